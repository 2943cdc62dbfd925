/**
 * A search parameter with no value (`name=`) is ignored, as R4 search.html has it ("Empty parameters
 * are not an error - they are just ignored by the server") and HAPI FHIR does: for every parameter
 * type and modifier, `_id`, `_lastUpdated`, `_list`, full text, `_filter`, chains and `_has`, under
 * strict handling too, and it is left out of the self link. Its name and modifier are still checked,
 * and a conditional interaction whose only criteria are empty has none; on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, link, type FhirClient, type Json } from '../helpers/fhir.ts';

const LOINC = 'http://loinc.org';

const DATA: Json[] = [
  { resourceType: 'Patient', id: 'p1', gender: 'male', birthDate: '1970-01-01', name: [{ family: 'Xavier' }], identifier: [{ system: 'urn:mrn', value: '1' }] },
  { resourceType: 'Patient', id: 'p2', gender: 'female', birthDate: '1980-01-01', name: [{ family: 'Young' }] },
  {
    resourceType: 'Observation', id: 'o1', status: 'final', code: { coding: [{ system: LOINC, code: '2345-7' }] },
    subject: { reference: 'Patient/p1' }, valueQuantity: { value: 5, system: 'http://unitsofmeasure.org', code: 'mg' },
  },
  { resourceType: 'Observation', id: 'o2', status: 'final', code: { coding: [{ system: LOINC, code: '1-8' }] }, subject: { reference: 'Patient/p2' } },
  { resourceType: 'RiskAssessment', id: 'r1', status: 'final', subject: { reference: 'Patient/p1' }, prediction: [{ probabilityDecimal: 0.5 }] },
  { resourceType: 'ValueSet', id: 'vs1', status: 'active', url: 'http://example.org/vs/1' },
  { resourceType: 'Location', id: 'l1', position: { latitude: 42, longitude: -83 } },
];

/** Per type, a search with an empty parameter, ANDed with one that is not (or none): the same as without it. */
const EMPTY: [type: string, empty: string, rest: string, expected: string[]][] = [
  ['Patient', 'name=', '', ['p1', 'p2']],
  ['Patient', 'name=', 'gender=male', ['p1']],
  ['Patient', 'name:exact=', 'gender=female', ['p2']],
  ['Patient', 'name:contains=', '', ['p1', 'p2']],
  ['Patient', 'gender=', 'name=xav', ['p1']],
  ['Patient', 'gender:not=', '', ['p1', 'p2']],
  ['Patient', 'gender:text=', '', ['p1', 'p2']],
  ['Patient', 'gender:in=', '', ['p1', 'p2']],
  ['Patient', 'gender:below=', '', ['p1', 'p2']],
  ['Patient', 'identifier:of-type=', '', ['p1', 'p2']],
  ['Patient', 'birthdate=', 'gender=female', ['p2']],
  ['Patient', 'name:missing=', '', ['p1', 'p2']],
  ['Patient', '_id=', 'gender=male', ['p1']],
  ['Patient', '_id:not=', '', ['p1', 'p2']],
  ['Patient', '_lastUpdated=', '', ['p1', 'p2']],
  ['Patient', '_list=', '', ['p1', 'p2']],
  ['Patient', '_text=', '', ['p1', 'p2']],
  ['Patient', '_content=', '', ['p1', 'p2']],
  ['Patient', '_filter=', 'gender=male', ['p1']],
  ['Patient', '_tag=', '', ['p1', 'p2']],
  ['Patient', '_profile=', '', ['p1', 'p2']],
  ['Patient', '_has:Observation:patient:code=', '', ['p1', 'p2']],
  ['Patient', '_has:Observation:patient:subject:Patient.name=', '', ['p1', 'p2']],
  ['Observation', 'subject=', 'code=1-8', ['o2']],
  ['Observation', 'subject:Patient=', '', ['o1', 'o2']],
  ['Observation', 'subject:identifier=', '', ['o1', 'o2']],
  ['Observation', 'subject:Patient.name=', 'code=2345-7', ['o1']],
  ['Observation', 'subject.name=', '', ['o1', 'o2']],
  ['Observation', 'patient._has:RiskAssessment:subject:probability=', '', ['o1', 'o2']],
  ['Observation', 'value-quantity=', '', ['o1', 'o2']],
  ['Observation', 'code-value-quantity=', '', ['o1', 'o2']],
  ['RiskAssessment', 'probability=', '', ['r1']],
  ['ValueSet', 'url=', '_id=vs1', ['vs1']],
  ['ValueSet', 'url:below=', '_id=vs1', ['vs1']],
  ['Location', 'near=', '', ['l1']],
];

