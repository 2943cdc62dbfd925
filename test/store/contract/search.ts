import { beforeAll, describe, expect, test } from 'bun:test';
import type { DateTest, SearchQuery, SortKey, Store } from '../../../src/store/types.ts';
import { ids, save, times, tokens, uniqueTenant } from './fixtures.ts';

const MRN = 'http://hospital.example/mrn';
const SSN = 'http://hl7.org/fhir/sid/us-ssn';
/** Patient ids, deliberately not in insertion order; bytewise: 'A-1' < 'B' < 'a.2' < 'b' < 'c9'. */
const PATIENTS = [
  { id: 'c9', at: 3_000, mrn: '300', ssn: '111' },
  { id: 'a.2', at: 1_000, mrn: '100', ssn: '222' },
  { id: 'b', at: 2_000, mrn: '200', ssn: '300' },
  { id: 'B', at: 2_000, mrn: '200', ssn: '444' },
  { id: 'A-1', at: 2_500, mrn: '250', ssn: '555' },
  { id: 'gone', at: 2_000, mrn: '200', ssn: '666' },
];

const q = (over: Partial<SearchQuery> = {}): SearchQuery => ({ type: 'Patient', sort: [], count: 100, ...over });
const window: Omit<DateTest, 'op'> = { low: 2_000, high: 2_500 };

