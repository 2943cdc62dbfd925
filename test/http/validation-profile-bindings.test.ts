/**
 * A profile's bindings decided by the terminology's membership (as `$validate-code` decides it), not by an
 * expansion: a value set larger than an expansion may hold, or intensional, is checked on write; one that
 * cannot be decided (unknown, or its code system absent) is a warning in `$validate` and no error on write.
 * On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const CS = 'http://example.org/fhir/CodeSystem/big';
const VS_ALL = 'http://example.org/fhir/ValueSet/big-all';
const VS_ISA = 'http://example.org/fhir/ValueSet/big-under-c1';
const VS_LOINC = 'http://example.org/fhir/ValueSet/loinc-chemistry';
const VS_UNKNOWN = 'http://example.org/fhir/ValueSet/nowhere';
const VS_UNUSED_SUPPLEMENT = 'http://example.org/fhir/ValueSet/big-with-other-supplement';
const VS_BAD_FILTER = 'http://example.org/fhir/ValueSet/big-by-missing-property';
const OTHER = 'http://example.org/fhir/CodeSystem/other';
const PROFILE = 'http://example.org/fhir/StructureDefinition/coded-observation';

/** 1,500 codes (more than an expansion for validation held): `c1` has `c2`..`c1500` below it. */
function bigCodeSystem(): Json {
  const children = Array.from({ length: 1499 }, (_, i) => ({ code: `c${i + 2}`, display: `Code ${i + 2}` }));
  return { resourceType: 'CodeSystem', url: CS, status: 'active', content: 'complete', hierarchyMeaning: 'is-a', concept: [{ code: 'c1', display: 'Code 1', concept: children }] };
}

const valueSet = (url: string, include: Json) => ({ resourceType: 'ValueSet', url, status: 'active', compose: { include: [include] } });

/** Observation.code bound (required) to `codeVs`, Observation.valueCodeableConcept (required) to `valueVs`. */
function profile(codeVs: string, valueVs: string): Json {
  const el = (path: string, extra: Json) => ({ id: path, path, short: path, definition: path, min: 0, max: '1', base: { path, min: 0, max: '1' }, ...extra });
  return {
    resourceType: 'StructureDefinition', url: PROFILE, name: 'CodedObservation', status: 'active', kind: 'resource', abstract: false,
    type: 'Observation', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Observation', derivation: 'constraint', fhirVersion: '4.0.1',
    snapshot: {
      element: [
        { id: 'Observation', path: 'Observation', short: 'Observation', definition: 'Observation', min: 0, max: '*', base: { path: 'Observation', min: 0, max: '*' } },
        el('Observation.code', { min: 1, base: { path: 'Observation.code', min: 1, max: '1' }, type: [{ code: 'CodeableConcept' }], binding: { strength: 'required', valueSet: codeVs } }),
        el('Observation.value[x]', { type: [{ code: 'CodeableConcept' }], binding: { strength: 'required', valueSet: valueVs } }),
      ],
    },
  };
}

const observation = (code: string, value?: Json): Json => ({
  resourceType: 'Observation', meta: { profile: [PROFILE] }, status: 'final',
  code: { coding: [{ system: CS, code }] }, ...(value ? { valueCodeableConcept: value } : {}),
});