await eachStore((kind, fresh) => {
  describe(`an empty parameter on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const r of DATA) await api.put200(r);
    });
    afterAll(() => t.close());

    test('is ignored, for every parameter type, modifier, chain and _has, under strict handling too, and is not in the self link', async () => {
      for (const [type, empty, rest, expected] of EMPTY) {
        for (const prefer of ['handling=lenient', 'handling=strict']) {
          const query = `${type}?${[empty, rest].filter(Boolean).join('&')}`;
          const res = await api.get(query, { Prefer: prefer });
          const body = (await res.json()) as Json;
          const found = res.status === 200 ? (body.entry ?? []).filter((e: Json) => e.search.mode === 'match').map((e: Json) => e.resource.id).sort() : body;
          expect({ query, prefer, found }).toEqual({ query, prefer, found: expected });
          // No warning: the parameter was not unknown, it had nothing to say.
          expect({ query, outcome: (body.entry ?? []).some((e: Json) => e.search.mode === 'outcome') }).toEqual({ query, outcome: false });
          const self = new URL(link(body, 'self')!);
          expect({ query, self: [...self.searchParams.keys()] }).toEqual({ query, self: rest ? [rest.split('=')[0]!] : [] });
        }
      }
    });

    test('across types and in a compartment too', async () => {
      const across = (await api.search('?_type=Patient,Observation&_id=&_lastUpdated=ge2000')) as Json;
      expect((across.entry as Json[]).map((e) => e.resource.id).sort()).toEqual(['o1', 'o2', 'p1', 'p2']);
      expect(new URL(link(across, 'self')!).searchParams.has('_id')).toBe(false);
      const compartment = (await api.search('Patient/p1/Observation?code=')) as Json;
      expect((compartment.entry as Json[]).map((e) => e.resource.id)).toEqual(['o1']);
    });

    test('a result parameter with no value (_count=, _sort=, _elements=, _include=, _total=, _summary=) is ignored too, and not in the self link', async () => {
      for (const prefer of ['handling=lenient', 'handling=strict']) {
        const empties = '_count=&_sort=&_elements=&_include=&_revinclude=&_total=&_summary=&_contained=';
        const res = await api.get(`Patient?${empties}&gender=male`, { Prefer: prefer });
        expect(res.status).toBe(200);
        const body = (await res.json()) as Json;
        expect(body.entry.map((e: Json) => [e.search.mode, e.resource.id])).toEqual([['match', 'p1']]);
        // Not subset: _elements and _summary said nothing.
        expect(body.entry[0].resource.name).toEqual([{ family: 'Xavier' }]);
        expect([...new URL(link(body, 'self')!).searchParams.keys()].sort()).toEqual(['gender']);
        // An empty one first does not hide the value after it.
        const paged = (await (await api.get('Patient?_count=&_count=1&_sort=&_sort=-birthdate', { Prefer: prefer })).json()) as Json;
        expect(paged.entry.map((e: Json) => e.resource.id)).toEqual(['p2']);
        const across = (await (await api.get('?_type=Patient&_count=&_sort=&_elements=&gender=female', { Prefer: prefer })).json()) as Json;
        expect(across.entry.map((e: Json) => e.resource.id)).toEqual(['p2']);
        expect(across.entry[0].resource.birthDate).toBe('1980-01-01');
      }
      // A Bundle's GET entry is read as the REST search is, in a transaction (checked before its writes) and a batch.
      for (const type of ['transaction', 'batch']) {
        const res = await api.post('', { resourceType: 'Bundle', type, entry: [{ request: { method: 'GET', url: 'Patient?gender=male&_count=&_sort=' } }] });
        expect(res.status).toBe(200);
        const entry = ((await res.json()) as Json).entry[0];
        expect([type, entry.response.status, entry.resource.entry.map((e: Json) => e.resource.id)]).toEqual([type, '200 OK', ['p1']]);
      }
    });

    test('its name and modifier are still checked, and a value that is not empty is read as before', async () => {
      for (const [query, key] of [
        ['Patient?name:nonsense=', 'name:nonsense'],
        ['Patient?gender:of-type=', 'gender:of-type'],
        ['Patient?birthdate:exact=', 'birthdate:exact'],
        ['Patient?_id:exact=', '_id:exact'],
        ['Patient?name:exact:contains=', 'name:exact:contains'],
        ['Observation?subject:Organization.name=', 'subject:Organization.name'],
        ['Observation?subject:Patient.name:nonsense=', 'subject:Patient.name:nonsense'],
        ['Patient?_filter:x=', '_filter:x'],
        // An empty alternative of a value, an empty string in _filter: values, not an empty parameter.
        ['Patient?name=x,', 'name'],
        ['Patient?gender=|', 'gender'],
        [`Patient?_filter=${encodeURIComponent('name eq ""')}`, '_filter'],
      ] as const) {
        const body = await expectOutcome(await api.get(query), 400);
        expect({ query, expression: body.issue[0].expression }).toEqual({ query, expression: [key] });
      }
      // An unknown parameter stays unknown: ignored with a warning, a 400 under strict handling.
      const lenient = (await api.search('Patient?foo=')) as Json;
      expect(lenient.entry.filter((e: Json) => e.search.mode === 'outcome')).toHaveLength(1);
      await expectOutcome(await api.get('Patient?foo=', { Prefer: 'handling=strict' }), 400);
    });

    test('a conditional interaction whose criteria are all empty has none (400); an empty one beside others is ignored', async () => {
      const created = await api.post('Patient', { resourceType: 'Patient', gender: 'other' }, { 'If-None-Exist': 'identifier=' });
      const body = await expectOutcome(created, 400, 'invalid');
      expect(body.issue[0].diagnostics).toContain('no search criteria');
      await expectOutcome(await api.del('Patient?identifier='), 400, 'invalid');
      await expectOutcome(await api.put('Patient?name=&_count=', { resourceType: 'Patient', gender: 'other' }), 400, 'invalid');
      // identifier=urn:mrn|1 finds p1: nothing is created.
      const matched = await api.post('Patient', { resourceType: 'Patient', gender: 'other' }, { 'If-None-Exist': 'identifier=urn:mrn|1&name=' });
      expect(matched.status).toBe(200);
      expect(((await matched.json()) as Json).id).toBe('p1');
      // In a transaction, a conditional reference of empty criteria alone matches nothing it could name.
      const tx = await api.post('', {
        resourceType: 'Bundle', type: 'transaction',
        entry: [{ request: { method: 'POST', url: 'Observation' }, resource: { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient?identifier=' } } }],
      });
      expect(tx.status).toBe(400);
      expect((await api.search('Patient')).entry).toHaveLength(2);
    });
  });
});
