import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { JobProgress } from '../../src/export/spec.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import type { Store } from '../../src/store/types.ts';
import { awaitManifest, clientToken, downloadLines, freePort, seed, startServer, type Server } from '../helpers/export-e2e.ts';

const COUNT = 60_000;
let dir: string;
let store: Store;
let creds: { clientId: string; secret: string };
const servers: Server[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cinder-export-crash-'));
  store = createSqliteStore(join(dir, 'cinder.db'));
  await store.migrate();
  creds = await seed(store, COUNT);
}, 120_000);
afterAll(async () => {
  for (const s of servers) s.proc.kill('SIGKILL');
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const env = () => ({
  CINDER_DATA_DIR: dir, CINDER_EXPORT_WORKERS: '1', CINDER_EXPORT_FILE_MAX_BYTES: '65536', CINDER_EXPORT_LEASE_SECONDS: '2', CINDER_LOG_LEVEL: 'warn',
});

test('a process killed with SIGKILL mid-export: a restarted process completes it with exactly the right lines', async () => {
  const port = freePort();
  const first = await startServer(env(), port);
  servers.push(first);
  const token = await clientToken(first.base, creds.clientId, creds.secret);
  const kick = await fetch(`${first.base}/tenants/t1/fhir/R4/$export?_type=Observation`, { headers: { Authorization: `Bearer ${token}` } });
  expect(kick.status).toBe(202);
  const statusUrl = kick.headers.get('content-location')!;
  const jobId = statusUrl.split('/').pop()!;

  // Kill the process once the job has written some files but is not done.
  let killedAt: JobProgress | undefined;
  for (let i = 0; i < 2000 && !killedAt; i++) {
    const job = await store.exports.get('t1', jobId);
    const progress = JSON.parse(job!.progress) as JobProgress;
    if (job!.state === 'completed') throw new Error('the export finished before the kill: make it larger');
    if (job!.state === 'in-progress' && progress.files.length >= 3) {
      first.proc.kill('SIGKILL');
      await first.proc.exited;
      killedAt = progress;
    } else await Bun.sleep(5);
  }
  expect(killedAt).toBeDefined();
  const afterKill = await store.exports.get('t1', jobId);
  expect(afterKill!.state).toBe('in-progress');

  const second = await startServer(env(), port);
  servers.push(second);
  const manifest = await awaitManifest(statusUrl, token);
  const lines = await downloadLines(manifest, token);
  const ids = lines.map((l) => (JSON.parse(l) as { id: string }).id);
  expect(ids.length).toBe(COUNT);
  expect(new Set(ids).size).toBe(COUNT);
  expect(manifest.output.reduce((n, o) => n + o.count, 0)).toBe(COUNT);
  const done = (await store.exports.get('t1', jobId))!;
  expect(done.attempts).toBe(2);
  // It resumed (files of the first attempt are kept), it did not start over.
  const keys = (JSON.parse(done.progress) as JobProgress).files.map((f) => f.key);
  expect(keys.filter((k) => k.includes('/a1/')).length).toBeGreaterThanOrEqual(killedAt!.files.length);
  expect(keys.some((k) => k.includes('/a2/'))).toBe(true);
  second.proc.kill('SIGTERM');
  expect(await second.proc.exited).toBe(0);
}, 120_000);
