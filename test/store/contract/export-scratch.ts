import { beforeEach, describe, expect, test } from 'bun:test';
import type { Store } from '../../../src/store/types.ts';
import type { StoreTarget } from '../../helpers/stores.ts';
import { exportJob as job, freshStore } from './fixtures.ts';

/** An export job's patients and Provenance notes. Each test on a new database, so that listings see its jobs only. */
export function exportScratchContract(target: StoreTarget) {
  describe('export job scratch data', () => {
    let store: Store;
    beforeEach(async () => {
      store = await freshStore(target);
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
