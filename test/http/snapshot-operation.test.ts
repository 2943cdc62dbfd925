/**
 * `StructureDefinition/$snapshot` (R4 structuredefinition-operation-snapshot.html): type level with a
 * `definition` in Parameters or a `url` (stored or core), instance level, and its errors, on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const URL_ = 'http://example.org/fhir/StructureDefinition/pulse';

/** A differential-only profile of Observation: code sliced with a fixed LOINC code, a Quantity value with a unit. */
function pulse(extra: Json = {}): Json {
  return {
    resourceType: 'StructureDefinition', url: URL_, name: 'Pulse', status: 'active', kind: 'resource', abstract: false,
    type: 'Observation', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Observation', derivation: 'constraint',
    differential: { element: [
      { id: 'Observation.code.coding', path: 'Observation.code.coding', slicing: { discriminator: [{ type: 'value', path: 'code' }], rules: 'open' } },
      { id: 'Observation.code.coding:hr', path: 'Observation.code.coding', sliceName: 'hr', min: 1, max: '1' },
      { id: 'Observation.code.coding:hr.code', path: 'Observation.code.coding.code', min: 1, fixedCode: '8867-4' },
      { id: 'Observation.valueQuantity', path: 'Observation.valueQuantity', min: 1, mustSupport: true },
      { id: 'Observation.valueQuantity.unit', path: 'Observation.valueQuantity.unit', min: 1 },
    ] },
    ...extra,
  };
}

const byId = (sd: Json) => new Map((sd.snapshot.element as Json[]).map((e) => [e.id as string, e]));

