/**
 * An export job claimed for a worker thread that is still starting, when the server is told to stop: it is
 * handed back unrun, with the attempt its claim counted refunded (as a running job's is when a stop interrupts
 * it). Counted, a job caught so at a few restarts in a row was given up without ever having run ("The
 * export's process ended 3 times while running it").
 */
import { expect, test } from 'bun:test';
import type { Store } from '../../src/store/types.ts';
import { awaitManifest, clientToken, downloadLines, freePort, seed, startServer } from '../helpers/export-e2e.ts';
import { cleanupAfterFile } from '../helpers/processes.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets();
const { tempDir, killAfter } = cleanupAfterFile(targets);

const env = (dir: string, databaseUrl: string) => ({
  CINDER_DATA_DIR: dir, CINDER_DATABASE_URL: databaseUrl, CINDER_EXPORT_WORKERS: '1', CINDER_LOG_LEVEL: 'warn',
});

/** Waits until the job is claimed (the pool claims it, then starts the thread that runs it). */
async function awaitClaim(store: Store, jobId: string): Promise<void> {
  for (let i = 0; i < 4000; i++) {
    if ((await store.exports.jobs.get('t1', jobId))?.state === 'in-progress') return;
    await Bun.sleep(2);
  }
  throw new Error('the job was never claimed');
}

for (const target of targets) {
  test(`${target.kind}: a job claimed as the server stops, before its thread runs it, is handed back with its attempt refunded`, async () => {
    const dir = tempDir('cinder-export-stop-');
    const db = await target.migrated();
    const url = target.kind === 'sqlite' ? 'sqlite:' + db.url : db.url;
    const store = db.open();
    await store.migrate();
    const creds = await seed(store, 30);
    const port = freePort();
    let server = await startServer(env(dir, url), port);
    killAfter(server.proc);
    const token = await clientToken(server.base, creds.clientId, creds.secret);
    const kick = await fetch(`${server.base}/tenants/t1/fhir/R4/$export?_type=Observation`, { headers: { Authorization: `Bearer ${token}` } });
    expect(kick.status).toBe(202);
    const statusUrl = kick.headers.get('content-location')!;
    const jobId = statusUrl.split('/').pop()!;

    // Stopped as soon as the job is claimed: its thread (started for it, none being idle) is still loading.
    await awaitClaim(store, jobId);
    server.proc.kill('SIGTERM');
    expect(await server.proc.exited).toBe(0);
    const handed = (await store.exports.jobs.get('t1', jobId))!;
    expect(handed.state).toBe('accepted');
    expect(handed.leaseOwner).toBeNull();
    expect(handed.attempts).toBe(0);

    // The next server runs it, as its first attempt.
    server = await startServer(env(dir, url), port);
    killAfter(server.proc);
    const manifest = await awaitManifest(statusUrl, token);
    expect(await downloadLines(manifest, token)).toHaveLength(30);
    expect((await store.exports.jobs.get('t1', jobId))!.attempts).toBe(1);
    server.proc.kill('SIGTERM');
    await server.proc.exited;
    await store.close();
  }, 120_000);
}
