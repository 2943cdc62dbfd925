/**
 * Re-slices (`a:s/r`, R4 profiling.html "Re-slicing") enforced within the values of their slice, as HL7's
 * validator does. Profiles given by their differential (the snapshot generated), on both databases.
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
const id = (use: string, system = MRN) => ({ system, use, value: use });
const patient = (profile: string, extra: Json): Json => ({ resourceType: 'Patient', meta: { profile: [BASE + profile] }, ...extra });
const errors = (outcome: Json) => (outcome.issue as Json[]).filter((i) => i.severity === 'error').map((i) => `${i.expression?.[0]} ${i.details.text}`);

await eachStore((kind, fresh) => {
  describe(`re-slices (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const sd of [resliced(), inherited()]) await api.create(sd);
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
  });
});