/** Search: ids, _lastUpdated, tokens, references, compartments, sort orders and keyset paging, count. */
export function searchContract(store: () => Store) {
  describe('search', () => {
    const t = uniqueTenant();
    let s: Store;
    beforeAll(async () => {
      s = store();
      for (const p of PATIENTS) {
        await save(s, t, 'Patient', p.id, {
          lastUpdated: p.at,
          index: [{ param: 'identifier', system: MRN, value: p.mrn }, { param: 'identifier', system: SSN, value: p.ssn }],
          compartments: [p.id],
        });
      }
      await save(s, t, 'Patient', 'gone', { lastUpdated: 2_100, deleted: true });
      for (const [id, patient] of [['o1', 'b'], ['o2', 'b'], ['o3', 'c9'], ['o4', 'B']] as const) {
        await save(s, t, 'Observation', id, {
          lastUpdated: 4_000,
          index: [{ param: 'subject', system: 'Patient', value: patient }, { param: 'code', system: 'http://loinc.org', value: '1-8' }],
          compartments: [patient],
        });
      }
      await save(s, t, 'Observation', 'o5', { lastUpdated: 4_000, index: [{ param: 'subject', system: 'Group', value: 'b' }] });
      await save(s, uniqueTenant(), 'Patient', 'b', { index: [{ param: 'identifier', system: MRN, value: '200' }] });
    });

    test('by ids; deleted and other types excluded', async () => {
      expect(ids(await s.resources.search(t, q({ where: [{ kind: 'id', ids: ['b', 'c9', 'gone', 'o1', 'nope'] }] })))).toEqual(['b', 'c9']);
      expect(ids(await s.resources.search(t, q()))).toEqual(['A-1', 'B', 'a.2', 'b', 'c9']);
      expect(await s.resources.count(t, q())).toBe(5);
      expect(await s.resources.search(t, q({ where: [{ kind: 'id', ids: [] }] }))).toEqual([]);
      expect(await s.resources.count(t, q({ where: [{ kind: 'id', ids: [] }] }))).toBe(0);
      expect(await s.resources.changeToken(t, [])).toBe(await s.resources.changeToken(uniqueTenant(), []));
    });

    test('present: ids with a current row of the type in the tenant, deletions included', async () => {
      expect((await s.resources.present(t, 'Patient', ['b', 'gone', 'o1', 'nope', 'A-1'])).sort()).toEqual(['A-1', 'b', 'gone']);
      expect(await s.resources.present(t, 'Observation', ['b', 'o1'])).toEqual(['o1']);
      expect(await s.resources.present(uniqueTenant(), 'Patient', ['b'])).toEqual([]);
      expect(await s.resources.present(t, 'Patient', [])).toEqual([]);
    });

    test('types: those the tenant holds a current row of, deletions included', async () => {
      expect((await s.resources.types(t)).sort()).toEqual(['Observation', 'Patient']);
      expect(await s.resources.types(uniqueTenant())).toEqual([]);
      const other = uniqueTenant();
      await save(s, other, 'Zeta', 'z', { deleted: true });
      await save(s, other, 'Alpha', 'a', {});
      await save(s, other, 'Alpha', 'b', {});
      expect((await s.resources.types(other)).sort()).toEqual(['Alpha', 'Zeta']);
    });

    test('containedKeys: the (type, param) of the id rows of contained resources of a type, in the tenant', async () => {
      const other = uniqueTenant();
      await save(s, other, 'Observation', 'o', { index: [
        { param: 'subject:Patient._id', system: '', value: 'p' },
        { param: 'subject:Patient.organization:Organization._id', system: '', value: 'org' },
        // LIKE's `_` matches any character (`.xid`), and a row with a system is no id row: both left out.
        { param: 'subject:Patient.xid', system: '', value: 'q' },
        { param: 'performer:Patient._id', system: 'urn:x', value: 'r' },
      ] });
      const sorted = (rs: { type: string; param: string }[]) => rs.map((r) => `${r.type}.${r.param}`).sort();
      expect(sorted(await s.resources.containedKeys(other, 'Patient'))).toEqual(['Observation.subject:Patient._id']);
      expect(sorted(await s.resources.containedKeys(other, 'Organization'))).toEqual(['Observation.subject:Patient.organization:Organization._id']);
      expect(await s.resources.containedKeys(other, 'Practitioner')).toEqual([]);
      expect(await s.resources.containedKeys(t, 'Patient')).toEqual([]);
    });

    test('referrers: the (type, param, target) of every reference key to the given types in the tenant', async () => {
      const sorted = (rs: { type: string; param: string; target: string }[]) => rs.map((r) => `${r.type}.${r.param}->${r.target}`).sort();
      expect(sorted(await s.resources.referrers(t, ['Patient']))).toEqual(['Observation.subject->Patient']);
      expect(sorted(await s.resources.referrers(t, ['Patient', 'Group']))).toEqual(['Observation.subject->Group', 'Observation.subject->Patient']);
      // Token keys name code systems, not types; another tenant's keys are its own.
      expect(await s.resources.referrers(t, ['Practitioner'])).toEqual([]);
      expect(await s.resources.referrers(uniqueTenant(), ['Patient'])).toEqual([]);
      expect(await s.resources.referrers(t, [])).toEqual([]);
    });

    test('_lastUpdated: each comparator against a precision window', async () => {
      const at = async (op: DateTest['op']) => ids(await s.resources.search(t, q({ where: times([{ op, ...window }]) })));
      expect(await at('eq')).toEqual(['B', 'b']);
      expect(await at('ne')).toEqual(['A-1', 'a.2', 'c9']);
      expect(await at('gt')).toEqual(['A-1', 'c9']);
      expect(await at('ge')).toEqual(['A-1', 'B', 'b', 'c9']);
      expect(await at('lt')).toEqual(['a.2']);
      expect(await at('le')).toEqual(['B', 'a.2', 'b']);
      const range: DateTest[] = [{ op: 'ge', low: 1_500, high: 1_600 }, { op: 'lt', low: 3_000, high: 3_001 }];
      expect(ids(await s.resources.search(t, q({ where: times(range) })))).toEqual(['A-1', 'B', 'b']);
      expect(await s.resources.count(t, q({ where: times(range) }))).toBe(3);
    });

    test('token with and without system; values ORed, parameters ANDed', async () => {
      const find = async (params: Parameters<typeof tokens>[0]) => ids(await s.resources.search(t, q({ where: tokens(params) })));
      expect(await find([{ param: 'identifier', values: [{ system: MRN, value: '200' }] }])).toEqual(['B', 'b']);
      expect(await find([{ param: 'identifier', values: [{ system: SSN, value: '200' }] }])).toEqual([]);
      expect(await find([{ param: 'identifier', values: [{ value: '300' }] }])).toEqual(['b', 'c9']);
      expect(await find([{ param: 'identifier', values: [{ system: MRN, value: '100' }, { system: SSN, value: '555' }] }])).toEqual(['A-1', 'a.2']);
      const both = [
        { param: 'identifier', values: [{ system: MRN, value: '200' }] },
        { param: 'identifier', values: [{ system: SSN, value: '444' }, { value: '111' }] },
      ];
      expect(await find(both)).toEqual(['B']);
      expect(await find([{ param: 'name', values: [{ value: '200' }] }])).toEqual([]);
      // Token `system|`: any value in that system; no value and no system: any value of the parameter.
      expect(await find([{ param: 'identifier', values: [{ system: MRN }] }])).toEqual(['A-1', 'B', 'a.2', 'b', 'c9']);
      expect(await find([{ param: 'identifier', values: [{ system: 'http://other' }, { system: SSN, value: '111' }] }])).toEqual(['c9']);
      expect(await find([{ param: 'identifier', values: [{}] }])).toEqual(['A-1', 'B', 'a.2', 'b', 'c9']);
      expect(await find([{ param: 'identifier', values: [{}, { value: '100' }] }, { param: 'identifier', values: [{ value: '100' }] }])).toEqual(['a.2']);
    });

    test('reference: system is the target type', async () => {
      const subject = (system: string | undefined, value: string) =>
        s.resources.search(t, q({ type: 'Observation', where: tokens([{ param: 'subject', values: [system === undefined ? { value } : { system, value }] }]) }));
      expect(ids(await subject('Patient', 'b'))).toEqual(['o1', 'o2']);
      expect(ids(await subject('Group', 'b'))).toEqual(['o5']);
      expect(ids(await subject(undefined, 'b'))).toEqual(['o1', 'o2', 'o5']);
      expect(ids(await subject('Patient', 'B'))).toEqual(['o4']);
    });

    test('compartment restricts to one patient, combined with other criteria', async () => {
      const obs = (over: Partial<SearchQuery>) => s.resources.search(t, q({ type: 'Observation', ...over }));
      expect(ids(await obs({ compartment: 'b' }))).toEqual(['o1', 'o2']);
      expect(ids(await obs({ compartment: 'b', where: [{ kind: 'id', ids: ['o2', 'o3'] }] }))).toEqual(['o2']);
      expect(ids(await obs({ compartment: 'nobody' }))).toEqual([]);
      expect(ids(await s.resources.search(t, q({ compartment: 'c9' })))).toEqual(['c9']);
      expect(await s.resources.count(t, q({ type: 'Observation', compartment: 'b', count: 1 }))).toBe(2);
    });

    test('sort orders, and keyset `after` paging returns every row exactly once', async () => {
      const expected = {
        id: ['A-1', 'B', 'a.2', 'b', 'c9'],
        lastUpdated: ['a.2', 'B', 'b', 'A-1', 'c9'],
        '-lastUpdated': ['c9', 'A-1', 'b', 'B', 'a.2'],
      } as const;
      const sorts: Record<keyof typeof expected, SortKey[]> = {
        id: [], lastUpdated: [{ by: 'lastUpdated', descending: false }], '-lastUpdated': [{ by: 'lastUpdated', descending: true }],
      };
      for (const name of ['id', 'lastUpdated', '-lastUpdated'] as const) {
        const sort = sorts[name];
        expect(ids(await s.resources.search(t, q({ sort })))).toEqual([...expected[name]]);
        for (const count of [1, 2, 3]) {
          const seen: string[] = [];
          let after: SearchQuery['after'];
          for (;;) {
            const page = await s.resources.search(t, q({ sort, count, after }));
            expect(page.length).toBeLessThanOrEqual(count);
            seen.push(...ids(page));
            if (page.length < count) break;
            const last = page.at(-1)!;
            after = { lastUpdated: last.lastUpdated, id: last.id };
          }
          expect(seen).toEqual([...expected[name]]);
        }
        expect(await s.resources.count(t, q({ sort, count: 1, after: { lastUpdated: 2_000, id: 'b' } }))).toBe(5);
      }
    });

    test('`asOf` with a keyset cursor: only resources last updated at or before it, in every keyset order, with conditions or not', async () => {
      const mrn = { kind: 'token' as const, param: 'identifier', values: [{ system: MRN, value: '200' }, { system: MRN, value: '250' }, { system: MRN, value: '300' }] };
      const cases: [SortKey[], SearchQuery['after'], string[]][] = [
        [[], { lastUpdated: 0, id: 'A-1' }, ['B', 'a.2', 'b']],
        [[{ by: 'lastUpdated', descending: false }], { lastUpdated: 1_000, id: 'a.2' }, ['B', 'b', 'A-1']],
        [[{ by: 'lastUpdated', descending: true }], { lastUpdated: 3_000, id: 'c9' }, ['A-1', 'b', 'B', 'a.2']],
      ];
      for (const [sort, after, expected] of cases) {
        expect({ sort, got: ids(await s.resources.search(t, q({ sort, after, asOf: 2_500 }))) }).toEqual({ sort, got: expected });
        expect({ sort, got: ids(await s.resources.search(t, q({ sort, after, asOf: 2_000 }))) }).toEqual({ sort, got: expected.filter((id) => id !== 'A-1') });
        expect({ sort, got: ids(await s.resources.search(t, q({ sort, after, asOf: 2_000, where: [mrn] }))) }).toEqual({ sort, got: expected.filter((id) => id === 'B' || id === 'b') });
        // A count ignores it (SearchQuery.asOf).
        expect(await s.resources.count(t, q({ sort, after, asOf: 1_000 }))).toBe(5);
      }
    });

    test('results carry the stored content and versions', async () => {
      const [b] = await s.resources.search(t, q({ where: [{ kind: 'id', ids: ['b'] }] }));
      expect(b).toEqual((await s.resources.read(t, 'Patient', 'b'))!);
      expect(JSON.parse(b!.content)).toMatchObject({ resourceType: 'Patient', id: 'b', meta: { versionId: '1' } });
    });
  });
}
