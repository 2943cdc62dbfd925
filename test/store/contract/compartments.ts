import { beforeAll, describe, expect, test } from 'bun:test';
import type { CompartmentRowsQuery, Store } from '../../../src/store/types.ts';
import { save, uniqueTenant, version } from './fixtures.ts';

/** CompartmentReads: patients' compartment sizes and rows, many patients at once (`Patient/$everything`). */
export function compartmentsContract(store: () => Store) {
  describe('compartment reads', () => {
    const t = uniqueTenant();
    let s: Store;
    beforeAll(async () => {
      s = store();
      // Bytewise: 'A-1' < 'B' < 'a.2' < 'b' < 'c9'. `b` links to `B` (so is in its compartment); `gone` is deleted.
      for (const id of ['c9', 'a.2', 'B', 'A-1']) await save(s, t, 'Patient', id, { lastUpdated: 1_000, compartments: [id] });
      await save(s, t, 'Patient', 'b', { lastUpdated: 1_000, compartments: ['b', 'B'] });
      await save(s, t, 'Patient', 'gone', { lastUpdated: 1_000, compartments: ['gone'] });
      await save(s, t, 'Patient', 'gone', { lastUpdated: 1_500, deleted: true });
      const rows: [string, string, string[], number][] = [
        ['Observation', 'o2', ['b'], 2_000], ['Observation', 'O1', ['b'], 1_000], ['Observation', 'o1', ['b', 'c9'], 3_000],
        ['Condition', 'c1', ['b'], 3_000], ['Observation', 'o3', ['nobody'], 3_000], ['Observation', 'o4', ['gone'], 3_000],
        ['Observation', 'del', ['b'], 1_000],
      ];
      for (const [type, id, compartments, lastUpdated] of rows) await save(s, t, type, id, { lastUpdated, compartments });
      await save(s, t, 'Observation', 'del', { lastUpdated: 4_000, deleted: true });
      await save(s, uniqueTenant(), 'Patient', 'b', { compartments: ['b'] });
    });
    const types = ['Patient', 'Observation', 'Condition'];
    const rows = async (q: Partial<CompartmentRowsQuery>) => (await s.resources.compartmentRows(t, { patients: ['b'], types, count: 100, ...q }))
      .map((r) => `${r.patient}:${r.type}/${r.id}`);

    test('sizes: of the patients named, in their order, or of the live Patients after one, in id order; capped, by type', async () => {
      const sizes = (patients: { ids: string[] } | { after?: string; count: number }, only = types, cap = 100) =>
        s.resources.compartmentSizes(t, { patients, types: only, cap });
      expect(await sizes({ ids: ['c9', 'nobody', 'b', 'none', 'gone'] })).toEqual([
        { patient: 'c9', rows: 2 }, { patient: 'nobody', rows: 1 }, { patient: 'b', rows: 5 }, { patient: 'none', rows: 0 }, { patient: 'gone', rows: 1 },
      ]);
      expect(await sizes({ ids: ['b', 'B'] }, ['Observation'])).toEqual([{ patient: 'b', rows: 3 }, { patient: 'B', rows: 0 }]);
      expect(await sizes({ ids: ['b', 'B'] }, ['Patient'], 1)).toEqual([{ patient: 'b', rows: 1 }, { patient: 'B', rows: 1 }]);
      expect((await sizes({ ids: ['B'] }, ['Patient']))[0]!.rows).toBe(2);
      expect((await sizes({ count: 10 })).map((x) => x.patient)).toEqual(['A-1', 'B', 'a.2', 'b', 'c9']);
      expect(await sizes({ after: 'B', count: 2 })).toEqual([{ patient: 'a.2', rows: 1 }, { patient: 'b', rows: 5 }]);
      expect(await sizes({ after: 'c9', count: 2 })).toEqual([]);
      expect(await s.resources.compartmentSizes(uniqueTenant(), { patients: { count: 5 }, types, cap: 5 })).toEqual([]);
    });

    test('rows: by patient, then type in the order given, then id bytewise; the Patient itself alone; each compartment it is in', async () => {
      expect(await rows({ patients: ['c9', 'b', 'B', 'nobody'] })).toEqual([
        'c9:Patient/c9', 'c9:Observation/o1', 'b:Patient/b', 'b:Observation/O1', 'b:Observation/o1', 'b:Observation/o2', 'b:Condition/c1', 'B:Patient/B', 'nobody:Observation/o3',
      ]);
      expect(await rows({ types: ['Condition', 'Observation'] })).toEqual(['b:Condition/c1', 'b:Observation/O1', 'b:Observation/o1', 'b:Observation/o2']);
      expect(await rows({ patients: ['gone'] })).toEqual(['gone:Observation/o4']);
      expect(await rows({ patients: [] })).toEqual([]);
      expect(await rows({ types: [] })).toEqual([]);
      const [first] = await s.resources.compartmentRows(t, { patients: ['b'], types: ['Observation'], count: 1 });
      expect(first).toMatchObject({ patient: 'b', type: 'Observation', id: 'O1', versionId: 1, lastUpdated: 1_000, deleted: false });
      expect(JSON.parse(first!.content)).toMatchObject({ resourceType: 'Observation', id: 'O1' });
    });

    test('rows: after a position of the first patient, at most count, since an instant', async () => {
      const both = ['b', 'c9'];
      expect(await rows({ patients: both, after: { type: 1, id: 'O1' } })).toEqual(['b:Observation/o1', 'b:Observation/o2', 'b:Condition/c1', 'c9:Patient/c9', 'c9:Observation/o1']);
      expect(await rows({ patients: both, after: { type: 1, id: '' } })).toEqual(['b:Observation/O1', 'b:Observation/o1', 'b:Observation/o2', 'b:Condition/c1', 'c9:Patient/c9', 'c9:Observation/o1']);
      expect(await rows({ patients: both, after: { type: 2, id: 'c1' } })).toEqual(['c9:Patient/c9', 'c9:Observation/o1']);
      expect(await rows({ patients: both, after: { type: 3, id: '' } })).toEqual(['c9:Patient/c9', 'c9:Observation/o1']);
      expect(await rows({ patients: both, after: { type: 1e15, id: 'x' } })).toEqual(['c9:Patient/c9', 'c9:Observation/o1']);
      expect(await rows({ patients: both, count: 3 })).toEqual(['b:Patient/b', 'b:Observation/O1', 'b:Observation/o1']);
      expect(await rows({ patients: both, since: 2_000 })).toEqual(['b:Observation/o1', 'b:Observation/o2', 'b:Condition/c1', 'c9:Observation/o1']);
      expect(await rows({ patients: both, since: 2_001, after: { type: 1, id: 'o1' } })).toEqual(['b:Condition/c1', 'c9:Observation/o1']);
    });

    test('rows, firstOwner: a resource a live Patient of a smaller id also holds is left out; Patients, other ids and dead patients count not', async () => {
      // o1 is b's and c9's: c9's row goes ('b' < 'c9' is live); b links to B, but a Patient is its own alone.
      expect(await rows({ patients: ['b', 'c9', 'B'], firstOwner: true })).toEqual([
        'b:Patient/b', 'b:Observation/O1', 'b:Observation/o1', 'b:Observation/o2', 'b:Condition/c1', 'c9:Patient/c9', 'B:Patient/B',
      ]);
      expect(await rows({ patients: ['c9'], firstOwner: true })).toEqual(['c9:Patient/c9']);
      expect(await rows({ patients: ['c9'] })).toEqual(['c9:Patient/c9', 'c9:Observation/o1']);
      // A holder that is no live Patient ('gone' is deleted, 'nobody' was never written) takes nothing away.
      await save(s, t, 'Observation', 'o5', { lastUpdated: 3_000, compartments: ['gone', 'nobody', 'b'] });
      expect(await rows({ patients: ['b'], types: ['Observation'], firstOwner: true })).toEqual(['b:Observation/O1', 'b:Observation/o1', 'b:Observation/o2', 'b:Observation/o5']);
    });

    test('patients of resources: every compartment of each current, live one named, on the index alone', async () => {
      const of = async (type: string, ids: string[]) => (await s.resources.compartmentPatients(t, type, ids)).map((r) => `${r.id}:${r.patient}`).sort();
      // o1 is b's and c9's; 'del' is deleted, 'none' never written; another type's ids name nothing here.
      expect(await of('Observation', ['o1', 'O1', 'del', 'none', 'o3'])).toEqual(['O1:b', 'o1:b', 'o1:c9', 'o3:nobody']);
      expect(await of('Condition', ['o1', 'c1'])).toEqual(['c1:b']);
      expect(await of('Observation', [])).toEqual([]);
    });

    test("a write transaction's patients of resources: its own puts and deletions seen, before and after others", async () => {
      const seen = await s.resources.write(t, async (w) => {
        const of = async (ids: string[]) => (await w.compartmentPatients('Observation', ids)).map((r) => `${r.id}:${r.patient}`).sort();
        const before = await of(['o1', 'w1']);
        await w.put(version('Observation', 'w1', { versionId: 1, compartments: ['b', 'c9'] }));
        await w.put(version('Observation', 'o1', { versionId: ((await w.current('Observation', 'o1'))?.versionId ?? 0) + 1, compartments: ['A-1'] }));
        const after = await of(['o1', 'w1', 'none']);
        await w.put(version('Observation', 'w1', { versionId: 2, deleted: true }));
        return { before, after, deleted: await of(['w1']) };
      });
      expect(seen).toEqual({ before: ['o1:b', 'o1:c9'], after: ['o1:A-1', 'w1:b', 'w1:c9'], deleted: [] });
    });
  });
}
