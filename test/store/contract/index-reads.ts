import { beforeAll, describe, expect, test } from 'bun:test';
import type { Condition, IndexEntry, Store, StringEntry } from '../../../src/store/types.ts';
import { uniqueTenant, version } from './fixtures.ts';

/** Writes (or rewrites) `type/id` with these token and string rows. */
async function put(s: Store, t: string, type: string, id: string, tokens: IndexEntry[], strings: StringEntry[] = [], deleted = false) {
  await s.resources.write(t, async (w) => {
    const cur = await w.current(type, id);
    const v = version(type, id, { versionId: (cur?.versionId ?? 0) + 1, index: tokens, deleted });
    if (!deleted) v.index.strings = strings;
    await w.put(v);
  });
}

const sorted = <T>(xs: T[]) => xs.map((x) => JSON.stringify(x)).sort();

/** Reads of distinct index values without the resources: `$meta`'s values in use, `$lastn`'s groups. */
export function indexReadsContract(store: () => Store) {
  describe('distinct index values', () => {
    const t = uniqueTenant();
    let s: Store;
    const subject = (id: string): IndexEntry => ({ param: 'subject', system: 'Patient', value: id });
    const code = (value: string, system = 'http://loinc.org'): IndexEntry => ({ param: 'code', system, value });
    const category = (value: string): IndexEntry => ({ param: 'category', system: 'urn:cat', value });
    beforeAll(async () => {
      s = store();
      await put(s, t, 'Patient', 'p1', [{ param: '_tag', system: 'urn:t', value: 'b' }, { param: '_tag', system: 'urn:t', value: 'a' }, { param: '_profile', system: '', value: 'http://p' }]);
      await put(s, t, 'Patient', 'p2', [{ param: '_tag', system: 'urn:t', value: 'a' }, { param: '_security', system: 'urn:s', value: 'R' }]);
      await put(s, t, 'Patient', 'p3', [{ param: '_tag', system: 'urn:t', value: 'gone' }]);
      await put(s, t, 'Patient', 'p3', [], [], true);
      await put(s, t, 'Patient', 'p4', [{ param: '_tag', system: 'urn:t', value: 'old' }]);
      await put(s, t, 'Patient', 'p4', [{ param: '_tag', system: 'urn:t', value: 'new' }]);
      await put(s, t, 'Basic', 'b1', [{ param: '_tag', system: 'urn:t', value: 'basic' }, { param: 'identifier', system: 'urn:t', value: 'not-meta' }]);
      await put(s, uniqueTenant(), 'Patient', 'p1', [{ param: '_tag', system: 'urn:t', value: 'other-tenant' }]);
      await put(s, t, 'Observation', 'o1', [subject('p1'), code('A'), category('lab')]);
      await put(s, t, 'Observation', 'o2', [subject('p1'), code('B'), code('C', 'urn:x'), category('Vital')]);
      await put(s, t, 'Observation', 'o3', [subject('p1'), category('lab')], [{ param: 'code:text', value: 'text alone', exact: 'Text alone' }]);
      await put(s, t, 'Observation', 'o4', [subject('p2'), code('Z'), category('lab')]);
      await put(s, t, 'Observation', 'o5', [subject('p1'), code('D'), category('lab')]);
      await put(s, t, 'Observation', 'o5', [], [], true);
    });

    test('metaInUse: the distinct _tag, _security and _profile values of current resources of the types, per tenant', async () => {
      expect(sorted(await s.resources.metaInUse(t, ['Patient'], 10))).toEqual(sorted([
        { param: '_tag', system: 'urn:t', value: 'a' }, { param: '_tag', system: 'urn:t', value: 'b' }, { param: '_tag', system: 'urn:t', value: 'new' },
        { param: '_profile', system: '', value: 'http://p' }, { param: '_security', system: 'urn:s', value: 'R' },
      ]));
      expect(sorted(await s.resources.metaInUse(t, ['Basic', 'Observation'], 10))).toEqual(sorted([{ param: '_tag', system: 'urn:t', value: 'basic' }]));
      // At most `cap` per key, the smallest first.
      expect((await s.resources.metaInUse(t, ['Patient'], 1)).filter((r) => r.param === '_tag')).toEqual([{ param: '_tag', system: 'urn:t', value: 'a' }]);
    });

    test('codingPairs and codeTexts: a subject\'s current resources, their codings held together, their texts of codes of text alone', async () => {
      const read = { type: 'Observation', param: 'code', via: { param: 'subject', target: 'Patient', id: 'p1' } };
      const pair = (s1: string, v1: string, s2 = s1, v2 = v1) => ({ system1: s1, value1: v1, system2: s2, value2: v2 });
      const L = 'http://loinc.org';
      expect(sorted(await s.resources.codingPairs(t, read, 100))).toEqual(sorted([
        pair(L, 'A'), pair(L, 'B'), pair('urn:x', 'C'), pair(L, 'B', 'urn:x', 'C'), pair('urn:x', 'C', L, 'B'),
      ]));
      expect(await s.resources.codeTexts(t, read, 100)).toEqual(['Text alone']);
      // Only those that also hold a category value among these (compared in lower case).
      expect(sorted(await s.resources.codingPairs(t, { ...read, also: { param: 'category', values: ['VITAL'] } }, 100)))
        .toEqual(sorted([pair(L, 'B'), pair('urn:x', 'C'), pair(L, 'B', 'urn:x', 'C'), pair('urn:x', 'C', L, 'B')]));
      expect(await s.resources.codeTexts(t, { ...read, also: { param: 'category', values: ['vital'] } }, 100)).toEqual([]);
      expect(await s.resources.codeTexts(t, { ...read, also: { param: 'category', values: ['lab'] } }, 100)).toEqual(['Text alone']);
      expect(sorted(await s.resources.codingPairs(t, { ...read, via: { ...read.via, id: 'p2' } }, 100))).toEqual(sorted([pair(L, 'Z')]));
      expect(await s.resources.codingPairs(t, { ...read, via: { ...read.via, target: 'Group' } }, 100)).toEqual([]);
      expect(await s.resources.codingPairs(t, read, 2)).toHaveLength(2);
    });

    test('codingPairs and codeTexts with `matching`: only the resources those search conditions select', async () => {
      const read = { type: 'Observation', param: 'code', via: { param: 'subject', target: 'Patient', id: 'p1' } };
      const pair = (s1: string, v1: string, s2 = s1, v2 = v1) => ({ system1: s1, value1: v1, system2: s2, value2: v2 });
      const L = 'http://loinc.org';
      const where = (...conditions: Condition[]) => ({ ...read, matching: { where: conditions } });
      const lab: Condition = { kind: 'token', param: 'category', values: [{ value: 'lab' }] };
      expect(await s.resources.codingPairs(t, where(lab), 100)).toEqual([pair(L, 'A')]);
      expect(await s.resources.codeTexts(t, where(lab), 100)).toEqual(['Text alone']);
      const vital: Condition = { kind: 'token', param: 'category', values: [{ system: 'urn:cat', value: 'Vital' }] };
      expect(sorted(await s.resources.codingPairs(t, where(vital), 100))).toEqual(sorted([pair(L, 'B'), pair('urn:x', 'C'), pair(L, 'B', 'urn:x', 'C'), pair('urn:x', 'C', L, 'B')]));
      expect(await s.resources.codeTexts(t, where(vital), 100)).toEqual([]);
      // Negated and ANDed conditions, as a search's: o1 alone has a code other than B and is of `lab`.
      const notB: Condition = { kind: 'token', param: 'code', values: [{ value: 'B' }], not: true };
      expect(await s.resources.codingPairs(t, where(notB, lab), 100)).toEqual([pair(L, 'A')]);
      expect(await s.resources.codingPairs(t, where(vital, lab), 100)).toEqual([]);
      expect(sorted(await s.resources.codingPairs(t, where(), 100))).toEqual(sorted(await s.resources.codingPairs(t, read, 100)));
      // The patient's compartment: these rows were written without compartments, so none is in p1's.
      expect(await s.resources.codingPairs(t, { ...read, matching: { where: [], compartment: 'p1' } }, 100)).toEqual([]);
    });
  });
}
