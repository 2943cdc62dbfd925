/**
 * More of R4 search (search.html) as a probe found it wanting, on both databases: a result parameter
 * takes no modifier it does not define, `:in` takes a ValueSet's location as well as its canonical
 * URL, `sa` and `eb` on numbers and quantities mean "wholly after" and "wholly before" the value's
 * range, and `_sort=patient` reads only the subjects that are Patients.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { download, eachStore, finish, kickOff, refs } from '../helpers/export.ts';
import { expectOutcome, fhirClient, matchesOfAllPages, type FhirClient, type Json } from '../helpers/fhir.ts';

const LOINC = 'http://loinc.org';
const UCUM = 'http://unitsofmeasure.org';
const enc = encodeURIComponent;

const observation = (id: string, extra: Json = {}): Json => ({
  resourceType: 'Observation', id, status: 'final', code: { coding: [{ system: LOINC, code: 'SORT' }] }, ...extra,
});
const percent = (value: number): Json => ({ value, unit: '%', system: 'http://unitsofmeasure.org', code: '%' });
const risk = (id: string, prediction: Json): Json => ({ resourceType: 'RiskAssessment', id, status: 'final', subject: { reference: 'Patient/p1' }, prediction: [prediction] });
const condition = (id: string, code: string, extra: Json = {}): Json => ({
  resourceType: 'Condition', id, subject: { reference: 'Patient/p1' }, code: { coding: [{ system: LOINC, code }] }, ...extra,
});
const age = (value: number) => ({ value, unit: 'a', system: UCUM, code: 'a' });

const GROUPS = Array.from({ length: 20 }, (_, i) => `s-w${String(i).padStart(2, '0')}`);

const DATA: Json[] = [
  { resourceType: 'Patient', id: 'p1', name: [{ family: 'Xavier' }] },
  { resourceType: 'Patient', id: 'p2', name: [{ family: 'Adams' }] },
  // `_sort=patient`: subjects that are Patients (stored, contained), and others that are not.
  observation('s-p1', { subject: { reference: 'Patient/p1' } }),
  observation('s-p2', { subject: { reference: 'Patient/p2' } }),
  observation('s-grp', { subject: { reference: 'Group/g1' } }),
  observation('s-none'),
  observation('s-cgrp', { contained: [{ resourceType: 'Group', id: 'g', type: 'person', actual: true }], subject: { reference: '#g' } }),
  observation('s-cpat', { contained: [{ resourceType: 'Patient', id: 'p' }], subject: { reference: '#p' } }),
  // Groups whose ids sort between the Patients' (`#p` and `p1`): a sort walk over every subject would
  // end its first range among them, before `p1`.
  ...GROUPS.map((id, i) => observation(id, { subject: { reference: `Group/a${String(i).padStart(2, '0')}` } })),
  // Numbers: a Range [0.2, 0.9] and points; quantities: an onset Range of 20 to 40 years, and an onset age of 50.
  // R4's ras-1 holds a probability Range to percentages (UCUM `%`).
  risk('ra-range', { probabilityRange: { low: percent(0.2), high: percent(0.9) } }),
  ...[['ra-01', 0.1], ['ra-05', 0.5], ['ra-075', 0.75], ['ra-082', 0.82], ['ra-085', 0.85]].map(([id, p]) => risk(id as string, { probabilityDecimal: p })),
  condition('c-onset', 'C', { onsetRange: { low: age(20), high: age(40) } }),
  condition('c-age', 'C', { onsetAge: age(50) }),
  // Two RiskAssessments contained in a Condition, tested one by one in memory by `_containedType=contained`.
  condition('c-host', 'D', {
    contained: [risk('cra-range', { probabilityRange: { low: percent(0.2), high: percent(0.9) } }), risk('cra-082', { probabilityDecimal: 0.82 })],
    evidence: [{ detail: [{ reference: '#cra-range' }, { reference: '#cra-082' }] }],
  }),
  // ValueSet `vs1` holds code A.
  { resourceType: 'ValueSet', id: 'vs1', status: 'active', url: 'http://example.org/fhir/ValueSet/one', compose: { include: [{ system: LOINC, concept: [{ code: 'A' }] }] } },
  condition('c-a', 'A'),
  condition('c-b', 'B'),
];

await eachStore((kind, fresh) => {
  describe(`search result parameters and R4 details on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const matches = async (query: string, client = api) =>
      ((await client.search(query)).entry ?? []).filter((e: Json) => e.search.mode === 'match').map((e: Json) => e.resource.id as string);
    const found = async (query: string, client = api) => (await matches(query, client)).sort();

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const r of DATA) await api.put200(r);
    });
    afterAll(() => t.close());

    test('a result parameter with a modifier it does not define is a 400 naming it as written, not dropped', async () => {
      for (const query of [
        'Patient?_sort:desc=family', 'Patient?_count:x=1', 'Patient?_summary:x=true', 'Patient?_elements:exclude=name', 'Patient?_total:x=accurate',
        'Patient?_cursor:x=abc', 'Patient?_contained:x=true', 'Patient?_containedType:x=contained', 'Patient?_format:x=json', 'Patient?_pretty:x=true',
        'Patient/p1/Observation?_sort:desc=patient', '?_type=Patient&_count:x=1', '?_type:x=Patient', 'Patient?_contained=true&_count:x=1',
      ]) {
        const key = query.split('&').at(-1)!.split('?').at(-1)!.split('=')[0]!;
        for (const headers of [{}, { Prefer: 'handling=strict' }] as Record<string, string>[]) {
          const body = await expectOutcome(await api.get(query, headers), 400, 'invalid');
          expect({ query, expression: body.issue[0].expression }).toEqual({ query, expression: [key] });
        }
      }
      // Those that take one keep it, and the parameters without one keep working.
      expect(await matches('Patient?_sort=-family')).toEqual(['p1', 'p2']);
      const included = (await api.search('Observation?_id=s-p1&_include=Observation:subject&_include:iterate=Patient:link&_revinclude:iterate=Observation:subject')).entry
        .filter((e: Json) => e.search.mode === 'include').map((e: Json) => e.resource.id);
      expect(included).toEqual(['p1']);
      // A filter takes no result parameter at all (`_typeFilter`, scope filters).
      expect((await api.get(`$export?_type=Patient&_typeFilter=${enc('Patient?_sort:desc=family')}`)).status).toBe(400);
    });

    test('_sort=patient orders by the subjects that are Patients alone; others sort with the missing, last', async () => {
      const missing = await found('Observation?patient:missing=true');
      expect(missing).toEqual(['s-cgrp', 's-grp', 's-none', ...GROUPS]);
      const ascending = ['s-cpat', 's-p1', 's-p2', ...missing];
      const descending = ['s-p2', 's-p1', 's-cpat', ...missing];
      // Read in order (by walking the index, a page at a time, and by the key of each resource) and driven by a code.
      expect(await matches('Observation?_sort=patient')).toEqual(ascending);
      expect(await matchesOfAllPages(api, 'Observation?_sort=patient&_count=2')).toEqual(ascending);
      expect(await matches(`Observation?code=${LOINC}|SORT&_sort=patient`)).toEqual(ascending);
      expect(await matches('Observation?_sort=-patient')).toEqual(descending);
      expect(await matchesOfAllPages(api, 'Observation?_sort=-patient&_count=2')).toEqual(descending);
      expect(await matches(`Observation?code=${LOINC}|SORT&_sort=-patient,_id`)).toEqual(descending);
      // `subject` itself takes every subject.
      expect(await matches('Observation?_sort=subject')).toEqual(['s-cgrp', 's-cpat', ...GROUPS, 's-grp', 's-p1', 's-p2', 's-none']);
    });

    test('sa and eb on a number: the stored value or Range wholly after or before the value, its precision ignored', async () => {
      const all = ['ra-01', 'ra-05', 'ra-075', 'ra-082', 'ra-085', 'ra-range'];
      const cases: [string, string[]][] = [
        // The Range [0.2, 0.9] starts before 0.5 and ends after it; 0.5 itself is neither after nor before it.
        ['sa0.5', ['ra-075', 'ra-082', 'ra-085']],
        ['eb0.5', ['ra-01']],
        // search.html, number: with "lt, ge, le, sa & eb ... the implicit precision of the number is
        // ignored": 0.82 starts after exactly 0.8 and 0.75 ends before it, though `0.8` ([0.75, 0.85)) finds both.
        ['sa0.8', ['ra-082', 'ra-085']],
        ['eb0.8', ['ra-01', 'ra-05', 'ra-075']],
        ['0.8', ['ra-075', 'ra-082']],
        ['eb0.25', ['ra-01']],
        ['sa0.1', all.filter((id) => id !== 'ra-01')],
        ['eb1.0', all],
        ['sa0.8,eb0.25', ['ra-01', 'ra-082', 'ra-085']],
        ['sa0.9', []],
      ];
      for (const [value, ids] of cases) expect({ value, ids: await found(`RiskAssessment?probability=${value}`) }).toEqual({ value, ids: ids.sort() });
      // Tested in memory on each contained resource as the SQL tests their container.
      const contained = (value: string) => found(`RiskAssessment?probability=${value}&_contained=true&_containedType=contained`);
      expect(await contained('sa0.5')).toEqual(['cra-082']);
      expect(await contained('eb0.5')).toEqual([]);
      expect(await contained('gt0.5')).toEqual(['cra-082', 'cra-range']);
    });

    test('sa and eb on a quantity Range, by the stored unit and in canonical UCUM units', async () => {
      expect(await found('Condition?onset-age=sa30')).toEqual(['c-age']);
      expect(await found('Condition?onset-age=sa10')).toEqual(['c-age', 'c-onset']);
      expect(await found('Condition?onset-age=eb30')).toEqual([]);
      expect(await found('Condition?onset-age=eb45')).toEqual(['c-onset']);
      expect(await found(`Condition?onset-age=sa30|${UCUM}|a`)).toEqual(['c-age']);
      expect(await found(`Condition?onset-age=eb600|${UCUM}|mo`)).toEqual(['c-onset']);
      expect(await found(`Condition?onset-age=eb300|${UCUM}|mo`)).toEqual([]);
    });

    test(':in and :not-in take a ValueSet by its location in the tenant, relative or absolute, as by its canonical URL', async () => {
      expect(await found('Condition?code:in=http://example.org/fhir/ValueSet/one')).toEqual(['c-a']);
      expect(await found('Condition?code:in=ValueSet/vs1')).toEqual(['c-a']);
      expect(await found(`Condition?code:in=${t.fhir()}/ValueSet/vs1`)).toEqual(['c-a']);
      expect(await found('Condition?code:not-in=ValueSet/vs1')).toEqual(['c-age', 'c-b', 'c-host', 'c-onset']);
      expect(await found('Patient?_has:Condition:subject:code:in=ValueSet/vs1')).toEqual(['p1']);
      // Unknown here (no such id, another tenant's base, a version): a 400 naming the parameter.
      for (const [query, key] of [
        ['Condition?code:in=ValueSet/nope', 'code:in'],
        [`Condition?code:in=${t.fhir('t2')}/ValueSet/vs1`, 'code:in'],
        ['Condition?code:not-in=ValueSet/vs1/_history/1', 'code:not-in'],
        ['Patient?_has:Condition:subject:code:in=ValueSet/nope', '_has:Condition:subject:code:in'],
      ]) {
        const body = await expectOutcome(await api.get(query!), 400);
        expect({ query, expression: body.issue[0].expression }).toEqual({ query, expression: [key] });
      }
      // Another tenant does not see t1's ValueSet by its id.
      const other = fhirClient(t, await t.tokenFor('t2', ['system/*.*']), 't2');
      await other.put200(condition('c-a', 'A'));
      await expectOutcome(await other.get('Condition?code:in=ValueSet/vs1'), 400);
      // In a SMART scope filter and in bulk export's `_typeFilter` too.
      const scoped = fhirClient(t, await t.tokenFor('t1', ['system/Condition.rs'], `system/Condition.rs?code:in=${enc('ValueSet/vs1')}`));
      expect(await found('Condition', scoped)).toEqual(['c-a']);
      const token = await t.token();
      const status = await kickOff(t, token, `/$export?_type=Condition&_typeFilter=${enc('Condition?code:in=ValueSet/vs1')}`);
      expect(refs(await download(t, token, (await finish(t, token, status)).output))).toEqual(['Condition/c-a']);
    });
  });
});
