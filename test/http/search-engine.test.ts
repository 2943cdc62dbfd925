/**
 * FHIR R4 search (search.html) through the REST API, on both databases: every parameter type with its
 * prefixes and modifiers, `:missing`, composites, chaining, `_has`, `_include`/`_revinclude`, `_sort`
 * with paging, `_total`, `_summary`, `_elements`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, link, matchesOfAllPages, type FhirClient, type Json } from '../helpers/fhir.ts';

const LOINC = 'http://loinc.org';
const UCUM = 'http://unitsofmeasure.org';
const CAT = 'http://terminology.hl7.org/CodeSystem/observation-category';
const CLIN = 'http://terminology.hl7.org/CodeSystem/condition-clinical';

const DATA: Json[] = [
  { resourceType: 'Organization', id: 'org1', name: 'Acme Health' },
  { resourceType: 'Practitioner', id: 'dr1', name: [{ family: 'House', given: ['Gregory'] }] },
  {
    resourceType: 'Patient', id: 'p1', gender: 'male', birthDate: '1974-12-25', active: true,
    name: [{ family: 'Chalmers', given: ['Peter', 'James'] }], managingOrganization: { reference: 'Organization/org1' },
    address: [{ city: 'PleasantVille', postalCode: '3999' }], telecom: [{ system: 'phone', value: '555-1234' }],
    identifier: [{ system: 'urn:mrn', value: 'M1', type: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v2-0203', code: 'MR' }], text: 'Medical record number' } }],
    generalPractitioner: [{ reference: 'Practitioner/dr1' }],
  },
  {
    resourceType: 'Patient', id: 'p2', gender: 'female', birthDate: '1985-06', name: [{ family: 'Müller', given: ['Zoë'] }], deceasedDateTime: '2020-01-01',
    identifier: [{ type: { text: 'Driver licence, pending' } }],
  },
  { resourceType: 'Patient', id: 'p3', gender: 'female', birthDate: '2001-02-03', name: [{ family: 'Chalmerson', given: ['Ann'] }], identifier: [{ system: 'urn:passport', value: 'X9', type: { text: 'Passport' } }] },
  {
    resourceType: 'Observation', id: 'o1', status: 'final', subject: { reference: 'Patient/p1' }, effectiveDateTime: '2020-03-01T10:00:00Z',
    category: [{ coding: [{ system: CAT, code: 'laboratory', display: 'Laboratory' }] }],
    code: { coding: [{ system: LOINC, code: '2339-0', display: 'Glucose' }], text: 'Glucose Bld-mCnc' },
    valueQuantity: { value: 100, unit: 'mg/dL', system: UCUM, code: 'mg/dL' }, performer: [{ reference: 'Practitioner/dr1' }],
  },
  {
    resourceType: 'Observation', id: 'o2', status: 'final', subject: { reference: 'Patient/p1' }, effectivePeriod: { start: '2021-01-01', end: '2021-01-31' },
    category: [{ coding: [{ system: CAT, code: 'vital-signs' }] }],
    code: { coding: [{ system: LOINC, code: '85354-9', display: 'Blood pressure' }] },
    component: [
      { code: { coding: [{ system: LOINC, code: '8480-6' }] }, valueQuantity: { value: 140, unit: 'mmHg', system: UCUM, code: 'mm[Hg]' } },
      { code: { coding: [{ system: LOINC, code: '8462-4' }] }, valueQuantity: { value: 90, unit: 'mmHg', system: UCUM, code: 'mm[Hg]' } },
    ],
  },
  {
    resourceType: 'Observation', id: 'o3', status: 'preliminary', subject: { reference: 'Patient/p2' }, effectiveDateTime: '2022-05',
    category: [{ coding: [{ system: CAT, code: 'laboratory' }] }], code: { coding: [{ system: LOINC, code: '2339-0' }] },
    valueQuantity: { value: 5.4, unit: 'mmol/L', system: UCUM, code: 'mmol/L' },
  },
  { resourceType: 'Observation', id: 'o4', status: 'final', subject: { reference: 'Group/g1' }, code: { coding: [{ system: LOINC, code: '1-1' }] }, valueString: 'Positive result' },
  { resourceType: 'Condition', id: 'c1', subject: { reference: 'Patient/p1' }, clinicalStatus: { coding: [{ system: CLIN, code: 'active' }] }, code: { text: 'Diabetes' }, onsetDateTime: '2019' },
  { resourceType: 'Condition', id: 'c2', subject: { reference: 'Patient/p2' }, clinicalStatus: { coding: [{ system: CLIN, code: 'resolved' }] }, code: { text: 'Flu' }, onsetPeriod: { start: '2020-02-01' } },
  { resourceType: 'Encounter', id: 'e1', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/p1' }, period: { start: '2020-01-01T09:00:00Z', end: '2020-01-01T10:00:00Z' }, length: { value: 60, unit: 'min', system: UCUM, code: 'min' } },
  { resourceType: 'Encounter', id: 'e2', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/p2' }, period: { start: '2021-06-01' } },
  { resourceType: 'Encounter', id: 'e3', status: 'planned', class: { code: 'AMB' }, subject: { reference: 'Patient/p3' }, period: { start: '2019-12-31T23:00:00Z', end: '2020-01-01T01:00:00Z' } },
  { resourceType: 'ValueSet', id: 'vs1', status: 'active', url: 'http://example.org/fhir/ValueSet/a', version: '1' },
  { resourceType: 'ValueSet', id: 'vs2', status: 'active', url: 'http://example.org/fhir/ValueSet/b/c' },
  { resourceType: 'QuestionnaireResponse', id: 'qr1', status: 'completed', questionnaire: 'http://example.org/Questionnaire/q|2.0' },
];

await eachStore((kind, fresh) => {
  describe(`search engine on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const found = async (query: string): Promise<string[]> => {
      const bundle = await api.search(query);
      const outcome = (bundle.entry ?? []).find((e: Json) => e.search?.mode === 'outcome');
      if (outcome) throw new Error(`${query}: ${JSON.stringify(outcome.resource)}`);
      return (bundle.entry ?? []).filter((e: Json) => e.search.mode === 'match').map((e: Json) => e.resource.id);
    };
    const sorted = async (query: string) => (await found(query)).sort();

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const r of DATA) await api.put200(r);
    });
    afterAll(() => t.close());

    test('1,000 ORed values of a date, number, string or token search are answered (SQLite caps expression depth at 1,000)', async () => {
      const days = Array.from({ length: 999 }, (_, i) => new Date(Date.UTC(1900, 0, 1) + i * 86_400_000).toISOString().slice(0, 10));
      const birthdate = (await api.search('Patient?_count=1')).entry[0].resource.birthDate as string | undefined;
      for (const query of [
        `Patient?birthdate=${[...days, birthdate ?? '1899-01-01'].join(',')}`,
        `Observation?value-quantity=${Array.from({ length: 1000 }, (_, i) => `gt${1e6 + i}`).join(',')}`,
        `Patient?name=${Array.from({ length: 1000 }, (_, i) => `zz${i}`).join(',')}`,
        `Patient?gender=${Array.from({ length: 1000 }, (_, i) => `g${i}`).join(',')}`,
      ]) {
        const res = await api.get(query);
        expect({ query: query.slice(0, 40), status: res.status }).toEqual({ query: query.slice(0, 40), status: 200 });
      }
      if (birthdate) expect((await found(`Patient?birthdate=${[...days, birthdate].join(',')}`)).length).toBeGreaterThan(0);
      await expectOutcome(await api.get(`Patient?name=${Array.from({ length: 1001 }, (_, i) => `zz${i}`).join(',')}`), 400, 'too-costly');
    });

    test('string: case- and accent-insensitive starts-with; :exact; :contains; HumanName and Address parts', async () => {
      expect(await sorted('Patient?name=chal')).toEqual(['p1', 'p3']);
      expect(await sorted('Patient?name=PETER')).toEqual(['p1']);
      expect(await sorted('Patient?family=muller')).toEqual(['p2']);
      expect(await sorted('Patient?given=zoe')).toEqual(['p2']);
      expect(await sorted('Patient?family:exact=Chalmers')).toEqual(['p1']);
      expect(await sorted('Patient?family:exact=chalmers')).toEqual([]);
      expect(await sorted('Patient?family:contains=ALMERS')).toEqual(['p1', 'p3']);
      expect(await sorted('Patient?address-city=pleasant')).toEqual(['p1']);
      expect(await sorted('Patient?address=3999')).toEqual(['p1']);
      expect(await sorted('Patient?name=ann,peter')).toEqual(['p1', 'p3']);
      // Soundex keeps four characters: Chalmers and Chalmerson are both C456
      expect(await sorted('Patient?phonetic=chalmerz')).toEqual(['p1', 'p3']);
      expect(await sorted('Patient?phonetic=muller')).toEqual(['p2']);
      expect(await sorted('Observation?value-string=posit')).toEqual(['o4']);
    });

    test('token: code, system|code, |code, system|, :not, :text, :of-type; boolean; ContactPoint', async () => {
      expect(await sorted('Patient?gender=female')).toEqual(['p2', 'p3']);
      expect(await sorted(`Observation?code=${LOINC}|2339-0`)).toEqual(['o1', 'o3']);
      expect(await sorted('Observation?code=|2339-0')).toEqual([]);
      expect(await sorted(`Observation?category=${CAT}|`)).toEqual(['o1', 'o2', 'o3']);
      expect(await sorted('Observation?category=laboratory&status=final')).toEqual(['o1']);
      expect(await sorted('Observation?status:not=final')).toEqual(['o3']);
      expect(await sorted('Observation?category:not=laboratory')).toEqual(['o2', 'o4']);
      expect(await sorted('Observation?code:text=glucose')).toEqual(['o1']);
      expect(await sorted('Condition?code:text=diab')).toEqual(['c1']);
      expect(await sorted('Observation?code:text=PRESSURE')).toEqual(['o2']);
      expect(await sorted('Observation?category:text=labor')).toEqual(['o1']);
      expect(await sorted('Observation?code:text=glucose,flu')).toEqual(['o1']);
      expect(await sorted('Patient?identifier:of-type=http://terminology.hl7.org/CodeSystem/v2-0203|MR|M1')).toEqual(['p1']);
      // An Identifier's :text is its type's text, with or without a value (search.html, token :text).
      expect(await sorted('Patient?identifier:text=medical')).toEqual(['p1']);
      expect(await sorted('Patient?identifier:text=PASSP')).toEqual(['p3']);
      expect(await sorted('Patient?identifier:text=licence')).toEqual(['p2']);
      expect(await sorted('Patient?identifier:text=record,passport')).toEqual(['p1', 'p3']);
      expect(await sorted('Patient?identifier=X9')).toEqual(['p3']);
      expect(await sorted('Patient?active=true')).toEqual(['p1']);
      expect(await sorted('Patient?deceased=true')).toEqual(['p2']);
      expect(await sorted('Patient?deceased=false')).toEqual(['p1', 'p3']);
      expect(await sorted('Patient?phone=555-1234')).toEqual(['p1']);
      expect(await sorted('Condition?clinical-status=active')).toEqual(['c1']);
    });

    test('date: every prefix against ranges on both sides (precision, Period, open ends)', async () => {
      expect(await sorted('Patient?birthdate=1974')).toEqual(['p1']);
      expect(await sorted('Patient?birthdate=1985-06-15')).toEqual([]);
      expect(await sorted('Patient?birthdate=1985')).toEqual(['p2']);
      expect(await sorted('Patient?birthdate=ge1985')).toEqual(['p2', 'p3']);
      expect(await sorted('Patient?birthdate=gt1985-06')).toEqual(['p3']);
      expect(await sorted('Patient?birthdate=lt1985-06-15')).toEqual(['p1', 'p2']);
      expect(await sorted('Patient?birthdate=le1974-12-25')).toEqual(['p1']);
      expect(await sorted('Patient?birthdate=ne1974-12-25')).toEqual(['p2', 'p3']);
      expect(await sorted('Patient?birthdate=sa1985-12-31')).toEqual(['p3']);
      expect(await sorted('Patient?birthdate=eb1985-01-01')).toEqual(['p1']);
      expect(await sorted('Patient?birthdate=ap2001-02-01')).toEqual(['p3']);
      // Period 2021-01-01 .. 2021-01-31 (whole days): inside 2021-01, overlapping 2021-01-15, ending before 2021-02
      expect(await sorted('Observation?date=2021-01')).toEqual(['o2']);
      expect(await sorted('Observation?date=2021-01-15')).toEqual([]);
      expect(await sorted('Observation?date=ge2021-01-15')).toEqual(['o2', 'o3']);
      expect(await sorted('Observation?date=le2021-01-15')).toEqual(['o1', 'o2']);
      expect(await sorted('Observation?date=eb2021-02-01')).toEqual(['o1', 'o2']);
      // open-ended period: from 2020-02-01, never ends
      expect(await sorted('Condition?onset-date=gt2030')).toEqual(['c2']);
      expect(await sorted('Condition?onset-date=lt2019-06')).toEqual(['c1']);
      expect(await sorted('Encounter?date=ge2020-01-01T00:30:00Z&date=le2020-01-01T00:30:00Z')).toEqual(['e3']);
      expect(await sorted('Encounter?date=2020-01-01')).toEqual(['e1']);
      expect(await sorted('Encounter?date=ge2021')).toEqual(['e2']);
    });

    test('number and quantity: prefixes, precision for eq, units by system|code and by unit', async () => {
      expect(await sorted('Observation?value-quantity=100')).toEqual(['o1']);
      expect(await sorted('Observation?value-quantity=100.4')).toEqual([]);
      expect(await sorted('Observation?value-quantity=1e2')).toEqual(['o1']);
      expect(await sorted('Observation?value-quantity=5.4')).toEqual(['o3']);
      expect(await sorted('Observation?value-quantity=5')).toEqual(['o3']);
      expect(await sorted('Observation?value-quantity=gt5.4')).toEqual(['o1']);
      expect(await sorted('Observation?value-quantity=ge5.4')).toEqual(['o1', 'o3']);
      expect(await sorted('Observation?value-quantity=lt100')).toEqual(['o3']);
      expect(await sorted(`Observation?value-quantity=100|${UCUM}|mg/dL`)).toEqual(['o1']);
      expect(await sorted(`Observation?value-quantity=100|${UCUM}|mmol/L`)).toEqual([]);
      expect(await sorted('Observation?value-quantity=5.4||mmol/L')).toEqual(['o3']);
      expect(await sorted('Observation?value-quantity=ap99')).toEqual(['o1']);
      expect(await sorted('Observation?component-value-quantity=gt100')).toEqual(['o2']);
      expect(await sorted('Observation?combo-value-quantity=gt99')).toEqual(['o1', 'o2']);
      expect(await sorted('Encounter?length=60')).toEqual(['e1']);
    });

    test('composite: code-value-quantity, component-code-value-quantity, combo', async () => {
      expect(await sorted(`Observation?code-value-quantity=${LOINC}|2339-0$gt50`)).toEqual(['o1']);
      expect(await sorted('Observation?code-value-quantity=2339-0$lt10')).toEqual(['o3']);
      expect(await sorted(`Observation?component-code-value-quantity=${LOINC}|8480-6$gt120`)).toEqual(['o2']);
      // the same component must carry code and value: 8462-4 is 90, not above 120
      expect(await sorted(`Observation?component-code-value-quantity=${LOINC}|8462-4$gt120`)).toEqual([]);
      expect(await sorted('Observation?combo-code-value-quantity=8462-4$90')).toEqual(['o2']);
      expect(await sorted('Observation?code-value-string=1-1$pos')).toEqual(['o4']);
      // combo-code: code or component-code (an OR of alternatives, each of which can drive).
      expect(await sorted('Observation?combo-code=8480-6')).toEqual(['o2']);
      expect(await sorted(`Observation?combo-code=${LOINC}|2339-0`)).toEqual(['o1', 'o3']);
      expect(await sorted('Observation?combo-code=2339-0,8462-4&status=final')).toEqual(['o1', 'o2']);
      expect((await api.search('Observation?combo-code=2339-0,8462-4&_total=accurate')).total).toBe(3);
      expect((await api.search('Observation?combo-code=2339-0,8462-4&_summary=count')).total).toBe(3);
      expect(await sorted('Observation?combo-code=nothing')).toEqual([]);
      // Two values of a composite of root parameters: an OR of two pairs.
      expect(await sorted(`Observation?combo-code-value-quantity=8462-4$90,${LOINC}|2339-0$gt50`)).toEqual(['o1', 'o2']);
      expect(await sorted(`Observation?code-value-quantity=${LOINC}|2339-0$gt50,2339-0$lt10`)).toEqual(['o1', 'o3']);
      // Each code with its own value: o3's is under 10 but paired here with 1-1, and o1's is not under 10.
      expect(await sorted('Observation?code-value-quantity=1-1$lt10,2339-0$lt10')).toEqual(['o3']);
      expect(await sorted('Observation?code-value-quantity=1-1$lt10,2339-0$gt1000')).toEqual([]);
      expect((await api.search('Observation?code-value-quantity=2339-0$gt50,2339-0$lt10&_total=accurate')).total).toBe(2);
    });

    test('reference: Type/id, id, absolute URL, :Type, :identifier; uri and canonical with |version, :below, :above', async () => {
      expect(await sorted('Observation?subject=Patient/p1')).toEqual(['o1', 'o2']);
      expect(await sorted('Observation?patient=p2')).toEqual(['o3']);
      expect(await sorted(`Observation?subject=${t.fhir()}/Patient/p2`)).toEqual(['o3']);
      expect(await sorted('Observation?subject:Group=g1')).toEqual(['o4']);
      expect(await sorted('Observation?performer=Practitioner/dr1')).toEqual(['o1']);
      expect(await sorted('Patient?organization=org1')).toEqual(['p1']);
      expect(await sorted('ValueSet?url=http://example.org/fhir/ValueSet/a')).toEqual(['vs1']);
      expect(await sorted('ValueSet?url:below=http://example.org/fhir/ValueSet/')).toEqual(['vs1', 'vs2']);
      expect(await sorted('ValueSet?url:above=http://example.org/fhir/ValueSet/b/c/d')).toEqual(['vs2']);
      expect(await sorted('QuestionnaireResponse?questionnaire=http://example.org/Questionnaire/q')).toEqual(['qr1']);
      expect(await sorted('QuestionnaireResponse?questionnaire=http://example.org/Questionnaire/q|2.0')).toEqual(['qr1']);
      // `:below` on a canonical: every version, or a version and those below it (2.0 is below 2).
      const below = (v: string) => sorted(`QuestionnaireResponse?questionnaire:below=${encodeURIComponent(`http://example.org/Questionnaire/q${v}`)}`);
      expect(await below('')).toEqual(['qr1']);
      expect(await below('|2')).toEqual(['qr1']);
      expect(await below('|2.0')).toEqual(['qr1']);
      expect(await below('|1')).toEqual([]);
      expect(await below('|2.0.1')).toEqual([]);
      expect(await sorted('QuestionnaireResponse?questionnaire:below=http://example.org/Questionnaire/r,http://example.org/Questionnaire/q|2')).toEqual(['qr1']);
      expect((await expectOutcome(await api.get('QuestionnaireResponse?questionnaire:above=http://example.org/Questionnaire/q'), 400)).issue[0].expression).toEqual(['questionnaire:above']);
    });

    test(':missing on every kind of parameter', async () => {
      expect(await sorted('Patient?deceased:missing=true')).toEqual([]);
      expect(await sorted('Patient?death-date:missing=false')).toEqual(['p2']);
      expect(await sorted('Patient?organization:missing=true')).toEqual(['p2', 'p3']);
      expect(await sorted('Patient?address-city:missing=false')).toEqual(['p1']);
      expect(await sorted('Observation?value-quantity:missing=true')).toEqual(['o2', 'o4']);
      expect(await sorted('Observation?code-value-quantity:missing=false')).toEqual(['o1', 'o3']);
      expect(await sorted('Observation?patient:missing=true')).toEqual(['o4']);
    });

    test('chaining, several levels and with a type; _has, nested', async () => {
      expect(await sorted('Observation?subject:Patient.name=peter')).toEqual(['o1', 'o2']);
      expect(await sorted('Observation?patient.gender=female')).toEqual(['o3']);
      expect(await sorted('Observation?patient.organization.name=acme')).toEqual(['o1', 'o2']);
      expect(await sorted('Observation?patient.general-practitioner:Practitioner.family=house')).toEqual(['o1', 'o2']);
      expect(await sorted('Patient?_has:Observation:patient:code=2339-0')).toEqual(['p1', 'p2']);
      expect(await sorted('Patient?_has:Observation:patient:status=preliminary')).toEqual(['p2']);
      expect(await sorted('Patient?_has:Condition:subject:clinical-status=active&gender=male')).toEqual(['p1']);
      expect(await sorted('Practitioner?_has:Observation:performer:_has:Condition:subject:clinical-status=active').catch(() => 'refused')).toBe('refused');
      expect(await sorted('Organization?_has:Patient:organization:_has:Condition:patient:clinical-status=active')).toEqual(['org1']);
      await expectOutcome(await api.get('Observation?subject.nonsense=x', { Prefer: 'handling=strict' }), 400);
      await expectOutcome(await api.get('Patient?_has:Observation:nonsense:code=x', { Prefer: 'handling=strict' }), 400);
      await expectOutcome(await api.get('Patient?_has:Observation:code:code=x'), 400);
      // Errors inside a chain or `_has` name the parameter as written.
      for (const [q, headers] of [
        ['Observation?subject:Patient.birthdate=1974-13', {}], ['Patient?_has:Observation:patient:date=zz2020', {}],
        ['Observation?subject.nonsense=x', { Prefer: 'handling=strict' }], ['Observation?subject:Patient.organization.name:exactly=x', {}],
      ] as [string, Record<string, string>][]) {
        const body = await expectOutcome(await api.get(q, headers), 400);
        expect([q, body.issue[0].expression]).toEqual([q, [decodeURIComponent(q.split('?')[1]!.split('=')[0]!)]]);
      }
      // Lenient, an unknown part of a chain is ignored with a warning naming the whole parameter.
      const lenient = await api.search('Observation?subject.nonsense=x&_count=1');
      const warning = lenient.entry.find((e: Json) => e.search.mode === 'outcome').resource;
      expect(warning.issue[0].expression).toEqual(['subject.nonsense']);
    });

    test('_include, _include:iterate, _include=*, _revinclude, _revinclude=* (search mode include, no duplicates)', async () => {
      const modes = async (query: string) => {
        const b = await api.search(query);
        return (b.entry ?? []).map((e: Json) => `${e.search.mode}:${e.resource.resourceType}/${e.resource.id}`).sort();
      };
      expect(await modes('Observation?code=85354-9&_include=Observation:patient')).toEqual(['include:Patient/p1', 'match:Observation/o2']);
      expect(await modes('Observation?_id=o1,o2&_include=Observation:subject')).toEqual(['include:Patient/p1', 'match:Observation/o1', 'match:Observation/o2']);
      expect(await modes('Observation?_id=o1&_include=Observation:subject&_include:iterate=Patient:organization')).toEqual([
        'include:Organization/org1', 'include:Patient/p1', 'match:Observation/o1',
      ]);
      expect(await modes('Observation?_id=o1&_include=*')).toEqual(['include:Patient/p1', 'include:Practitioner/dr1', 'match:Observation/o1']);
      expect(await modes('Patient?_id=p2&_revinclude=Observation:patient&_revinclude=Condition:subject')).toEqual([
        'include:Condition/c2', 'include:Observation/o3', 'match:Patient/p2',
      ]);
      // Every resource that refers to the matches, through any reference parameter.
      expect(await modes('Patient?_id=p1&_revinclude=*')).toEqual([
        'include:Condition/c1', 'include:Encounter/e1', 'include:Observation/o1', 'include:Observation/o2', 'match:Patient/p1',
      ]);
      expect(await modes('Practitioner?_revinclude=*')).toEqual(['include:Observation/o1', 'include:Patient/p1', 'match:Practitioner/dr1']);
      expect(await modes('Organization?_revinclude=*&_revinclude:iterate=Observation:patient')).toEqual([
        'include:Observation/o1', 'include:Observation/o2', 'include:Patient/p1', 'match:Organization/org1',
      ]);
      await expectOutcome(await api.get('Observation?_include=Observation:nonsense'), 400);
      // Another source type follows nothing without :iterate: a 400 under strict handling (a warning otherwise).
      await expectOutcome(await api.get('Observation?_include=Patient:organization', { Prefer: 'handling=strict' }), 400);
    });

    test('_sort on any parameter but composites, near and combo-*, several keys, descending, with stable paging and _total', async () => {
      expect(await found('Patient?_sort=birthdate')).toEqual(['p1', 'p2', 'p3']);
      expect(await found('Patient?_sort=-birthdate')).toEqual(['p3', 'p2', 'p1']);
      expect(await found('Patient?_sort=family')).toEqual(['p1', 'p3', 'p2']);
      expect(await found('Patient?_sort=gender,-birthdate')).toEqual(['p3', 'p2', 'p1']);
      expect(await found('Encounter?_sort=-date')).toEqual(['e2', 'e1', 'e3']);
      expect(await found('Observation?_sort=value-quantity')).toEqual(['o3', 'o1', 'o2', 'o4']);
      const seen: string[] = [];
      let next: string | undefined = 'Observation?_sort=-date&_count=1&_total=accurate';
      while (next) {
        const b = await api.search(next);
        expect(b.total).toBe(4);
        seen.push(...b.entry.map((e: Json) => e.resource.id));
        next = b.link.find((l: Json) => l.relation === 'next')?.url;
      }
      expect(seen).toEqual(['o3', 'o2', 'o1', 'o4']);
      expect((await api.search('Observation?_total=accurate&_count=1&status=final')).total).toBe(3);
      expect((await api.search('Observation?_summary=count&status=final')).total).toBe(3);
      await expectOutcome(await api.get('Observation?_sort=code-value-quantity'), 400);
      // A token by its code alone (ties by id); a union parameter keeps no values of its own: a 400 naming its parts.
      expect(await found('Observation?_sort=code')).toEqual(['o4', 'o1', 'o3', 'o2']);
      expect(await found('Observation?_sort=-code')).toEqual(['o2', 'o1', 'o3', 'o4']);
      expect(await found('Observation?_sort=category')).toEqual(['o1', 'o3', 'o2', 'o4']);
      const combo = await expectOutcome(await api.get('Observation?_sort=combo-code'), 400, 'not-supported');
      expect(combo.issue[0].diagnostics).toBe("Cannot sort by 'combo-code', which is searched as any of 'code', 'component-code': sort by one of those");
      expect(combo.issue[0].expression).toEqual(['_sort']);
    });

    test('_summary and _elements subset the resources and tag them SUBSETTED', async () => {
      const [p] = (await api.search('Patient?_id=p1&_elements=gender')).entry.map((e: Json) => e.resource);
      expect(Object.keys(p).sort()).toEqual(['gender', 'id', 'meta', 'resourceType']);
      expect(p.meta.tag).toContainEqual(expect.objectContaining({ code: 'SUBSETTED' }));
      const [s] = (await api.search('Patient?_id=p1&_summary=true')).entry.map((e: Json) => e.resource);
      expect(s.name).toBeDefined();
      expect(s.generalPractitioner).toBeUndefined();
      const [o] = (await api.search('Observation?_id=o1&_summary=text')).entry.map((e: Json) => e.resource);
      expect(Object.keys(o).sort()).toEqual(['code', 'id', 'meta', 'resourceType', 'status']);
      // A choice element by its name (`deceased`: deceasedDateTime), never a longer name (`birth`); each
      // resource of the page by its own members.
      const entries = (await api.search('Patient?_id=p1,p2&_elements=deceased,birth&_sort=_id')).entry as Json[];
      const page = entries.filter((e) => e.search.mode === 'match').map((e) => Object.keys(e.resource).sort());
      expect(page).toEqual([['id', 'meta', 'resourceType'], ['deceasedDateTime', 'id', 'meta', 'resourceType']]);
      // `birth` is no element's name: a warning says it was ignored.
      expect(entries.find((e) => e.search.mode === 'outcome')!.resource.issue[0].diagnostics).toContain("'birth'");
      const [d] = (await api.search('Patient?_id=p2&_summary=true')).entry.map((e: Json) => e.resource);
      expect(d.deceasedDateTime).toBe('2020-01-01');
    });

    test(':in and :not-in through the terminology service (stored and core ValueSets)', async () => {
      await api.put200({
        resourceType: 'ValueSet', id: 'glucose-codes', status: 'active', url: 'http://example.org/fhir/ValueSet/glucose-codes',
        compose: { include: [{ system: LOINC, concept: [{ code: '2339-0' }, { code: '15074-8' }] }] },
      });
      expect(await sorted('Observation?code:in=http://example.org/fhir/ValueSet/glucose-codes')).toEqual(['o1', 'o3']);
      expect(await sorted('Observation?code:not-in=http://example.org/fhir/ValueSet/glucose-codes')).toEqual(['o2', 'o4']);
      expect(await sorted('Patient?gender:in=http://hl7.org/fhir/ValueSet/administrative-gender')).toEqual(['p1', 'p2', 'p3']);
      expect(await sorted('Condition?clinical-status:in=http://hl7.org/fhir/ValueSet/condition-clinical&clinical-status:not=resolved')).toEqual(['c1']);
      const unknown = await expectOutcome(await api.get('Observation?code:in=http://example.org/fhir/ValueSet/nope'), 400);
      expect(unknown.issue[0].expression).toEqual(['code:in']);
      expect(unknown.issue[0].diagnostics ?? unknown.issue[0].details?.text).toContain('nope');
      // A union (combo-code: code or component-code) as its members ORed; :not-in as none of them.
      const MIXED = 'http://example.org/fhir/ValueSet/mixed';
      await api.put200({ resourceType: 'ValueSet', id: 'mixed', status: 'active', url: MIXED, compose: { include: [{ system: LOINC, concept: [{ code: '2339-0' }, { code: '8480-6' }] }] } });
      expect(await sorted(`Observation?combo-code:in=${MIXED}`)).toEqual(['o1', 'o2', 'o3']);
      expect(await sorted(`Observation?combo-code:not-in=${MIXED}`)).toEqual(['o4']);
      expect(await sorted(`Observation?code:not-in=${MIXED}`)).toEqual(['o2', 'o4']);
      expect(await sorted(`Observation?combo-code:in=${MIXED}&combo-code:not-in=http://example.org/fhir/ValueSet/glucose-codes`)).toEqual(['o2']);
      const union = await expectOutcome(await api.get('Observation?combo-code:in=http://example.org/fhir/ValueSet/nope', { Prefer: 'handling=strict' }), 400);
      expect(union.issue[0].expression).toEqual(['combo-code:in']);
      expect(union.issue[0].diagnostics).toContain('nope');
    });

    test(':below and :above through the code system\'s subsumption (stored and core CodeSystems)', async () => {
      const BODY = 'http://example.org/fhir/CodeSystem/body';
      await api.put200({
        resourceType: 'CodeSystem', id: 'body', url: BODY, status: 'active', content: 'complete', hierarchyMeaning: 'is-a',
        concept: [{ code: 'limb', concept: [{ code: 'arm', concept: [{ code: 'hand' }] }, { code: 'leg' }] }, { code: 'head' }],
      });
      for (const [id, code] of [['b-limb', 'limb'], ['b-arm', 'arm'], ['b-hand', 'hand'], ['b-leg', 'leg'], ['b-head', 'head']]) {
        await api.put200({ resourceType: 'BodyStructure', id, patient: { reference: 'Patient/p3' }, location: { coding: [{ system: BODY, code }] } });
      }
      expect(await sorted(`BodyStructure?location:below=${BODY}|limb`)).toEqual(['b-arm', 'b-hand', 'b-leg', 'b-limb']);
      expect(await sorted(`BodyStructure?location:below=${BODY}|arm,${BODY}|head`)).toEqual(['b-arm', 'b-hand', 'b-head']);
      expect(await sorted(`BodyStructure?location:above=${BODY}|hand`)).toEqual(['b-arm', 'b-hand', 'b-limb']);
      expect(await sorted(`BodyStructure?location:above=${BODY}|head`)).toEqual(['b-head']);
      // The R4 core condition-clinical hierarchy: active > recurrence, relapse; inactive > remission, resolved.
      const CLIN_CS = 'http://terminology.hl7.org/CodeSystem/condition-clinical';
      expect(await sorted(`Condition?clinical-status:below=${CLIN_CS}|active`)).toEqual(['c1']);
      expect(await sorted(`Condition?clinical-status:below=${CLIN_CS}|inactive`)).toEqual(['c2']);
      expect(await sorted(`Condition?clinical-status:above=${CLIN_CS}|resolved`)).toEqual(['c2']);
      for (const [q, expr] of [['BodyStructure?location:below=limb', 'location:below'], ['BodyStructure?location:below=http://example.org/nope|x', 'location:below'],
        ['Observation?subject:Patient.gender:below=x|y', 'subject:Patient.gender:below'], ['Observation?combo-code:above=http://example.org/nope|x', 'combo-code:above']]) {
        const body = await expectOutcome(await api.get(q), 400);
        expect(body.issue[0].expression).toEqual([expr]);
      }
      // A union (combo-code: code or component-code) as its members ORed. This test's Observation is deleted at its end.
      await api.put200({ resourceType: 'Observation', id: 'o-body', status: 'final', code: { coding: [{ system: BODY, code: 'head' }] }, component: [{ code: { coding: [{ system: BODY, code: 'hand' }] } }] });
      expect(await sorted(`Observation?combo-code:below=${BODY}|arm`)).toEqual(['o-body']);
      expect(await sorted(`Observation?code:below=${BODY}|arm`)).toEqual([]);
      expect(await sorted(`Observation?combo-code:above=${BODY}|hand`)).toEqual(['o-body']);
      expect(await sorted(`Observation?combo-code:above=${BODY}|limb`)).toEqual([]);
      expect((await api.del('Observation/o-body')).ok).toBe(true);
    });

    test(':in, :not-in, :below and :above inside chains and _has, into contained resources too', async () => {
      const RX = 'http://www.nlm.nih.gov/research/umls/rxnorm';
      const MEDS = 'http://example.org/fhir/ValueSet/chained-meds';
      await api.put200({ resourceType: 'ValueSet', id: 'chained-meds', status: 'active', url: MEDS, compose: { include: [{ system: RX, concept: [{ code: '111' }] }] } });
      await api.put200({ resourceType: 'ValueSet', id: 'bp', status: 'active', url: 'http://example.org/fhir/ValueSet/bp', compose: { include: [{ system: LOINC, concept: [{ code: '85354-9' }] }] } });
      await api.put200({ resourceType: 'Medication', id: 'med1', code: { coding: [{ system: RX, code: '111' }] } });
      await api.put200({ resourceType: 'Medication', id: 'med2', code: { coding: [{ system: RX, code: '222' }] } });
      const request = (id: string, medication: Json, more: Json = {}) =>
        api.put200({ resourceType: 'MedicationRequest', id, status: 'active', intent: 'order', subject: { reference: 'Patient/p3' }, medicationReference: medication, ...more });
      await request('mr-stored', { reference: 'Medication/med1' });
      await request('mr-other', { reference: 'Medication/med2' });
      await request('mr-contained', { reference: '#m' }, { contained: [{ resourceType: 'Medication', id: 'm', code: { coding: [{ system: RX, code: '111' }] } }] });
      const GENDERS = 'http://hl7.org/fhir/ValueSet/administrative-gender';
      expect(await sorted(`Observation?subject:Patient.gender:in=${GENDERS}`)).toEqual(['o1', 'o2', 'o3']);
      expect(await sorted(`Observation?subject:Patient.gender:not-in=${GENDERS}`)).toEqual([]);
      expect(await sorted(`MedicationRequest?medication.code:in=${MEDS}`)).toEqual(['mr-contained', 'mr-stored']);
      expect(await sorted(`MedicationRequest?medication.code:not-in=${MEDS}`)).toEqual(['mr-other']);
      expect(await sorted('Patient?_has:Observation:subject:code:in=http://example.org/fhir/ValueSet/bp')).toEqual(['p1']);
      expect(await sorted(`Patient?_has:Condition:subject:clinical-status:below=${CLIN}|inactive`)).toEqual(['p2']);
      expect(await sorted(`Patient?_has:Condition:subject:clinical-status:above=${CLIN}|recurrence`)).toEqual(['p1']);
      // Two levels: Encounters of patients with an active (or recurring, relapsed) Condition.
      expect(await sorted(`Encounter?subject:Patient._has:Condition:subject:clinical-status:below=${CLIN}|active`)).toEqual(['e1']);
      // Without :Patient, on the chain's targets a Condition's subject can refer to (Patient and Group, not
      // Observation's Device or Location), as a chained name on the targets that have it.
      expect(await sorted(`Encounter?subject._has:Condition:subject:clinical-status:below=${CLIN}|active`)).toEqual(['e1']);
      const viaPatient = await sorted(`Observation?subject:Patient._has:Condition:subject:clinical-status:below=${CLIN}|active`);
      expect(viaPatient.length).toBeGreaterThan(0);
      expect(await sorted(`Observation?subject._has:Condition:subject:clinical-status:below=${CLIN}|active`)).toEqual(viaPatient);
      expect((await expectOutcome(await api.get(`Observation?subject:Device._has:Condition:subject:clinical-status=${CLIN}|active`), 400)).issue[0].diagnostics).toContain('does not refer to Device');
      expect(await sorted(`Observation?_filter=${encodeURIComponent(`subject.gender in ${GENDERS} and subject.gender eq female`)}`)).toEqual(['o3']);
      expect(await sorted(`MedicationRequest?_filter=${encodeURIComponent(`medication.code ni ${MEDS}`)}`)).toEqual(['mr-other']);
      // An unknown ValueSet is a 400 naming the whole parameter (or _filter).
      for (const [q, expr] of [
        ['Observation?subject:Patient.gender:in=http://example.org/nope', 'subject:Patient.gender:in'],
        ['Patient?_has:Observation:subject:code:not-in=http://example.org/nope', '_has:Observation:subject:code:not-in'],
        [`Observation?_filter=${encodeURIComponent('subject.gender in http://example.org/nope')}`, '_filter'],
      ]) {
        const body = await expectOutcome(await api.get(q), 400);
        expect(body.issue[0].expression).toEqual([expr]);
        expect(body.issue[0].diagnostics ?? body.issue[0].details?.text).toContain('nope');
      }
    });

    test('reference :below and :above walk a hierarchy (Location.partOf, Organization.partOf)', async () => {
      // Resources of this test alone, deleted at its end (the other tests count Encounters and Patients).
      const created: string[] = [];
      const put = async (r: Json) => {
        created.push(`${r.resourceType}/${r.id}`);
        await api.put200(r);
      };
      const location = (id: string, parent?: string) => put({ resourceType: 'Location', id, name: id, ...(parent ? { partOf: { reference: `Location/${parent}` } } : {}) });
      const encounter = (id: string, at: string, patient: string) => put({
        resourceType: 'Encounter', id, status: 'finished', class: { code: 'AMB' }, subject: { reference: `Patient/${patient}` }, location: [{ location: { reference: `Location/${at}` } }],
      });
      try {
        await location('hosp');
        await location('ward-a', 'hosp');
        await location('room-a1', 'ward-a');
        await location('ward-b', 'hosp');
        await location('elsewhere');
        // A cycle ends the walk where it started.
        await location('cyc1', 'cyc2');
        await location('cyc2', 'cyc1');
        await put({ resourceType: 'Organization', id: 'network', name: 'Network' });
        await put({ resourceType: 'Organization', id: 'clinic', name: 'Clinic', partOf: { reference: 'Organization/network' } });
        for (const id of ['h1', 'h2', 'h3']) await put({ resourceType: 'Patient', id, ...(id === 'h1' ? { managingOrganization: { reference: 'Organization/clinic' } } : {}) });
        await encounter('at-hosp', 'hosp', 'h1');
        await encounter('at-room', 'room-a1', 'h2');
        await encounter('at-ward-b', 'ward-b', 'h2');
        await encounter('at-elsewhere', 'elsewhere', 'h3');
        await encounter('at-cyc1', 'cyc1', 'h3');
        expect(await sorted('Encounter?location:below=Location/hosp')).toEqual(['at-hosp', 'at-room', 'at-ward-b']);
        expect(await sorted('Encounter?location:below=ward-a')).toEqual(['at-room']);
        expect(await sorted('Encounter?location:below=hosp,elsewhere')).toEqual(['at-elsewhere', 'at-hosp', 'at-room', 'at-ward-b']);
        expect(await sorted('Encounter?location:above=room-a1')).toEqual(['at-hosp', 'at-room']);
        expect(await sorted('Encounter?location:above=ward-b')).toEqual(['at-hosp', 'at-ward-b']);
        expect(await sorted('Encounter?location:below=cyc2')).toEqual(['at-cyc1']);
        expect(await sorted('Encounter?location:above=cyc2')).toEqual(['at-cyc1']);
        expect(await sorted('Location?partof:below=hosp')).toEqual(['room-a1', 'ward-a', 'ward-b']);
        expect(await sorted('Encounter?location:below=nowhere')).toEqual([]);
        // Inside `_has` and a chain, and counted.
        expect(await sorted('Patient?_has:Encounter:subject:location:below=ward-a')).toEqual(['h2']);
        expect(await sorted('Encounter?subject:Patient._has:Encounter:subject:location:below=ward-a')).toEqual(['at-room', 'at-ward-b']);
        expect((await api.search('Encounter?location:below=hosp&_summary=count')).total).toBe(3);
        // Organizations: h1's clinic is part of a network.
        expect(await sorted('Patient?organization:below=network')).toEqual(['h1']);
        expect(await sorted('Patient?organization:above=network')).toEqual([]);
        expect(await sorted('Patient?organization:above=clinic')).toEqual(['h1']);
        for (const [q, expr] of [
          ['Encounter?location:above=http://example.org/fhir/Location/hosp', 'location:above'],
          ['Encounter?location:below=hosp,http://example.org/fhir/Location/hosp', 'location:below'],
          ['Encounter?location:below=Patient/p1', 'location:below'],
          ['Encounter?subject:below=p1', 'subject:below'],
          ['Patient?_has:Encounter:subject:location:above=Patient/p1', '_has:Encounter:subject:location:above'],
        ]) {
          const body = await expectOutcome(await api.get(q), 400);
          expect([q, body.issue[0].expression]).toEqual([q, [expr]]);
        }
        // The walk reads Locations: a token that may not search them is refused.
        const encountersOnly = fhirClient(t, await t.tokenFor('t1', ['system/Encounter.rs']));
        await expectOutcome(await encountersOnly.get('Encounter?location:below=hosp'), 403);
        const cap = await (await api.get('metadata')).json();
        const encounterCap = cap.rest[0].resource.find((r: Json) => r.type === 'Encounter');
        expect(encounterCap.searchParam.find((p: Json) => p.name === 'location').documentation).toContain(':below');
      } finally {
        for (const ref of created.reverse()) await api.call('DELETE', ref);
      }
    });

    test('malformed values are a 400 naming the parameter', async () => {
      for (const q of ['Patient?birthdate=1974-13', 'Patient?birthdate=zz1974', 'Observation?value-quantity=abc', 'Patient?gender:exact=male',
        'Observation?code-value-quantity=2339-0', 'Patient?name:missing=yes', 'Patient?_sort=nonsense', 'Observation?subject:Nonsense=x']) {
        const body = await expectOutcome(await api.get(q), 400);
        expect(body.issue[0].expression[0]).toBe(decodeURIComponent(q.split('?')[1]!.split('=')[0]!));
      }
    });

    test('compartment search Patient/{id}/{type} and $everything with _type, _since, _count paging', async () => {
      expect(await sorted('Patient/p1/Observation')).toEqual(['o1', 'o2']);
      expect(await sorted('Patient/p1/Observation?category=laboratory')).toEqual(['o1']);
      expect(await sorted('Patient/p2/Condition')).toEqual(['c2']);
      const all = async (first: string) => {
        const seen: string[] = [];
        let next: string | undefined = first;
        while (next) {
          const b = await api.search(next);
          seen.push(...(b.entry ?? []).map((e: Json) => `${e.search.mode === 'include' ? '+' : ''}${e.resource.resourceType}/${e.resource.id}`));
          next = b.link.find((l: Json) => l.relation === 'next')?.url;
        }
        return seen;
      };
      const everything = await all('Patient/p1/$everything');
      expect(everything.filter((x) => !x.startsWith('+')).sort()).toEqual(['Condition/c1', 'Encounter/e1', 'Observation/o1', 'Observation/o2', 'Patient/p1']);
      expect(everything.filter((x) => x.startsWith('+')).sort()).toEqual(['+Organization/org1', '+Practitioner/dr1']);
      const paged = (await all('Patient/p1/$everything?_count=2')).filter((x) => !x.startsWith('+'));
      expect(paged.sort()).toEqual(['Condition/c1', 'Encounter/e1', 'Observation/o1', 'Observation/o2', 'Patient/p1']);
      expect((await all('Patient/p1/$everything?_type=Observation,Condition')).sort()).toEqual(['Condition/c1', 'Observation/o1', 'Observation/o2']);
      expect(await all('Patient/p1/$everything?_since=2030-01-01')).toEqual([]);
      const typeLevel = (await all('Patient/$everything?_type=Patient,Condition&_count=1')).sort();
      expect(typeLevel).toEqual(['Condition/c1', 'Condition/c2', 'Patient/p1', 'Patient/p2', 'Patient/p3']);
      await expectOutcome(await api.get('Patient/nope/$everything'), 404);
    });

    test('$everything pages after the first link themselves with their _cursor, and the first page', async () => {
      const matches = (b: Json) => b.entry.map((e: Json) => `${e.search.mode}:${e.resource.resourceType}/${e.resource.id}`);
      for (const path of ['Patient/p1/$everything?_count=2', 'Patient/$everything?_type=Patient,Condition&_count=1']) {
        const first = await api.search(path);
        expect(link(first, 'first')).toBeUndefined();
        const next = link(first, 'next')!;
        const second = await api.search(next);
        expect(link(second, 'self')).toBe(next);
        expect(link(second, 'first')).toBe(link(first, 'self'));
        expect(matches(await api.search(link(second, 'self')!))).toEqual(matches(second));
      }
    });

    test('$everything includes what the patient\'s resources refer to, but no other patient (a Group\'s members)', async () => {
      await api.put200({ resourceType: 'Practitioner', id: 'dr-g', name: [{ family: 'Member' }] });
      await api.put200({ resourceType: 'Group', id: 'g-every', type: 'person', actual: true, member: ['p1', 'p2', 'p3'].map((id) => ({ entity: { reference: `Patient/${id}` } })).concat([{ entity: { reference: 'Practitioner/dr-g' } }]) });
      const bundle = await api.search('Patient/p1/$everything?_count=1000');
      const entries = bundle.entry.map((e: Json) => `${e.search.mode === 'include' ? '+' : ''}${e.resource.resourceType}/${e.resource.id}`);
      expect(entries).toContain('Group/g-every');
      expect(entries).toContain('+Practitioner/dr-g');
      expect(entries.filter((x: string) => x.includes('Patient/'))).toEqual(['Patient/p1']);
      expect((await api.del('Group/g-every')).status).toBe(200);
    });

    test('conditional update uses the same search', async () => {
      const res = await api.put(`Patient?family=Chalmerson&birthdate=2001`, { resourceType: 'Patient', name: [{ family: 'Chalmerson', given: ['Anne'] }], birthDate: '2001-02-03', gender: 'female' });
      expect(res.status).toBe(200);
      expect((await res.json()).id).toBe('p3');
      expect(await sorted('Patient?given=anne')).toEqual(['p3']);
    });

    test('chains and _has see only live resources, on either side of the reference', async () => {
      for (const id of ['px', 'py']) await api.put200({ resourceType: 'Patient', id, name: [{ family: 'Zebedee' }] });
      await api.put200({ resourceType: 'Observation', id: 'ox1', status: 'final', subject: { reference: 'Patient/px' }, code: { coding: [{ system: 'urn:t', code: 'del-1' }] } });
      await api.put200({ resourceType: 'Observation', id: 'ox2', status: 'final', subject: { reference: 'Patient/py' }, code: { coding: [{ system: 'urn:t', code: 'del-1' }] } });
      expect(await sorted('Patient?_has:Observation:patient:code=del-1')).toEqual(['px', 'py']);
      expect(await sorted('Observation?subject:Patient.family=zebedee')).toEqual(['ox1', 'ox2']);
      expect(await sorted('Observation?subject:Patient.family=zebedee&code=urn:t|del-1')).toEqual(['ox1', 'ox2']);
      expect((await api.del('Observation/ox1')).status).toBe(200);
      expect(await sorted('Patient?_has:Observation:patient:code=del-1')).toEqual(['py']);
      expect((await api.del('Patient/py')).status).toBe(200);
      expect(await sorted('Patient?_has:Observation:patient:code=del-1')).toEqual([]);
      expect(await sorted('Observation?subject:Patient.family=zebedee')).toEqual([]);
      expect(await sorted('Observation?code=urn:t|del-1')).toEqual(['ox2']);
      // Counts too (one condition, or the compartment alone, are counted on the index rows).
      expect((await api.search('Observation?code=urn:t|del-1&_summary=count')).total).toBe(1);
      expect((await api.search('Observation?code=urn:t|del-1,urn:t|nope&_total=accurate')).total).toBe(1);
      expect((await api.search('Patient/px/Observation?_summary=count')).total).toBe(0);
    });

    test('sorted, driven searches page every match once, in order: ties by id, resources without the key last', async () => {
      // 23 Encounters of one patient: dates with ties (the threshold of a page often falls among
      // equals), some without a period (sorted last either way), and a period whose end comes later
      // than its start's rank suggests (the key is the highest end, descending; the lowest start, ascending).
      const encounters: { id: string; start?: number; end?: number }[] = [];
      for (let i = 0; i < 23; i++) {
        const id = `se-${String((i * 11) % 23).padStart(2, '0')}`;
        const day = i % 5 === 4 ? undefined : 1 + (i % 4) * 2;
        const period = day === undefined ? undefined : { start: `2023-03-${String(day).padStart(2, '0')}T10:00:00Z`, end: `2023-03-${String(i === 7 ? 28 : day).padStart(2, '0')}T11:00:00Z` };
        await api.put200({ resourceType: 'Encounter', id, status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/sorted-p' }, ...(period && { period }) });
        encounters.push({ id, ...(period && { start: Date.parse(period.start), end: Date.parse(period.end) }) });
      }
      /** The ids by a key (undefined last), descending or not, ties by id ascending or (`idDown`) descending. */
      const byKey = (key: 'start' | 'end', descending: boolean, idDown = false) => [...encounters]
        .sort((a, b) => {
          const [x, y] = [a[key], b[key]];
          const tie = (a.id < b.id) === idDown ? 1 : -1;
          if (x === undefined || y === undefined) return (x === undefined ? 1 : 0) - (y === undefined ? 1 : 0) || tie;
          return (descending ? y - x : x - y) || tie;
        })
        .map((x) => x.id);
      const paged = (query: string) => matchesOfAllPages(api, query);
      const down = byKey('end', true);
      for (const count of [1, 3, 4, 7, 50]) {
        expect(await paged(`Encounter?subject=Patient/sorted-p&_sort=-date&_count=${count}`)).toEqual(down);
        expect(await paged(`Encounter?subject=Patient/sorted-p&_sort=date&_count=${count}`)).toEqual(byKey('start', false));
        expect(await paged(`Patient/sorted-p/Encounter?_sort=-date&_count=${count}`)).toEqual(down);
      }
      // A second key orders the ties of the first, before the id.
      expect(await paged('Encounter?subject=Patient/sorted-p&_sort=-date,-_id&_count=4')).toEqual(byKey('end', true, true));
      // Driven by the sort's own parameter: March 2023 holds every Encounter with a period.
      const dated = new Set(encounters.filter((e) => e.end !== undefined).map((e) => e.id));
      expect(await paged('Encounter?date=2023-03&_sort=-date&_count=3')).toEqual(down.filter((id) => dated.has(id)));
    });

    test('a count of one code counts each resource once, whichever systems carry the code', async () => {
      const coded = (id: string, ...codings: [string, string][]) =>
        api.put200({ resourceType: 'Observation', id, status: 'final', code: { coding: codings.map(([system, code]) => ({ system, code })) } });
      await coded('oc1', ['urn:sys:a', 'twice'], ['urn:sys:a', 'twice']);
      await coded('oc2', ['urn:sys:a', 'twice'], ['urn:sys:b', 'twice']);
      await coded('oc3', ['urn:sys:b', 'twice']);
      await coded('oc4', ['urn:sys:c', 'once']);
      const total = async (q: string) => (await api.search(`${q}&_total=accurate&_count=1`)).total;
      expect(await total('Observation?code=twice')).toBe(3);
      expect(await total('Observation?code=urn:sys:a|twice')).toBe(2);
      expect(await total('Observation?code=urn:sys:b|twice')).toBe(2);
      expect(await total('Observation?code=once')).toBe(1);
      expect((await api.search('Observation?code=twice&_summary=count')).total).toBe(3);
      // A code of one system only, then a second system for it: counted once as well.
      await coded('oc5', ['urn:sys:d', 'later']);
      expect(await total('Observation?code=later')).toBe(1);
      await coded('oc5', ['urn:sys:d', 'later'], ['urn:sys:e', 'later']);
      expect(await total('Observation?code=later')).toBe(1);
      // References: one target type, or an id that two types share.
      await api.put200({ resourceType: 'Observation', id: 'oc6', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/shared' }, focus: [{ reference: 'Patient/shared' }, { reference: 'Group/shared' }] });
      expect(await total('Observation?focus=shared')).toBe(1);
      expect(await total('Observation?focus=Patient/shared')).toBe(1);
      for (const id of ['oc1', 'oc2', 'oc3', 'oc4', 'oc5', 'oc6']) expect((await api.del(`Observation/${id}`)).status).toBe(200);
      expect(await total('Observation?code=twice')).toBe(0);
    });
  });
});
