/**
 * The database maintenance commands beside a real `cinder serve` (separate processes on one SQLite file):
 * `cinder backup` while the server writes gives a consistent copy holding every write acknowledged before
 * it began, which a second server opens and serves; `cinder compact` and `cinder restore` are refused
 * while the server has the database open; compact gives the space of expunged resources back once it is
 * stopped, and fails cleanly (the database whole and usable) when the disk cannot take the copy. From
 * source and (when built) dist/cinder.
 */
import { describe, expect, test } from 'bun:test';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { clientToken, freePort } from '../helpers/export-e2e.ts';
import { cinderCommands, cleanupAfterFile, readBanner, serveEnv, spawnServe } from '../helpers/processes.ts';

const { tempDir, killAfter } = cleanupAfterFile();

/** Runs `cinder ...args` to its end in `dir` with `env`. */
async function run(command: string[], dir: string, env: Record<string, string>, ...args: string[]) {
  const p = Bun.spawn([...command, ...args], { env, cwd: dir, stdout: 'pipe', stderr: 'pipe' });
  const [stdout, stderr, code] = [await new Response(p.stdout).text(), await new Response(p.stderr).text(), await p.exited];
  return { stdout, stderr, code };
}

/** A `cinder serve` on a new port in `dir`: its FHIR base, a token, and stop() (SIGTERM, waits for the exit). */
async function startServer(command: string[], dir: string, credentials?: { clientId: string; secret: string }) {
  const port = freePort();
  const env = serveEnv(dir, port, { CINDER_EXPORT_WORKERS: '0' });
  const server = spawnServe(command, dir, env);
  killAfter(server);
  // The first start on an empty data directory prints the admin client; a later one prints no banner.
  const banner = credentials ? undefined : await readBanner(server.stdout);
  const { clientId, secret } = credentials ?? { clientId: banner!.clientId!, secret: banner!.secret! };
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 400 && !(await fetch(`${base}/healthz`).catch(() => null))?.ok; i++) await Bun.sleep(50);
  const token = await clientToken(base, clientId, secret);
  const headers = { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' };
  return {
    env, credentials: { clientId, secret },
    fhir: `${base}/tenants/default/fhir/R4`, headers,
    async stop() {
      server.kill('SIGTERM');
      expect(await server.exited).toBe(0);
    },
  };
}

/** Each test starts two servers and runs several commands, each a process of its own: seconds apiece on a loaded machine. */
const SPAWNS_TIMEOUT = 120_000;

