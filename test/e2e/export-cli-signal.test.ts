/**
 * `cinder export` (a process, from source) stopped by SIGTERM or SIGINT (Ctrl-C) while it runs: its job, which it
 * claims under a lease, is removed before it exits, so that no server's export workers claim it once the lease
 * ran out and run the whole export again for no one. The run is held where it stands by a proxy that leaves one
 * of its statements unanswered (test/helpers/pg-fault-proxy.ts), so the signal always lands mid-export.
 */
import { describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import { tenantWithOnePatient } from '../helpers/cli.ts';
import { startPgFaultProxy } from '../helpers/pg-fault-proxy.ts';
import { cinderCommands, cleanupAfterFile } from '../helpers/processes.ts';
import { rawStatements, storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
const { tempDir, killAfter } = cleanupAfterFile(targets);
const pg = targets.find((t) => t.kind === 'postgres');
const [, fromSource] = cinderCommands()[0]!;

async function jobs(url: string): Promise<{ state: string; request: string }[]> {
  const [rows] = await rawStatements('postgres', url, [['SELECT state, request FROM export_jobs', []]]);
  return rows as { state: string; request: string }[];
}

describe.skipIf(!pg)('cinder export stopped by a signal', () => {
  for (const [signal, code] of [['SIGTERM', 143], ['SIGINT', 130]] as const) {
    test(`${signal}: exit ${code}, saying so, and its job is removed`, async () => {
      const db = await pg!.migrated();
      await tenantWithOnePatient(db.url);
      const target = new URL(db.url);
      const proxy = await startPgFaultProxy(Number(target.port || 5432));
      try {
        // The run counts each type's resources once its job is made: that statement is never answered.
        proxy.swallowOn('cinder', 'COUNT(');
        const dir = tempDir('cinder-export-signal-');
        const proc = Bun.spawn([...fromSource, 'export', '--tenant', 't1', '--out', join(dir, 'out')], {
          env: { PATH: process.env.PATH ?? '', HOME: dir, CINDER_DATABASE_URL: db.url.replace(`@${target.host}`, `@127.0.0.1:${proxy.port}`), CINDER_BASE_URL: 'http://cinder.test' },
          cwd: dir, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe',
        });
        killAfter(proc);
        let held = false;
        for (let i = 0; i < 300 && !held && proc.exitCode === null; i++) {
          held = proxy.swallowed === 1 && (await jobs(db.url)).length === 1;
          if (!held) await Bun.sleep(50);
        }
        expect(held).toBe(true);
        expect((await jobs(db.url))[0]).toMatchObject({ state: 'in-progress', request: 'cinder export --tenant t1' });
        proc.kill(signal);
        const exited = await Promise.race([proc.exited, Bun.sleep(20_000).then(() => 'still running')]);
        expect(exited).toBe(code);
        expect(await new Response(proc.stderr).text()).toBe(`cinder export: stopped by ${signal}: the export is removed, and what ${join(dir, 'out')} holds of it is incomplete\n`);
        expect(await jobs(db.url)).toEqual([]);
      } finally {
        proxy.stop();
      }
    }, 60_000);
  }
});
