/**
 * Search details a careful client relies on (R4 search.html), on both databases: the range a number's
 * precision implies has exact decimal ends, a parameter takes one modifier, and `_include` /
 * `_revinclude` take `Type:*`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, link, type FhirClient, type Json } from '../helpers/fhir.ts';

const UCUM = 'http://unitsofmeasure.org';
const LOINC = 'http://loinc.org';
const V2_0203 = 'http://terminology.hl7.org/CodeSystem/v2-0203';

const risk = (id: string, probabilityDecimal: number): Json => ({
  resourceType: 'RiskAssessment', id, status: 'final', subject: { reference: 'Patient/p1' }, prediction: [{ probabilityDecimal }],
});
const glucose = (id: string, value: number): Json => ({
  resourceType: 'Observation', id, status: 'final', code: { coding: [{ system: LOINC, code: '2339-0' }] }, subject: { reference: 'Patient/p1' },
  performer: [{ reference: 'Practitioner/dr1' }], valueQuantity: { value, unit: 'mmol/L', system: UCUM, code: 'mmol/L' },
});

const DATA: Json[] = [
  {
    resourceType: 'Patient', id: 'p1', gender: 'male', name: [{ family: 'Xavier', given: ['Ann'] }],
    identifier: [{ type: { coding: [{ system: V2_0203, code: 'MR' }] }, system: 'urn:mrn', value: 'M1' }],
  },
  { resourceType: 'Patient', id: 'p2', gender: 'female' },
  { resourceType: 'Practitioner', id: 'dr1', name: [{ family: 'House' }] },
  risk('r075', 0.75), risk('r080', 0.8), risk('r085', 0.85), risk('r11', 1.1), risk('r115', 1.15), risk('r105', 1.05),
  glucose('g535', 5.35), glucose('g54', 5.4), glucose('g545', 5.45), glucose('gneg', -5.35),
];

await eachStore((kind, fresh) => {
  describe(`search fidelity on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const entries = async (query: string): Promise<{ id: string; mode: string }[]> => {
      const bundle = await api.search(query);
      return (bundle.entry ?? []).map((e: Json) => ({ id: `${e.resource.resourceType}/${e.resource.id}`, mode: e.search.mode }));
    };
    const found = async (query: string) => (await entries(query)).filter((e) => e.mode === 'match').map((e) => e.id.split('/')[1]).sort();

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const r of DATA) await api.put200(r);
    });
    afterAll(() => t.close());

    test('eq on a number is the range [low, high) its precision implies, with exact decimal ends', async () => {
      // 0.8 is [0.75, 0.85): 0.8 - 0.05 and 0.8 + 0.05 in binary floating point are 0.75 and 0.8500000000000001.
      expect(await found('RiskAssessment?probability=0.8')).toEqual(['r075', 'r080']);
      expect(await found('RiskAssessment?probability=1.1')).toEqual(['r105', 'r11']);
      expect(await found('RiskAssessment?probability=ne0.8')).toEqual(['r105', 'r11', 'r115', 'r085'].sort());
      expect(await found('RiskAssessment?probability=0.80')).toEqual(['r080']);
      // 5.4 is [5.35, 5.45): 5.4 - 0.05 is 5.3500000000000005 in floating point.
      expect(await found('Observation?value-quantity=5.4')).toEqual(['g535', 'g54']);
      expect(await found(`Observation?value-quantity=5.4|${UCUM}|mmol/L`)).toEqual(['g535', 'g54']);
      expect(await found('Observation?value-quantity=-5.4')).toEqual([]);
      expect(await found('Observation?value-quantity=-5.3')).toEqual(['gneg']);
      expect(await found('Observation?value-quantity=5.45')).toEqual(['g545']);
    });

    test('ap on a number is the range its 10% (or its precision, where wider) implies, with exact decimal ends', async () => {
      for (const r of [risk('r005', 0.05), risk('r099', 0.99), risk('r121', 1.21)]) await api.put200(r);
      try {
        // ap1.1 is [0.99, 1.21): 1.1 -/+ 0.11 in binary floating point are 0.9900000000000001 and 1.2100000000000002.
        expect(await found('RiskAssessment?probability=ap1.1')).toEqual(['r099', 'r105', 'r11', 'r115']);
        // ap0.1 is its precision, [0.05, 0.15): 0.1 - (0.15 - 0.05) / 2 is 0.05000000000000001.
        expect(await found('RiskAssessment?probability=ap0.1')).toEqual(['r005']);
        expect(await found('RiskAssessment?probability=ap0.1,ap1.1&_sort=probability')).toEqual(['r005', 'r099', 'r105', 'r11', 'r115']);
      } finally {
        for (const id of ['r005', 'r099', 'r121']) await api.del(`RiskAssessment/${id}`);
      }
    });

    test('a code element\'s system is its required binding\'s: system|code and system| find it, another system does not', async () => {
      const GENDER = 'http://hl7.org/fhir/administrative-gender';
      expect(await found(`Patient?gender=${GENDER}|male`)).toEqual(['p1']);
      expect(await found(`Patient?gender=${GENDER}|male,${GENDER}|female`)).toEqual(['p1', 'p2']);
      expect(await found(`Patient?gender=${GENDER}|`)).toEqual(['p1', 'p2']);
      expect(await found(`Patient?gender:not=${GENDER}|male`)).toEqual(['p2']);
      expect(await found('Patient?gender=male')).toEqual(['p1']);
      expect(await found('Patient?gender=http://example.org/other|male')).toEqual([]);
      expect(await found(`Patient?gender=${GENDER}|nonsense`)).toEqual([]);
      expect(await found('Observation?status=http://hl7.org/fhir/observation-status|final&value-quantity=5.4')).toEqual(['g535', 'g54']);
      // In a chain and in _filter too.
      expect(await found(`Observation?subject:Patient.gender=${GENDER}|male&value-quantity=5.4`)).toEqual(['g535', 'g54']);
      expect(await found(`Patient?_filter=${encodeURIComponent(`gender eq ${GENDER}|female`)}`)).toEqual(['p2']);
    });

    test('a parameter takes one modifier: a second is a 400 naming the parameter, not dropped', async () => {
      expect(await found('Patient?name:contains=avi')).toEqual(['p1']);
      for (const key of ['name:contains:exact', 'name:missing:not']) {
        const body = await expectOutcome(await api.get(`Patient?${key}=xav`), 400, 'invalid');
        expect(body.issue[0].expression).toEqual([key]);
        expect(body.issue[0].diagnostics).toContain('more than one modifier');
      }
      for (const key of ['subject:identifier:Patient', 'subject:Patient:identifier', 'subject:Patient:x.name']) {
        const body = await expectOutcome(await api.get(`Observation?${key}=1`), 400, 'invalid');
        expect(body.issue[0].expression).toEqual([key]);
      }
      // Under handling=strict too, and in a chain's last parameter.
      await expectOutcome(await api.get('Observation?subject:Patient.name:exact:contains=Xavier'), 400, 'invalid');
      expect(await found('Observation?subject:Patient.name:exact=Xavier')).toEqual(['g535', 'g54', 'g545', 'gneg']);
    });

    test('a token value naming neither system nor code, and an :of-type value of other than three parts, are a 400', async () => {
      for (const [query, key] of [
        ['Patient?gender=|', 'gender'],
        ['Patient?gender=male,|', 'gender'],
        [`Observation?code-value-quantity=$gt5`, 'code-value-quantity'],
        [`Observation?component-code-value-quantity=$gt100`, 'component-code-value-quantity'],
        ['Patient?identifier:of-type=a|b|c|d', 'identifier:of-type'],
        ['Patient?identifier:of-type=a|b', 'identifier:of-type'],
      ] as const) {
        const body = await expectOutcome(await api.get(query), 400, 'invalid');
        expect({ query, expression: body.issue[0].expression }).toEqual({ query, expression: [key] });
      }
      // `system|` and `|code` stay what they mean.
      expect(await found(`Observation?code=${LOINC}|`)).toEqual(['g535', 'g54', 'g545', 'gneg']);
      expect(await found('Observation?code=|2339-0')).toEqual([]);
    });

    test(':of-type on a token parameter that holds no Identifier is a 400 naming it (R4: "token (only Identifier)"), in a chain too', async () => {
      expect(await found(`Patient?identifier:of-type=${V2_0203}|MR|M1`)).toEqual(['p1']);
      expect(await found(`Observation?subject:Patient.identifier:of-type=${V2_0203}|MR|M1`)).toEqual(['g535', 'g54', 'g545', 'gneg']);
      for (const [query, key, types] of [
        [`Patient?gender:of-type=${V2_0203}|MR|M1`, 'gender:of-type', 'code'],
        [`Observation?code:of-type=${V2_0203}|MR|M1`, 'code:of-type', 'CodeableConcept'],
        // A union of parameters (code | component.code), none of them over Identifiers.
        [`Observation?combo-code:of-type=${V2_0203}|MR|M1`, 'combo-code:of-type', 'CodeableConcept'],
        [`Patient?_tag:of-type=${V2_0203}|MR|M1`, '_tag:of-type', 'Coding'],
        [`Observation?subject:Patient.gender:of-type=${V2_0203}|MR|M1`, 'subject:Patient.gender:of-type', 'code'],
      ] as const) {
        for (const prefer of ['handling=lenient', 'handling=strict']) {
          const body = await expectOutcome(await api.get(query, { Prefer: prefer }), 400, 'invalid');
          expect({ query, expression: body.issue[0].expression }).toEqual({ query, expression: [key] });
          expect(body.issue[0].diagnostics).toContain(`':of-type' applies to Identifier values`);
          expect(body.issue[0].diagnostics).toContain(`its values: ${types}`);
        }
      }
    });

    test('Prefer: a preference given twice counts the first time (RFC 7240); _count beyond the page size is the page size', async () => {
      const lenientFirst = await api.get('Patient?foo=1', { Prefer: 'handling=lenient, handling=strict' });
      expect(lenientFirst.status).toBe(200);
      await expectOutcome(await api.get('Patient?foo=1', { Prefer: 'handling=strict, handling=lenient' }), 400);
      for (const count of ['1001', '99999999999999999999']) {
        const res = await api.get(`Observation?_count=${count}`);
        expect({ count, status: res.status }).toEqual({ count, status: 200 });
        // The self link gives the page size applied.
        const self = ((await res.json()) as Json).link.find((l: Json) => l.relation === 'self').url as string;
        expect(new URL(self).searchParams.get('_count')).toBe('1000');
      }
      await expectOutcome(await api.get('Observation?_count=-1'), 400);
    });

    test('$everything by POST (a Parameters body, or none) as by GET; parameters it does not take are warned of, or a 400 under strict handling', async () => {
      const ids = (bundle: Json) => (bundle.entry ?? []).filter((e: Json) => e.search?.mode === 'match').map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`).sort();
      const byGet = ids(await api.search('Patient/p1/$everything?_type=Observation'));
      expect(byGet).toEqual(['g535', 'g54', 'g545', 'gneg'].map((id) => `Observation/${id}`));
      const parameters = (...parameter: Json[]) => ({ resourceType: 'Parameters', parameter });
      const posted = await api.post('Patient/p1/$everything', parameters({ name: '_type', valueString: 'Observation' }));
      expect(posted.status).toBe(200);
      expect(ids(await posted.json())).toEqual(byGet);
      const empty = await api.call('POST', 'Patient/p1/$everything', undefined);
      expect(empty.status).toBe(200);
      expect(ids(await empty.json())).toEqual(ids(await api.search('Patient/p1/$everything')));
      const typeLevel = await api.post('Patient/$everything', parameters({ name: '_type', valueString: 'Patient' }, { name: '_count', valueInteger: 1 }));
      const page = (await typeLevel.json()) as Json;
      expect(ids(page)).toEqual(['Patient/p1']);
      expect(page.link.find((l: Json) => l.relation === 'next')).toBeDefined();
      await expectOutcome(await api.post('Patient/p1/$everything', { resourceType: 'Patient' }), 400);
      await expectOutcome(await api.post('Patient/p1/$everything', parameters({ name: '_type' })), 400);
      // `start` and `end` (care dates) keep the resources whose care date overlaps the range, with no warning even
      // under strict handling: these Observations have none, and are left out; a value that is no date is a 400 naming it.
      const dated = (await api.get('Patient/p1/$everything?start=2020-01-01&_type=Observation', { Prefer: 'handling=strict' })) as Response;
      expect(dated.status).toBe(200);
      const bundle = (await dated.json()) as Json;
      expect(ids(bundle)).toEqual([]);
      expect((bundle.entry ?? []).some((e: Json) => e.search?.mode === 'outcome')).toBe(false);
      const strict = await expectOutcome(await api.get('Patient/p1/$everything?end=soon'), 400);
      expect(strict.issue[0].expression).toEqual(['end']);
      await expectOutcome(await api.post('Patient/p1/$everything', parameters({ name: 'foo', valueString: 'x' }), { Prefer: 'handling=strict' }), 400);
    });

    test('_include and _revinclude take Type:* (every reference parameter of that type)', async () => {
      const included = async (query: string) => (await entries(query)).filter((e) => e.mode === 'include').map((e) => e.id).sort();
      expect(await included('Observation?_id=g54&_include=Observation:*')).toEqual(['Patient/p1', 'Practitioner/dr1']);
      expect(await included('Observation?_id=g54&_include=Observation:*:Practitioner')).toEqual(['Practitioner/dr1']);
      expect(await included('Patient?_id=p1&_revinclude=Observation:*')).toEqual(['Observation/g535', 'Observation/g54', 'Observation/g545', 'Observation/gneg']);
      expect(await included('Patient?_id=p1&_revinclude=*')).toEqual([
        'Observation/g535', 'Observation/g54', 'Observation/g545', 'Observation/gneg',
        ...['r075', 'r080', 'r085', 'r105', 'r11', 'r115'].map((id) => `RiskAssessment/${id}`),
      ]);
      await expectOutcome(await api.get('Observation?_include=Patient:*', { Prefer: 'handling=strict' }), 400, 'invalid');
      expect(await included('Observation?_id=g54&_include:iterate=Patient:*&_include=Observation:subject')).toEqual(['Patient/p1']);
      // The CapabilityStatement lists them.
      const rest = (await (await api.get('metadata')).json()).rest[0].resource as Json[];
      const of = (type: string) => rest.find((r) => r.type === type)!;
      expect(of('Observation').searchInclude).toEqual(expect.arrayContaining(['*', 'Observation:*', 'Observation:subject']));
      expect(of('Patient').searchRevInclude).toEqual(expect.arrayContaining(['*', 'Observation:*', 'RiskAssessment:*', 'Observation:subject']));
    });

    test('a _revinclude whose parameter (or :Type) cannot refer to the type searched: a 400 naming _revinclude when strict, ignored with a warning when lenient', async () => {
      await api.put200({ resourceType: 'Organization', id: 'org-rev', name: 'Acme' });
      const strict = { Prefer: 'handling=strict' };
      for (const [type, value, why] of [
        ['Organization', 'Observation:subject', "'subject' of Observation does not refer to Organization (its targets: Group, Device, Patient, Location)"],
        ['Organization', 'RiskAssessment:*', 'no reference parameter of RiskAssessment refers to Organization'],
        ['Patient', 'Observation:subject:Group', 'its :Type Group is not the type searched (Patient)'],
        ['Organization', 'ActivityDefinition:composed-of', "ActivityDefinition.'composed-of' holds canonical references, which name canonical resources (with a url and a version), not Organization"],
      ]) {
        const body = await expectOutcome(await api.get(`${type}?_revinclude=${value}`, strict), 400, 'invalid');
        expect(body.issue[0].expression).toEqual(['_revinclude']);
        expect(body.issue[0].diagnostics).toBe(`_revinclude '${value}' cannot include anything on ${type}: ${why}`);
        const lenient = await api.search(`${type}?_id=${type === 'Patient' ? 'p1' : 'org-rev'}&_revinclude=${value}`);
        expect(lenient.entry.map((e: Json) => e.search.mode)).toEqual(['match', 'outcome']);
        const warning = lenient.entry[1].resource.issue[0];
        expect(warning).toMatchObject({ severity: 'warning', code: 'not-supported', expression: ['_revinclude'] });
        expect(warning.diagnostics).toContain(why);
        expect(new URL(link(lenient, 'self')!).searchParams.has('_revinclude')).toBe(false);
      }
      // One that may refer to it, `*`, and an iterated one (which follows included resources, of any type) are taken.
      for (const query of ['Patient?_id=p1&_revinclude=Observation:subject', 'Organization?_revinclude=*', 'Organization?_revinclude=Patient:organization&_revinclude:iterate=Observation:subject']) {
        const res = await api.get(query, strict);
        expect(res.status).toBe(200);
      }
    });

    test('_include takes :iterate alone as its modifier, and Type:parameter[:Target] alone as its value', async () => {
      for (const query of ['Observation?_include:foo=Observation:subject', 'Observation?_revinclude:x=Observation:subject', 'Observation?_include=Observation:subject:Patient:x']) {
        const body = await expectOutcome(await api.get(query), 400, 'invalid');
        expect(body.issue[0].expression).toEqual([query.split('?')[1]!.split('=')[0]]);
      }
    });
  });
});
