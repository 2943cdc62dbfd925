import { afterAll, beforeEach, describe, expect, test } from 'bun:test';
import type { NewExportJob, Store } from '../../src/store/types.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets();
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const job = (id: string, at: number, clientId = 'c1'): NewExportJob => ({
  id, tenant: 't1', clientId, request: 'http://x/$export', spec: '{}', transactionTime: at, progress: '{"step":0}', createdAt: at,
});

for (const target of targets) {
  describe(`ExportJobRepo (${target.kind})`, () => {
    let store: Store;
    beforeEach(async () => {
      store = (await target.fresh()).open();
      await store.migrate();
    });

    test('create enforces the per-client limit of accepted and in-progress jobs', async () => {
      expect(await store.exports.jobs.create(job('a', 1), [], 2)).toBe(true);
      expect(await store.exports.jobs.create(job('b', 2), [], 2)).toBe(true);
      expect(await store.exports.jobs.create(job('c', 3), [], 2)).toBe(false);
      expect(await store.exports.jobs.create(job('c', 3, 'c2'), [], 2)).toBe(true);
      expect(await store.exports.jobs.cancel('t1', 'a', 4)).toBe('accepted');
      expect(await store.exports.jobs.cancel('t1', 'a', 4)).toBeNull();
      expect(await store.exports.jobs.create(job('d', 5), [], 2)).toBe(true);
      expect((await store.exports.jobs.get('t1', 'd'))!.state).toBe('accepted');
      expect(await store.exports.jobs.get('t2', 'd')).toBeNull();
    });

    test('claim: oldest first, leased, attempts counted; an expired lease can be taken over', async () => {
      await store.exports.jobs.create(job('a', 1), [], 9);
      await store.exports.jobs.create(job('b', 2), [], 9);
      const first = (await store.exports.jobs.claim('w1', 100, 1000))!;
      expect([first.id, first.state, first.leaseOwner, first.leaseUntil, first.attempts]).toEqual(['a', 'in-progress', 'w1', 1100, 1]);
      expect((await store.exports.jobs.claim('w2', 100, 1000))!.id).toBe('b');
      expect(await store.exports.jobs.claim('w3', 100, 1000)).toBeNull();
      expect(await store.exports.jobs.checkpoint('a', 'w1', 500, 1000, '{"step":1}')).toBe(true);
      expect(await store.exports.jobs.checkpoint('b', 'w2', 500, 5000)).toBe(true);
      expect(await store.exports.jobs.claim('w3', 1200, 1000)).toBeNull();
      const stolen = (await store.exports.jobs.claim('w3', 1600, 1000))!;
      expect([stolen.id, stolen.attempts, stolen.progress]).toEqual(['a', 2, '{"step":1}']);
      expect(await store.exports.jobs.checkpoint('a', 'w1', 1700, 1000)).toBe(false);
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

    test('holding files for a download, purging and removal', async () => {
      await store.exports.jobs.create(job('a', 1), [{ id: 'p1', joined: false }], 9);
      await store.exports.jobs.claim('w', 1, 1000);
      await store.exports.jobs.complete('a', 'w', 10, '{}', 100);
      expect(await store.exports.downloads.holdFiles('t1', 'a', 'd1', 50, 150, true)).toBe(true);
      expect(await store.exports.downloads.holdFiles('t1', 'a', 'd2', 60, 130, true)).toBe(true);
      expect(await store.exports.cleanup.purgeable(120, 10)).toEqual([]);
      expect(await store.exports.cleanup.markPurged('a', 120)).toBe(false);
      expect(await store.exports.downloads.holdFiles('t1', 'a', 'd3', 120, 200, true)).toBe(false);
      expect(await store.exports.downloads.holdFiles('t1', 'a', 'd1', 120, 200, false)).toBe(true);
      await store.exports.downloads.releaseFiles('a', 'd2');
      expect(await store.exports.cleanup.purgeable(150, 10)).toEqual([]);
      await store.exports.downloads.releaseFiles('a', 'd1');
      expect((await store.exports.cleanup.purgeable(150, 10)).map((j) => j.id)).toEqual(['a']);
      expect(await store.exports.downloads.holdFiles('t1', 'a', 'd1', 150, 300, false)).toBe(true);
      expect((await store.exports.cleanup.purgeable(301, 10)).map((j) => j.id)).toEqual(['a']);
      expect(await store.exports.cleanup.markPurged('a', 301)).toBe(true);
      expect(await store.exports.downloads.holdFiles('t1', 'a', 'd4', 302, 400, false)).toBe(false);
      expect(await store.exports.cleanup.purgeable(400, 10)).toEqual([]);
      expect(await store.exports.cleanup.purgedBefore(301, 10)).toEqual([]);
      expect(await store.exports.cleanup.purgedBefore(302, 10)).toEqual(['a']);
      await store.exports.cleanup.remove('a');
      expect(await store.exports.jobs.get('t1', 'a')).toBeNull();
      expect(await store.exports.scratch.patientsIn('a', ['p1'])).toEqual([]);
    });

    test('a cancelled job is purgeable once no worker lease runs', async () => {
      await store.exports.jobs.create(job('a', 1), [], 9);
      await store.exports.jobs.claim('w', 10, 1000);
      expect(await store.exports.jobs.cancel('t1', 'a', 20)).toBe('in-progress');
      expect(await store.exports.jobs.checkpoint('a', 'w', 30, 1000)).toBe(false);
      expect(await store.exports.cleanup.purgeable(500, 10)).toEqual([]);
      expect((await store.exports.cleanup.purgeable(1011, 10)).map((j) => j.id)).toEqual(['a']);
    });

    test('patients and provenance bookkeeping', async () => {
      await store.exports.jobs.create(job('a', 1), [{ id: 'p1', joined: false }, { id: 'p2', joined: true }], 9);
      expect((await store.exports.scratch.patientsIn('a', ['p2', 'p3', 'p1'])).sort((x, y) => x.id.localeCompare(y.id))).toEqual([
        { id: 'p1', joined: false }, { id: 'p2', joined: true },
      ]);
      await store.exports.scratch.noteProvenance('a', [
        { target: 'Observation/1', provenance: 'pa', rank: '2' },
        { target: 'Observation/2', provenance: 'pb', rank: '1' },
      ]);
      await store.exports.scratch.noteProvenance('a', [
        { target: 'Observation/1', provenance: 'pc', rank: '3' },
        { target: 'Observation/2', provenance: 'pd', rank: '0' },
      ]);
      expect(await store.exports.scratch.latestProvenance('a', '', 10)).toEqual(['pb', 'pc']);
      expect(await store.exports.scratch.latestProvenance('a', 'pb', 10)).toEqual(['pc']);
      expect(await store.exports.jobs.countByState()).toEqual({ accepted: 1 });
    });
  });
}
