import { describe, expect, test } from 'bun:test';
import type { HistoryQuery, ResourceVersion, Store } from '../../../src/store/types.ts';
import { save, stored, uniqueTenant, version, versions } from './fixtures.ts';

type Key = [string, string, number];
const keys = (rs: ResourceVersion[]): Key[] => rs.map((r) => [r.type, r.id, r.versionId]);

/** Reads every page of a history query with keyset `before`. */
async function allPages(s: Store, tenant: string, q: HistoryQuery): Promise<ResourceVersion[]> {
  const out: ResourceVersion[] = [];
  for (let before: HistoryQuery['before']; ; ) {
    const page = await s.resources.history(tenant, { ...q, before });
    out.push(...page);
    if (page.length < q.count) return out;
    const last = page.at(-1)!;
    before = { lastUpdated: last.lastUpdated, type: last.type, id: last.id, versionId: last.versionId };
  }
}

/** read, vread and history, with deletions as versions. */
export function historyContract(store: () => Store) {
  describe('read, vread, history', () => {
    test('read and vread return exactly what was put; unknown ids and versions are null', async () => {
      const s = store();
      const t = uniqueTenant();
      const v1 = await save(s, t, 'Patient', 'p1', { lastUpdated: 1_000, body: { name: [{ family: 'One' }] } });
      const v2 = await save(s, t, 'Patient', 'p1', { lastUpdated: 2_000, body: { name: [{ family: 'Two' }] } });
      expect(await s.resources.read(t, 'Patient', 'p1')).toEqual(stored(v2));
      expect(await s.resources.vread(t, 'Patient', 'p1', 1)).toEqual(stored(v1));
      expect(await s.resources.vread(t, 'Patient', 'p1', 2)).toEqual(stored(v2));
      expect(await s.resources.vread(t, 'Patient', 'p1', 3)).toBeNull();
      expect(await s.resources.read(t, 'Patient', 'p2')).toBeNull();
      expect(await s.resources.read(t, 'Observation', 'p1')).toBeNull();
      expect(await s.resources.read(uniqueTenant(), 'Patient', 'p1')).toBeNull();
    });

    test('vreadMany returns each version asked that exists, as vread does, once, whatever the table holding it', async () => {
      const s = store();
      const t = uniqueTenant();
      const v1 = await save(s, t, 'Patient', 'p1', { lastUpdated: 1_000, body: { name: [{ family: 'One' }] } });
      const v2 = await save(s, t, 'Patient', 'p1', { lastUpdated: 2_000, body: { name: [{ family: 'Two' }] } });
      const del = await save(s, t, 'Patient', 'p2', { lastUpdated: 3_000 });
      const gone = await save(s, t, 'Patient', 'p2', { lastUpdated: 4_000, deleted: true });
      await save(s, t, 'Observation', 'p1', { lastUpdated: 5_000 });
      const asked = [{ id: 'p1', versionId: 1 }, { id: 'p1', versionId: 2 }, { id: 'p1', versionId: 2 }, { id: 'p1', versionId: 3 }, { id: 'p2', versionId: 1 }, { id: 'p2', versionId: 2 }, { id: 'p9', versionId: 1 }];
      const got = await s.resources.vreadMany(t, 'Patient', asked);
      const byKey = (rs: ResourceVersion[]) => [...rs].sort((a, b) => a.id.localeCompare(b.id) || a.versionId - b.versionId);
      expect(byKey(got)).toEqual([stored(v1), stored(v2), stored(del), { ...stored(gone), deleted: true, content: '' }]);
      expect(await s.resources.vreadMany(t, 'Patient', [])).toEqual([]);
      expect(await s.resources.vreadMany(uniqueTenant(), 'Patient', asked)).toEqual([]);
      expect(keys(await s.resources.vreadMany(t, 'Observation', asked))).toEqual([['Observation', 'p1', 1]]);
      // A version or id no store could hold (a $convert entry's echo) is no error, found nowhere, beside those found.
      const odd = [{ id: 'p1', versionId: 99_999_999_999 }, { id: 'p1', versionId: 0 }, { id: 'p1', versionId: -1 }, { id: 'p1', versionId: 1.5 }, { id: 'p1\u0000', versionId: 1 }, { id: "p1' OR '1'='1", versionId: 1 }, { id: 'p1', versionId: 1 }];
      expect(keys(await s.resources.vreadMany(t, 'Patient', odd))).toEqual([['Patient', 'p1', 1]]);
    });

    test('content is kept byte for byte (key order, spacing, number format)', async () => {
      const s = store();
      const t = uniqueTenant();
      const content = '{"resourceType":"Patient",  "id":"x","meta":{"versionId":"1"},"z":1.50,"a":{"y":[ ],"b":"\\u00e9 é"}}\n';
      const v = { ...version('Patient', 'x'), content };
      await s.resources.write(t, (w) => w.put(v));
      expect((await s.resources.read(t, 'Patient', 'x'))!.content).toBe(content);
      expect((await s.resources.vread(t, 'Patient', 'x', 1))!.content).toBe(content);
      expect((await s.resources.search(t, { type: 'Patient', sort: [], count: 1 }))[0]!.content).toBe(content);
    });

    test('a deletion is a version with empty content; the resource can come back', async () => {
      const s = store();
      const t = uniqueTenant();
      await save(s, t, 'Patient', 'p1', { lastUpdated: 1_000 });
      const del = await save(s, t, 'Patient', 'p1', { lastUpdated: 2_000, deleted: true });
      expect(await s.resources.read(t, 'Patient', 'p1')).toEqual({ ...stored(del), deleted: true, content: '' });
      await s.resources.write(t, async (w) => {
        expect(await w.current('Patient', 'p1')).toEqual({ versionId: 2, lastUpdated: 2_000, deleted: true, content: '' });
        expect(await w.exists('Patient', 'p1')).toBe(false);
      });
      const back = await save(s, t, 'Patient', 'p1', { lastUpdated: 3_000 });
      expect(await s.resources.read(t, 'Patient', 'p1')).toEqual(stored(back));
      const h = await s.resources.history(t, { type: 'Patient', id: 'p1', count: 10 });
      expect(h.map((r) => [r.versionId, r.deleted, r.content === ''])).toEqual([[3, false, false], [2, true, true], [1, false, false]]);
    });

    test('instance, type and system history: newest first, ties by type, id, version descending', async () => {
      const s = store();
      const t = uniqueTenant();
      await save(s, t, 'Patient', 'a', { lastUpdated: 1_000 });
      await save(s, t, 'Patient', 'b', { lastUpdated: 2_000 });
      await save(s, t, 'Observation', 'o', { lastUpdated: 2_000 });
      await save(s, t, 'Patient', 'a', { lastUpdated: 2_000 });
      await save(s, t, 'Patient', 'a', { lastUpdated: 3_000, deleted: true });
      await save(s, uniqueTenant(), 'Patient', 'a', { lastUpdated: 2_500 });
      const all = await s.resources.history(t, { count: 100 });
      expect(keys(all)).toEqual([['Patient', 'a', 3], ['Patient', 'b', 1], ['Patient', 'a', 2], ['Observation', 'o', 1], ['Patient', 'a', 1]]);
      expect(keys(await s.resources.history(t, { type: 'Patient', count: 100 }))).toEqual(keys(all).filter((k) => k[0] === 'Patient'));
      expect(versions(await s.resources.history(t, { type: 'Patient', id: 'a', count: 100 }))).toEqual([3, 2, 1]);
      expect(keys(await s.resources.history(t, { count: 2 }))).toEqual(keys(all).slice(0, 2));
    });

    test('keyset `before` pages through every version exactly once; since/at bound by time', async () => {
      const s = store();
      const t = uniqueTenant();
      for (let i = 0; i < 12; i++) await save(s, t, i % 3 ? 'Patient' : 'Encounter', `r${i % 5}`, { lastUpdated: 1_000 + 100 * (i % 4) });
      const all = await s.resources.history(t, { count: 100 });
      expect(all).toHaveLength(12);
      for (const count of [1, 5, 12]) expect(keys(await allPages(s, t, { count }))).toEqual(keys(all));
      const since = await s.resources.history(t, { since: 1_100, count: 100 });
      expect(keys(since)).toEqual(keys(all.filter((r) => r.lastUpdated >= 1_100)));
      const at = await s.resources.history(t, { at: 1_200, count: 100 });
      expect(keys(at)).toEqual(keys(all.filter((r) => r.lastUpdated <= 1_200)));
      const both = await allPages(s, t, { type: 'Patient', since: 1_100, at: 1_200, count: 2 });
      expect(keys(both)).toEqual(keys(all.filter((r) => r.type === 'Patient' && r.lastUpdated >= 1_100 && r.lastUpdated <= 1_200)));
      expect(both.length).toBeGreaterThan(0);
    });

    test('history gives each version the method it was written with, kept as it moves to history; other reads leave it out', async () => {
      const s = store();
      const t = uniqueTenant();
      await s.resources.write(t, (w) => w.insertNew([version('Patient', 'p1', { lastUpdated: 1_000, method: 'PUT' })]));
      await save(s, t, 'Patient', 'p1', { lastUpdated: 2_000, method: 'PATCH' });
      await save(s, t, 'Patient', 'p1', { lastUpdated: 3_000, deleted: true });
      await save(s, t, 'Patient', 'p1', { lastUpdated: 4_000, method: 'POST' });
      const h = await s.resources.history(t, { type: 'Patient', id: 'p1', count: 10 });
      expect(h.map((r) => [r.versionId, r.method])).toEqual([[4, 'POST'], [3, 'DELETE'], [2, 'PATCH'], [1, 'PUT']]);
      expect((await s.resources.history(t, { count: 10 })).map((r) => r.method)).toEqual(['POST', 'DELETE', 'PATCH', 'PUT']);
      expect(await s.resources.read(t, 'Patient', 'p1')).not.toHaveProperty('method');
      expect(await s.resources.vread(t, 'Patient', 'p1', 2)).not.toHaveProperty('method');
    });

    test('history says of each live version whether it made the resource exist: version 1, or the one after a deletion', async () => {
      const s = store();
      const t = uniqueTenant();
      await s.resources.write(t, (w) => w.insertNew([version('Patient', 'p1', { lastUpdated: 1_000, method: 'PUT' })]));
      await save(s, t, 'Patient', 'p1', { lastUpdated: 2_000, method: 'PUT' });
      await save(s, t, 'Patient', 'p1', { lastUpdated: 3_000, deleted: true });
      await save(s, t, 'Patient', 'p1', { lastUpdated: 4_000, method: 'PUT' });
      await save(s, t, 'Patient', 'p1', { lastUpdated: 5_000, method: 'PATCH' });
      const expected = [[5, false], [4, true], [3, undefined], [2, false], [1, true]];
      const h = await s.resources.history(t, { type: 'Patient', id: 'p1', count: 10 });
      expect(h.map((r) => [r.versionId, r.created])).toEqual(expected);
      expect((await s.resources.history(t, { count: 10 })).map((r) => [r.versionId, r.created])).toEqual(expected);
      // Read a page at a time, the version before is still found.
      expect((await s.resources.history(t, { count: 1, before: { lastUpdated: 5_000, type: 'Patient', id: 'p1', versionId: 5 } }))[0]!.created).toBe(true);
      expect(await s.resources.read(t, 'Patient', 'p1')).not.toHaveProperty('created');
    });

    test('put without current() replaces an existing resource and keeps its history', async () => {
      const s = store();
      const t = uniqueTenant();
      const v1 = await save(s, t, 'Patient', 'p1', { lastUpdated: 1_000 });
      const v2 = version('Patient', 'p1', { versionId: 2, lastUpdated: 2_000 });
      await s.resources.write(t, (w) => w.put(v2));
      expect(await s.resources.read(t, 'Patient', 'p1')).toEqual(stored(v2));
      expect(await s.resources.vread(t, 'Patient', 'p1', 1)).toEqual(stored(v1));
    });
  });
}
