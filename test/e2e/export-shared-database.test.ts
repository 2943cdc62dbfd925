/**
 * Two Cinder processes on one PostgreSQL database, each with a data directory of its own (two hosts,
 * two containers): an export run by A is downloaded through B. With the default export storage on
 * PostgreSQL (the database itself) every file is served by both; with `file:` storage B's disk does
 * not have A's files, and B says so with 410 instead of failing.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { awaitManifest, clientToken, freePort, seed, startServer, type Server } from '../helpers/export-e2e.ts';
import { storeTargets, type StoreTarget } from '../helpers/stores.ts';

const targets = (await storeTargets({ main: false })).filter((t) => t.kind === 'postgres');
const postgres = targets[0] as StoreTarget | undefined;
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

describe.skipIf(!postgres)('an export downloaded through another process of the same PostgreSQL database', () => {
  const dirs: string[] = [];
  const servers: Server[] = [];
  afterAll(() => {
    for (const s of servers) s.proc.kill('SIGKILL');
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  /** `fileStorage`: each process keeps export files in its own data directory. */
  async function pair(fileStorage = false) {
    const db = await postgres!.fresh();
    const store = db.open();
    await store.migrate();
    const client = await seed(store, 3000);
    const [portA, portB] = [freePort(), freePort()];
    const env = (workers: string) => {
      const dir = mkdtempSync(join(tmpdir(), 'cinder-host-'));
      dirs.push(dir);
      return { CINDER_DATABASE_URL: db.url, CINDER_DATA_DIR: dir, CINDER_EXPORT_WORKERS: workers, CINDER_LOG_LEVEL: 'warn', ...(fileStorage ? { CINDER_EXPORT_STORAGE: `file:${dir}/exports` } : {}) };
    };
    // One public base URL for both, as behind a load balancer (tokens name it as their issuer).
    const a = await startServer(env('1'), portA);
    const b = await startServer(env('0'), portB, a.base);
    servers.push(a, b);
    return { a, b, client };
  }

  let shared: Awaited<ReturnType<typeof pair>>;
  beforeAll(async () => {
    shared = await pair();
  }, 60_000);

  test('default storage on PostgreSQL: B serves A\'s files, whole and ranged', async () => {
    const { a, b, client } = shared;
    const token = await clientToken(a.base, client.clientId, client.secret);
    const kick = await fetch(`${a.base}/tenants/t1/fhir/R4/$export?_type=Observation`, { headers: { Authorization: `Bearer ${token}`, Prefer: 'respond-async' } });
    expect(kick.status).toBe(202);
    const manifest = await awaitManifest(kick.headers.get('content-location')!, token);
    expect(manifest.output.map((o) => o.count)).toEqual([3000]);
    const viaB = manifest.output[0]!.url.replace(a.base, b.base);
    const whole = await fetch(viaB, { headers: { Authorization: `Bearer ${token}` } });
    expect(whole.status).toBe(200);
    const text = await whole.text();
    expect(text.split('\n').filter(Boolean).length).toBe(3000);
    const fromA = await (await fetch(manifest.output[0]!.url, { headers: { Authorization: `Bearer ${token}` } })).text();
    expect(text).toBe(fromA);
    const ranged = await fetch(viaB, { headers: { Authorization: `Bearer ${token}`, Range: 'bytes=100-199' } });
    expect(ranged.status).toBe(206);
    expect(await ranged.text()).toBe(Buffer.from(text).subarray(100, 200).toString());
  }, 60_000);

  test('file: storage on two disks: B answers 410 with an OperationOutcome saying the file is not there', async () => {
    const { a, b, client } = await pair(true);
    const token = await clientToken(a.base, client.clientId, client.secret);
    const kick = await fetch(`${a.base}/tenants/t1/fhir/R4/$export?_type=Observation`, { headers: { Authorization: `Bearer ${token}`, Prefer: 'respond-async' } });
    const manifest = await awaitManifest(kick.headers.get('content-location')!, token);
    const res = await fetch(manifest.output[0]!.url.replace(a.base, b.base), { headers: { Authorization: `Bearer ${token}` } });
    expect(res.status).toBe(410);
    const outcome = (await res.json()) as { resourceType: string; issue: { details: { text: string } }[] };
    expect(outcome.resourceType).toBe('OperationOutcome');
    expect(outcome.issue[0]!.details.text).toContain('no longer in the export storage');
  }, 60_000);
});
