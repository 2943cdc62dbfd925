/**
 * `type` and `profile` discriminators through `resolve()` followed by more path (`item.resolve().value`,
 * R4 profiling.html "Discriminator"): a value's slice is chosen by what the held target has at that path,
 * against the element there in the slice's target profile, as HL7's validator chooses it. Profiles given
 * by their differential; targets contained (never read from the store). On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const BASE = 'http://example.org/fhir/StructureDefinition/';
const diff = (name: string, type: string, element: Json[]): Json => ({
  resourceType: 'StructureDefinition', url: BASE + name, name: name.replace(/-/g, ''), status: 'active', kind: 'resource', abstract: false,
  type, baseDefinition: `http://hl7.org/fhir/StructureDefinition/${type}`, derivation: 'constraint', differential: { element },
});
const e = (id: string, extra: Json = {}) => ({ id, path: id.replace(/:[^.]*/g, ''), ...extra });
const item = (target: string) => ({ type: [{ code: 'Reference', targetProfile: [BASE + target] }] });

/** A Quantity without a comparator. */
const exact = (): Json => ({ ...diff('exact-quantity', 'Quantity', [e('Quantity.comparator', { max: '0' })]), kind: 'complex-type' });
/** An Observation whose value is a Quantity, profiled as exact-quantity; one whose value is a CodeableConcept. */
const numeric = () => diff('numeric-obs', 'Observation', [e('Observation.value[x]', { type: [{ code: 'Quantity', profile: [`${BASE}exact-quantity`] }] })]);
/** The same with R4's own SimpleQuantity (a constraint on Quantity among R4's data type definitions). */
const simple = () => diff('simple-obs', 'Observation', [e('Observation.value[x]', { type: [{ code: 'Quantity', profile: ['http://hl7.org/fhir/StructureDefinition/SimpleQuantity'] }] })]);
const bySimple = () => diff('list-by-simple-quantity', 'List', [
  e('List.entry', { slicing: { discriminator: [{ type: 'profile', path: 'item.resolve().value' }], rules: 'open' } }),
  e('List.entry:simple', { sliceName: 'simple', min: 1 }),
  e('List.entry:simple.item', item('simple-obs')),
]);
const coded = () => diff('coded-obs', 'Observation', [e('Observation.value[x]', { type: [{ code: 'CodeableConcept' }] })]);
/** A List of exactly one numeric Observation and at most one coded one, sliced by the type of `item.resolve().value`, closed. */
const byType = () => diff('list-by-value-type', 'List', [
  e('List.entry', { slicing: { discriminator: [{ type: 'type', path: 'item.resolve().value' }], rules: 'closed' } }),
  e('List.entry:numeric', { sliceName: 'numeric', min: 1, max: '1' }),
  e('List.entry:numeric.item', item('numeric-obs')),
  e('List.entry:coded', { sliceName: 'coded', max: '1' }),
  e('List.entry:coded.item', item('coded-obs')),
]);
/** A List with an entry whose Observation's value conforms to exact-quantity (sliced by the profile of `item.resolve().value`). */
const byProfile = () => diff('list-by-value-profile', 'List', [
  e('List.entry', { slicing: { discriminator: [{ type: 'profile', path: 'item.resolve().value' }], rules: 'open' } }),
  e('List.entry:simple', { sliceName: 'simple', min: 1 }),
  e('List.entry:simple.item', item('numeric-obs')),
]);

const obs = (id: string, value: Json): Json => ({ resourceType: 'Observation', id, status: 'final', code: { text: id }, ...value });
const list = (profile: string, contained: Json[], refs = contained.map((c) => `#${c.id}`)): Json => ({
  resourceType: 'List', meta: { profile: [BASE + profile] }, status: 'current', mode: 'working', contained, entry: refs.map((reference) => ({ item: { reference } })),
});
const errors = (outcome: Json) => (outcome.issue as Json[]).filter((i) => i.severity === 'error').map((i) => `${i.expression?.[0]} ${i.details.text}`);
const QTY = { valueQuantity: { value: 1, unit: 'mg' } };
const CC = { valueCodeableConcept: { text: 'high' } };

await eachStore((kind, fresh) => {
  describe(`discriminators through resolve() and on (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const sd of [exact(), numeric(), coded(), byType(), byProfile(), simple(), bySimple()]) await api.create(sd);
    });
    afterAll(() => t.close());

    test("a type discriminator at item.resolve().value: each entry's slice is the one whose target profile has its value's type", async () => {
      expect((await api.post('List', list('list-by-value-type', [obs('q', QTY), obs('c', CC)]))).status).toBe(201);
      const none = await expectOutcome(await api.post('List', list('list-by-value-type', [obs('c', CC)])), 422);
      expect(errors(none)).toEqual([expect.stringMatching(/^List\.entry List\.entry:numeric: at least 1 required/)]);
      const two = await expectOutcome(await api.post('List', list('list-by-value-type', [obs('q', QTY), obs('r', QTY)])), 422);
      expect(errors(two)).toEqual([expect.stringMatching(/^List\.entry List\.entry:numeric: at most 1 allowed .* found 2$/)]);
      const other = await expectOutcome(await api.post('List', list('list-by-value-type', [obs('q', QTY), obs('s', { valueString: 'x' })])), 422);
      expect(errors(other)).toEqual([expect.stringMatching(/^List\.entry\[1\] .*matches none of the slices \(numeric, coded\) and the slicing is closed$/)]);
    });

    test('a target the request does not hold decides no slice: the counts are not judged, and $validate says so', async () => {
      const res = await api.post('List/$validate', list('list-by-value-type', [obs('c', CC)], ['#c', 'Observation/elsewhere']));
      const outcome = (await res.json()) as Json;
      expect(errors(outcome)).toEqual([]);
      expect((outcome.issue as Json[]).some((i) => i.severity === 'warning' && i.details.text.includes('depends on a reference'))).toBe(true);
    });

    test("a profile discriminator at item.resolve().value: the value must conform to the profile the target profile's element names", async () => {
      expect((await api.post('List', list('list-by-value-profile', [obs('q', QTY)]))).status).toBe(201);
      // A comparator is not allowed in an exact-quantity: that value fills no slice.
      const refused = await expectOutcome(await api.post('List', list('list-by-value-profile', [obs('q', { valueQuantity: { value: 1, comparator: '<' } })])), 422);
      expect(errors(refused)).toEqual([expect.stringMatching(/^List\.entry List\.entry:simple: at least 1 required/)]);
    });

    test("R4's SimpleQuantity as the target profile's value profile: known, so a comparator fills no slice and an exact value does", async () => {
      expect((await api.post('List', list('list-by-simple-quantity', [obs('q', QTY)]))).status).toBe(201);
      const refused = await expectOutcome(await api.post('List', list('list-by-simple-quantity', [obs('q', { valueQuantity: { value: 1, comparator: '<' } })])), 422);
      expect(errors(refused)).toEqual([expect.stringMatching(/^List\.entry List\.entry:simple: at least 1 required/)]);
    });
  });
});
