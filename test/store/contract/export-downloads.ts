import { beforeEach, describe, expect, test } from 'bun:test';
import type { Store } from '../../../src/store/types.ts';
import type { StoreTarget } from '../../helpers/stores.ts';
import { exportJob as job, freshStore } from './fixtures.ts';

/** Download holds on a completed job's files. Each test on a new database, so that listings see its jobs only. */
export function exportDownloadsContract(target: StoreTarget) {
  describe('export downloads', () => {
    let store: Store;
    beforeEach(async () => {
      store = await freshStore(target);
    });

    test('a download holds the files: no purge while held, no new hold once purged', async () => {
      await store.exports.jobs.create(job('a', 1), [{ id: 'p1', joined: false }], 9);
      await store.exports.jobs.claim('w', 1, 1000);
      await store.exports.jobs.complete('a', 'w', 10, '{}', 100);
      expect(await store.exports.downloads.holdFiles('t1', 'a', 'd1', 50, 60_000, true)).toBe(true);
      expect(await store.exports.downloads.holdFiles('t1', 'a', 'd2', 60, 60_000, true)).toBe(true);
      expect(await store.exports.cleanup.purgeable(120, 10)).toEqual([]);
      expect(await store.exports.cleanup.markPurged('a', 120)).toBe(false);
      expect(await store.exports.downloads.holdFiles('t1', 'a', 'd3', 120, 60_000, true)).toBe(false);
      expect(await store.exports.downloads.holdFiles('t1', 'a', 'd1', 120, 60_000, false)).toBe(true);
      await store.exports.downloads.releaseFiles('a', 'd2');
      expect(await store.exports.cleanup.purgeable(150, 10)).toEqual([]);
      await store.exports.downloads.releaseFiles('a', 'd1');
      expect((await store.exports.cleanup.purgeable(150, 10)).map((j) => j.id)).toEqual(['a']);
      // A hold lapses by the database's clock.
      expect(await store.exports.downloads.holdFiles('t1', 'a', 'd1', 150, 1, false)).toBe(true);
      await Bun.sleep(20);
      expect((await store.exports.cleanup.purgeable(301, 10)).map((j) => j.id)).toEqual(['a']);
      expect(await store.exports.cleanup.markPurged('a', 301)).toBe(true);
      expect(await store.exports.downloads.holdFiles('t1', 'a', 'd4', 302, 60_000, false)).toBe(false);
      expect(await store.exports.cleanup.purgeable(400, 10)).toEqual([]);
    });

    test("a hold is judged by the database's clock: a clean-up process far ahead of the downloader's does not purge held files", async () => {
      const now = Date.now();
      await store.exports.jobs.create(job('a', now), [{ id: 'p1', joined: false }], 9);
      await store.exports.jobs.claim('w', now, 1000);
      await store.exports.jobs.complete('a', 'w', now, '{}', now + 3_600_000);
      // The downloading process's clock is a day behind; the clean-up's is past the files' expiry and a day ahead.
      expect(await store.exports.downloads.holdFiles('t1', 'a', 'd1', now, 60_000, true)).toBe(true);
      expect(await store.exports.downloads.holdFiles('t1', 'a', 'd1', now - 86_400_000, 60_000, false)).toBe(true);
      const ahead = now + 86_400_000;
      expect(await store.exports.cleanup.purgeable(ahead, 10)).toEqual([]);
      expect(await store.exports.cleanup.markPurged('a', ahead)).toBe(false);
      await store.exports.downloads.releaseFiles('a', 'd1');
      expect((await store.exports.cleanup.purgeable(ahead, 10)).map((j) => j.id)).toEqual(['a']);
      expect(await store.exports.cleanup.markPurged('a', ahead)).toBe(true);
    });
  });
}
