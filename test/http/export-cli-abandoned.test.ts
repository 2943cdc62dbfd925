/**
 * A job `cinder export` made and claimed for its own directory, left behind when that process was killed
 * outright (SIGKILL, out of memory: it removes its job on SIGINT and SIGTERM), is failed by the server's runner
 * that claims it once its lease ran out, saying so, rather than run as a whole export into the server's storage
 * for no one. Exports kicked off through the API run as before. On both stores.
 */
import { describe, expect, test } from 'bun:test';
import { kickOff as kickOffJob } from '../../src/export/kickoff.ts';
import { operatorAccess } from '../../src/fhir/access.ts';
import { createTestApp } from '../helpers/app.ts';
import { eachStore, finish, kickOff, put, runExports } from '../helpers/export.ts';

await eachStore((kind, fresh) => {
  describe(`a cinder export job whose process ended (${kind})`, () => {
    test('is failed by the next runner that claims it, with a reason; an API export still completes', async () => {
      const t = await createTestApp({ store: await fresh() });
      try {
        await put(t, { resourceType: 'Patient', id: 'p1' });
        const input = {
          method: 'GET' as const, outputFormat: [], since: [], types: [], typeFilters: [], elements: [], patients: [], includeAssociatedData: [], unknown: [], empty: [],
        };
        // As src/cli/export.ts makes it: claimed by the command's runner, its lease already over (the process is gone).
        const id = await kickOffJob({ store: t.store, clock: t.clock, maxJobsPerClient: Number.MAX_SAFE_INTEGER, settleMs: 0 }, {
          tenant: 't1', access: operatorAccess, level: 'system', input, lenient: false, requestUrl: 'cinder export --tenant t1',
          claim: { owner: 'cli:4242:deadbeef', leaseMs: -1 },
        });
        expect((await t.store.exports.jobs.get('t1', id))!.state).toBe('in-progress');
        expect(await runExports(t)).toEqual(['failed']);
        const job = (await t.store.exports.jobs.get('t1', id))!;
        expect(job.state).toBe('failed');
        expect(job.error).toBe('The cinder export --tenant t1 process that ran this export ended before it finished; run it again');

        const token = await t.token();
        const manifest = await finish(t, token, await kickOff(t, token, '/$export'));
        expect(manifest.output.map((o) => o.type)).toEqual(['Patient']);
      } finally {
        await t.close();
      }
    }, 30_000);
  });
});
