import { beforeEach, describe, expect, test } from 'bun:test';
import type { Store } from '../../../src/store/types.ts';
import type { StoreTarget } from '../../helpers/stores.ts';
import { exportJob as job, freshStore } from './fixtures.ts';

/** Export clean-up: purging files and deleting jobs. Each test on a new database, so that listings see its jobs only. */
export function exportCleanupContract(target: StoreTarget) {
  describe('export clean-up', () => {
    let store: Store;
    beforeEach(async () => {
      store = await freshStore(target);
    });

    test("a cancelled job is purgeable once no worker lease runs (by the database's clock)", async () => {
      await store.exports.jobs.create(job('a', 1), [], 9);
      await store.exports.jobs.create(job('b', 2), [], 9);
      await store.exports.jobs.claim('w', 10, 60_000, 'a');
      await store.exports.jobs.claim('w', 10, -1, 'b');
      expect(await store.exports.jobs.cancel('t1', 'a', 20)).toBe('in-progress');
      expect(await store.exports.jobs.cancel('t1', 'b', 20)).toBe('in-progress');
      expect(await store.exports.jobs.checkpoint('a', 'w', 30, 1000)).toBe(false);
      // 'a' is leased for a minute from the database's now, whatever the caller's clock says.
      expect((await store.exports.cleanup.purgeable(Date.now() + 3_600_000, 10)).map((j) => j.id)).toEqual(['b']);
      expect(await store.exports.cleanup.markPurged('a', Date.now() + 3_600_000)).toBe(false);
      expect(await store.exports.cleanup.markPurged('b', 30)).toBe(true);
    });

    test("purging a job's files drops its patients and Provenance notes at once; its record stays for the retention", async () => {
      await store.exports.jobs.create(job('a', 1), [{ id: 'p1', joined: false }, { id: 'p2', joined: true }], 9);
      await store.exports.jobs.claim('w', 10, -1);
      await store.exports.scratch.noteProvenance('a', [{ target: 'Patient/p1', provenance: 'pv1', rank: '1' }]);
      expect((await store.exports.scratch.patientsIn('a', ['p1', 'p2'])).map((p) => p.id).sort()).toEqual(['p1', 'p2']);
      expect(await store.exports.jobs.cancel('t1', 'a', 20)).toBe('in-progress');
      expect(await store.exports.cleanup.markPurged('a', 1011)).toBe(true);
      expect(await store.exports.scratch.patientsIn('a', ['p1', 'p2'])).toEqual([]);
      expect(await store.exports.scratch.latestProvenance('a', '', 10)).toEqual([]);
      expect((await store.exports.jobs.get('t1', 'a'))?.state).toBe('cancelled');
    });

    test('purged jobs are deleted after the retention, with their patients and bookkeeping', async () => {
      await store.exports.jobs.create(job('a', 1), [{ id: 'p1', joined: false }], 9);
      await store.exports.jobs.claim('w', 1, 1000);
      await store.exports.jobs.complete('a', 'w', 10, '{}', 100);
      expect((await store.exports.cleanup.purgeable(301, 10)).map((j) => j.id)).toEqual(['a']);
      expect(await store.exports.cleanup.markPurged('a', 301)).toBe(true);
      expect(await store.exports.cleanup.purgeable(400, 10)).toEqual([]);
      expect(await store.exports.cleanup.purgedBefore(301, 10)).toEqual([]);
      expect(await store.exports.cleanup.purgedBefore(302, 10)).toEqual(['a']);
      await store.exports.cleanup.remove('a');
      expect(await store.exports.jobs.get('t1', 'a')).toBeNull();
      expect(await store.exports.scratch.patientsIn('a', ['p1'])).toEqual([]);
    });
  });
}
