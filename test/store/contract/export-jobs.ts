import { beforeEach, describe, expect, test } from 'bun:test';
import type { Store } from '../../../src/store/types.ts';
import type { StoreTarget } from '../../helpers/stores.ts';
import { exportJob as job, freshStore } from './fixtures.ts';

/** Export job lifecycle: kick-off limits, claims and leases, end states. Each test on a new database, so that listings see its jobs only. */
export function exportJobsContract(target: StoreTarget) {
  describe('export jobs', () => {
    let store: Store;
    beforeEach(async () => {
      store = await freshStore(target);
    });

    test('create enforces the per-client limit of accepted and in-progress jobs, which activeCount counts', async () => {
      expect(await store.exports.jobs.create(job('a', 1), [], 2)).toBe(true);
      expect(await store.exports.jobs.create(job('b', 2), [], 2)).toBe(true);
      expect(await store.exports.jobs.create(job('c', 3), [], 2)).toBe(false);
      expect(await store.exports.jobs.create(job('c', 3, 'c2'), [], 2)).toBe(true);
      expect(await store.exports.jobs.cancel('t1', 'a', 4)).toBe('accepted');
      expect(await store.exports.jobs.cancel('t1', 'a', 4)).toBeNull();
      expect(await store.exports.jobs.create(job('d', 5), [], 2)).toBe(true);
      expect((await store.exports.jobs.get('t1', 'd'))!.state).toBe('accepted');
      expect([await store.exports.jobs.activeCount('t1', 'c1'), await store.exports.jobs.activeCount('t1', 'c2'), await store.exports.jobs.activeCount('t2', 'c1')]).toEqual([2, 1, 0]);
      await store.exports.jobs.claim('w1', 6, 1000, 'b');
      expect(await store.exports.jobs.complete('b', 'w1', 7, '{}', 9999)).toBe(true);
      expect(await store.exports.jobs.activeCount('t1', 'c1')).toBe(1);
      expect(await store.exports.jobs.get('t2', 'd')).toBeNull();
    });

    test("the limit counts per owner: a client's user (ownerUser) apart from its other users and from its own authority", async () => {
      const of = (id: string, ownerUser?: string) => ({ ...job(id, 1), ...(ownerUser === undefined ? {} : { ownerUser }) });
      expect(await store.exports.jobs.create(of('a1', 'alice'), [], 1)).toBe(true);
      expect(await store.exports.jobs.create(of('a2', 'alice'), [], 1)).toBe(false);
      expect(await store.exports.jobs.create(of('b1', 'bob'), [], 1)).toBe(true);
      expect(await store.exports.jobs.create(of('o1'), [], 1)).toBe(true);
      expect(await store.exports.jobs.create(of('o2'), [], 1)).toBe(false);
      expect([
        await store.exports.jobs.activeCount('t1', 'c1', 'alice'), await store.exports.jobs.activeCount('t1', 'c1', 'bob'),
        await store.exports.jobs.activeCount('t1', 'c1'), await store.exports.jobs.activeCount('t1', 'c1', 'carol'),
      ]).toEqual([1, 1, 1, 0]);
      expect(await store.exports.jobs.cancel('t1', 'a1', 2)).toBe('accepted');
      expect(await store.exports.jobs.create(of('a3', 'alice'), [], 1)).toBe(true);
    });

    test("claim: oldest first, leased by the database's clock, attempts counted; an expired lease can be taken over", async () => {
      await store.exports.jobs.create(job('a', 1), [], 9);
      await store.exports.jobs.create(job('b', 2), [], 9);
      const before = Date.now();
      const first = (await store.exports.jobs.claim('w1', 100, 60_000))!;
      expect([first.id, first.state, first.leaseOwner, first.attempts, first.updatedAt]).toEqual(['a', 'in-progress', 'w1', 1, 100]);
      // The lease runs from the database's now (this machine's clock), not from the caller's `now` (100).
      expect(first.leaseUntil!).toBeGreaterThanOrEqual(before + 60_000 - 1000);
      expect((await store.exports.jobs.claim('w2', 100, 60_000))!.id).toBe('b');
      expect(await store.exports.jobs.claim('w3', 100, 60_000)).toBeNull();
      expect(await store.exports.jobs.checkpoint('a', 'w1', 500, 60_000, '{"step":1}')).toBe(true);
      expect(await store.exports.jobs.checkpoint('b', 'w2', 500, 60_000)).toBe(true);
      // A caller whose clock runs far ahead does not find either lease expired.
      expect(await store.exports.jobs.claim('w3', before + 3_600_000, 60_000)).toBeNull();
      // w1 stops renewing: its last renewal's lease ran out (renewed with a lease already over).
      expect(await store.exports.jobs.checkpoint('a', 'w1', 600, -1)).toBe(true);
      const stolen = (await store.exports.jobs.claim('w3', 0, 60_000))!;
      expect([stolen.id, stolen.attempts, stolen.progress]).toEqual(['a', 2, '{"step":1}']);
      expect(await store.exports.jobs.checkpoint('a', 'w1', 1700, 60_000)).toBe(false);
      expect(await store.exports.jobs.complete('a', 'w1', 1700, '{}', 9999)).toBe(false);
      expect(await store.exports.jobs.complete('a', 'w3', 1700, '{"done":1}', 9999)).toBe(true);
      const done = (await store.exports.jobs.get('t1', 'a'))!;
      expect([done.state, done.progress, done.expiresAt, done.leaseOwner]).toEqual(['completed', '{"done":1}', 9999, null]);
    });

    test('claim by id, release and fail', async () => {
      await store.exports.jobs.create(job('a', 1), [], 9);
      await store.exports.jobs.create(job('b', 2), [], 9);
      expect((await store.exports.jobs.claim('w1', 10, 1000, 'b'))!.id).toBe('b');
      await store.exports.jobs.release('b', 'w1', 20);
      expect((await store.exports.jobs.get('t1', 'b'))!.state).toBe('accepted');
      expect((await store.exports.jobs.claim('w1', 30, 1000, 'b'))!.attempts).toBe(2);
      expect(await store.exports.jobs.fail('b', 'w1', 40, 'boom', 500)).toBe(true);
      const failed = (await store.exports.jobs.get('t1', 'b'))!;
      expect([failed.state, failed.error, failed.expiresAt]).toEqual(['failed', 'boom', 500]);
    });

    test('concurrent claims never hand one job to two workers', async () => {
      for (let i = 0; i < 6; i++) await store.exports.jobs.create(job(`j${i}`, i), [], 99);
      const claims = await Promise.all(Array.from({ length: 10 }, (_, i) => store.exports.jobs.claim(`w${i}`, 100, 1000)));
      const ids = claims.filter((c) => c !== null).map((c) => c!.id);
      expect(ids.sort()).toEqual(['j0', 'j1', 'j2', 'j3', 'j4', 'j5']);
    });
  });
}
