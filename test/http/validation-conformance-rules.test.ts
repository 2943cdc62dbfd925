/**
 * Rules R4 states outside its invariants, as HL7's validator checks them (its test cases vs-bad-code, vs-bad-props,
 * obs-temp-code2, cs-bad-props, supplement-2, bundle-id-2..4, sp-diff-type, sp-diff-base, capstmt, allergy):
 * SNOMED CT concept ids (in Codings and Quantities), a required code given by extensions alone, a CodeSystem's supplements and properties, a Bundle's absolute fullUrls
 * (bundle-duplicate-id), paging links, search results and a document's references
 * (bundle-document-versioned-references-bad), a profile's differential paths (obs-mz), a SearchParameter derived from an R4 one, a CapabilityStatement's search parameter types. Each
 * error refuses the write (POST and PUT, nothing written) and is an error in `$validate`, at the element;
 * on both databases.
 */
import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const SCT = 'http://snomed.info/sct';
const observation = (code: string): Json => ({ resourceType: 'Observation', status: 'final', code: { coding: [{ system: SCT, code }] } });
const codeSystem = (extra: Json): Json => ({ resourceType: 'CodeSystem', url: 'http://example.org/cs/test', status: 'active', content: 'complete', ...extra });
const searchParameter = (extra: Json): Json => ({
  resourceType: 'SearchParameter', url: 'http://example.org/SearchParameter/org-name', name: 'OrgName', status: 'active', description: 'Name of the organization',
  code: 'org-name', base: ['Organization'], type: 'string', expression: 'Organization.name', derivedFrom: 'http://hl7.org/fhir/SearchParameter/Organization-name', ...extra,
});

/** `severity code expression` of each issue `$validate` gives (the all-clear information left out). */
async function validated(api: FhirClient, resource: Json): Promise<string[]> {
  const res = await api.post(`${resource.resourceType}/$validate`, resource);
  expect(res.status).toBe(200);
  return (((await res.json()) as Json).issue as Json[]).filter((i) => i.severity !== 'information').map((i) => `${i.severity} ${i.code} ${i.expression[0]}`).sort();
}

