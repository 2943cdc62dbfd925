/**
 * A job's lease (bulk export, $import) is judged by the database's clock, not by the clocks of the processes that share it: a server
 * whose clock runs a minute ahead of the `cinder export` command's (another machine, no NTP) does not take
 * the command's live job for that of a killed command and fail it, nor a running API export's for an
 * abandoned one and run it twice; a job whose holder stopped renewing is still taken over. On both stores.
 */
import { describe, expect, test } from 'bun:test';
import { kickOff as kickOffJob } from '../../src/export/kickoff.ts';
import { CLI_OWNER_PREFIX } from '../../src/export/run-job.ts';
import { operatorAccess } from '../../src/fhir/access.ts';
import { createTestApp, testClock } from '../helpers/app.ts';
import { eachStore, kickOff, put, runExports } from '../helpers/export.ts';

const input = {
  method: 'GET' as const, outputFormat: [], since: [], types: [], typeFilters: [], elements: [], patients: [], includeAssociatedData: [], unknown: [], empty: [],
};
const LEASE_MS = 30_000;

await eachStore((kind, fresh) => {
  describe(`export leases under clock skew (${kind})`, () => {
    test("a live cinder export job is not claimed by a server whose clock is a minute ahead of the command's", async () => {
      const t = await createTestApp({ store: await fresh(), clock: testClock(Date.now()) });
      try {
        await put(t, { resourceType: 'Patient', id: 'p1' });
        // As src/cli/export.ts makes it, on the command's machine (its clock the test's), with a 30 s lease it renews.
        const id = await kickOffJob({ store: t.store, clock: t.clock, maxJobsPerClient: Number.MAX_SAFE_INTEGER, settleMs: 0 }, {
          tenant: 't1', access: operatorAccess, level: 'system', input, lenient: false, requestUrl: 'cinder export --tenant t1',
          claim: { owner: `${CLI_OWNER_PREFIX}4242:deadbeef`, leaseMs: LEASE_MS },
        });
        // The command renews its lease; a server a minute ahead looks for claimable jobs.
        expect(await t.store.exports.jobs.checkpoint(id, `${CLI_OWNER_PREFIX}4242:deadbeef`, t.clock.now(), LEASE_MS)).toBe(true);
        const ahead = testClock(t.clock.now() + 60_000);
        expect(await runExports(t, { clock: ahead, owner: 'server-ahead' })).toEqual([]);
        const job = (await t.store.exports.jobs.get('t1', id))!;
        expect([job.state, job.leaseOwner, job.error]).toEqual(['in-progress', `${CLI_OWNER_PREFIX}4242:deadbeef`, null]);
      } finally {
        await t.close();
      }
    }, 30_000);

    test('a running API export is not claimed a second time by a process whose clock is ahead; a lapsed lease still is', async () => {
      const t = await createTestApp({ store: await fresh(), clock: testClock(Date.now()) });
      try {
        await put(t, { resourceType: 'Patient', id: 'p1' });
        await kickOff(t, await t.token(), '/$export');
        const held = (await t.store.exports.jobs.claim('process-a', t.clock.now(), LEASE_MS))!;
        expect(held.state).toBe('in-progress');
        expect(await t.store.exports.jobs.claim('process-b', t.clock.now() + 60_000, LEASE_MS)).toBeNull();
        // A holder whose clock is behind does not stretch its lease either: renewed, it runs LEASE_MS from the database's now.
        expect(await t.store.exports.jobs.checkpoint(held.id, 'process-a', t.clock.now() - 60_000, 1)).toBe(true);
        await Bun.sleep(20);
        const taken = (await t.store.exports.jobs.claim('process-b', t.clock.now() - 60_000, LEASE_MS))!;
        expect([taken.id, taken.leaseOwner, taken.attempts]).toEqual([held.id, 'process-b', 2]);
      } finally {
        await t.close();
      }
    }, 30_000);

    test('a running $import job is not claimed a second time by a process whose clock is ahead; a lapsed lease still is', async () => {
      const t = await createTestApp({ store: await fresh(), clock: testClock(Date.now()) });
      try {
        const now = t.clock.now();
        const id = crypto.randomUUID();
        expect(await t.store.imports.create({ id, tenant: 't1', clientId: 'c1', request: 'https://x/$import', spec: '{"inputs":[]}', progress: '{"done":[]}', createdAt: now }, 5)).toBe(true);
        expect((await t.store.imports.claim('process-a', now, LEASE_MS))!.id).toBe(id);
        expect(await t.store.imports.claim('process-b', now + 60_000, LEASE_MS)).toBeNull();
        expect(await t.store.imports.checkpoint(id, 'process-a', now - 60_000, 1)).toBe(true);
        await Bun.sleep(20);
        expect(await t.store.imports.claim('process-b', now - 60_000, LEASE_MS)).toMatchObject({ id, leaseOwner: 'process-b', attempts: 2 });
      } finally {
        await t.close();
      }
    }, 30_000);
  });
});
