import { describe, expect, test } from 'bun:test';
import type { NewImportJob, Store } from '../../../src/store/types.ts';
import { uniqueTenant } from './fixtures.ts';

function job(tenant: string, id: string, over: Partial<NewImportJob> = {}): NewImportJob {
  return { id, tenant, clientId: 'c1', request: 'https://x/$import', spec: '{"inputs":[]}', progress: '{"done":[]}', createdAt: 1_000, ...over };
}

/** ImportJobRepo: kick-off limits, claims under a lease, cancel and removal of ended jobs. Each test leaves nothing claimable. */
export function importJobsContract(store: () => Store) {
  describe('import jobs', () => {
    test('create keeps a client to maxActive accepted or running jobs; get returns the job of its tenant only', async () => {
      const s = store();
      const t = uniqueTenant();
      expect(await s.imports.create(job(t, `${t}-a`), 2)).toBe(true);
      expect(await s.imports.create(job(t, `${t}-b`), 2)).toBe(true);
      expect(await s.imports.create(job(t, `${t}-c`), 2)).toBe(false);
      expect(await s.imports.create(job(t, `${t}-d`, { clientId: 'c2' }), 2)).toBe(true);
      expect(await s.imports.get(t, `${t}-a`)).toMatchObject({ id: `${t}-a`, tenant: t, clientId: 'c1', state: 'accepted', attempts: 0, leaseOwner: null, progress: '{"done":[]}', createdAt: 1_000 });
      expect(await s.imports.get(uniqueTenant(), `${t}-a`)).toBeNull();
      for (const id of ['a', 'b', 'd']) expect(await s.imports.cancel(t, `${t}-${id}`, 2_000)).toBe('accepted');
      expect(await s.imports.create(job(t, `${t}-e`), 2)).toBe(true);
      expect(await s.imports.cancel(t, `${t}-e`, 2_000)).toBe('accepted');
    });

    test("the limit counts per owner: a client's user (ownerUser) apart from its other users and from its own authority", async () => {
      const s = store();
      const t = uniqueTenant();
      expect(await s.imports.create(job(t, `${t}-a1`, { ownerUser: 'alice' }), 1)).toBe(true);
      expect(await s.imports.create(job(t, `${t}-a2`, { ownerUser: 'alice' }), 1)).toBe(false);
      expect(await s.imports.create(job(t, `${t}-b1`, { ownerUser: 'bob' }), 1)).toBe(true);
      expect(await s.imports.create(job(t, `${t}-o1`), 1)).toBe(true);
      expect(await s.imports.create(job(t, `${t}-o2`), 1)).toBe(false);
      for (const id of ['a1', 'b1', 'o1']) expect(await s.imports.cancel(t, `${t}-${id}`, 2_000)).toBe('accepted');
    });

    test("a renewal stores the running input's counts apart from the progress; stored progress, a claim and the job's end clear them", async () => {
      const s = store();
      const t = uniqueTenant();
      await s.imports.create(job(t, `${t}-n`), 5);
      const owner = (await s.imports.claim('owner-n', 30_000, 1_000))!.leaseOwner!;
      expect((await s.imports.get(t, `${t}-n`))!.counts).toBeNull();
      expect(await s.imports.checkpoint(`${t}-n`, owner, 30_100, 1_000, '{"done":[1]}')).toBe(true);
      // The counts alone: the progress stays as stored.
      expect(await s.imports.checkpoint(`${t}-n`, owner, 30_200, 1_000, undefined, '{"imported":5,"failed":1}')).toBe(true);
      expect(await s.imports.get(t, `${t}-n`)).toMatchObject({ progress: '{"done":[1]}', counts: '{"imported":5,"failed":1}' });
      // A lease alone keeps both.
      expect(await s.imports.checkpoint(`${t}-n`, owner, 30_300, 1_000)).toBe(true);
      expect(await s.imports.get(t, `${t}-n`)).toMatchObject({ progress: '{"done":[1]}', counts: '{"imported":5,"failed":1}' });
      // The progress as an input ends: the counts were that input's.
      expect(await s.imports.checkpoint(`${t}-n`, owner, 30_400, 1_000, '{"done":[1,2]}')).toBe(true);
      expect(await s.imports.get(t, `${t}-n`)).toMatchObject({ progress: '{"done":[1,2]}', counts: null });
      // Renewed with a lease already over (by the database's clock): the owner stops here.
      expect(await s.imports.checkpoint(`${t}-n`, owner, 30_500, -1, '{"done":[1,2]}', '{"imported":1,"failed":0}')).toBe(true);
      expect((await s.imports.get(t, `${t}-n`))!.counts).toBe('{"imported":1,"failed":0}');
      // Another claim (the lease ran out) reads its input again: no counts of the attempt before.
      const again = await s.imports.claim('owner-m', 40_000, 1_000);
      expect(again).toMatchObject({ id: `${t}-n`, counts: null });
      expect(await s.imports.checkpoint(`${t}-n`, 'owner-m', 40_100, 1_000, undefined, '{"imported":2,"failed":0}')).toBe(true);
      expect(await s.imports.complete(`${t}-n`, 'owner-m', 40_200, '{"done":[1,2,3]}')).toBe(true);
      expect(await s.imports.get(t, `${t}-n`)).toMatchObject({ state: 'completed', progress: '{"done":[1,2,3]}', counts: null });
    });

    test('a claim leases the oldest job; another claim waits for the lease to run out; the old owner then can no longer write', async () => {
      const s = store();
      const t = uniqueTenant();
      await s.imports.create(job(t, `${t}-1`), 5);
      const before = Date.now();
      const [a, b] = await Promise.all([s.imports.claim('owner-a', 10_000, 60_000), s.imports.claim('owner-b', 10_000, 60_000)]);
      const claimed = [a, b].filter((j) => j !== null);
      expect(claimed).toHaveLength(1);
      const owner = claimed[0]!.leaseOwner!;
      expect(claimed[0]).toMatchObject({ id: `${t}-1`, state: 'in-progress', attempts: 1, updatedAt: 10_000 });
      // Leased from the database's now (this machine's clock), not from the caller's `now`; a caller far ahead finds it live.
      expect(claimed[0]!.leaseUntil!).toBeGreaterThanOrEqual(before + 60_000 - 1000);
      expect(await s.imports.claim('owner-c', before + 3_600_000, 1_000)).toBeNull();
      expect(await s.imports.checkpoint(`${t}-1`, owner, 10_600, 60_000, '{"done":[1]}')).toBe(true);
      expect(await s.imports.checkpoint(`${t}-1`, owner, 10_700, -1)).toBe(true);
      expect((await s.imports.get(t, `${t}-1`))!.progress).toBe('{"done":[1]}');
      const again = await s.imports.claim('owner-c', 12_000, 1_000);
      expect(again).toMatchObject({ id: `${t}-1`, attempts: 2, leaseOwner: 'owner-c', progress: '{"done":[1]}' });
      expect(await s.imports.checkpoint(`${t}-1`, owner, 12_100, 1_000)).toBe(false);
      expect(await s.imports.complete(`${t}-1`, owner, 12_100, '{}')).toBe(false);
      expect(await s.imports.complete(`${t}-1`, 'owner-c', 12_200, '{"done":[2]}')).toBe(true);
      expect(await s.imports.get(t, `${t}-1`)).toMatchObject({ state: 'completed', completedAt: 12_200, leaseOwner: null, progress: '{"done":[2]}' });
      expect(await s.imports.claim('owner-d', 99_000, 1_000)).toBeNull();
    });

    test('release hands a job back at once; fail ends it with its reason; cancel stops its owner', async () => {
      const s = store();
      const t = uniqueTenant();
      await s.imports.create(job(t, `${t}-r`), 5);
      await s.imports.claim('o1', 20_000, 60_000);
      await s.imports.release(`${t}-r`, 'o1', 20_001);
      expect(await s.imports.get(t, `${t}-r`)).toMatchObject({ state: 'accepted', leaseOwner: null });
      expect((await s.imports.claim('o2', 20_002, 60_000))!.attempts).toBe(2);
      expect(await s.imports.fail(`${t}-r`, 'o2', 20_003, 'broken', '{"done":[]}')).toBe(true);
      expect(await s.imports.get(t, `${t}-r`)).toMatchObject({ state: 'failed', error: 'broken', completedAt: 20_003 });

      await s.imports.create(job(t, `${t}-c`), 5);
      await s.imports.claim('o3', 20_010, 60_000);
      expect(await s.imports.cancel(t, `${t}-c`, 20_011)).toBe('in-progress');
      expect(await s.imports.cancel(t, `${t}-c`, 20_012)).toBeNull();
      expect(await s.imports.checkpoint(`${t}-c`, 'o3', 20_013, 60_000)).toBe(false);
      expect(await s.imports.claim('o4', 200_000, 60_000)).toBeNull();
    });

    test("a job's credential is claimed with it, kept while it is handed back, and wiped when it completes, fails or is cancelled", async () => {
      const s = store();
      const t = uniqueTenant();
      await s.imports.create(job(t, `${t}-k`, { credential: 'u:p' }), 5);
      expect((await s.imports.claim('o1', 30_000, 60_000))!.credential).toBe('u:p');
      await s.imports.release(`${t}-k`, 'o1', 30_001, true);
      expect((await s.imports.get(t, `${t}-k`))!.credential).toBe('u:p');
      expect((await s.imports.claim('o2', 30_002, 60_000))!.credential).toBe('u:p');
      expect(await s.imports.complete(`${t}-k`, 'o2', 30_003, '{"done":[]}')).toBe(true);
      expect((await s.imports.get(t, `${t}-k`))!.credential).toBeNull();

      await s.imports.create(job(t, `${t}-f`, { credential: 'u:p' }), 5);
      await s.imports.claim('o3', 30_010, 60_000);
      expect(await s.imports.fail(`${t}-f`, 'o3', 30_011, 'broken', '{"done":[]}')).toBe(true);
      expect((await s.imports.get(t, `${t}-f`))!.credential).toBeNull();

      await s.imports.create(job(t, `${t}-x`, { credential: 'u:p' }), 5);
      expect(await s.imports.cancel(t, `${t}-x`, 30_020)).toBe('accepted');
      expect((await s.imports.get(t, `${t}-x`))!.credential).toBeNull();
      await s.imports.create(job(t, `${t}-n`), 5);
      expect((await s.imports.get(t, `${t}-n`))!.credential).toBeNull();
      await s.imports.cancel(t, `${t}-n`, 30_021);
    });

    test('removeEnded deletes jobs that ended before a time, never a running or waiting one', async () => {
      const s = store();
      const t = uniqueTenant();
      await s.imports.create(job(t, `${t}-old`, { createdAt: 100 }), 5);
      await s.imports.cancel(t, `${t}-old`, 200);
      await s.imports.create(job(t, `${t}-new`, { createdAt: 100 }), 5);
      await s.imports.cancel(t, `${t}-new`, 5_000);
      await s.imports.create(job(t, `${t}-waiting`, { createdAt: 100 }), 5);
      const counts = await s.imports.countByState();
      expect(counts.cancelled).toBeGreaterThanOrEqual(2);
      expect(counts.accepted).toBeGreaterThanOrEqual(1);
      expect(await s.imports.removeEnded(1_000)).toContainEqual({ tenant: t, id: `${t}-old` });
      expect(await s.imports.get(t, `${t}-old`)).toBeNull();
      expect(await s.imports.get(t, `${t}-new`)).not.toBeNull();
      expect(await s.imports.get(t, `${t}-waiting`)).not.toBeNull();
      await s.imports.cancel(t, `${t}-waiting`, 5_000);
    });
  });
}
