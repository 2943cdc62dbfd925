/**
 * SQLite running out of space for real: `cinder serve` from source in a process whose file size limit
 * (`ulimit -f`, with SIGXFSZ ignored, so a write past it fails with EFBIG as on a full disk) stops the
 * database from growing. Creates answer 503 with an OperationOutcome, never 500; what was refused is
 * not there; what was acknowledged is; reads go on.
 */
import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient, createTenant } from '../../src/auth/admin.ts';
import { systemClock } from '../../src/clock.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { clientToken, freePort } from '../helpers/export-e2e.ts';

const ROOT = new URL('../..', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'cinder-full-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('a full disk: 503 transient for writes, nothing half-written, reads go on', async () => {
  const store = createSqliteStore(join(dir, 'cinder.db'));
  await store.migrate();
  await createTenant(store, systemClock, 'default');
  const client = await createClient(store, systemClock, { tenant: 'default', scopes: ['system/*.*'] });
  await store.close();

  const port = freePort();
  // 8 MiB per file: the database, its WAL and nothing else this process writes may grow past it.
  const proc = Bun.spawn(['bash', '-c', "trap '' XFSZ; ulimit -f 8192; exec bun src/main.ts serve"], {
    cwd: ROOT, stdout: 'ignore', stderr: 'ignore',
    env: { ...process.env, CINDER_DATA_DIR: dir, CINDER_PORT: String(port), CINDER_HOST: '127.0.0.1', CINDER_LOG_LEVEL: 'error', CINDER_EXPORT_WORKERS: '0' },
  });
  const base = `http://127.0.0.1:${port}`;
  try {
    for (let i = 0; i < 200; i++) {
      if ((await fetch(`${base}/healthz`).catch(() => null))?.ok) break;
      await Bun.sleep(50);
    }
    const token = await clientToken(base, client.client.clientId, client.clientSecret!);
    const auth = { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' };
    const fhir = `${base}/tenants/default/fhir/R4`;
    const stored: string[] = [];
    let refused: { id: string; status: number; code: string } | undefined;
    for (let i = 0; i < 200 && !refused; i++) {
      const id = `big-${i}`;
      const body = JSON.stringify({ resourceType: 'Patient', id, name: [{ family: 'x'.repeat(200_000) + i }] });
      const res = await fetch(`${fhir}/Patient/${id}`, { method: 'PUT', headers: auth, body });
      if (res.status === 201) {
        stored.push(id);
        await res.arrayBuffer();
      } else {
        refused = { id, status: res.status, code: ((await res.json()) as { issue: { code: string }[] }).issue[0]!.code };
      }
    }
    expect(refused).toBeDefined();
    expect(refused!.status).toBe(503);
    expect(refused!.code).toBe('transient');
    expect(stored.length).toBeGreaterThan(5);
    // The refused write is not there; every acknowledged one is, and reads still work.
    expect((await fetch(`${fhir}/Patient/${refused!.id}`, { headers: auth })).status).toBe(404);
    for (const id of stored) expect((await fetch(`${fhir}/Patient/${id}`, { headers: auth })).status).toBe(200);
    // A second write is refused the same way while the disk stays full.
    const again = await fetch(`${fhir}/Patient/one-more`, { method: 'PUT', headers: auth, body: JSON.stringify({ resourceType: 'Patient', id: 'one-more', name: [{ family: 'y'.repeat(200_000) }] }) });
    expect(again.status).toBe(503);
  } finally {
    proc.kill('SIGKILL');
    await proc.exited;
  }
}, 60_000);
