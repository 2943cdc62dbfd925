/**
 * `_filter`'s operations as FHIR R4 search_filter.html defines them (ARCHITECTURE.md, "`_filter`"), on
 * both databases: string and token comparisons case-insensitive ("Values are never case sensitive"),
 * `ne` as "An item in the set has an unequal value" (not the negation of `eq`, which `not (x eq v)`
 * still is), strings ordered, dates `co`, `pr` in any case. Each answer is an exact set, and the
 * in-memory matcher (a SMART v2 scope filter judging reads; the core ValueSets) agrees with the SQL.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { TestApp } from '../helpers/app.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { appOnFresh } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';

const X = 'http://x.org';
const GENDER = 'http://hl7.org/fhir/administrative-gender';
const C = 'http://example.org/c';
const U = 'http://example.org/u';
const LOINC = 'http://loinc.org';

const loinc = (code: string) => ({ coding: [{ system: LOINC, code }] });
const component = (value: number) => ({ code: { coding: [{ system: C, code: 'A' }] }, valueQuantity: { value, unit: 'u', system: U, code: 'u' } });

const DATA: Json[] = [
  { resourceType: 'Patient', id: 's-one', gender: 'male', name: [{ family: 'Peter' }], identifier: [{ system: X, value: 'AbC' }] },
  { resourceType: 'Patient', id: 's-two', gender: 'female', name: [{ family: 'Peter' }, { family: 'Quinn', given: ['Ann'] }], identifier: [{ system: X, value: 'abc' }, { system: X, value: 'zzz' }] },
  { resourceType: 'Patient', id: 's-three', gender: 'other', name: [{ family: 'Smith' }], identifier: [{ system: 'http://y.org', value: 'ABC' }] },
  { resourceType: 'Patient', id: 's-none', name: [{ given: ['Eve'] }] },
  { resourceType: 'Practitioner', id: 's-d1' },
  { resourceType: 'Practitioner', id: 's-d2' },
  { resourceType: 'Group', id: 's-g', type: 'person', actual: true },
  { resourceType: 'Observation', id: 's-o1', status: 'final', code: loinc('2339-0'), subject: { reference: 'Patient/s-one' }, performer: [{ reference: 'Practitioner/s-d1' }, { reference: 'Practitioner/s-d2' }], component: [component(5)] },
  { resourceType: 'Observation', id: 's-o2', status: 'final', code: loinc('2339-0'), subject: { reference: 'Patient/s-two' }, performer: [{ reference: 'Practitioner/s-d1' }], component: [component(6)] },
  { resourceType: 'Observation', id: 's-o3', status: 'final', code: loinc('718-7'), subject: { reference: 'Group/s-g' } },
  { resourceType: 'Observation', id: 's-o4', status: 'final', code: loinc('2339-0') },
  { resourceType: 'Questionnaire', id: 's-q1', status: 'active', url: 'http://example.org/q' },
  { resourceType: 'Questionnaire', id: 's-q2', status: 'active', url: 'http://example.org/Other' },
  { resourceType: 'Questionnaire', id: 's-q3', status: 'active' },
  { resourceType: 'QuestionnaireResponse', id: 's-qr1', status: 'completed', questionnaire: 'http://example.org/q|2' },
  { resourceType: 'QuestionnaireResponse', id: 's-qr2', status: 'completed', questionnaire: 'http://example.org/q' },
  { resourceType: 'QuestionnaireResponse', id: 's-qr3', status: 'completed', questionnaire: 'http://example.org/r' },
  { resourceType: 'QuestionnaireResponse', id: 's-qr4', status: 'completed' },
  { resourceType: 'Encounter', id: 's-e1', status: 'finished', class: { code: 'IMP' }, period: { start: '2018-01-20T10:00:00Z', end: '2018-02-10T10:00:00Z' } },
  { resourceType: 'Encounter', id: 's-e2', status: 'finished', class: { code: 'IMP' }, period: { start: '2018-02-03T10:00:00Z', end: '2018-02-04T10:00:00Z' } },
  { resourceType: 'Encounter', id: 's-e3', status: 'in-progress', class: { code: 'IMP' }, period: { start: '2017-12-30T10:00:00Z' } },
  { resourceType: 'Encounter', id: 's-e4', status: 'planned', class: { code: 'IMP' } },
];

/** Filters on each type and their exact answers: the same from the SQL of a search and from the in-memory matcher. */
const CASES: Record<string, [filter: string, ids: string[]][]> = {
  Patient: [
    // Strings: case-insensitive (as they were), `ne` an unequal value, orderings by code point.
    ['family eq PETER', ['s-one', 's-two']],
    ['family ne peter', ['s-three', 's-two']],
    ['family ne "PeTeR"', ['s-three', 's-two']],
    ['not (family eq peter)', ['s-none', 's-three']],
    ['given ne ANN', ['s-none']],
    ['family gt PETER', ['s-three', 's-two']],
    ['family ge peter', ['s-one', 's-three', 's-two']],
    ['family lt Q', ['s-one', 's-two']],
    ['family le " QUINN "', ['s-one', 's-two']],
    // Tokens: codes, systems and the implied system of a `code` element, in any case.
    ['gender eq MALE', ['s-one']],
    [`gender eq ${GENDER.toUpperCase()}|Male`, ['s-one']],
    ['gender ne male', ['s-three', 's-two']],
    ['gender ne Male or gender eq MALE', ['s-one', 's-three', 's-two']],
    ['not (gender eq male)', ['s-none', 's-three', 's-two']],
    ['identifier eq abc', ['s-one', 's-three', 's-two']],
    [`identifier eq ${X.toUpperCase()}|ABC`, ['s-one', 's-two']],
    ['identifier ne ABC', ['s-two']],
    [`identifier ne ${X}|abc`, ['s-three', 's-two']],
    [`identifier eq HTTP://X.ORG| and gender eq FEMALE`, ['s-two']],
    // `pr`'s true and false in any case.
    ['gender pr FALSE', ['s-none']],
    ['family pr True', ['s-one', 's-three', 's-two']],
  ],
  Observation: [
    ['code eq LOINC|2339-0', ['s-o1', 's-o2', 's-o4']],
    ['subject ne Patient/s-one', ['s-o2', 's-o3']],
    ['not (subject eq Patient/s-one)', ['s-o2', 's-o3', 's-o4']],
    // `patient` is a subject that is a Patient: the Group's Observation has none.
    ['patient ne Patient/s-one', ['s-o2']],
    ['performer ne Practitioner/s-d1', ['s-o1']],
    ['performer ne s-d2', ['s-o1', 's-o2']],
    [`component-code-value-quantity eq ${C}|A$5|${U}|u`, ['s-o1']],
    // A pair of values, none equal: an Observation without components has none.
    [`component-code-value-quantity ne ${C}|A$5|${U}|u`, ['s-o2']],
  ],
  QuestionnaireResponse: [
    ['questionnaire eq http://example.org/q', ['s-qr1', 's-qr2']],
    // A canonical without a version is equal to its versions, as `eq` finds them.
    ['questionnaire ne http://example.org/q', ['s-qr3']],
  ],
  Questionnaire: [
    ['url ne http://example.org/q', ['s-q2']],
    // URIs are compared as written.
    ['url eq HTTP://EXAMPLE.ORG/q', []],
    ['url eq http://example.org/q', ['s-q1']],
  ],
  Encounter: [
    // `co`: the stored period holds the whole of the value's.
    ['date co 2018-02-03', ['s-e1', 's-e3']],
    ['date co 2018-02-03T12:00:00Z', ['s-e1', 's-e2', 's-e3']],
    ['date co 2018-02', ['s-e3']],
    ['date eq 2018-02', ['s-e2']],
    ['date co 2017', []],
  ],
};

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`_filter operations on ${target.kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const found = async (query: string): Promise<string[]> => ((await api.search(`${query}&_count=1000`)).entry ?? [])
      .filter((e: Json) => e.search.mode === 'match').map((e: Json) => e.resource.id as string).sort();
    const filtered = (type: string, filter: string) => found(`${type}?_filter=${encodeURIComponent(filter)}`);

    beforeAll(async () => {
      ({ t, api } = await appOnFresh(target));
      const res = await api.post('', { resourceType: 'Bundle', type: 'batch', entry: DATA.map((resource) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } })) });
      expect(res.status).toBe(200);
      expect(((await res.json()) as Json).entry.map((e: Json) => e.response.status)).toEqual(DATA.map(() => '201 Created'));
    }, 60_000);
    afterAll(() => t.close());

    test('each filter finds exactly its resources', async () => {
      for (const [type, cases] of Object.entries(CASES)) {
        for (const [filter, ids] of cases) expect({ type, filter, ids: await filtered(type, filter) }).toEqual({ type, filter, ids });
      }
    });

    test('plain search parameters keep their own case sensitivity and :not', async () => {
      expect(await found('Patient?gender=MALE')).toEqual([]);
      expect(await found('Patient?identifier=abc')).toEqual(['s-two']);
      expect(await found('Patient?gender:not=male')).toEqual(['s-none', 's-three', 's-two']);
      expect(await found('Observation?code=LOINC|2339-0')).toEqual([]);
    });

    test('a SMART v2 scope filter judges each read in memory as the search does in SQL', async () => {
      for (const [type, cases] of Object.entries(CASES)) {
        const all = DATA.filter((r) => r.resourceType === type).map((r) => r.id as string);
        for (const [filter, ids] of cases) {
          const token = await t.tokenFor('t1', [`system/${type}.rs`], `system/${type}.rs?_filter=${encodeURIComponent(filter)}`);
          const scoped = fhirClient(t, token);
          const readable: string[] = [];
          for (const id of all) {
            const res = await scoped.get(`${type}/${id}`);
            await res.body?.cancel();
            if (res.status === 200) readable.push(id);
            else expect({ type, filter, id, status: res.status }).toEqual({ type, filter, id, status: 403 });
          }
          expect({ type, filter, readable: readable.sort() }).toEqual({ type, filter, readable: ids });
        }
      }
    }, 60_000);

    test('_lastUpdated co: the instant\'s own millisecond holds the value', async () => {
      const encounters = DATA.filter((r) => r.resourceType === 'Encounter').map((r) => r.id as string);
      const stored = await Promise.all(encounters.map(async (id) => ((await (await api.get(`Encounter/${id}`)).json()) as Json).meta.lastUpdated as string));
      const at = stored[0]!;
      expect(at).toMatch(/\.\d{3}Z$/);
      const same = encounters.filter((_, i) => Date.parse(stored[i]!) === Date.parse(at)).sort();
      expect(same).toContain('s-e1');
      expect(await filtered('Encounter', `_lastUpdated co ${at}`)).toEqual(same);
      // A second is wider than an instant: no instant holds it, though `eq` finds those within it.
      const second = at.replace(/\.\d{3}Z$/, 'Z');
      expect(await filtered('Encounter', `_lastUpdated co ${second}`)).toEqual([]);
      expect(await filtered('Encounter', `_lastUpdated eq ${second}`)).toEqual(expect.arrayContaining(same));
    });

    test('the core ValueSets, matched in memory, compare strings and tokens the same way', async () => {
      expect(await filtered('ValueSet', 'name eq ADMINISTRATIVEGENDER and status eq ACTIVE')).toEqual(['administrative-gender']);
      expect(await filtered('ValueSet', 'url eq http://hl7.org/fhir/ValueSet/administrative-gender and status ne DRAFT')).toEqual(['administrative-gender']);
      expect(await filtered('ValueSet', 'url eq http://hl7.org/fhir/ValueSet/administrative-gender and status ne ACTIVE')).toEqual([]);
      expect(await filtered('ValueSet', 'url eq HTTP://HL7.ORG/fhir/ValueSet/administrative-gender')).toEqual([]);
    });

    test('what stays unsupported is a 400 naming _filter', async () => {
      for (const [query, text] of [
        ['QuestionnaireResponse', "'ne' is not supported with a versioned canonical URL"],
        ['Observation', "'co' is not supported on a quantity parameter"],
        ['Patient', "'gt' is not supported on a token parameter"],
      ] as const) {
        const filter = { QuestionnaireResponse: 'questionnaire ne http://example.org/q|2', Observation: 'value-quantity co 5', Patient: 'gender gt m' }[query];
        const body = await expectOutcome(await api.get(`${query}?_filter=${encodeURIComponent(filter)}`), 400, 'not-supported');
        expect(body.issue[0].expression).toEqual(['_filter']);
        expect(body.issue[0].details.text).toContain(text);
      }
    });
  });
}
