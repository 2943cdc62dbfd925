import { describe, expect, test } from 'bun:test';
import type { Store } from '../../../src/store/types.ts';
import { save, uniqueTenant } from './fixtures.ts';

/**
 * ResourceRepo.versionsSince (src/fhir/search-pin.ts): the versions of a type stamped at or after a time, current and
 * past, as ids and version numbers; none of another type or tenant, none stamped before; at most `count`.
 */
export function versionsSinceContract(store: () => Store) {
  describe('versionsSince()', () => {
    test('the ids and version numbers of a type written since a time, current and past, at most count', async () => {
      const s = store();
      const t = uniqueTenant();
      const at = 1_700_000_000_000;
      await save(s, t, 'Patient', 'p1', { lastUpdated: at - 10 });
      await save(s, t, 'Patient', 'p2', { lastUpdated: at - 5 });
      await save(s, t, 'Patient', 'p1', { lastUpdated: at });
      await save(s, t, 'Patient', 'p1', { lastUpdated: at + 5 });
      await save(s, t, 'Patient', 'p3', { lastUpdated: at + 6 });
      await save(s, t, 'Patient', 'p2', { lastUpdated: at + 7, deleted: true });
      await save(s, t, 'Observation', 'o1', { lastUpdated: at + 8 });
      await save(s, uniqueTenant(), 'Patient', 'p4', { lastUpdated: at + 9 });
      const key = (v: { id: string; versionId: number }) => `${v.id}/${v.versionId}`;
      const all = (await s.resources.versionsSince(t, 'Patient', at, 10)).map(key).sort();
      expect(all).toEqual(['p1/2', 'p1/3', 'p2/2', 'p3/1']);
      expect((await s.resources.versionsSince(t, 'Patient', at + 6, 10)).map(key).sort()).toEqual(['p2/2', 'p3/1']);
      expect(await s.resources.versionsSince(t, 'Patient', at + 10, 10)).toEqual([]);
      const two = (await s.resources.versionsSince(t, 'Patient', at, 2)).map(key);
      expect(two).toHaveLength(2);
      for (const k of two) expect(all).toContain(k);
    });
  });
}
