import { describe, expect, test } from 'bun:test';
import type { Store } from '../../../src/store/types.ts';
import { save, uniqueTenant, version } from './fixtures.ts';

/**
 * ResourceRepo.writeMark (src/fhir/search-total.ts): every transaction that changes a tenant's resources or index rows
 * moves it, whichever writer method changed them and whether its versions were written before the end (a search
 * inside the transaction writes them first) or at it (PostgreSQL folds the mark into that statement); a transaction
 * that changed nothing, or another tenant's, leaves it.
 */
export function writeMarkContract(store: () => Store) {
  describe('writeMark()', () => {
    test('moves with every kind of write to the tenant, and only with those', async () => {
      const s = store();
      const t = uniqueTenant();
      const other = uniqueTenant();
      const marks: string[] = [await s.resources.writeMark(t)];
      /** The mark after `step`, asserting that it moved (or not). */
      const after = async (what: string, moves: boolean, step: () => Promise<unknown>) => {
        await step();
        const mark = await s.resources.writeMark(t);
        expect({ what, moved: mark !== marks[marks.length - 1] }).toEqual({ what, moved: moves });
        marks.push(mark);
      };
      await after('create', true, () => save(s, t, 'Patient', 'p1', { index: [{ param: 'identifier', system: 's', value: 'a' }] }));
      await after('update', true, () => save(s, t, 'Patient', 'p1', { index: [{ param: 'identifier', system: 's', value: 'b' }] }));
      await after('a transaction that reads only', false, () => s.resources.write(t, (w) => w.current('Patient', 'p1')));
      await after('another tenant\'s write', false, () => save(s, other, 'Patient', 'p1'));
      await after('a create and an update together', true, () => s.resources.write(t, async (w) => {
        await w.put(version('Patient', 'p2'));
        await w.put(version('Patient', 'p1', { versionId: 3 }));
      }));
      await after('versions written before the end by a search in the transaction', true, () => s.resources.write(t, async (w) => {
        await w.put(version('Patient', 'p1', { versionId: 4 }));
        await w.search({ type: 'Patient', sort: [], count: 10 });
      }));
      await after('a deletion', true, () => save(s, t, 'Patient', 'p2', { deleted: true }));
      await after('an import\'s bulk insert', true, () => s.resources.write(t, (w) => w.insertNew([version('Patient', 'p3'), version('Patient', 'p4')])));
      await after('a reindex', true, () => s.resources.write(t, (w) => w.replaceIndex([{ type: 'Patient', id: 'p3', index: { tokens: [{ param: 'identifier', system: 's', value: 'c' }], strings: [], ranges: [], composites: [] }, compartments: [] }])));
      // Every mark differs from every earlier one: it only grows.
      const moved = marks.filter((m, i) => i === 0 || m !== marks[i - 1]);
      expect(new Set(moved).size).toBe(moved.length);
    });
  });
}
