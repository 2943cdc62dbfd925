/**
 * Extensions checked against their definitions wherever they are used (R4 extensibility.html): every
 * extension in `$validate` (value type, nested extensions and their counts, bindings, `extension` or
 * `modifierExtension`, and context), and on a write of a resource claiming a profile (all but the
 * context). On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const BIRTH_PLACE = 'http://hl7.org/fhir/StructureDefinition/patient-birthPlace';
const DO_NOT_PERFORM = 'http://hl7.org/fhir/StructureDefinition/request-doNotPerform';
const DOSE = 'http://example.org/fhir/StructureDefinition/dose';
const SOURCE = 'http://example.org/fhir/StructureDefinition/dose-source';
const SCRIPTED = 'http://example.org/fhir/StructureDefinition/scripted-context';
const PLAIN = 'http://example.org/fhir/StructureDefinition/plain-patient';

const el = (id: string, min: number, max: string, extra: Json = {}) => {
  const path = id.replace(/:[^.]*/g, '');
  return { id, path, short: id, definition: id, min, max, base: { path, min: 0, max: '*' }, ...extra };
};

/** An extension definition of the tenant: `parts` its elements below `Extension`. */
function extensionDefinition(url: string, context: Json[], parts: Json[], extra: Json = {}): Json {
  return {
    resourceType: 'StructureDefinition', url, name: url.slice(url.lastIndexOf('/') + 1).replace(/-/g, ''), status: 'active', kind: 'complex-type', abstract: false,
    context, type: 'Extension', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Extension', derivation: 'constraint', fhirVersion: '4.0.1',
    snapshot: { element: [el('Extension', 0, '*', extra), ...parts, el('Extension.url', 1, '1', { type: [{ code: 'uri' }], fixedUri: url })] },
  };
}

/** `dose` on an Observation: a nested `amount` (1..1, Quantity) and `note` (0..1, string), no value of its own. */
const dose = () => extensionDefinition(DOSE, [{ type: 'element', expression: 'Observation' }], [
  el('Extension.extension', 0, '*', { slicing: { discriminator: [{ type: 'value', path: 'url' }], rules: 'open' }, type: [{ code: 'Extension' }] }),
  el('Extension.extension:amount', 1, '1', { sliceName: 'amount', type: [{ code: 'Extension' }] }),
  el('Extension.extension:amount.url', 1, '1', { type: [{ code: 'uri' }], fixedUri: 'amount' }),
  el('Extension.extension:amount.value[x]', 1, '1', { type: [{ code: 'Quantity' }] }),
  el('Extension.extension:note', 0, '1', { sliceName: 'note', type: [{ code: 'Extension' }] }),
  el('Extension.extension:note.url', 1, '1', { type: [{ code: 'uri' }], fixedUri: 'note' }),
  el('Extension.extension:note.value[x]', 1, '1', { type: [{ code: 'string' }] }),
  el('Extension.value[x]', 0, '0', { type: [{ code: 'boolean' }] }),
]);
/** May be used only inside a `dose` extension. */
const source = () => extensionDefinition(SOURCE, [{ type: 'extension', expression: DOSE }], [el('Extension.value[x]', 1, '1', { type: [{ code: 'string' }] })]);
/** A context Cinder does not evaluate. */
const scripted = () => extensionDefinition(SCRIPTED, [{ type: 'fhirpath', expression: "Patient.where(active = true)" }], [el('Extension.value[x]', 1, '1', { type: [{ code: 'boolean' }] })]);

const plainProfile = (): Json => ({
  resourceType: 'StructureDefinition', url: PLAIN, name: 'PlainPatient', status: 'active', kind: 'resource', abstract: false,
  type: 'Patient', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Patient', derivation: 'constraint', fhirVersion: '4.0.1',
  snapshot: { element: [el('Patient', 0, '*')] },
});

const errorsOf = (outcome: Json) => (outcome.issue as Json[]).filter((i) => i.severity === 'error');
const where = (issues: Json[]) => issues.map((i) => i.expression?.[0]).sort();

