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
const PLACED = 'http://example.org/fhir/StructureDefinition/placed';
const COSTLY = 'http://example.org/fhir/StructureDefinition/costly-context';
const UNPARSED = 'http://example.org/fhir/StructureDefinition/unparsed-context';
const RECENT = 'http://example.org/fhir/StructureDefinition/recent-birth';
const MIN_OCCURS = 'http://hl7.org/fhir/StructureDefinition/questionnaire-minOccurs';

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
const flag = () => [el('Extension.value[x]', 1, '1', { type: [{ code: 'boolean' }] })];
/** On an active Patient alone. */
const scripted = () => extensionDefinition(SCRIPTED, [{ type: 'fhirpath', expression: "Patient.where(active = true)" }], flag());
/** On a female contact, or on a birth date: selected by place. */
const placed = () => extensionDefinition(PLACED, [{ type: 'fhirpath', expression: "Patient.contact.where(gender = 'female')" }, { type: 'fhirpath', expression: 'Patient.birthDate' }], flag());
/** A context whose evaluation visits the cube of the given names. */
const costly = () => extensionDefinition(COSTLY, [{ type: 'fhirpath', expression: 'Patient.name.given.select(%resource.name.given.select(%resource.name.given))' }], flag());
/** A context that is no FHIRPath. */
const unparsed = () => extensionDefinition(UNPARSED, [{ type: 'fhirpath', expression: 'Patient.name.where(' }], flag());
/** On a birth date, which must be in 2000 or later (a context invariant on a primitive). */
const recent = () => ({ ...extensionDefinition(RECENT, [{ type: 'element', expression: 'Patient.birthDate' }], flag()), contextInvariant: ['$this >= @2000-01-01'] });

