/**
 * A large resource validated in parts with turns of the event loop (validateInParts, src/fhir/validation/parts.ts):
 * every PART_ITEMS items of its largest array apart, then its own invariants and rules: the same issues, in the
 * same order, as one validation of the whole (validateResource), whatever breaks where: items in several parts,
 * the resource's own elements before and after the array, the invariants over all items (csd-1, que-2, across
 * parts too), element ids given again across parts, contained resources, items that are no objects, more than
 * MAX_ISSUES.
 */
import { describe, expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { PART_ITEMS, partedMember, validateInParts } from '../../src/fhir/validation/parts.ts';
import { MAX_ISSUES, validateResource } from '../../src/fhir/validation/validate.ts';

type Json = Record<string, unknown>;
const n = PART_ITEMS * 3 + 7;

function codeSystem(change: (c: Json, i: number) => void = () => {}, extra: Json = {}, after: Json = {}): Json {
  const concept = Array.from({ length: n }, (_, i) => {
    const c: Json = { code: `c${i}`, display: `Concept ${i}` };
    change(c, i);
    return c;
  });
  return { resourceType: 'CodeSystem', url: 'http://example.org/cs', status: 'draft', content: 'complete', ...extra, concept, ...after };
}

function questionnaire(change: (item: Json, i: number) => void = () => {}, extra: Json = {}): Json {
  const item = Array.from({ length: n }, (_, i) => {
    const it: Json = { linkId: `q${i}`, text: `Question ${i}`, type: 'string' };
    change(it, i);
    return it;
  });
  return { resourceType: 'Questionnaire', status: 'draft', ...extra, item };
}

const CASES: Record<string, () => Json> = {
  'a valid CodeSystem': () => codeSystem(),
  'bad concepts in several parts': () => codeSystem((c, i) => {
    if (i % 997 === 3) c.display = 7;
    if (i === n - 1) c.bogus = 1;
    if (i === PART_ITEMS) c.designation = [{ value: '' }];
  }),
  'a code given twice across parts (csd-1), and in a nested concept': () => codeSystem((c, i) => {
    if (i === n - 2) c.code = 'c5';
    if (i === 12) c.concept = [{ code: 'c11' }];
  }),
  "the CodeSystem's own elements before and after concept, and its rules (a property's code twice)": () => codeSystem((c, i) => {
    if (i === 2000) c.property = [{ code: 'undefined-property', valueString: 'x' }];
  }, { status: 'unknown-status', property: [{ code: 'p', type: 'string' }, { code: 'p', type: 'code' }] }, { unknownAfter: true, count: 'many' }),
  'an element id on every concept, one given again in a later part beside other problems of its concept': () => codeSystem((c, i) => {
    c.id = `e${i}`;
    if (i === PART_ITEMS * 3 + 2) {
      c.id = 'e7';
      c.bogus = 1;
    }
    if (i === 9) c.designation = [{ id: 'e8', value: 'x' }];
  }),
  'contained resources, one referred to from a concept in the last part, one not at all': () => codeSystem((c, i) => {
    if (i === n - 1) c.extension = [{ url: 'http://example.org/x', valueReference: { reference: '#vs1' } }];
  }, { contained: [{ resourceType: 'ValueSet', id: 'vs1', status: 'draft' }, { resourceType: 'ValueSet', id: 'vs2', status: 'draft' }, { resourceType: 'ValueSet', id: 'vs1', status: 'draft' }] }),
  'concepts that are no objects': () => {
    const r = codeSystem();
    r.concept = (r.concept as unknown[]).map((c, i) => (i === 5 ? null : i === PART_ITEMS + 1 ? 'c' : i === n - 1 ? [c] : c));
    return r;
  },
  'more than MAX_ISSUES errors': () => codeSystem((c, i) => {
    if (i % 20 === 0) c.bogus = i;
  }),
  'a Questionnaire: a linkId given twice across parts (que-2), items breaking their own invariants': () => questionnaire((it, i) => {
    if (i === n - 1) it.linkId = 'q3';
    if (i === PART_ITEMS + 2) it.type = 'display', it.required = true;
    if (i === 2 * PART_ITEMS + 3) it.type = 'group';
  }),
  'a document Bundle of many entries: fullUrls, the invariants over entries, a resource in a late entry': () => {
    const entry = Array.from({ length: n }, (_, i) => ({ fullUrl: `urn:uuid:00000000-0000-4000-8000-${String(i).padStart(12, '0')}`, resource: { resourceType: 'Patient', id: `p${i}`, name: [{ family: `P${i}` }] } }));
    entry[n - 3]!.fullUrl = entry[4]!.fullUrl;
    (entry[PART_ITEMS + 4]!.resource as Json).gender = 'sometimes';
    (entry[2 * PART_ITEMS]! as Json).request = { method: 'GET', url: 'Patient' };
    return { resourceType: 'Bundle', type: 'collection', entry };
  },
};

describe('validateInParts', () => {
  for (const [name, make] of Object.entries(CASES)) {
    for (const level of ['strict', 'structural'] as const) {
      test(`${name} (${level}): the issues of one validation of the whole, in its order`, async () => {
        const r = make();
        const member = partedMember(r);
        expect(member).toBeDefined();
        const want = validateResource(r, level);
        let turns = 0;
        const got = await validateInParts(r, member!, level, { pace: () => (turns++, Promise.resolve()) });
        expect(got).toEqual(want);
        // A turn before each part of the array, before the resource's own invariants and before its rules.
        expect(turns).toBe(Math.ceil((r[member!] as unknown[]).length / PART_ITEMS) + 2);
      });
    }
  }

  test('the cases are not all valid (the comparison sees issues)', () => {
    const expressions = (name: string) => validateResource(CASES[name]!(), 'strict').map((i) => i.expression);
    expect(expressions('a code given twice across parts (csd-1), and in a nested concept')).toContain('CodeSystem');
    expect(validateResource(CASES['an element id on every concept, one given again in a later part beside other problems of its concept']!(), 'strict').find((i) => i.expression === `CodeSystem.concept[${PART_ITEMS * 3 + 2}].id`)?.text)
      .toBe("Element ids must be unique within a resource: 'e7' is also the id of CodeSystem.concept[7]");
    expect(expressions("the CodeSystem's own elements before and after concept, and its rules (a property's code twice)")).toEqual(expect.arrayContaining(['CodeSystem.status', 'CodeSystem.unknownAfter', 'CodeSystem.count', 'CodeSystem.property[1].code', 'CodeSystem.concept[2000].property[0].code']));
    expect(validateResource(CASES['more than MAX_ISSUES errors']!(), 'strict').length).toBe(MAX_ISSUES + 1);
    expect(expressions('a Questionnaire: a linkId given twice across parts (que-2), items breaking their own invariants')).toEqual(expect.arrayContaining(['Questionnaire', `Questionnaire.item[${PART_ITEMS + 2}]`]));
    expect(expressions('contained resources, one referred to from a concept in the last part, one not at all')).toEqual(expect.arrayContaining(['CodeSystem.contained[1]']));
  });

  test('what is validated at once: arrays of at most PART_ITEMS items, primitives, resources, and element ids outside the array', () => {
    expect(partedMember({ ...codeSystem(), concept: (codeSystem().concept as unknown[]).slice(0, PART_ITEMS) })).toBeUndefined();
    expect(partedMember(codeSystem())).toBe('concept');
    // Element ids outside the array, which the whole walk meets before or after the array's: one walk.
    expect(partedMember(codeSystem(() => {}, { meta: { id: 'm', lastUpdated: '2020-01-01T00:00:00Z' } }))).toBeUndefined();
    expect(partedMember(codeSystem(() => {}, { id: 'cs' }))).toBe('concept');
    // A primitive array (its `_name` pairs with it by index) and an array of resources.
    expect(partedMember({ resourceType: 'Patient', name: [{ given: Array.from({ length: n }, () => 'x') }] })).toBeUndefined();
    expect(partedMember({ resourceType: 'Basic', code: { text: 'x' }, contained: Array.from({ length: n }, (_, i) => ({ resourceType: 'Basic', id: `b${i}`, code: { text: 'x' } })) })).toBeUndefined();
  });
});

describe('validateInParts, generated', () => {
  test('CodeSystems with element ids given again within and across parts, codes repeated, bad concepts, own elements with and without ids: the issues of one validation of the whole', async () => {
    let seed = 20261201;
    const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
    const pick = <T>(a: readonly T[]): T => a[Math.floor(rnd() * a.length)]!;
    const ids = ['a', 'b', 'c'];
    let parted = 0;
    for (let c = 0; c < 8; c++) {
      const p = 0.004 + rnd() * 0.006;
      const concept = Array.from({ length: PART_ITEMS + 1 + Math.floor(rnd() * PART_ITEMS * 2) }, (_, i): unknown => {
        const x: Json = { code: `c${i}` };
        if (rnd() < p) x.id = pick(ids);
        if (rnd() < p) x.designation = [{ id: pick(ids), value: 'd' }];
        if (rnd() < p) x.code = pick(['c1', 'c2', '']);
        if (rnd() < p) x.display = pick([3, '', ' padded ']);
        if (rnd() < p / 2) x.concept = [{ code: pick(['c1', 'n1']), id: pick(ids) }];
        return rnd() < p / 4 ? pick([null, 3, [x], 'x']) : x;
      });
      const own = (): Json => ({
        ...(rnd() < 0.3 ? { identifier: [{ value: 'v' }] } : {}),
        ...(rnd() < 0.3 ? { meta: { id: pick(ids), lastUpdated: '2020-01-01T00:00:00Z' } } : {}),
      });
      const r: Json = { resourceType: 'CodeSystem', id: 'cs', url: 'http://example.org/cs', status: 'draft', content: 'complete', ...own(), concept, ...own() };
      const member = partedMember(r);
      if (member !== undefined) parted++;
      for (const level of ['strict', 'structural'] as const) {
        const want = validateResource(r, level);
        expect(member === undefined ? want : await validateInParts(r, member, level, { pace: () => undefined })).toEqual(want);
      }
    }
    // Some were validated in parts (an element id outside the concepts sends the rest whole).
    expect(parted).toBeGreaterThan(2);
  });
});

describe('validateInParts, the R4 examples', () => {
  test('every example of R4 with an array of elements, validated two items at a time: the issues of one validation of the whole, at both levels', async () => {
    const examples = new URL('../../node_modules/hl7.fhir.r4.examples/', import.meta.url);
    let parted = 0;
    for (const file of readdirSync(examples).sort()) {
      if (!file.endsWith('.json') || file === 'package.json' || file.startsWith('.')) continue;
      const r = JSON.parse(readFileSync(new URL(file, examples), 'utf8')) as Json;
      const member = partedMember(r, 2);
      if (typeof r.resourceType !== 'string' || member === undefined) continue;
      parted++;
      for (const level of ['strict', 'structural'] as const) {
        const got = await validateInParts(r, member, level, { pace: () => undefined, partItems: 2 });
        expect([file, level, got]).toEqual([file, level, validateResource(r, level)]);
      }
    }
    // Most examples with an array of three elements or more at their top (a Bundle's entries, a CodeSystem's concepts).
    expect(parted).toBeGreaterThan(500);
  }, 120_000);
});
