import { describe, expect, test } from 'bun:test';
import { EXPUNGE_SCAN_ROWS } from '../../../src/store/expunge-batch.ts';
import type { ExpungeBatch, Store } from '../../../src/store/types.ts';
import { save, uniqueTenant } from './fixtures.ts';

/** Versions of `type/id` still stored, oldest first (history, then the current one). */
async function kept(s: Store, t: string, type: string, id: string): Promise<number[]> {
  const current = await s.resources.read(t, type, id);
  if (!current) return [];
  const out: number[] = [];
  for (let v = 1; v < current.versionId; v++) if (await s.resources.vread(t, type, id, v)) out.push(v);
  return [...out, current.versionId];
}

/** `n` versions of `type/id`, the last a deletion when `deleted`. */
async function versionsOf(s: Store, t: string, type: string, id: string, n: number, deleted = false): Promise<void> {
  for (let i = 1; i <= n; i++) {
    await save(s, t, type, id, { lastUpdated: i * 1000, deleted: deleted && i === n, index: [{ param: 'code', system: 's', value: `${id}-${i}` }], compartments: ['p'] });
  }
}

/** ExpungeRepo.batch: what each mode removes, the limit's cut, resuming, and when a type is done. */
export function expungeContract(store: () => Store) {
  describe('expunge batches', () => {
    const batch = (s: Store, b: Omit<ExpungeBatch, 'after'> & { after?: number }) => s.expunge.batch({ after: 0, ...b });

    test('previous: history versions alone, oldest first, cut by the limit and resumed', async () => {
      const s = store();
      const t = uniqueTenant();
      await versionsOf(s, t, 'Basic', 'a', 4);
      await versionsOf(s, t, 'Basic', 'b', 3, true);
      let r = await batch(s, { tenant: t, type: 'Basic', mode: 'previous', limit: 2 });
      expect(r).toMatchObject({ removed: 2, done: false });
      expect(await kept(s, t, 'Basic', 'a')).toEqual([3, 4]);
      r = await batch(s, { tenant: t, type: 'Basic', mode: 'previous', limit: 10, after: r.after });
      expect(r).toMatchObject({ removed: 3, done: true });
      expect(await kept(s, t, 'Basic', 'a')).toEqual([4]);
      // A deleted resource keeps its deletion, and stays deleted.
      expect(await kept(s, t, 'Basic', 'b')).toEqual([3]);
      expect((await s.resources.read(t, 'Basic', 'b'))!.deleted).toBe(true);
    });

    test('deleted: every version of deleted resources, the resource row last; live ones untouched', async () => {
      const s = store();
      const t = uniqueTenant();
      await versionsOf(s, t, 'Basic', 'live', 2);
      await versionsOf(s, t, 'Basic', 'gone', 3, true);
      let r = await batch(s, { tenant: t, type: 'Basic', mode: 'deleted', limit: 2 });
      // Cut after its two oldest versions: the deletion (the resource row) stays until its history is gone.
      expect(r).toMatchObject({ removed: 2, done: false });
      expect(await kept(s, t, 'Basic', 'gone')).toEqual([3]);
      r = await batch(s, { tenant: t, type: 'Basic', mode: 'deleted', limit: 2, after: r.after });
      expect(r).toMatchObject({ removed: 1, done: true });
      expect(await s.resources.read(t, 'Basic', 'gone')).toBeNull();
      expect(await kept(s, t, 'Basic', 'live')).toEqual([1, 2]);
      expect((await s.resources.search(t, { type: 'Basic', sort: [], count: 10 })).map((v) => v.id)).toEqual(['live']);
    });

    test('all: live resources too; ids and one version narrow it; another tenant and type are untouched', async () => {
      const s = store();
      const t = uniqueTenant();
      const other = uniqueTenant();
      await versionsOf(s, t, 'Basic', 'x', 2);
      await versionsOf(s, t, 'Basic', 'y', 2);
      await versionsOf(s, t, 'Group', 'x', 1);
      await versionsOf(s, other, 'Basic', 'x', 1);
      expect(await batch(s, { tenant: t, type: 'Basic', mode: 'previous', ids: ['y'], versionId: 1, limit: 10 })).toMatchObject({ removed: 1, done: true });
      expect(await kept(s, t, 'Basic', 'y')).toEqual([2]);
      expect(await batch(s, { tenant: t, type: 'Basic', mode: 'all', ids: ['x'], limit: 10 })).toMatchObject({ removed: 2, done: true });
      expect(await s.resources.read(t, 'Basic', 'x')).toBeNull();
      expect(await kept(s, t, 'Basic', 'y')).toEqual([2]);
      expect(await kept(s, t, 'Group', 'x')).toEqual([1]);
      expect(await kept(s, other, 'Basic', 'x')).toEqual([1]);
    });

    test(`a batch examines at most ${EXPUNGE_SCAN_ROWS} resource rows, and resumes after them`, async () => {
      const s = store();
      const t = uniqueTenant();
      const live = Array.from({ length: EXPUNGE_SCAN_ROWS + 5 }, (_, i) => ({ type: 'Basic', id: `l${i}`, versionId: 1, lastUpdated: 1000, deleted: false, content: '{}', method: 'POST' as const, index: { tokens: [], strings: [], ranges: [], composites: [] }, compartments: [] }));
      await s.resources.write(t, (w) => w.insertNew(live));
      await versionsOf(s, t, 'Basic', 'last', 2, true);
      // Live rows only in the first rows examined (SQLite reads them and moves on; PostgreSQL reads the deleted ones alone).
      let r = await batch(s, { tenant: t, type: 'Basic', mode: 'deleted', limit: 10 });
      let removed = r.removed;
      for (let i = 0; !r.done && i < 5; i++) {
        r = await batch(s, { tenant: t, type: 'Basic', mode: 'deleted', limit: 10, after: r.after });
        removed += r.removed;
      }
      expect({ removed, done: r.done }).toEqual({ removed: 2, done: true });
      expect(await s.resources.read(t, 'Basic', 'last')).toBeNull();
      expect(await s.resources.read(t, 'Basic', 'l0')).not.toBeNull();
    });
  });
}
