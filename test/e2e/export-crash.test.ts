/**
 * Crash recovery of export jobs with real `cinder serve` processes and their worker threads: the
 * process running a job is killed with SIGKILL in the middle of a large export; on SQLite the
 * restarted process, on PostgreSQL a second process already running, completes it with exactly the
 * right lines (each resource once, none missing), resuming from the last checkpoint.
 */
import { expect, test } from 'bun:test';
import type { JobProgress } from '../../src/export/spec.ts';
import type { Store } from '../../src/store/types.ts';
import { awaitManifest, clientToken, downloadLines, freePort, seed, startServer, type Server } from '../helpers/export-e2e.ts';
import { cleanupAfterFile } from '../helpers/processes.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
const { tempDir, killAfter } = cleanupAfterFile(targets);

const env = (dir: string, databaseUrl: string) => ({
  CINDER_DATA_DIR: dir, CINDER_DATABASE_URL: databaseUrl, CINDER_EXPORT_WORKERS: '1', CINDER_EXPORT_FILE_MAX_BYTES: '65536',
  CINDER_EXPORT_LEASE_SECONDS: '2', CINDER_LOG_LEVEL: 'warn',
});

/** Waits until the job has finished some files but not all, then SIGKILLs the process holding its lease. */
async function killMidway(store: Store, jobId: string, running: Server[]): Promise<{ progress: JobProgress; victim: Server }> {
  for (let i = 0; i < 4000; i++) {
    const job = (await store.exports.jobs.get('t1', jobId))!;
    if (job.state === 'completed') throw new Error('the export finished before the kill: make it larger');
    const progress = JSON.parse(job.progress) as JobProgress;
    if (job.state === 'in-progress' && progress.files.length >= 3) {
      const victim = running.find((s) => job.leaseOwner!.includes(`:${s.proc.pid}:`))!;
      victim.proc.kill('SIGKILL');
      await victim.proc.exited;
      return { progress, victim };
    }
    await Bun.sleep(5);
  }
  throw new Error('the job never got under way');
}

for (const target of targets) {
  const count = 60_000;
  test(`${target.kind}: a process killed with SIGKILL mid-export; ${target.kind === 'sqlite' ? 'the restarted process' : 'a second process'} completes it exactly`, async () => {
    const dir = tempDir('cinder-export-crash-');
    const db = await target.migrated();
    const url = target.kind === 'sqlite' ? 'sqlite:' + db.url : db.url;
    const store = db.open();
    await store.migrate();
    const creds = await seed(store, count);
    const ports = [freePort(), freePort()];
    const first = await startServer(env(dir, url), ports[0]!);
    killAfter(first.proc);
    const running = [first];
    if (target.kind === 'postgres') running.push(await startServer(env(dir, url), ports[1]!, first.base));
    killAfter(...running.slice(1).map((s) => s.proc));

    const token = await clientToken(first.base, creds.clientId, creds.secret);
    const kick = await fetch(`${first.base}/tenants/t1/fhir/R4/$export?_type=Observation`, { headers: { Authorization: `Bearer ${token}` } });
    expect(kick.status).toBe(202);
    const statusUrl = kick.headers.get('content-location')!;
    const jobId = statusUrl.split('/').pop()!;
    const { progress, victim } = await killMidway(store, jobId, running);
    expect((await store.exports.jobs.get('t1', jobId))!.state).toBe('in-progress');

    let survivor = running.find((s) => s !== victim);
    if (!survivor) {
      survivor = await startServer(env(dir, url), ports[0]!);
      killAfter(survivor.proc);
    }
    const manifest = await awaitManifest(statusUrl.replace(/^http:\/\/[^/]+/, survivor.base), token);
    const lines = await downloadLines({ output: manifest.output.map((o) => ({ url: o.url.replace(/^http:\/\/[^/]+/, survivor.base) })) }, token);
    const ids = lines.map((l) => (JSON.parse(l) as { id: string }).id);
    expect(ids.length).toBe(count);
    expect(new Set(ids).size).toBe(count);
    expect(manifest.output.reduce((n, o) => n + o.count, 0)).toBe(count);
    const done = (await store.exports.jobs.get('t1', jobId))!;
    expect(done.attempts).toBe(2);
    // It resumed from its checkpoint (the first attempt's files are kept), it did not start over.
    const keys = (JSON.parse(done.progress) as JobProgress).files.map((f) => f.key);
    expect(keys.filter((k) => k.includes('/a1/')).length).toBeGreaterThanOrEqual(progress.files.length);
    expect(keys.some((k) => k.includes('/a2/'))).toBe(true);
    survivor.proc.kill('SIGTERM');
    expect(await survivor.proc.exited).toBe(0);
  }, 300_000);
}

test('SIGTERM mid-export hands the job back at once; the next process resumes it', async () => {
  const target = targets.find((t) => t.kind === 'sqlite')!;
  const dir = tempDir('cinder-export-term-');
  const db = await target.migrated();
  const store = db.open();
  await store.migrate();
  const creds = await seed(store, 60_000);
  const port = freePort();
  const first = await startServer({ ...env(dir, 'sqlite:' + db.url), CINDER_EXPORT_LEASE_SECONDS: '600' }, port);
  killAfter(first.proc);
  const token = await clientToken(first.base, creds.clientId, creds.secret);
  const kick = await fetch(`${first.base}/tenants/t1/fhir/R4/$export?_type=Observation`, { headers: { Authorization: `Bearer ${token}` } });
  const statusUrl = kick.headers.get('content-location')!;
  const jobId = statusUrl.split('/').pop()!;
  for (let i = 0; i < 4000; i++) {
    const job = (await store.exports.jobs.get('t1', jobId))!;
    if (job.state === 'in-progress' && (JSON.parse(job.progress) as JobProgress).files.length >= 3) break;
    await Bun.sleep(5);
  }
  first.proc.kill('SIGTERM');
  expect(await first.proc.exited).toBe(0);
  const handedBack = (await store.exports.jobs.get('t1', jobId))!;
  // With a 10-minute lease only a hand-back lets the next process take the job at once.
  expect([handedBack.state, handedBack.leaseOwner]).toEqual(['accepted', null]);
  const second = await startServer({ ...env(dir, 'sqlite:' + db.url), CINDER_EXPORT_LEASE_SECONDS: '600' }, port);
  killAfter(second.proc);
  const manifest = await awaitManifest(statusUrl, token);
  const ids = (await downloadLines(manifest, token)).map((l) => (JSON.parse(l) as { id: string }).id);
  expect(new Set(ids).size).toBe(60_000);
  expect(ids.length).toBe(60_000);
  // The hand-back at SIGTERM gave its attempt back (a stop is not the job's fault): one attempt counted.
  expect((await store.exports.jobs.get('t1', jobId))!.attempts).toBe(1);
  second.proc.kill('SIGTERM');
  await second.proc.exited;
}, 300_000);