await eachStore((kind, fresh) => {
  describe(`extensions against their definitions (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const validate = async (resource: Json) => (await (await api.post(`${resource.resourceType}/$validate`, resource)).json()) as Json;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const sd of [dose(), source(), scripted(), plainProfile()]) await api.create(sd);
    });
    afterAll(() => t.close());

    test('many different extension urls are looked up a batch at a time, and definitions among them still found', async () => {
      let searches = 0;
      const resources = t.store.resources;
      const search = resources.search.bind(resources);
      resources.search = (...args: Parameters<typeof search>) => (args[1].type === 'StructureDefinition' && searches++, search(...args));
      try {
        // 3,000 urls no definition names (one search each before: 1.1 s on PostgreSQL), a tenant's and an R4 core one.
        const unknown = Array.from({ length: 3_000 }, (_, i) => ({ url: `http://unknown.example/ext${i}`, valueString: 'x' }));
        const outcome = await validate({ resourceType: 'Observation', status: 'final', code: { text: 'x' }, extension: [...unknown, { url: SOURCE, valueBoolean: true }, { url: BIRTH_PLACE, valueString: 'Utrecht' }] });
        expect(where(errorsOf(outcome))).toEqual(['Observation.extension[3000]', 'Observation.extension[3000].value.ofType(Boolean)', 'Observation.extension[3001]', 'Observation.extension[3001].value.ofType(String)']);
        expect(searches).toBeLessThan(100);
      } finally {
        resources.search = search;
      }
    });

    test('$validate checks an R4 core extension where no profile names it: its value type, its context', async () => {
      const wrongType = await validate({ resourceType: 'Patient', extension: [{ url: BIRTH_PLACE, valueString: 'Utrecht' }] });
      expect(where(errorsOf(wrongType))).toEqual(['Patient.extension[0].value.ofType(String)']);
      expect(errorsOf(wrongType)[0].details.text).toContain(BIRTH_PLACE);
      expect(errorsOf(await validate({ resourceType: 'Patient', extension: [{ url: BIRTH_PLACE, valueAddress: { city: 'Utrecht' } }] }))).toEqual([]);
      const elsewhere = await validate({ resourceType: 'Observation', status: 'final', code: { text: 'x' }, extension: [{ url: BIRTH_PLACE, valueAddress: { city: 'Utrecht' } }] });
      expect(where(errorsOf(elsewhere))).toEqual(['Observation.extension[0]']);
      expect(errorsOf(elsewhere)[0]).toMatchObject({ code: 'structure' });
      expect(errorsOf(elsewhere)[0].details.text).toContain('element Patient');
    });

    test('a modifier extension must be a modifierExtension, and a regular one must not', async () => {
      const order = (key: string) => ({ resourceType: 'NutritionOrder', status: 'active', intent: 'order', patient: { reference: 'Patient/p' }, dateTime: '2024-01-01', [key]: [{ url: DO_NOT_PERFORM, valueBoolean: true }] });
      expect(errorsOf(await validate(order('modifierExtension')))).toEqual([]);
      const asExtension = errorsOf(await validate(order('extension')));
      expect(where(asExtension)).toEqual(['NutritionOrder.extension[0]']);
      expect(asExtension[0].details.text).toContain('modifierExtension');
      const regular = errorsOf(await validate({ resourceType: 'Patient', modifierExtension: [{ url: BIRTH_PLACE, valueAddress: { city: 'Utrecht' } }] }));
      expect(where(regular)).toEqual(['Patient.modifierExtension[0]']);
    });

    test('a tenant\'s complex extension: nested parts and their counts, an extension context, an unevaluated fhirpath context', async () => {
      const obs = (ext: Json[]): Json => ({ resourceType: 'Observation', status: 'final', code: { text: 'dose' }, extension: ext });
      const amount = { url: 'amount', valueQuantity: { value: 5, unit: 'mg' } };
      const bySource = { url: SOURCE, valueString: 'pharmacy' };
      expect(errorsOf(await validate(obs([{ url: DOSE, extension: [amount, bySource] }])))).toEqual([]);
      const missing = errorsOf(await validate(obs([{ url: DOSE, extension: [{ url: 'note', valueString: 'after food' }] }])));
      expect(where(missing)).toEqual(['Observation.extension[0].extension']);
      expect(missing[0].details.text).toContain('Extension.extension:amount');
      const wrongPart = errorsOf(await validate(obs([{ url: DOSE, extension: [{ url: 'amount', valueString: '5 mg' }] }])));
      expect(where(wrongPart)).toEqual(['Observation.extension[0].extension[0].value.ofType(String)']);
      // `dose-source` may only be inside `dose`.
      expect(where(errorsOf(await validate(obs([{ url: DOSE, extension: [amount] }, bySource]))))).toEqual(['Observation.extension[1]']);
      const scriptedUse = await validate({ resourceType: 'Patient', extension: [{ url: SCRIPTED, valueBoolean: true }] });
      expect(errorsOf(scriptedUse)).toEqual([]);
      const warned = (scriptedUse.issue as Json[]).filter((i) => i.code === 'not-supported');
      expect(where(warned)).toEqual(['Patient.extension[0]']);
      expect(warned[0].details.text).toContain('fhirpath');
    });

    test('a write claiming a profile is refused for a broken extension anywhere, not for its context; one claiming none is not checked', async () => {
      const patient = (ext: Json[], profiled = true): Json => ({ resourceType: 'Patient', ...(profiled ? { meta: { profile: [PLAIN] } } : {}), contact: [{ name: { family: 'Ng' }, ...(ext.length ? { extension: ext } : {}) }] });
      const refused = await expectOutcome(await api.post('Patient', patient([{ url: BIRTH_PLACE, valueString: 'Utrecht' }])), 422);
      expect(where(refused.issue)).toEqual(['Patient.contact[0].extension[0].value.ofType(String)']);
      const modifier = await expectOutcome(await api.post('Patient', { ...patient([]), extension: [{ url: DO_NOT_PERFORM, valueBoolean: true }] }), 422);
      expect(where(modifier.issue)).toEqual(['Patient.extension[0]']);
      // The context (birthPlace belongs on Patient, not on a contact) is $validate's to report.
      expect((await api.post('Patient', patient([{ url: BIRTH_PLACE, valueAddress: { city: 'Utrecht' } }]))).status).toBe(201);
      expect((await api.post('Patient', patient([{ url: BIRTH_PLACE, valueString: 'Utrecht' }], false))).status).toBe(201);
    });
  });
});