await eachStore((kind, fresh) => {
  describe(`profile bindings by terminology membership (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.create(bigCodeSystem());
      await api.create(valueSet(VS_ALL, { system: CS }));
      await api.create(valueSet(VS_ISA, { system: CS, filter: [{ property: 'concept', op: 'descendent-of', value: 'c1' }] }));
      await api.create(valueSet(VS_LOINC, { system: 'http://loinc.org', filter: [{ property: 'CLASS', op: '=', value: 'CHEM' }] }));
      // Names a supplement of a code system it does not include ($validate-code's 400 not-found), and filters on a
      // property the code system does not define ($validate-code's 400 vs-invalid).
      await api.create({ resourceType: 'CodeSystem', url: OTHER, status: 'active', content: 'complete', concept: [{ code: 'o1', display: 'Other 1' }] });
      await api.create({ resourceType: 'CodeSystem', url: `${OTHER}-de`, status: 'active', content: 'supplement', supplements: OTHER, concept: [{ code: 'o1', designation: [{ language: 'de', value: 'Andere 1' }] }] });
      await api.create({ ...valueSet(VS_UNUSED_SUPPLEMENT, { system: CS }), extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/valueset-supplement', valueCanonical: `${OTHER}-de` }] });
      await api.create(valueSet(VS_BAD_FILTER, { system: CS, filter: [{ property: 'colour', op: '=', value: 'red' }] }));
    });
    afterAll(() => t.close());

    test('a value set of 1,500 codes: a code outside it is refused on write, the last code inside it is accepted', async () => {
      const sd = await api.create(profile(VS_ALL, VS_ALL));
      expect((await api.post('Observation', observation('c1500'))).status).toBe(201);
      const refused = await expectOutcome(await api.post('Observation', observation('c9999')), 422);
      expect(refused.issue).toHaveLength(1);
      expect(refused.issue[0]).toMatchObject({ code: 'code-invalid', expression: ['Observation.code'] });
      expect(refused.issue[0].details.text).toContain(VS_ALL);
      // Another system's code is not in it either.
      await expectOutcome(await api.post('Observation', { ...observation('c1'), code: { coding: [{ system: 'http://example.org/other', code: 'c1' }] } }), 422);
      await api.del(`StructureDefinition/${sd.id}`);
    });

    test('an intensional value set (descendent-of over 1,500 codes) is decided per code', async () => {
      const sd = await api.create(profile(VS_ISA, VS_ISA));
      expect((await api.post('Observation', observation('c777'))).status).toBe(201);
      const refused = await expectOutcome(await api.post('Observation', observation('c1')), 422);
      expect(refused.issue[0]).toMatchObject({ code: 'code-invalid', expression: ['Observation.code'] });
      // One member among the codings suffices.
      expect((await api.post('Observation', { ...observation('c2'), valueCodeableConcept: { coding: [{ system: CS, code: 'c1' }, { system: CS, code: 'c3' }] } })).status).toBe(201);
      await expectOutcome(await api.post('Observation', observation('c2', { coding: [{ system: CS, code: 'c1' }] })), 422);
      await api.del(`StructureDefinition/${sd.id}`);
    });

    test('a value set that cannot be decided (unknown, or its code system absent) is no error on write and a warning in $validate', async () => {
      const sd = await api.create(profile(VS_LOINC, VS_UNKNOWN));
      const obs = observation('c1', { coding: [{ system: CS, code: 'c1' }] });
      obs.code = { coding: [{ system: 'http://loinc.org', code: '2345-7' }] };
      expect((await api.post('Observation', obs)).status).toBe(201);
      const outcome = (await (await api.post('Observation/$validate', obs)).json()) as Json;
      const issues = outcome.issue as Json[];
      expect(issues.filter((i) => i.severity === 'error')).toEqual([]);
      const warned = issues.filter((i) => i.code === 'not-supported').map((i) => [i.expression[0], i.details.text]);
      expect(warned.map(([e]) => e).sort()).toEqual(['Observation.code', 'Observation.value.ofType(CodeableConcept)']);
      expect(warned.find(([e]) => e === 'Observation.code')![1]).toContain(VS_LOINC);
      expect(warned.find(([e]) => e !== 'Observation.code')![1]).toContain(VS_UNKNOWN);
      await api.del(`StructureDefinition/${sd.id}`);
    });

    test('a value set $validate-code refuses (a supplement it does not use, a filter on no property) is no error on write and a warning in $validate', async () => {
      const sd = await api.create(profile(VS_UNUSED_SUPPLEMENT, VS_BAD_FILTER));
      const obs = observation('c1', { coding: [{ system: CS, code: 'c1' }] });
      // Was a 400 naming the value set's supplement, at `url`, an element the Observation does not have.
      expect((await api.post('Observation', obs)).status).toBe(201);
      const outcome = (await (await api.post('Observation/$validate', obs)).json()) as Json;
      expect(outcome.resourceType).toBe('OperationOutcome');
      const issues = outcome.issue as Json[];
      expect(issues.filter((i) => i.severity === 'error')).toEqual([]);
      const warned = issues.filter((i) => i.code === 'not-supported').map((i) => [i.expression[0], i.details.text]);
      expect(warned.find(([e]) => e === 'Observation.code')![1]).toContain(`${OTHER}-de`);
      expect(warned.find(([e]) => e !== 'Observation.code')![1]).toContain("no property 'colour'");
      await api.del(`StructureDefinition/${sd.id}`);
    });
  });
});
