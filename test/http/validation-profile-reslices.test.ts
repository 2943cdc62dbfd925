/**
 * Re-slices (`a:s/r`, R4 profiling.html "Re-slicing") enforced within the values of their slice, and slices
 * of an element nothing slices applied to the element, as HL7's validator does. Profiles given by their
 * differential (the snapshot generated), on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const BASE = 'http://example.org/fhir/StructureDefinition/';
const MRN = 'http://example.org/mrn';
const diff = (name: string, type: string, element: Json[]): Json => ({
  resourceType: 'StructureDefinition', url: BASE + name, name, status: 'active', kind: 'resource', abstract: false,
  type, baseDefinition: `http://hl7.org/fhir/StructureDefinition/${type}`, derivation: 'constraint', differential: { element },
});
const e = (id: string, extra: Json = {}) => ({ id, path: id.replace(/:[^.]*/g, ''), ...extra });

/** identifier sliced by system; its slice `mrn` (at most 2) re-sliced by use, closed: one `official`, at most one `old`. */
const resliced = () => diff('resliced', 'Patient', [
  e('Patient.identifier', { slicing: { discriminator: [{ type: 'value', path: 'system' }], rules: 'open' } }),
  e('Patient.identifier:mrn', { sliceName: 'mrn', max: '2', slicing: { discriminator: [{ type: 'value', path: 'use' }], rules: 'closed' } }),
  e('Patient.identifier:mrn.system', { min: 1, fixedUri: MRN }),
  e('Patient.identifier:mrn/official', { sliceName: 'mrn/official', min: 1, max: '1' }),
  e('Patient.identifier:mrn/official.use', { fixedCode: 'official' }),
  e('Patient.identifier:mrn/old', { sliceName: 'mrn/old', max: '1' }),
  e('Patient.identifier:mrn/old.use', { fixedCode: 'old' }),
]);
/** As above, but the slice `mrn` has no slicing of its own: its re-slices divide it by the slicing's discriminators (system and use). */
const inherited = () => diff('inherited', 'Patient', [
  e('Patient.identifier', { slicing: { discriminator: [{ type: 'value', path: 'system' }, { type: 'value', path: 'use' }], rules: 'open' } }),
  e('Patient.identifier:mrn', { sliceName: 'mrn' }),
  e('Patient.identifier:mrn.system', { min: 1, fixedUri: MRN }),
  e('Patient.identifier:mrn/official', { sliceName: 'mrn/official', min: 1 }),
  e('Patient.identifier:mrn/official.use', { fixedCode: 'official' }),
]);
/** Slices of elements nothing slices (as R4's catalog has `Composition.date:IssueDate`): their rules hold for the element. */
const unsliced = () => diff('unsliced', 'Patient', [
  e('Patient.birthDate:born', { sliceName: 'born', min: 1 }),
  e('Patient.name:usual', { sliceName: 'usual', max: '1' }),
  e('Patient.name:usual.use', { fixedCode: 'usual' }),
]);
/** The same in the form of HL7's snapshots (catalog's): the slice stands in place of the element, which the snapshot does not list
 * (an extension slice so is still a slice, by url). */
const BIRTH_PLACE = 'http://hl7.org/fhir/StructureDefinition/patient-birthPlace';
const inPlace = (): Json => {
  const el = (id: string, min: number, max: string, extra: Json = {}) => ({ id, path: id.replace(/:[^.]*/g, ''), short: id, definition: id, min, max, base: { path: id.replace(/:[^.]*/g, ''), min: 0, max }, ...extra });
  return {
    ...diff('in-place', 'Patient', []), differential: undefined, fhirVersion: '4.0.1',
    snapshot: { element: [el('Patient', 0, '*'), el('Patient.birthDate:born', 1, '1', { sliceName: 'born', type: [{ code: 'date' }] }),
      el('Patient.extension:birthPlace', 1, '1', { sliceName: 'birthPlace', type: [{ code: 'Extension', profile: [BIRTH_PLACE] }] })] },
  };
};

const id = (use: string, system = MRN) => ({ system, use, value: use });
const patient = (profile: string, extra: Json): Json => ({ resourceType: 'Patient', meta: { profile: [BASE + profile] }, ...extra });
const errors = (outcome: Json) => (outcome.issue as Json[]).filter((i) => i.severity === 'error').map((i) => `${i.expression?.[0]} ${i.details.text}`);