await eachStore((kind, fresh) => {
  describe(`R4's rules outside its invariants on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeEach(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterEach(() => t.close());

    /** The expressions of the 422's issues, for a POST and a PUT of `resource`; `$validate` must name the same errors. */
    async function refused(resource: Json): Promise<string[]> {
      const post = await expectOutcome(await api.post(resource.resourceType, resource), 422);
      const put = await expectOutcome(await api.put(`${resource.resourceType}/x1`, { ...resource, id: 'x1' }), 422);
      const at = (o: Json) => (o.issue as Json[]).filter((i) => i.severity === 'error').map((i) => `${i.code} ${i.expression[0]}`).sort();
      expect(at(put)).toEqual(at(post));
      expect((await validated(api, resource)).filter((i) => i.startsWith('error')).map((i) => i.slice(6))).toEqual(at(post));
      expect(await countVersions(t)).toBe(0);
      return at(post);
    }

    test('a SNOMED CT code that can be no concept id is refused at its code; SCTIDs of any edition and expressions are not', async () => {
      expect(await refused(observation('276885007x'))).toEqual(['code-invalid Observation.code.coding[0].code']);
      expect(await refused(observation('1'))).toEqual(['code-invalid Observation.code.coding[0].code']);
      expect(await refused(observation('T-15460'))).toEqual(['code-invalid Observation.code.coding[0].code']);
      // A wrong check digit (276885007 with its last digit changed), and a description's id (partition 01).
      expect(await refused(observation('276885008'))).toEqual(['code-invalid Observation.code.coding[0].code']);
      expect(await refused(observation('2154512019'))).toEqual(['code-invalid Observation.code.coding[0].code']);
      const text = ((await expectOutcome(await api.post('Observation', observation('276885008')), 422)).issue as Json[])[0]!.details.text;
      expect(text).toContain('check digit');
      // The International Edition, the UK extension (long form, partition 10), a post-coordinated expression.
      // (Not a vital sign's code, such as 276885007 Core body temperature: that one asks for R4's bodytemp profile.)
      for (const code of ['386661006', '35901911000001104', '71341001:272741003=7771000']) expect((await api.post('Observation', observation(code))).status).toBe(201);
    });

    test('a code bound required given by its extensions alone (a data-absent-reason) is refused; a cross-version code is a warning; another extension is none', async () => {
      // HL7's test case allergy: AllergyIntolerance.category (required: food, medication, environment, biologic).
      const absent = { extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/data-absent-reason', valueCode: 'unknown' }] };
      const allergy = (extra: Json): Json => ({
        resourceType: 'AllergyIntolerance', patient: { reference: 'Patient/p1' }, code: { text: 'peanuts' },
        clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical', code: 'active' }] }, ...extra,
      });
      expect(await refused(allergy({ _category: [absent] }))).toEqual(['code-invalid AllergyIntolerance.category[0]']);
      expect(await refused(allergy({ category: ['food', null], _category: [null, absent] }))).toEqual(['code-invalid AllergyIntolerance.category[1]']);
      // A single code: AllergyIntolerance.criticality (required).
      expect(await refused(allergy({ _criticality: absent }))).toEqual(['code-invalid AllergyIntolerance.criticality']);
      const text = ((await expectOutcome(await api.post('AllergyIntolerance', allergy({ _category: [absent] })), 422)).issue as Json[])[0]!.details.text;
      expect(text).toContain('http://hl7.org/fhir/ValueSet/allergy-intolerance-category');
      // The code of another FHIR version carried by its cross-version extension: a warning, the write kept.
      const r5 = { extension: [{ url: 'http://hl7.org/fhir/5.0/StructureDefinition/extension-AllergyIntolerance.criticality', valueCode: 'unable-to-assess' }] };
      expect(await validated(api, allergy({ _criticality: r5 }))).toEqual(['warning code-invalid AllergyIntolerance.criticality']);
      expect((await api.post('AllergyIntolerance', allergy({ _criticality: r5 }))).status).toBe(201);
      // An element left out, or with its code beside the extension, asks for nothing; nor does a language (a preferred binding).
      expect((await api.post('AllergyIntolerance', allergy({ category: ['food'], _category: [absent] }))).status).toBe(201);
      expect((await api.post('Patient', { resourceType: 'Patient', _language: absent })).status).toBe(201);
      // Another extension alone says nothing is missing: it carries something of its own (the Subscriptions backport's
      // payload content on a websocket channel's payload, which needs no MIME type), and is no error.
      const own = { extension: [{ url: 'http://example.org/fhir/StructureDefinition/criticality-note', valueString: 'asked, not assessed' }] };
      expect((await api.post('AllergyIntolerance', allergy({ _criticality: own }))).status).toBe(201);
    });

    test("a Quantity's SNOMED CT code (a unit of presentation) is held to a concept id as a Coding's is", async () => {
      const quantity = (code: string) => ({ value: 10, unit: 'tablet', system: SCT, code });
      const dispense = (code: string, dose = '732936001'): Json => ({
        resourceType: 'MedicationDispense', status: 'completed',
        medicationCodeableConcept: { coding: [{ system: 'http://www.nlm.nih.gov/research/umls/rxnorm', code: '313782' }] },
        quantity: quantity(code),
        dosageInstruction: [{ text: 'one tablet a day', doseAndRate: [{ doseQuantity: { ...quantity(dose), value: 1 } }] }],
      });
      // 732936001 (Tablet) with its check digit changed, in the quantity and in a dose.
      expect(await refused(dispense('732936002'))).toEqual(['code-invalid MedicationDispense.quantity.code']);
      expect(await refused(dispense('732936001', '732936002'))).toEqual(['code-invalid MedicationDispense.dosageInstruction[0].doseAndRate[0].dose.ofType(Quantity).code']);
      expect(await refused(dispense('T-15460'))).toEqual(['code-invalid MedicationDispense.quantity.code']);
      const text = ((await expectOutcome(await api.post('MedicationDispense', dispense('732936002')), 422)).issue as Json[])[0]!.details.text;
      expect(text).toContain('check digit');
      expect((await api.post('MedicationDispense', dispense('732936001'))).status).toBe(201);
    });

    test("a ValueSet's SNOMED CT include lists concept ids, and filters on the concept name concept ids", async () => {
      const vs = { resourceType: 'ValueSet', status: 'active', compose: { include: [{ system: SCT, concept: [{ code: '1' }, { code: '276885007' }] }, { system: 'http://example.org/cs', concept: [{ code: '1' }] }] } };
      expect(await refused(vs)).toEqual(['code-invalid ValueSet.compose.include[0].concept[0].code']);
      // A filter on the concept names concepts; a refinement (ECL, other properties) is not judged.
      const filtered = (filter: Json[]): Json => ({ resourceType: 'ValueSet', status: 'active', compose: { include: [{ system: SCT, filter }] } });
      expect(await refused(filtered([
        { property: 'concept', op: 'is-a', value: 'something' }, { property: 'concept', op: 'in', value: '276885007, 12' }, { property: 'concept', op: 'descendent-of', value: '276885007' },
      ]))).toEqual(['code-invalid ValueSet.compose.include[0].filter[0].value', 'code-invalid ValueSet.compose.include[0].filter[1].value']);
      expect(await validated(api, filtered([{ property: 'constraint', op: '=', value: '<< 276885007' }, { property: 'concept', op: 'regex', value: '27.*' }, { property: '116676008', op: '=', value: '72704001' }]))).toEqual([]);
    });

    test("a canonical resource's urn:uuid url holds a UUID; capitals are a warning; a transaction's temporary fullUrls are not held to it", async () => {
      const vs = (url: string): Json => ({ resourceType: 'ValueSet', url, status: 'active' });
      expect(await refused(vs('urn:uuid:6a2ee390-978e-42c6-8f88-c17dff3bd8a'))).toEqual(['value ValueSet.url']);
      expect(await refused({ resourceType: 'ValueSet', status: 'active', compose: { include: [{ system: 'urn:uuid:not-a-uuid' }] } })).toEqual(['value ValueSet.compose.include[0].system']);
      expect(await validated(api, vs('urn:uuid:6A2EE390-978E-42C6-8F88-C17DFF3BD8A1'))).toEqual(['warning value ValueSet.url']);
      expect((await api.post('ValueSet', vs('urn:uuid:6A2EE390-978E-42C6-8F88-C17DFF3BD8A1'))).status).toBe(201);
      const tx = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: [
        { fullUrl: 'urn:uuid:patient-1', resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } },
        { resource: { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: 'urn:uuid:patient-1' } }, request: { method: 'POST', url: 'Observation' } },
      ] });
      expect(tx.status).toBe(200);
    });

    test('a transaction entry with a SNOMED CT code that is no concept id writes nothing', async () => {
      const outcome = await expectOutcome(await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: [
        { resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } },
        { resource: observation('276885007x'), request: { method: 'POST', url: 'Observation' } },
      ] }), 422);
      expect((outcome.issue as Json[]).map((i) => i.expression[0])).toEqual(['Bundle.entry[1].resource.code.coding[0].code']);
      expect(await countVersions(t)).toBe(0);
    });

    test("a CodeSystem supplement's content is 'supplement', and a supplement names what it supplements", async () => {
      expect(await refused(codeSystem({ supplements: 'http://loinc.org', concept: [{ code: 'test' }] }))).toEqual(['value CodeSystem.content']);
      expect(await refused(codeSystem({ content: 'supplement', concept: [{ code: 'test' }] }))).toEqual(['value CodeSystem.supplements']);
      expect((await api.post('CodeSystem', codeSystem({ content: 'supplement', supplements: 'http://loinc.org' }))).status).toBe(201);
    });

    test("a CodeSystem's properties: codes unique, R4's concept-properties of their types, concepts' values of the declared types", async () => {
      const cs = codeSystem({
        property: [
          { uri: 'http://hl7.org/fhir/concept-properties#notSelectable', code: 'notSelectable', type: 'dateTime' },
          { code: 'notSelectable', type: 'boolean' },
          { code: 'weight', type: 'decimal' },
        ],
        concept: [{ code: 'a', property: [{ code: 'weight', valueInteger: 12 }], concept: [{ code: 'a1', property: [{ code: 'weight', valueString: 'heavy' }] }] }],
      });
      expect(await refused(cs)).toEqual([
        'value CodeSystem.concept[0].concept[0].property[0].value.ofType(string)',
        'value CodeSystem.concept[0].property[0].value.ofType(integer)',
        'value CodeSystem.property[0].type',
        'value CodeSystem.property[1].code',
      ]);
    });

    test('a property no CodeSystem.property declares, and a URI twice, are warnings; the write is accepted', async () => {
      const cs = codeSystem({
        property: [{ uri: 'http://example.org/p', code: 'p', type: 'code' }, { uri: 'http://example.org/p', code: 'q', type: 'code' }, { code: 'order', type: 'integer' }],
        concept: [{ code: 'a', property: [{ code: 'order', valueInteger: 1 }, { code: 'colour', valueString: 'red' }] }],
      });
      expect(await validated(api, cs)).toEqual(['warning value CodeSystem.concept[0].property[1].code', 'warning value CodeSystem.property[1].uri']);
      expect((await api.post('CodeSystem', cs)).status).toBe(201);
    });

    test("a Bundle's paging links occur once each; a searchset's outcome is an OperationOutcome and its results have ids", async () => {
      const link = (relation: string) => ({ relation, url: 'http://example.org/fhir/Patient?name=test' });
      const patient = { resourceType: 'Patient', id: 'p1' };
      const searchset = (link: Json[], entry: Json[]): Json => ({ resourceType: 'Bundle', type: 'searchset', link, ...(entry.length > 0 && { entry }) });
      expect(await refused(searchset([link('self'), link('self'), link('first'), link('next'), link('first')], []))).toEqual(['value Bundle.link[1].relation', 'value Bundle.link[4].relation']);
      expect(await refused({ resourceType: 'Bundle', type: 'collection', link: [link('next'), link('next')] })).toEqual(['value Bundle.link[1].relation']);
      expect(await refused(searchset([link('self')], [
        { fullUrl: 'http://example.org/fhir/Patient/p1', resource: patient, search: { mode: 'outcome' } },
        { fullUrl: 'urn:uuid:0b8e5b2c-3c4a-4f7e-9d51-2f4b7c1a9e01', resource: { resourceType: 'Patient' }, search: { mode: 'match' } },
        { fullUrl: 'urn:uuid:0b8e5b2c-3c4a-4f7e-9d51-2f4b7c1a9e02', resource: { resourceType: 'Organization', name: 'x' }, search: { mode: 'include' } },
      ]))).toEqual(['value Bundle.entry[0].resource', 'value Bundle.entry[1].resource', 'value Bundle.entry[2].resource']);
      // Other relations may repeat; an outcome needs no id; Cinder's own search result is a valid searchset to store.
      expect((await api.post('Bundle', searchset([link('self'), link('alternate'), link('alternate')], [
        { resource: { resourceType: 'OperationOutcome', issue: [{ severity: 'warning', code: 'processing' }] }, search: { mode: 'outcome' } },
      ]))).status).toBe(201);
      await api.create({ resourceType: 'Patient', name: [{ family: 'Ng' }] });
      const own = await api.search('Patient?_count=1&_total=accurate');
      expect((await api.post('Bundle', own)).status).toBe(201);
    });

    test("outside a transaction or batch an entry's fullUrl is absolute; a transaction's may be relative to the FHIR base", async () => {
      const collection = (fullUrl: string): Json => ({ resourceType: 'Bundle', type: 'collection', entry: [{ fullUrl, resource: { resourceType: 'Patient', id: 'p1' } }] });
      expect(await refused(collection('Patient/p1'))).toEqual(['value Bundle.entry[0].fullUrl']);
      expect((await api.post('Bundle', collection('http://example.org/fhir/Patient/p1'))).status).toBe(201);
      const tx = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: [{ fullUrl: 'Patient/p1', resource: { resourceType: 'Patient', id: 'p1' }, request: { method: 'PUT', url: 'Patient/p1' } }] });
      expect(tx.status).toBe(200);
    });

    test("a document's references name one entry each: not two versions of one fullUrl, nor a version none has", async () => {
      const obs = (version: string): Json => ({ fullUrl: 'http://example.org/fhir/Observation/o1', resource: { resourceType: 'Observation', id: 'o1', meta: { versionId: version }, status: 'final', code: { text: 'x' } } });
      const document = (refs: string[]): Json => ({
        resourceType: 'Bundle', type: 'document', identifier: { system: 'urn:ietf:rfc:3986', value: 'urn:uuid:0b8e5b2c-3c4a-4f7e-9d51-2f4b7c1a9e03' }, timestamp: '2026-11-30T10:00:00Z',
        entry: [
          { fullUrl: 'http://example.org/fhir/Composition/c1', resource: { resourceType: 'Composition', id: 'c1', status: 'final', type: { text: 'note' }, date: '2026-11-30', title: 'Note', author: [{ display: 'Dr A' }], section: [{ title: 'Results', entry: refs.map((reference) => ({ reference })) }] } },
          obs('1'), obs('2'),
        ],
      });
      expect(await refused(document(['Observation/o1/_history/3', 'Observation/o1']))).toEqual([
        'value Bundle.entry[0].resource.section[0].entry[0].reference', 'value Bundle.entry[0].resource.section[0].entry[1].reference',
      ]);
      // Each version named, and a reference to what the Bundle does not hold, are accepted.
      expect((await api.post('Bundle', document(['Observation/o1/_history/1', 'http://example.org/fhir/Observation/o1/_history/2', 'Observation/other']))).status).toBe(201);
    });

    test("a profile's differential names paths of its type; slices, datatypes' elements and a choice's types are paths", async () => {
      const profile = (type: string, paths: string[]): Json => ({
        resourceType: 'StructureDefinition', url: `http://example.org/StructureDefinition/p-${type}`, name: 'P', status: 'draft', kind: type === 'Extension' ? 'complex-type' : 'resource', abstract: false,
        type, baseDefinition: `http://hl7.org/fhir/StructureDefinition/${type}`, derivation: 'constraint',
        ...(type === 'Extension' && { context: [{ type: 'element', expression: 'Patient' }] }),
        differential: { element: paths.map((id) => ({ id, path: id.replace(/:[^.]+/g, '') })) },
      });
      expect(await refused(profile('Observation', ['Observation', 'Observation.valueBla', 'Observation.code.coding.nickname', 'Observation.component.code', 'Observation.component.valueQuantity.nickname']))).toEqual([
        'value StructureDefinition.differential.element[1].path', 'value StructureDefinition.differential.element[2].path', 'value StructureDefinition.differential.element[4].path',
      ]);
      const text = ((await expectOutcome(await api.post('StructureDefinition', profile('Observation', ['Observation.valueBla'])), 422)).issue as Json[])[0]!.details.text;
      expect(text).toContain("'Observation.value[x]'");
      const good = profile('Observation', ['Observation', 'Observation.value[x]', 'Observation.valueQuantity.unit', 'Observation.component:systolic.value[x]', 'Observation.code.coding:loinc.system', 'Observation.extension:x', 'Observation.contained']);
      expect(await validated(api, good)).toEqual([]);
      expect((await api.post('StructureDefinition', good)).status).toBe(201);
      expect((await api.post('StructureDefinition', profile('Extension', ['Extension', 'Extension.extension:a', 'Extension.extension:a.value[x]', 'Extension.url', 'Extension.value[x]']))).status).toBe(201);
    });

    test('a SearchParameter derived from an R4 one has its type and only its bases', async () => {
      expect(await refused(searchParameter({ type: 'token' }))).toEqual(['value SearchParameter.type']);
      expect(await refused(searchParameter({ base: ['Organization', 'Patient'], expression: 'Organization.name | Patient.name' }))).toEqual(['value SearchParameter.base[1]']);
      expect(await validated(api, searchParameter({}))).toEqual([]);
      // One derived from a parameter of every resource (Resource-id) may have any base.
      expect(await validated(api, searchParameter({ code: 'my-id', base: ['Patient'], type: 'token', expression: 'Patient.id', derivedFrom: 'http://hl7.org/fhir/SearchParameter/Resource-id' }))).toEqual([]);
    });

    test("a CapabilityStatement's search parameter of another type than its definition is a warning", async () => {
      const cs = {
        resourceType: 'CapabilityStatement', status: 'draft', date: '2026-11-30', description: 'What a client needs', kind: 'requirements', fhirVersion: '4.0.1', format: ['json'],
        rest: [{ mode: 'server', resource: [{ type: 'AllergyIntolerance', searchParam: [
          { name: 'clinical-status', definition: 'http://hl7.org/fhir/SearchParameter/AllergyIntolerance-clinical-status', type: 'date' },
          { name: 'code', definition: 'http://hl7.org/fhir/SearchParameter/clinical-code', type: 'token' },
        ] }] }],
      };
      expect(await validated(api, cs)).toEqual(['warning value CapabilityStatement.rest[0].resource[0].searchParam[0].type']);
      expect((await api.post('CapabilityStatement', cs)).status).toBe(201);
    });
  });
});