await eachStore((kind, fresh) => {
  describe(`StructureDefinition/$snapshot (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    test('type level with a definition: the snapshot generated from the differential over R4 Observation', async () => {
      const res = await api.post('StructureDefinition/$snapshot', { resourceType: 'Parameters', parameter: [{ name: 'definition', resource: pulse() }] });
      expect(res.status).toBe(200);
      const sd = (await res.json()) as Json;
      expect(sd.resourceType).toBe('StructureDefinition');
      expect(sd.differential.element).toHaveLength(5);
      const el = byId(sd);
      // Every element of R4 Observation, in its order, then the slices and the datatypes expanded below them.
      expect(sd.snapshot.element[0].id).toBe('Observation');
      expect(el.get('Observation.status')).toMatchObject({ path: 'Observation.status', min: 1, max: '1' });
      expect(el.get('Observation.code.coding:hr')).toMatchObject({ path: 'Observation.code.coding', sliceName: 'hr', min: 1, max: '1' });
      expect(el.get('Observation.code.coding:hr.code')).toMatchObject({ path: 'Observation.code.coding.code', min: 1, fixedCode: '8867-4', base: { path: 'Coding.code' } });
      expect(el.get('Observation.code.coding:hr.display')).toMatchObject({ min: 0, max: '1' });
      expect(el.get('Observation.value[x]')?.type).toEqual([{ code: 'Quantity' }]);
      expect(el.get('Observation.value[x]:valueQuantity')).toMatchObject({ sliceName: 'valueQuantity', min: 1, mustSupport: true, type: [{ code: 'Quantity' }] });
      expect(el.get('Observation.value[x]:valueQuantity.unit')).toMatchObject({ path: 'Observation.value[x].unit', min: 1 });
      const ids = (sd.snapshot.element as Json[]).map((e) => e.id);
      expect(ids.indexOf('Observation.code.coding:hr')).toBeGreaterThan(ids.indexOf('Observation.code.coding'));
      expect(ids.indexOf('Observation.code.coding:hr')).toBeLessThan(ids.indexOf('Observation.code.text'));
    });

    test('by url (a stored profile, then an R4 core one) and at instance level', async () => {
      const stored = await api.create(pulse());
      const byUrl = (await (await api.get(`StructureDefinition/$snapshot?url=${encodeURIComponent(URL_)}`)).json()) as Json;
      expect(byId(byUrl).get('Observation.code.coding:hr.code')?.fixedCode).toBe('8867-4');
      const post = await api.post('StructureDefinition/$snapshot', { resourceType: 'Parameters', parameter: [{ name: 'url', valueString: URL_ }] });
      expect(post.status).toBe(200);
      const instance = (await (await api.get(`StructureDefinition/${stored.id}/$snapshot`)).json()) as Json;
      expect(instance.id).toBe(stored.id);
      expect(instance.snapshot.element).toEqual(byUrl.snapshot.element);
      expect((await api.post(`StructureDefinition/${stored.id}/$snapshot`, { resourceType: 'Parameters' })).status).toBe(200);
      const bp = (await (await api.get(`StructureDefinition/$snapshot?url=${encodeURIComponent('http://hl7.org/fhir/StructureDefinition/bp')}`)).json()) as Json;
      expect(byId(bp).get('Observation.component:SystolicBP.code.coding:SBPCode.code')?.fixedCode).toBe('8480-6');
      expect(byId(bp).get('Observation.component:DiastolicBP')).toMatchObject({ min: 1, max: '1' });
    });

    test('errors: 400 for a bad input, 404 for an unknown url or id, 422 naming the differential element that cannot be placed', async () => {
      await expectOutcome(await api.post('StructureDefinition/$snapshot', { resourceType: 'Parameters' }), 400);
      await expectOutcome(await api.post('StructureDefinition/$snapshot', { resourceType: 'Parameters', parameter: [{ name: 'definition', resource: { resourceType: 'Patient' } }] }), 400);
      await expectOutcome(await api.get('StructureDefinition/$snapshot?definition=x'), 400);
      // `_format` is every interaction's; another parameter is ignored, or a 400 naming it under strict handling.
      const bpUrl = `StructureDefinition/$snapshot?url=${encodeURIComponent('http://hl7.org/fhir/StructureDefinition/bp')}`;
      expect((await api.get(`${bpUrl}&_format=json`)).status).toBe(200);
      expect((await api.get(`${bpUrl}&x=1`)).status).toBe(200);
      expect((await expectOutcome(await api.get(`${bpUrl}&x=1`, { prefer: 'handling=strict' }), 400)).issue[0].expression).toEqual(['x']);
      const malformed = await expectOutcome(await api.post('StructureDefinition/$snapshot', { resourceType: 'Parameters', parameter: [{ name: 'definition', resource: pulse({ differential: { element: [null, 3, { path: 7 }] } }) }] }), 422);
      expect(malformed.issue.length).toBeGreaterThan(0);
      await expectOutcome(await api.get('StructureDefinition/$snapshot?url=http://example.org/none'), 404);
      await expectOutcome(await api.get('StructureDefinition/no-such-id/$snapshot'), 404);
      const noPath = pulse({ differential: { element: [{ id: 'Observation.nickname', path: 'Observation.nickname', min: 1 }] } });
      const o1 = await expectOutcome(await api.post('StructureDefinition/$snapshot', { resourceType: 'Parameters', parameter: [{ name: 'definition', resource: noPath }] }), 422);
      expect(o1.issue[0].expression).toEqual(['Observation.nickname']);
      expect(o1.issue[0].details.text).toContain('nickname');
      const cases: [Json, string, string][] = [
        [{ id: 'Observation.status', path: 'Observation.status', max: '2' }, 'Observation.status', 'max 2 is above the base'],
        [{ id: 'Observation.status', path: 'Observation.status', min: 0 }, 'Observation.status', 'min 0 is below the base'],
        [{ id: 'Observation.subject', path: 'Observation.subject', type: [{ code: 'CodeableConcept' }] }, 'Observation.subject', 'the type CodeableConcept is not one the base allows'],
        [{ id: 'Observation.subject', path: 'Observation.subject', type: [{ code: 'Reference', targetProfile: ['http://hl7.org/fhir/StructureDefinition/Practitioner'] }] }, 'Observation.subject', 'the target http://hl7.org/fhir/StructureDefinition/Practitioner (Practitioner) is not one the base allows'],
        [{ id: 'Observation.hasMember', path: 'Observation.hasMember', type: [{ code: 'Reference', targetProfile: ['http://hl7.org/fhir/StructureDefinition/groupdefinition'] }] }, 'Observation.hasMember', 'the target http://hl7.org/fhir/StructureDefinition/groupdefinition (Group) is not one the base allows'],
        [{ id: 'Observation.status', path: 'Observation.status', binding: { strength: 'preferred', valueSet: 'http://example.org/vs' } }, 'Observation.status', 'the base\'s binding is required'],
        [{ id: 'Observation.category:VSCat.coding.code', path: 'Observation.category.coding.code', fixedCode: 'laboratory' }, 'Observation.category:VSCat.coding.code', 'the base fixes fixedCode to "vital-signs"'],
      ];
      for (const [element, at, text] of cases) {
        const base = at.includes('VSCat') ? { baseDefinition: 'http://hl7.org/fhir/StructureDefinition/vitalsigns' } : {};
        const o = await expectOutcome(await api.post('StructureDefinition/$snapshot', { resourceType: 'Parameters', parameter: [{ name: 'definition', resource: pulse({ ...base, differential: { element: [element] } }) }] }), 422);
        expect(o.issue[0].expression).toEqual([at]);
        expect(o.issue[0].details.text).toContain(text);
      }
      const narrowed = await api.post('StructureDefinition/$snapshot', { resourceType: 'Parameters', parameter: [{ name: 'definition', resource: pulse({ differential: { element: [{ id: 'Observation.subject', path: 'Observation.subject', type: [{ code: 'Reference', targetProfile: ['http://hl7.org/fhir/StructureDefinition/Patient'] }], constraint: [{ key: 'x-1', severity: 'error', human: 'x', expression: 'reference.exists()' }] }] } }) }] });
      const subject = byId((await narrowed.json()) as Json).get('Observation.subject')!;
      expect(subject.type).toEqual([{ code: 'Reference', targetProfile: ['http://hl7.org/fhir/StructureDefinition/Patient'] }]);
      expect(subject.constraint.map((c: Json) => `${c.key} ${c.source ?? ''}`)).toEqual(['ele-1 http://hl7.org/fhir/StructureDefinition/Element', `x-1 ${URL_}`]);
      const unknownBase = pulse({ baseDefinition: 'http://example.org/none' });
      expect((await expectOutcome(await api.post('StructureDefinition/$snapshot', { resourceType: 'Parameters', parameter: [{ name: 'definition', resource: unknownBase }] }), 422)).issue[0].details.text).toContain('http://example.org/none');
    });

    /** The snapshot $snapshot generates for a differential of `type` over its R4 base. */
    const generate = async (type: string, elements: Json[], extra: Json = {}) => {
      const definition = { resourceType: 'StructureDefinition', url: 'http://example.org/x', name: 'X', status: 'draft', kind: 'resource', abstract: false, type, baseDefinition: `http://hl7.org/fhir/StructureDefinition/${type}`, derivation: 'constraint', differential: { element: elements }, ...extra };
      return api.post('StructureDefinition/$snapshot', { resourceType: 'Parameters', parameter: [{ name: 'definition', resource: definition }] });
    };

    test('a differential of paths only: each element within the slice named before it', async () => {
      const res = await generate('Observation', [
        { path: 'Observation.component', slicing: { discriminator: [{ type: 'pattern', path: 'code' }], rules: 'open' } },
        { path: 'Observation.component', sliceName: 'a', min: 1 },
        { path: 'Observation.component.code', patternCodeableConcept: { coding: [{ system: 'http://loinc.org', code: '1-8' }] } },
        { path: 'Observation.component', sliceName: 'b' },
        { path: 'Observation.component.code', short: 'b code' },
      ]);
      expect(res.status).toBe(200);
      const el = byId((await res.json()) as Json);
      expect(el.get('Observation.component:a.code')?.patternCodeableConcept).toBeDefined();
      expect(el.get('Observation.component:b.code')?.short).toBe('b code');
      expect(el.get('Observation.component.code')?.patternCodeableConcept).toBeUndefined();
    });

    test('below a contentReference (Questionnaire.item.item) and a re-slice', async () => {
      const q = await generate('Questionnaire', [{ id: 'Questionnaire.item.item.linkId', path: 'Questionnaire.item.item.linkId', maxLength: 10 }]);
      expect(q.status).toBe(200);
      const qel = byId((await q.json()) as Json);
      expect(qel.get('Questionnaire.item.item.linkId')).toMatchObject({ path: 'Questionnaire.item.item.linkId', maxLength: 10, min: 1 });
      expect(qel.get('Questionnaire.item.item.type')).toMatchObject({ path: 'Questionnaire.item.item.type', min: 1 });
      const r = await generate('Patient', [
        { id: 'Patient.identifier', path: 'Patient.identifier', slicing: { discriminator: [{ type: 'value', path: 'system' }], rules: 'open' } },
        { id: 'Patient.identifier:mrn', path: 'Patient.identifier', sliceName: 'mrn', max: '2', slicing: { discriminator: [{ type: 'value', path: 'use' }], rules: 'open' } },
        { id: 'Patient.identifier:mrn/old', path: 'Patient.identifier', sliceName: 'mrn/old', max: '1' },
      ]);
      expect(r.status).toBe(200);
      const ids = ((await r.json()) as Json).snapshot.element.map((e: Json) => e.id) as string[];
      expect(ids.indexOf('Patient.identifier:mrn/old')).toBeGreaterThan(ids.indexOf('Patient.identifier:mrn.assigner'));
      const over = await generate('Patient', [
        { id: 'Patient.identifier', path: 'Patient.identifier', slicing: { discriminator: [{ type: 'value', path: 'system' }], rules: 'open' } },
        { id: 'Patient.identifier:mrn', path: 'Patient.identifier', sliceName: 'mrn', max: '1' },
        { id: 'Patient.identifier:mrn/old', path: 'Patient.identifier', sliceName: 'mrn/old', max: '2' },
      ]);
      expect((await expectOutcome(over, 422)).issue[0].expression).toEqual(['Patient.identifier:mrn/old']);
    });

    test('a choice named by two of its types keeps both, each a type slice; a base profile\'s slice cannot lose its min', async () => {
      const res = await generate('Observation', [
        { id: 'Observation.valueQuantity', path: 'Observation.valueQuantity', short: 'q' },
        { id: 'Observation.valueString', path: 'Observation.valueString', maxLength: 20 },
      ]);
      expect(res.status).toBe(200);
      const el = byId((await res.json()) as Json);
      expect(el.get('Observation.value[x]')?.type).toEqual([{ code: 'Quantity' }, { code: 'string' }]);
      expect(el.get('Observation.value[x]:valueQuantity')).toMatchObject({ short: 'q', type: [{ code: 'Quantity' }] });
      expect(el.get('Observation.value[x]:valueString')).toMatchObject({ maxLength: 20, type: [{ code: 'string' }] });
      // vitalsigns' slice VSCat is 1..1: a profile on vitalsigns may not make it 0..1.
      const lower = await generate('Observation', [{ id: 'Observation.category:VSCat', path: 'Observation.category', sliceName: 'VSCat', min: 0 }], { baseDefinition: 'http://hl7.org/fhir/StructureDefinition/vitalsigns' });
      const o = await expectOutcome(lower, 422);
      expect(o.issue[0].expression).toEqual(['Observation.category:VSCat']);
      expect(o.issue[0].details.text).toContain("min 0 is below the base's min 1");
    });

    test("a constraint may not change isModifier, give a type another type's profile, or make its slices need more than the element's max", async () => {
      const modifier = await expectOutcome(await generate('Observation', [{ id: 'Observation.status', path: 'Observation.status', isModifier: false }]), 422);
      expect(modifier.issue[0].expression).toEqual(['Observation.status']);
      expect(modifier.issue[0].details.text).toContain("isModifier false changes the base's true");
      // Saying what the base says is no change.
      expect((await generate('Observation', [{ id: 'Observation.status', path: 'Observation.status', isModifier: true }])).status).toBe(200);
      const profiled = await expectOutcome(await generate('Observation', [{ id: 'Observation.valueQuantity', path: 'Observation.valueQuantity', type: [{ code: 'Quantity', profile: ['http://hl7.org/fhir/StructureDefinition/vitalsigns'] }] }]), 422);
      expect(profiled.issue[0].expression).toEqual(['Observation.valueQuantity']);
      expect(profiled.issue[0].details.text).toContain('the profile http://hl7.org/fhir/StructureDefinition/vitalsigns constrains Observation, not the type Quantity');
      expect((await generate('Observation', [{ id: 'Observation.valueQuantity', path: 'Observation.valueQuantity', type: [{ code: 'Quantity', profile: ['http://hl7.org/fhir/StructureDefinition/SimpleQuantity'] }] }])).status).toBe(200);
      const slices = (max: string) => generate('Patient', [
        { id: 'Patient.identifier', path: 'Patient.identifier', max, slicing: { discriminator: [{ type: 'value', path: 'system' }], rules: 'open' } },
        { id: 'Patient.identifier:a', path: 'Patient.identifier', sliceName: 'a', min: 1 },
        { id: 'Patient.identifier:b', path: 'Patient.identifier', sliceName: 'b', min: 1 },
      ]);
      expect((await slices('2')).status).toBe(200);
      const over = await expectOutcome(await slices('1'), 422);
      expect(over.issue[0].expression).toEqual(['Patient.identifier:b']);
      expect(over.issue[0].details.text).toContain('the slices of Patient.identifier need at least 2 values (their min summed), above its max 1');
    });

    test("fixed[x] and pattern[x] agree with the base's: a pattern includes the base's pattern, a fixed value matches it, a fixed value stays fixed", async () => {
      const loinc = (code: string, extra: Json = {}) => ({ coding: [{ system: 'http://loinc.org', code, ...extra }] });
      await api.create(pulse({ url: 'http://example.org/coded', differential: { element: [{ id: 'Observation.code', path: 'Observation.code', patternCodeableConcept: loinc('1234-5') }] } }));
      const over = (element: Json) => generate('Observation', [{ id: 'Observation.code', path: 'Observation.code', ...element }], { baseDefinition: 'http://example.org/coded' });
      const narrower = await over({ patternCodeableConcept: { ...loinc('1234-5', { display: 'x' }), text: 't' } });
      expect(narrower.status).toBe(200);
      expect(byId((await narrower.json()) as Json).get('Observation.code')?.patternCodeableConcept).toEqual({ ...loinc('1234-5', { display: 'x' }), text: 't' });
      for (const element of [{ patternCodeableConcept: loinc('9999-9') }, { fixedCodeableConcept: loinc('9999-9') }, { patternCoding: { system: 'http://loinc.org', code: '1234-5' } }]) {
        const o = await expectOutcome(await over(element), 422);
        expect(o.issue[0].expression).toEqual(['Observation.code']);
        expect(o.issue[0].details.text).toContain("does not agree with the base's patternCodeableConcept");
      }
      expect((await over({ fixedCodeableConcept: loinc('1234-5') })).status).toBe(200);
      // vitalsigns fixes VSCat's coding.code: the same value as a pattern keeps it fixed; another is a 422.
      const vs = (patternCode: string) => generate('Observation', [{ id: 'Observation.category:VSCat.coding.code', path: 'Observation.category.coding.code', patternCode }], { baseDefinition: 'http://hl7.org/fhir/StructureDefinition/vitalsigns' });
      const same = await vs('vital-signs');
      expect(same.status).toBe(200);
      const code = byId((await same.json()) as Json).get('Observation.category:VSCat.coding.code');
      expect(code?.fixedCode).toBe('vital-signs');
      expect(code?.patternCode).toBeUndefined();
      const other = await expectOutcome(await vs('laboratory'), 422);
      expect(other.issue[0].details.text).toContain('the base fixes fixedCode to "vital-signs"');
    });

    test("a required binding's value set replaced by a subset of it (the tenant's terminology decides), not by another; undecided, a warning", async () => {
      const vs = (id: string, system: string, codes: string[]) => ({
        resourceType: 'ValueSet', url: `http://example.org/vs/${id}`, status: 'active', compose: { include: [{ system, concept: codes.map((code) => ({ code })) }] },
      });
      await api.create(vs('done', 'http://hl7.org/fhir/observation-status', ['final', 'amended']));
      await api.create(vs('genders', 'http://hl7.org/fhir/administrative-gender', ['male']));
      const bound = (id: string) => [{ id: 'Observation.status', path: 'Observation.status', binding: { strength: 'required', valueSet: `http://example.org/vs/${id}` } }];
      const subset = await generate('Observation', bound('done'));
      expect(subset.status).toBe(200);
      expect(byId((await subset.json()) as Json).get('Observation.status')?.binding).toMatchObject({ strength: 'required', valueSet: 'http://example.org/vs/done' });
      const other = await expectOutcome(await generate('Observation', bound('genders')), 422);
      expect(other.issue[0].expression).toEqual(['Observation.status']);
      expect(other.issue[0].details.text).toContain("the base's required binding to http://hl7.org/fhir/ValueSet/observation-status may be replaced only by a subset of it; http://example.org/vs/genders has http://hl7.org/fhir/administrative-gender|male");
      // A value set the terminology does not hold: generated, and $validate against the profile says what was not checked.
      expect((await generate('Observation', bound('nowhere'))).status).toBe(200);
      await api.create(pulse({ url: 'http://example.org/unsure', differential: { element: bound('nowhere') } }));
      const res = await api.post('Observation/$validate', { resourceType: 'Observation', meta: { profile: ['http://example.org/unsure'] }, status: 'final', code: { text: 'x' } });
      const warnings = ((await res.json()) as Json).issue.filter((i: Json) => i.severity === 'warning').map((i: Json) => i.details.text as string);
      expect(warnings.some((w: string) => w.includes('is replaced by http://example.org/vs/nowhere, which must be a subset of it; not checked'))).toBe(true);
    });

    test("a slice of an element nothing slices stands in the element's place, as HL7 writes it; a profile over such a base keeps it", async () => {
      const res = await generate('Patient', [
        { id: 'Patient.birthDate:born', path: 'Patient.birthDate', sliceName: 'born', min: 1 },
        { id: 'Patient.name:a', path: 'Patient.name', sliceName: 'a', short: 'a' },
        { id: 'Patient.name:a.family', path: 'Patient.name.family', min: 1 },
        { id: 'Patient.name:b', path: 'Patient.name', sliceName: 'b', short: 'b' },
      ]);
      expect(res.status).toBe(200);
      const ids = ((await res.json()) as Json).snapshot.element.map((e: Json) => e.id as string);
      expect(ids).toContain('Patient.birthDate:born');
      expect(ids).not.toContain('Patient.birthDate');
      // The first name stands in place; a second is a slice after it (both hold for every name when validating).
      expect(ids.filter((id: string) => id.startsWith('Patient.name') && !id.slice('Patient.name'.length).includes('.'))).toEqual(['Patient.name:a', 'Patient.name:b']);
      expect(ids).toContain('Patient.name:a.family');
      // HL7's catalog has Composition.date:IssueDate without Composition.date: a profile on it kept neither before.
      const over = await generate('Composition', [{ id: 'Composition.title', path: 'Composition.title', short: 'x' }], { baseDefinition: 'http://hl7.org/fhir/StructureDefinition/catalog' });
      expect(over.status).toBe(200);
      expect(byId((await over.json()) as Json).get('Composition.date:IssueDate')).toMatchObject({ path: 'Composition.date', sliceName: 'IssueDate', min: 1 });
    });

    test('below a choice of several types is a 422 asking for one type', async () => {
      const o = await expectOutcome(await generate('Observation', [{ id: 'Observation.value[x].unit', path: 'Observation.value[x].unit', min: 1 }]), 422);
      expect(o.issue[0].expression).toEqual(['Observation.value[x].unit']);
      expect(o.issue[0].details.text).toContain('constrain it to one type first');
    });

    test('a cycle of differential-only profiles is a 422, not a hang', async () => {
      const a = pulse({ url: 'http://example.org/a', baseDefinition: 'http://example.org/b' });
      await api.create(pulse({ url: 'http://example.org/b', baseDefinition: 'http://example.org/a' }));
      await api.create(a);
      const o = await expectOutcome(await api.get(`StructureDefinition/$snapshot?url=${encodeURIComponent('http://example.org/a')}`), 422);
      expect(o.issue[0].details.text).toContain('derives from itself');
    });

    test('the CapabilityStatement lists $snapshot on StructureDefinition', async () => {
      const cs = (await (await api.get('metadata')).json()) as Json;
      const ops = (cs.rest[0].resource as Json[]).find((r) => r.type === 'StructureDefinition')?.operation as Json[];
      expect(ops).toContainEqual({ name: 'snapshot', definition: 'http://hl7.org/fhir/OperationDefinition/StructureDefinition-snapshot' });
    });

    test('limits: at most 16 definitions deep, at most 10,000 elements', async () => {
      for (let i = 0; i <= 16; i++) {
        const base = i === 0 ? 'http://hl7.org/fhir/StructureDefinition/Patient' : `http://example.org/deep-${i - 1}`;
        await api.create({ ...pulse(), url: `http://example.org/deep-${i}`, type: 'Patient', baseDefinition: base, differential: { element: [{ id: 'Patient.name', path: 'Patient.name', short: `level ${i}` }] } });
      }
      expect((await api.get(`StructureDefinition/$snapshot?url=${encodeURIComponent('http://example.org/deep-15')}`)).status).toBe(200);
      const deep = await expectOutcome(await api.get(`StructureDefinition/$snapshot?url=${encodeURIComponent('http://example.org/deep-16')}`), 422);
      expect(deep.issue[0].details.text).toContain('stands on more than 16 definitions');
      const slices = Array.from({ length: 1000 }, (_, i) => ({ id: `Patient.contact:c${i}`, path: 'Patient.contact', sliceName: `c${i}` }));
      const many = await generate('Patient', [{ id: 'Patient.contact', path: 'Patient.contact', slicing: { discriminator: [{ type: 'value', path: 'gender' }], rules: 'open' } }, ...slices]);
      expect((await expectOutcome(many, 422)).issue[0].details.text).toContain('more than the 10000 elements');
    });

    test("a token whose scope filter leaves a stored profile out gets no snapshot of it by url (as its search finds none)", async () => {
      await api.create(pulse({ url: 'http://example.org/hidden', name: 'Hidden', status: 'draft' }));
      await api.create(pulse({ url: 'http://example.org/shown', name: 'Shown' }));
      const filtered = fhirClient(t, await craftToken(t, 'system/StructureDefinition.rs?status=active'));
      expect((await filtered.search(`StructureDefinition?url=${encodeURIComponent('http://example.org/hidden')}`)).total ?? 0).toBe(0);
      const hidden = await expectOutcome(await filtered.get(`StructureDefinition/$snapshot?url=${encodeURIComponent('http://example.org/hidden')}`), 404);
      expect(hidden.issue[0].details.text).toBe('No StructureDefinition has the url http://example.org/hidden');
      expect(JSON.stringify(hidden)).not.toContain('Hidden');
      // Nor by standing on it: a definition given inline, derived from it, finds no such base.
      const derived = { ...pulse({ url: 'http://example.org/derived', baseDefinition: 'http://example.org/hidden' }), differential: { element: [{ id: 'Observation', path: 'Observation' }] } };
      const onHidden = await expectOutcome(await filtered.post('StructureDefinition/$snapshot', { resourceType: 'Parameters', parameter: [{ name: 'definition', resource: derived }] }), 422);
      expect(JSON.stringify(onHidden)).not.toContain('8867-4');
      expect((await api.post('StructureDefinition/$snapshot', { resourceType: 'Parameters', parameter: [{ name: 'definition', resource: derived }] })).status).toBe(200);
      // One in reach, and R4's own, are generated.
      expect((await filtered.get(`StructureDefinition/$snapshot?url=${encodeURIComponent('http://example.org/shown')}`)).status).toBe(200);
      expect((await filtered.get(`StructureDefinition/$snapshot?url=${encodeURIComponent('http://hl7.org/fhir/StructureDefinition/bp')}`)).status).toBe(200);
    });

    test('a chain of 16 profiles each adding 40 slices: every slice once, each from the base element without the others', async () => {
      // Each new slice copied the sliced element with every slice the chain had made before, then dropped them:
      // this chain took 51 s to generate (1.6 s since).
      for (let k = 0; k < 16; k++) {
        const element: Json[] = k === 0 ? [{ id: 'Patient.identifier', path: 'Patient.identifier', slicing: { discriminator: [{ type: 'value', path: 'system' }], rules: 'open' } }] : [];
        for (let i = 0; i < 40; i++) {
          element.push({ id: `Patient.identifier:s${k}x${i}`, path: 'Patient.identifier', sliceName: `s${k}x${i}` }, { id: `Patient.identifier:s${k}x${i}.system`, path: 'Patient.identifier.system', fixedUri: `urn:s${k}x${i}` });
        }
        const base = k === 0 ? 'http://hl7.org/fhir/StructureDefinition/Patient' : `http://example.org/sliced-${k - 1}`;
        await api.create({ ...pulse(), url: `http://example.org/sliced-${k}`, type: 'Patient', baseDefinition: base, differential: { element } });
      }
      const res = await api.get(`StructureDefinition/$snapshot?url=${encodeURIComponent('http://example.org/sliced-15')}`);
      expect(res.status).toBe(200);
      const elements = ((await res.json()) as Json).snapshot.element as Json[];
      const slices = elements.filter((e) => e.path === 'Patient.identifier' && e.sliceName !== undefined);
      expect(slices.length).toBe(640);
      expect(new Set(slices.map((e) => e.id)).size).toBe(640);
      const systems = elements.filter((e) => e.path === 'Patient.identifier.system' && e.fixedUri !== undefined);
      expect(systems.map((e) => [e.id, e.fixedUri])).toEqual(slices.map((e) => [`${e.id}.system`, `urn:${e.sliceName}`]));
      // Each slice holds Identifier's elements (its system constrained) and no slice of its own.
      const under = (id: string) => elements.filter((e) => (e.id as string).startsWith(`${id}.`) || (e.id as string).startsWith(`${id}:`)).length;
      const each = under(slices[0]!.id as string);
      expect(each).toBe(8);
      expect(new Set(slices.map((e) => under(e.id as string)))).toEqual(new Set([each]));
      expect(under('Patient.identifier')).toBe(640 * (1 + each));
    });

    test('needs read access to StructureDefinition', async () => {
      const narrow = fhirClient(t, await t.token('system/Patient.read'));
      await expectOutcome(await narrow.get(`StructureDefinition/$snapshot?url=${encodeURIComponent('http://hl7.org/fhir/StructureDefinition/bp')}`), 403);
    });
  });
});
