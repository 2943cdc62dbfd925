import { describe, expect, test } from 'bun:test';
import type { Store } from '../../../src/store/types.ts';
import { ids, save, tokens, uniqueTenant, version } from './fixtures.ts';

/** ResourceWriter.insertNew: bulk creation of first versions, as `cinder import` writes. */
export function insertNewContract(store: () => Store) {
  describe('insertNew()', () => {
    test('creates what does not exist, with index and compartments; leaves existing and deleted resources alone', async () => {
      const s = store();
      const t = uniqueTenant();
      await save(s, t, 'Patient', 'old', { lastUpdated: 1, body: { gender: 'male' } });
      await save(s, t, 'Patient', 'gone', { lastUpdated: 1 });
      await save(s, t, 'Patient', 'gone', { lastUpdated: 2, deleted: true });
      const batch = [
        version('Patient', 'new1', { lastUpdated: 10, index: [{ param: 'identifier', system: 's', value: 'a\\b\tc' }], compartments: ['new1'] }),
        version('Patient', 'old', { lastUpdated: 10, body: { gender: 'female' } }),
        version('Observation', 'o1', { lastUpdated: 10, index: [{ param: 'code', system: 'http://loinc.org', value: '8867-4' }], compartments: ['new1'] }),
        version('Patient', 'gone', { lastUpdated: 10 }),
        version('Observation', 'o2', { lastUpdated: 10, body: { note: 'line\nbreak \\ "quoted" é' } }),
      ];
      const inserted = await s.resources.write(t, (w) => w.insertNew(batch));
      expect(inserted).toEqual([true, false, true, false, true]);

      expect(await s.resources.read(t, 'Observation', 'o2')).toMatchObject({ versionId: 1, lastUpdated: 10, deleted: false, content: batch[4]!.content });
      expect(JSON.parse((await s.resources.read(t, 'Patient', 'old'))!.content).gender).toBe('male');
      expect((await s.resources.read(t, 'Patient', 'gone'))).toMatchObject({ versionId: 2, deleted: true });
      const byValue = await s.resources.search(t, { type: 'Patient', sort: [], count: 10, where: tokens([{ param: 'identifier', values: [{ system: 's', value: 'a\\b\tc' }] }]) });
      expect(ids(byValue)).toEqual(['new1']);
      expect(ids(await s.resources.search(t, { type: 'Observation', sort: [], count: 10, compartment: 'new1' }))).toEqual(['o1']);
      expect(await s.resources.count(t, { type: 'Observation', sort: [], count: 0, where: tokens([{ param: 'code', values: [{ value: '8867-4' }] }]) })).toBe(1);
    });

    test('in the same transaction, current() sees the created rows and put() writes their next version', async () => {
      const s = store();
      const t = uniqueTenant();
      await s.resources.write(t, async (w) => {
        const first = version('Patient', 'p', { lastUpdated: 5, index: [{ param: 'identifier', system: 's', value: 'v1' }] });
        expect(await w.insertNew([first])).toEqual([true]);
        expect(await w.current('Patient', 'p')).toEqual({ versionId: 1, lastUpdated: 5, deleted: false, content: first.content });
        expect(await w.exists('Patient', 'p')).toBe(true);
        expect(await w.insertNew([version('Patient', 'p', { lastUpdated: 6 })])).toEqual([false]);
        await w.put(version('Patient', 'p', { versionId: 2, lastUpdated: 6, index: [{ param: 'identifier', system: 's', value: 'v2' }] }));
      });
      const history = await s.resources.history(t, { type: 'Patient', id: 'p', count: 10 });
      expect(history.map((v) => v.versionId)).toEqual([2, 1]);
      const find = (value: string) => s.resources.search(t, { type: 'Patient', sort: [], count: 10, where: tokens([{ param: 'identifier', values: [{ value }] }]) });
      expect(ids(await find('v2'))).toEqual(['p']);
      expect(ids(await find('v1'))).toEqual([]);
    });

    for (const [where, taken] of [['first', 0], ['last', 2_999]] as const) {
      test(`a large batch whose ${where} resource exists: the others are created, nothing is lost or doubled`, async () => {
        const s = store();
        const t = uniqueTenant();
        await save(s, t, 'Patient', `p${taken}`, { lastUpdated: 1 });
        const body = { text: { div: 'x'.repeat(300) } };
        const batch = Array.from({ length: 3_000 }, (_, i) =>
          version('Patient', `p${i}`, { lastUpdated: 10, body, index: [{ param: 'identifier', system: 's', value: String(i % 7) }], compartments: [`p${i}`] }),
        );
        const inserted = await s.resources.write(t, (w) => w.insertNew(batch));
        expect(inserted.filter(Boolean)).toHaveLength(2_999);
        expect(inserted[taken]).toBe(false);
        expect(await s.resources.count(t, { type: 'Patient', sort: [], count: 0 })).toBe(3_000);
        const sevens = await s.resources.count(t, { type: 'Patient', sort: [], count: 0, where: tokens([{ param: 'identifier', values: [{ system: 's', value: String(taken % 7) }] }]) });
        expect(sevens).toBe(428);
        expect((await s.resources.read(t, 'Patient', `p${taken}`))!.lastUpdated).toBe(1);
        expect(await s.resources.count(t, { type: 'Patient', sort: [], count: 0, compartment: 'p1234' })).toBe(1);
      });
    }

    test('a failing transaction rolls the created rows back', async () => {
      const s = store();
      const t = uniqueTenant();
      const boom = new Error('boom');
      const failing = s.resources.write(t, async (w) => {
        await w.insertNew([version('Patient', 'a', { index: [{ param: 'identifier', system: 's', value: 'x' }] })]);
        throw boom;
      });
      await expect(failing).rejects.toBe(boom);
      expect(await s.resources.read(t, 'Patient', 'a')).toBeNull();
      expect(await s.resources.count(t, { type: 'Patient', sort: [], count: 0, where: tokens([{ param: 'identifier', values: [{ value: 'x' }] }]) })).toBe(0);
    });
  });
}
