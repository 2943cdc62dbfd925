/**
 * `cinder export` (a process, from source) whose start is slow: it counts each type's resources for its
 * progress bar before the run begins, which on a large or busy database takes longer than the export lease
 * (CINDER_EXPORT_LEASE_SECONDS). Its job's lease is renewed from the moment the job is made, so a server's
 * runner beside it never takes the job for that of a killed command (and fails it) while the command lives.
 * The counting is held by a lock on the resources table, taken once the job exists.
 */
import { describe, expect, test } from 'bun:test';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import postgres from 'postgres';
import { systemClock } from '../../src/clock.ts';
import { loadConfig } from '../../src/config.ts';
import { drainJobs, runSettings } from '../../src/export/runner.ts';
import { silentLogger } from '../../src/log.ts';
import { openSink } from '../../src/export/sink.ts';
import { openStore } from '../../src/store/open.ts';
import { tenantWithOnePatient } from '../helpers/cli.ts';
import { cinderCommands, cleanupAfterFile } from '../helpers/processes.ts';
import { rawStatements, storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
const { tempDir, killAfter } = cleanupAfterFile(targets);
const pg = targets.find((t) => t.kind === 'postgres');
const [, fromSource] = cinderCommands()[0]!;

describe.skipIf(!pg)('cinder export whose counting outlasts the export lease', () => {
  test('keeps its job: a server runner claims nothing, and the export completes', async () => {
    const db = await pg!.migrated();
    await tenantWithOnePatient(db.url);
    const lock = postgres(db.url, { max: 1, onnotice: () => undefined });
    const config = loadConfig({ CINDER_DATABASE_URL: db.url, CINDER_BASE_URL: 'http://cinder.test', CINDER_EXPORT_LEASE_SECONDS: '2', CINDER_DATA_DIR: tempDir('cinder-export-slow-server-') });
    const server = openStore(db.url);
    try {
      const reserved = await lock.reserve();
      const dir = tempDir('cinder-export-slow-');
      const out = join(dir, 'out');
      const proc = Bun.spawn([...fromSource, 'export', '--tenant', 't1', '--out', out], {
        env: { PATH: process.env.PATH ?? '', HOME: dir, CINDER_DATABASE_URL: db.url, CINDER_BASE_URL: 'http://cinder.test', CINDER_EXPORT_LEASE_SECONDS: '2', CINDER_LOG_LEVEL: 'warn' },
        cwd: dir, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe',
      });
      killAfter(proc);
      // Once the job exists, the resources table is locked: the command's counting waits.
      let made = false;
      for (let i = 0; i < 400 && !made && proc.exitCode === null; i++) {
        made = (await rawStatements('postgres', db.url, [['SELECT id FROM export_jobs', []]]))[0]!.length === 1;
        if (!made) await Bun.sleep(10);
      }
      expect(made).toBe(true);
      await reserved`BEGIN`;
      await reserved`LOCK TABLE resources IN ACCESS EXCLUSIVE MODE`;
      // Twice the lease, then a server's runner looks for claimable jobs.
      await Bun.sleep(4_000);
      const outcomes = await drainJobs({
        ...runSettings(config), settleMs: 0, store: server, sink: openSink(config.exportStorage, {}, server), clock: systemClock,
        log: silentLogger, owner: 'server-runner',
      });
      await reserved`ROLLBACK`;
      reserved.release();
      const code = await Promise.race([proc.exited, Bun.sleep(30_000).then(() => 'still running')]);
      const stderr = await new Response(proc.stderr).text();
      expect({ outcomes, code, stderr }).toEqual({ outcomes: [], code: 0, stderr: '' });
      expect(readdirSync(out)).toEqual(['Patient-1.ndjson']);
    } finally {
      await server.close();
      await lock.end();
    }
  }, 60_000);
});
