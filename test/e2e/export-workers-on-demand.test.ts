/**
 * Export worker threads start when there is a job for them, not with the server: a fresh `cinder serve`
 * without exports to run starts none (each thread loads the code and opens its own connections, which
 * competed with the server's first requests and kept some 12 MB each). Threads are counted by name in
 * /proc (Bun names a Worker's thread `Worker`).
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { awaitManifest, clientToken, downloadLines, freePort, seed, startServer, type Server } from '../helpers/export-e2e.ts';

let dir: string;
let server: Server;
let client: { clientId: string; secret: string };

/** The server process's Worker threads. */
function workerThreads(pid: number): number {
  return readdirSync(`/proc/${pid}/task`).filter((t) => {
    try {
      return readFileSync(`/proc/${pid}/task/${t}/comm`, 'utf8').trim() === 'Worker';
    } catch {
      return false; // the thread ended meanwhile
    }
  }).length;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cinder-export-on-demand-'));
  const store = createSqliteStore(join(dir, 'cinder.db'));
  await store.migrate();
  client = await seed(store, 30);
  await store.close();
  server = await startServer({ CINDER_DATA_DIR: dir, CINDER_EXPORT_WORKERS: '2', CINDER_LOG_LEVEL: 'warn' }, freePort());
}, 60_000);

afterAll(() => {
  server?.proc.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

test.if(process.platform === 'linux')('no export worker thread before the first job; one starts for it and runs it', async () => {
  // Several of the pool's claim rounds (every 500 ms) find nothing to run.
  await Bun.sleep(1_600);
  expect(workerThreads(server.proc.pid)).toBe(0);

  const token = await clientToken(server.base, client.clientId, client.secret);
  const kick = await fetch(`${server.base}/tenants/t1/fhir/R4/$export?_type=Observation`, { headers: { Authorization: `Bearer ${token}`, Prefer: 'respond-async' } });
  expect(kick.status).toBe(202);
  const manifest = await awaitManifest(kick.headers.get('content-location')!, token);
  expect(manifest.output.map((o) => [o.type, o.count])).toEqual([['Observation', 30]]);
  expect(await downloadLines(manifest, token)).toHaveLength(30);
  // One job, one thread: the second starts only when a job finds the first busy.
  expect(workerThreads(server.proc.pid)).toBe(1);
}, 60_000);