/** A Patient whose extensions are closed to all but birthPlace. */
const CLOSED = 'http://example.org/fhir/StructureDefinition/closed-patient';
const closedProfile = (): Json => ({
  resourceType: 'StructureDefinition', url: CLOSED, name: 'ClosedPatient', status: 'active', kind: 'resource', abstract: false,
  type: 'Patient', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Patient', derivation: 'constraint', fhirVersion: '4.0.1',
  snapshot: { element: [
    el('Patient', 0, '*'),
    el('Patient.extension', 0, '*', { slicing: { discriminator: [{ type: 'value', path: 'url' }], rules: 'closed' }, type: [{ code: 'Extension' }] }),
    el('Patient.extension:birthPlace', 0, '1', { sliceName: 'birthPlace', type: [{ code: 'Extension', profile: [BIRTH_PLACE] }] }),
  ] },
});

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
      for (const sd of [dose(), source(), scripted(), placed(), costly(), unparsed(), recent(), plainProfile(), closedProfile()]) await api.create(sd);
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
        expect(where(errorsOf(outcome))).toEqual(['Observation.extension[3000]', 'Observation.extension[3000].value.ofType(boolean)', 'Observation.extension[3001]', 'Observation.extension[3001].value.ofType(string)']);
        expect(searches).toBeLessThan(100);
      } finally {
        resources.search = search;
      }
    });

    test('$validate checks an R4 core extension where no profile names it: its value type, its context', async () => {
      const wrongType = await validate({ resourceType: 'Patient', extension: [{ url: BIRTH_PLACE, valueString: 'Utrecht' }] });
      expect(where(errorsOf(wrongType))).toEqual(['Patient.extension[0].value.ofType(string)']);
      expect(errorsOf(wrongType)[0].details.text).toContain(BIRTH_PLACE);
      expect(errorsOf(await validate({ resourceType: 'Patient', extension: [{ url: BIRTH_PLACE, valueAddress: { city: 'Utrecht' } }] }))).toEqual([]);
      const elsewhere = await validate({ resourceType: 'Observation', status: 'final', code: { text: 'x' }, extension: [{ url: BIRTH_PLACE, valueAddress: { city: 'Utrecht' } }] });
      expect(where(errorsOf(elsewhere))).toEqual(['Observation.extension[0]']);
      expect(errorsOf(elsewhere)[0]).toMatchObject({ code: 'structure' });
      expect(errorsOf(elsewhere)[0].details.text).toContain('element Patient');
    });

    test("structuredefinition-fhir-type on an ElementDefinition's type, where R4's own snapshots carry it, is no error; on another element it is", async () => {
      const fhirType = (where: Json) => ({
        resourceType: 'StructureDefinition', url: 'http://cinder.test/StructureDefinition/typed', name: 'Typed', status: 'draft', kind: 'complex-type', abstract: false,
        type: 'Extension', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Extension', derivation: 'constraint',
        snapshot: { element: [{ id: 'Extension', path: 'Extension', min: 0, max: '*' }, { id: 'Extension.id', path: 'Extension.id', min: 0, max: '1', ...where }] },
      });
      const ext = [{ url: 'http://hl7.org/fhir/StructureDefinition/structuredefinition-fhir-type', valueUrl: 'string' }];
      // The extension's errors (the bare StructureDefinition breaks snapshot invariants besides).
      const typeErrors = (outcome: Json) => errorsOf(outcome).filter((i) => String(i.details?.text).includes('structuredefinition-fhir-type'));
      // As R4's StructureDefinitions have it (Element.id, Extension.url): HL7's validator accepts it.
      expect(typeErrors(await validate(fhirType({ type: [{ extension: ext, code: 'http://hl7.org/fhirpath/System.String' }] })))).toEqual([]);
      // Its R4 context.
      expect(typeErrors(await validate(fhirType({ type: [{ code: 'http://hl7.org/fhirpath/System.String', _code: { extension: ext } }] })))).toEqual([]);
      const elsewhere = typeErrors(await validate(fhirType({ extension: ext, type: [{ code: 'http://hl7.org/fhirpath/System.String' }] })));
      expect(where(elsewhere)).toEqual(['StructureDefinition.snapshot.element[1].extension[0]']);
      expect(elsewhere[0].details.text).toContain('element ElementDefinition.type.code, element ElementDefinition.type');
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

    test('a tenant\'s complex extension: nested parts and their counts, an extension context', async () => {
      const obs = (ext: Json[]): Json => ({ resourceType: 'Observation', status: 'final', code: { text: 'dose' }, extension: ext });
      const amount = { url: 'amount', valueQuantity: { value: 5, unit: 'mg' } };
      const bySource = { url: SOURCE, valueString: 'pharmacy' };
      expect(errorsOf(await validate(obs([{ url: DOSE, extension: [amount, bySource] }])))).toEqual([]);
      const missing = errorsOf(await validate(obs([{ url: DOSE, extension: [{ url: 'note', valueString: 'after food' }] }])));
      expect(where(missing)).toEqual(['Observation.extension[0].extension']);
      expect(missing[0].details.text).toContain('Extension.extension:amount');
      const wrongPart = errorsOf(await validate(obs([{ url: DOSE, extension: [{ url: 'amount', valueString: '5 mg' }] }])));
      expect(where(wrongPart)).toEqual(['Observation.extension[0].extension[0].value.ofType(string)']);
      // `dose-source` may only be inside `dose`.
      expect(where(errorsOf(await validate(obs([{ url: DOSE, extension: [amount] }, bySource]))))).toEqual(['Observation.extension[1]']);
    });

    test('a fhirpath context is evaluated on the resource the extension is in and must select the element holding it', async () => {
      const scriptedUse = (active: boolean) => validate({ resourceType: 'Patient', active, extension: [{ url: SCRIPTED, valueBoolean: true }] });
      expect(errorsOf(await scriptedUse(true))).toEqual([]);
      const inactive = errorsOf(await scriptedUse(false));
      expect(where(inactive)).toEqual(['Patient.extension[0]']);
      expect(inactive[0]).toMatchObject({ code: 'structure' });
      expect(inactive[0].details.text).toBe(`The extension ${SCRIPTED} is not allowed to be used at this point (allowed = fhirpath Patient.where(active = true); this element is Patient)`);
      // By place: the female contact, not the male one (equal in all else), and the birth date, not the gender.
      const mark = [{ url: PLACED, valueBoolean: true }];
      const contacts = await validate({
        // A gender beside its extension: a required code given by its extensions alone is an error of its own.
        resourceType: 'Patient', birthDate: '1990-01-01', _birthDate: { extension: mark }, gender: 'unknown', _gender: { extension: mark },
        contact: [{ name: { family: 'Ng' }, gender: 'female', extension: mark }, { name: { family: 'Ng' }, gender: 'male', extension: mark }],
      });
      expect(where(errorsOf(contacts))).toEqual(['Patient.contact[1].extension[0]', 'Patient.gender.extension[0]']);
      // A contained resource is the resource its extensions' contexts are evaluated on.
      const contained = await validate({ resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: '#p' }, contained: [{ resourceType: 'Patient', id: 'p', active: true, extension: [{ url: SCRIPTED, valueBoolean: true }] }] });
      expect(errorsOf(contained)).toEqual([]);
    });

    test('a fhirpath context that is no FHIRPath is a warning in $validate; one too costly to evaluate is a too-costly error', async () => {
      const unparsedUse = await validate({ resourceType: 'Patient', extension: [{ url: UNPARSED, valueBoolean: true }] });
      expect(errorsOf(unparsedUse)).toEqual([]);
      const warned = (unparsedUse.issue as Json[]).filter((i) => i.code === 'not-supported');
      expect(where(warned)).toEqual(['Patient.extension[0]']);
      expect(warned[0].details.text).toContain('Patient.name.where(');
      const given = Array.from({ length: 120 }, (_, i) => `g${i}`);
      const costlyUse = await validate({ resourceType: 'Patient', name: [{ given }], extension: [{ url: COSTLY, valueBoolean: true }] });
      const refused = errorsOf(costlyUse);
      expect(refused.map((i) => [i.code, i.expression[0]])).toEqual([['too-costly', 'Patient.extension[0]']]);
    });

    test('context invariants hold on the element holding the extension, %extension naming it (R4 questionnaire-minOccurs)', async () => {
      const item = (extra: Json, minOccurs: number): Json => ({ linkId: 'q', type: 'string', ...extra, extension: [{ url: MIN_OCCURS, valueInteger: minOccurs }] });
      const questionnaire = (...item: Json[]): Json => ({ resourceType: 'Questionnaire', status: 'active', item });
      // `type!='display' and (required=true or %extension.valueInteger=0)`
      expect(errorsOf(await validate(questionnaire(item({ required: true }, 2), item({ linkId: 'r' }, 0))))).toEqual([]);
      const broken = errorsOf(await validate(questionnaire(item({ required: false }, 2), item({ linkId: 'd', type: 'display', text: 'd' }, 0))));
      expect(where(broken)).toEqual(['Questionnaire.item[0].extension[0]', 'Questionnaire.item[1].extension[0]']);
      expect(broken[0].details.text).toBe(`The extension ${MIN_OCCURS}|4.0.1 must not be used at this point (Questionnaire.item[0]): its context invariant 'type!='display' and (required=true or %extension.valueInteger=0)' does not hold`);
      // On a primitive: the birth date with its extensions is the focus.
      const born = (birthDate: string) => validate({ resourceType: 'Patient', birthDate, _birthDate: { extension: [{ url: RECENT, valueBoolean: true }] } });
      expect(errorsOf(await born('2001-02-03'))).toEqual([]);
      expect(where(errorsOf(await born('1999-02-03')))).toEqual(['Patient.birthDate.extension[0]']);
    });

    test('an extension Cinder has no definition of is information in $validate, never an error; a write is not refused for it', async () => {
      const outcome = await validate({
        resourceType: 'Patient', extension: [
          { url: 'http://unknown.example/fhir/StructureDefinition/x', valueString: 'x' },
          // Under R4's own namespace but defined by a later extension pack, not by R4.
          { url: 'http://hl7.org/fhir/StructureDefinition/artifact-relatedArtifact', valueString: 'y' },
          { url: 'relative', valueString: 'z' },
          { url: DOSE, extension: [{ url: 'amount', valueQuantity: { value: 5, unit: 'mg' } }] },
        ],
      });
      const info = (outcome.issue as Json[]).filter((i) => i.severity === 'information');
      expect(where(info)).toEqual(['Patient.extension[0]', 'Patient.extension[1]', 'Patient.extension[2]']);
      expect(info.map((i) => i.code)).toEqual(['informational', 'informational', 'informational']);
      expect(info[0].details.text).toContain('Unknown extension http://unknown.example/fhir/StructureDefinition/x');
      // A relative url at the top names no definition, and is no url of an extension (R4 Extension.url: the
      // URI of its StructureDefinition): an error at its url. The dose's context (Observation) is the other;
      // its relative part names no definition and is not reported.
      expect(where(errorsOf(outcome))).toEqual(['Patient.extension[2].url', 'Patient.extension[3]']);
      const unknown = { url: 'http://unknown.example/fhir/StructureDefinition/x', valueString: 'x' };
      expect((await api.post('Patient', { resourceType: 'Patient', meta: { profile: [PLAIN] }, extension: [unknown] })).status).toBe(201);
      // Unless a profile it claims closes its extensions.
      const closed = await expectOutcome(await api.post('Patient', { resourceType: 'Patient', meta: { profile: [CLOSED] }, extension: [unknown] }), 422);
      expect(where(closed.issue)).toEqual(['Patient.extension[0]']);
      expect((await api.post('Patient', { resourceType: 'Patient', meta: { profile: [CLOSED] }, extension: [{ url: BIRTH_PLACE, valueAddress: { city: 'Utrecht' } }] })).status).toBe(201);
    });

    test('a write claiming a profile is refused for a broken extension anywhere, not for its context or context invariants; one claiming none is not checked', async () => {
      const patient = (ext: Json[], profiled = true): Json => ({ resourceType: 'Patient', ...(profiled ? { meta: { profile: [PLAIN] } } : {}), contact: [{ name: { family: 'Ng' }, ...(ext.length ? { extension: ext } : {}) }] });
      const refused = await expectOutcome(await api.post('Patient', patient([{ url: BIRTH_PLACE, valueString: 'Utrecht' }])), 422);
      expect(where(refused.issue)).toEqual(['Patient.contact[0].extension[0].value.ofType(string)']);
      const modifier = await expectOutcome(await api.post('Patient', { ...patient([]), extension: [{ url: DO_NOT_PERFORM, valueBoolean: true }] }), 422);
      expect(where(modifier.issue)).toEqual(['Patient.extension[0]']);
      // The context (birthPlace belongs on Patient, not on a contact) is $validate's to report.
      expect((await api.post('Patient', patient([{ url: BIRTH_PLACE, valueAddress: { city: 'Utrecht' } }]))).status).toBe(201);
      expect((await api.post('Patient', patient([{ url: BIRTH_PLACE, valueString: 'Utrecht' }], false))).status).toBe(201);
      // Nor a fhirpath context that selects another element, nor a context invariant that does not hold.
      expect((await api.post('Patient', { ...patient([]), active: false, extension: [{ url: SCRIPTED, valueBoolean: true }] })).status).toBe(201);
      expect((await api.post('Patient', { ...patient([]), birthDate: '1999-01-01', _birthDate: { extension: [{ url: RECENT, valueBoolean: true }] } })).status).toBe(201);
    });
  });
});