describe.each(cinderCommands())('database maintenance beside cinder serve (%s)', (_, command) => {
  test('backup while the server writes: consistent, every acknowledged write in it, served by a second server', async () => {
    const dir = tempDir('cinder-backup-');
    const server = await startServer(command, dir);
    let acknowledged = 0;
    let writing = true;
    // Writes go on during the backup, one after the other; each counted once the server answered 201.
    const writer = (async () => {
      for (let i = 0; writing; i++) {
        const res = await fetch(`${server.fhir}/Patient/p${i}`, { method: 'PUT', headers: server.headers, body: JSON.stringify({ resourceType: 'Patient', id: `p${i}`, name: [{ family: 'x'.repeat(2000) + i }] }) });
        expect(res.status).toBe(201);
        await res.arrayBuffer();
        acknowledged = i + 1;
      }
    })();
    while (acknowledged < 50) await Bun.sleep(20);
    const before = acknowledged;
    const out = join(dir, 'backup.db');
    const backup = await run(command, dir, server.env, 'backup', '--out', out, '--json');
    expect(backup.stderr).toBe('');
    expect(backup.code).toBe(0);
    writing = false;
    await writer;
    expect(acknowledged).toBeGreaterThan(before);
    const printed = JSON.parse(backup.stdout);
    expect(printed.path).toBe(out);
    expect(printed.bytes).toBe(statSync(out).size);
    await server.stop();

    // The copy, as the database of a second server in another data directory.
    const second = tempDir('cinder-restored-');
    const restored = await run(command, second, serveEnv(second, 1), 'restore', '--from', out);
    expect(restored.stderr).toBe('');
    expect(restored.code).toBe(0);
    expect((await run(command, second, serveEnv(second, 1), 'check')).code).toBe(0);
    const copy = await startServer(command, second, server.credentials);
    try {
      const res = await fetch(`${copy.fhir}/Patient?_summary=count`, { headers: copy.headers });
      const total = ((await res.json()) as { total: number }).total;
      // Every write acknowledged before the backup began, and none that was not acknowledged when it ended.
      expect(total).toBeGreaterThanOrEqual(before);
      expect(total).toBeLessThanOrEqual(acknowledged);
      for (let i = 0; i < total; i++) {
        const read = await fetch(`${copy.fhir}/Patient/p${i}`, { headers: copy.headers });
        expect(read.status).toBe(200);
        expect(((await read.json()) as { name: { family: string }[] }).name[0]!.family).toBe('x'.repeat(2000) + i);
      }
      expect((await fetch(`${copy.fhir}/Patient/p${total}`, { headers: copy.headers })).status).toBe(404);
    } finally {
      await copy.stop();
    }
  }, SPAWNS_TIMEOUT);

  test('compact: refused while serve has the database open; after deletes and an expunge it shrinks the file', async () => {
    const dir = tempDir('cinder-compact-');
    const server = await startServer(command, dir);
    const entries = Array.from({ length: 200 }, (_, i) => ({
      resource: { resourceType: 'Basic', id: `b${i}`, code: { text: 'y'.repeat(4000) + i } }, request: { method: 'PUT', url: `Basic/b${i}` },
    }));
    const post = (entry: unknown[]) => fetch(server.fhir, { method: 'POST', headers: server.headers, body: JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry }) });
    expect((await post(entries)).status).toBe(200);
    expect((await post(entries.slice(0, 190).map((e) => ({ request: { method: 'DELETE', url: e.request.url } })))).status).toBe(200);
    const expunge = await run(command, dir, server.env, 'expunge', '--tenant', 'default', '--deleted', '--json');
    expect(expunge.code).toBe(0);

    const refused = await run(command, dir, server.env, 'compact');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('is in use by another process (a running cinder serve?): stop every Cinder process using it');
    expect(refused.stdout).toBe('');
    // Neither may a restore, even of a sound backup.
    const backup = join(dir, 'backup.db');
    expect((await run(command, dir, server.env, 'backup', '--out', backup)).code).toBe(0);
    const restore = await run(command, dir, server.env, 'restore', '--from', backup);
    expect(restore.code).toBe(1);
    expect(restore.stderr).toContain('is in use by another process (a running cinder serve?)');
    // Still serving, every live resource there.
    expect((await fetch(`${server.fhir}/Basic/b199`, { headers: server.headers })).status).toBe(200);
    await server.stop();

    const database = join(dir, 'data', 'cinder.db');
    const compacted = await run(command, dir, server.env, 'compact', '--json');
    expect(compacted.stderr).toBe('');
    expect(compacted.code).toBe(0);
    const r = JSON.parse(compacted.stdout);
    expect(r).toMatchObject({ database, page_size_before: 16384, page_size: 16384 });
    expect(r.bytes_after).toBeLessThan(r.bytes_before / 2);
    expect(statSync(database).size).toBe(r.bytes_after);
    expect(readdirSync(join(dir, 'data')).filter((f) => f.startsWith('cinder.db') || f.startsWith('.cinder.db'))).toEqual(['cinder.db']);
    expect((await run(command, dir, server.env, 'check')).code).toBe(0);
    const again = await startServer(command, dir, server.credentials);
    try {
      expect((await fetch(`${again.fhir}/Basic/b199`, { headers: again.headers })).status).toBe(200);
      expect((await fetch(`${again.fhir}/Basic/b0`, { headers: again.headers })).status).toBe(404);
    } finally {
      await again.stop();
    }
  }, SPAWNS_TIMEOUT);
});

test('compact on a disk that cannot take the copy fails cleanly: exit 1, the database whole and usable', async () => {
  const [, command] = cinderCommands()[0]!;
  const dir = tempDir('cinder-compact-full-');
  const server = await startServer(command, dir);
  const entries = Array.from({ length: 100 }, (_, i) => ({ resource: { resourceType: 'Basic', id: `b${i}`, code: { text: 'z'.repeat(4000) + i } }, request: { method: 'PUT', url: `Basic/b${i}` } }));
  expect((await fetch(server.fhir, { method: 'POST', headers: server.headers, body: JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry: entries }) })).status).toBe(200);
  await server.stop();
  const database = join(dir, 'data', 'cinder.db');
  const before = await Bun.file(database).bytes();
  // A file size limit below the copy's size (SIGXFSZ ignored: the write fails with EFBIG, as on a full disk).
  const p = Bun.spawn(['bash', '-c', `trap '' XFSZ; ulimit -f 256; exec "$@"`, 'bash', ...command, 'compact', '--page-size', '4096'], { env: server.env, cwd: dir, stdout: 'pipe', stderr: 'pipe' });
  const [stderr, code] = [await new Response(p.stderr).text(), await p.exited];
  expect(code).toBe(1);
  expect(stderr).toContain('cinder compact: cannot write');
  expect(Buffer.from(await Bun.file(database).bytes()).equals(Buffer.from(before))).toBe(true);
  expect(readdirSync(join(dir, 'data')).filter((f) => f.startsWith('.cinder.db'))).toEqual([]);
  expect((await run(command, dir, server.env, 'check')).code).toBe(0);
  const again = await startServer(command, dir, server.credentials);
  try {
    expect((await fetch(`${again.fhir}/Basic/b99`, { headers: again.headers })).status).toBe(200);
  } finally {
    await again.stop();
  }
});