await eachStore((kind, fresh) => {
  describe(`re-slices and unsliced slices (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const sd of [resliced(), inherited(), unsliced(), inPlace()]) await api.create(sd);
    });
    afterAll(() => t.close());

    test("a re-slice's count and closed re-slicing hold within its slice's values only", async () => {
      expect((await api.post('Patient', patient('resliced', { identifier: [id('official'), id('old'), id('usual', 'http://other')] }))).status).toBe(201);
      const missing = await expectOutcome(await api.post('Patient', patient('resliced', { identifier: [id('old')] })), 422);
      expect(errors(missing)).toEqual([expect.stringMatching(/^Patient\.identifier Patient\.identifier:mrn\/official: at least 1 required/)]);
      const closed = await expectOutcome(await api.post('Patient', patient('resliced', { identifier: [id('official'), id('usual')] })), 422);
      expect(errors(closed)).toEqual([expect.stringMatching(/^Patient\.identifier\[1\] Patient\.identifier:mrn .*matches none of the slices \(mrn\/official, mrn\/old\) and the slicing is closed$/)]);
      const two = await expectOutcome(await api.post('Patient', patient('resliced', { identifier: [id('official'), id('official'), id('old')] })), 422);
      expect(errors(two).sort()).toEqual([
        expect.stringMatching(/^Patient\.identifier Patient\.identifier:mrn\/official: at most 1 allowed .* found 2$/),
        expect.stringMatching(/^Patient\.identifier Patient\.identifier:mrn: at most 2 allowed .* found 3$/),
      ]);
    });

    test('a slice without a slicing of its own is re-sliced by the discriminators of the slicing it belongs to', async () => {
      expect((await api.post('Patient', patient('inherited', { identifier: [id('official')] }))).status).toBe(201);
      const missing = await expectOutcome(await api.post('Patient', patient('inherited', { identifier: [id('old')] })), 422);
      expect(errors(missing)).toEqual([expect.stringMatching(/^Patient\.identifier Patient\.identifier:mrn\/official: at least 1 required/)]);
    });

    test("$validate reports a re-slice's problems", async () => {
      const res = await api.post('Patient/$validate', patient('resliced', { identifier: [id('usual')] }));
      expect(res.status).toBe(200);
      const texts = errors((await res.json()) as Json);
      expect(texts).toHaveLength(2);
      expect(texts.some((x) => x.includes('Patient.identifier:mrn/official: at least 1 required'))).toBe(true);
      expect(texts.some((x) => x.startsWith('Patient.identifier[0]') && x.includes('closed'))).toBe(true);
    });

    test('the rules of a slice of an element nothing slices hold for every value of the element', async () => {
      expect((await api.post('Patient', patient('unsliced', { birthDate: '1970-01-01', name: [{ use: 'usual', family: 'A' }] }))).status).toBe(201);
      const refused = await expectOutcome(await api.post('Patient', patient('unsliced', { name: [{ use: 'official', family: 'A' }, { use: 'usual', family: 'B' }] })), 422);
      expect(errors(refused).sort()).toEqual([
        expect.stringMatching(/^Patient\.birthDate Patient\.birthDate:born: at least 1 required/),
        expect.stringMatching(/^Patient\.name Patient\.name:usual: at most 1 allowed .* found 2$/),
        expect.stringMatching(/^Patient\.name\[0\]\.use Patient\.name:usual\.use .*must be exactly "usual"/),
      ]);
      const born = { url: BIRTH_PLACE, valueAddress: { city: 'Oslo' } };
      const other = { url: 'http://example.org/other', valueString: 'x' };
      expect((await api.post('Patient', patient('in-place', { birthDate: '1970-01-01', extension: [other, born] }))).status).toBe(201);
      const inPlace = await expectOutcome(await api.post('Patient', patient('in-place', { gender: 'other', extension: [other] })), 422);
      expect(errors(inPlace).sort()).toEqual([
        expect.stringMatching(/^Patient\.birthDate Patient\.birthDate:born: at least 1 required/),
        expect.stringMatching(/^Patient\.extension Patient\.extension:birthPlace: at least 1 required/),
      ]);
    });
  });
});
