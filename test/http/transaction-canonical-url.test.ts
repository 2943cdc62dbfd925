/**
 * A transaction or batch entry whose fullUrl is its canonical resource's `url` (as IG and terminology
 * Bundles write them) keeps that `url`, on both databases: a fullUrl is replaced in references and in
 * uri elements that link (FHIR R4 http 3.1.0.11.2), not in identities (a canonical resource's `url`, a
 * ValueSet's include system, a Coding's system, an Extension's url) nor in `canonical` elements, and a
 * fullUrl that is its entry's canonical URL is not replaced in any uri element.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { bundlePoster, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const BASE = 'http://example.org/fhir';
const VS = `${BASE}/ValueSet/b`;
const CS = `${BASE}/CodeSystem/colours`;
const SD = `${BASE}/StructureDefinition/favourite-colour`;
const CM = `${BASE}/ConceptMap/colours-to-snomed`;

const tx = (entry: Json[], type = 'transaction') => ({ resourceType: 'Bundle', type, entry });
const put = (fullUrl: string, resource: Json) => ({ fullUrl, resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
const post = (fullUrl: string, resource: Json) => ({ fullUrl, resource, request: { method: 'POST', url: resource.resourceType } });

/** A ValueSet with `id`, or none (`null`: for a POST). */
const valueSet = (id: string | null = 'b', url = VS): Json => ({
  resourceType: 'ValueSet', ...(id === null ? {} : { id }), url, status: 'active',
  compose: { include: [{ system: CS }] },
});
const codeSystem = (id = 'colours'): Json => ({
  resourceType: 'CodeSystem', id, url: CS, status: 'active', content: 'complete', valueSet: VS,
  concept: [{ code: 'red', display: 'Red' }, { code: 'blue', display: 'Blue' }],
});
const structureDefinition = (id = 'favourite-colour'): Json => ({
  resourceType: 'StructureDefinition', id, url: SD, name: 'FavouriteColour', status: 'active', kind: 'complex-type', abstract: false,
  context: [{ type: 'element', expression: 'Patient' }], type: 'Extension',
  baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Extension', derivation: 'constraint',
  differential: { element: [
    { id: 'Extension', path: 'Extension', max: '1' },
    { id: 'Extension.url', path: 'Extension.url', fixedUri: SD },
    { id: 'Extension.value[x]', path: 'Extension.value[x]', type: [{ code: 'Coding' }], binding: { strength: 'required', valueSet: VS } },
  ] },
});
const conceptMap = (): Json => ({
  resourceType: 'ConceptMap', id: 'colours-to-snomed', url: CM, status: 'active', sourceUri: VS,
  group: [{ source: CS, target: 'http://snomed.info/sct', element: [{ code: 'red', target: [{ code: '386713009', equivalence: 'equivalent' }] }] }],
});

await eachStore((kind, fresh) => {
  describe(`a canonical resource's url in a transaction on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const { ok } = bundlePoster(() => t, () => api);
    const read = async (location: string): Promise<Json> => {
      const res = await api.get(location.replace(/\/_history\/\d+$/, ''));
      expect(res.status).toBe(200);
      return (await res.json()) as Json;
    };

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    test('the reproduction: a PUT ValueSet whose fullUrl is its url keeps the url', async () => {
      const res = await ok(tx([put(VS, valueSet())]));
      expect(res.entry[0].response.status).toMatch(/^20[01] /);
      expect((await read('ValueSet/b')).url).toBe(VS);
    });

    test('an IG-style Bundle: CodeSystem, ValueSet, StructureDefinition and ConceptMap keep their urls and the canonical URLs they use', async () => {
      const res = await ok(tx([put(CS, codeSystem()), put(VS, valueSet()), put(SD, structureDefinition()), put(CM, conceptMap())]));
      expect(res.entry.map((e: Json) => e.response.status.slice(0, 1))).toEqual(['2', '2', '2', '2']);
      const cs = await read('CodeSystem/colours');
      expect([cs.url, cs.valueSet]).toEqual([CS, VS]);
      const vs = await read('ValueSet/b');
      expect([vs.url, vs.compose.include[0].system]).toEqual([VS, CS]);
      const sd = await read('StructureDefinition/favourite-colour');
      expect(sd.url).toBe(SD);
      expect(sd.differential.element[1].fixedUri).toBe(SD);
      expect(sd.differential.element[2].binding.valueSet).toBe(VS);
      const cm = await read('ConceptMap/colours-to-snomed');
      // sourceUri, a uri that is no identity of its own, names the ValueSet by its canonical URL, the entry's fullUrl.
      expect([cm.url, cm.sourceUri, cm.group[0].source]).toEqual([CM, VS, CS]);
      // The terminology works on what was stored.
      const expanded = await api.get(`ValueSet/$expand?url=${encodeURIComponent(VS)}`);
      expect(expanded.status).toBe(200);
      expect(((await expanded.json()) as Json).expansion.contains.map((c: Json) => c.code).sort()).toEqual(['blue', 'red']);
    });

    test('a POST with a canonical URL as fullUrl: the new id is given, the url kept', async () => {
      const res = await ok(tx([post(`${BASE}/ValueSet/posted`, valueSet(null, `${BASE}/ValueSet/posted`))]));
      const stored = await read(res.entry[0].response.location);
      expect(stored.id).not.toBe('posted');
      expect(stored.url).toBe(`${BASE}/ValueSet/posted`);
    });

    test('references to the fullUrl are rewritten to the entry; canonicals, systems and extension urls are kept', async () => {
      const res = await ok(tx([
        put(CS, codeSystem()),
        post(`${BASE}/ValueSet/new-one`, valueSet(null, `${BASE}/ValueSet/new-one`)),
        put(SD, structureDefinition()),
        post('urn:uuid:3b0c6c8e-5f7a-4d0e-9a55-0000000000a1', {
          resourceType: 'Provenance', recorded: '2026-01-01T00:00:00Z', agent: [{ who: { display: 'IG publisher' } }],
          target: [{ reference: `${BASE}/ValueSet/new-one` }, { reference: CS }],
        }),
        post('urn:uuid:3b0c6c8e-5f7a-4d0e-9a55-0000000000a2', {
          resourceType: 'Questionnaire', status: 'active',
          item: [{ linkId: 'colour', text: 'Colour', type: 'choice', answerValueSet: `${BASE}/ValueSet/new-one` }],
        }),
        post('urn:uuid:3b0c6c8e-5f7a-4d0e-9a55-0000000000a3', {
          resourceType: 'Patient', name: [{ family: 'Rainbow' }],
          identifier: [{ system: CS, value: 'p-1' }],
          extension: [{ url: SD, valueCoding: { system: CS, code: 'blue' } }],
        }),
      ]));
      const vsId = res.entry[1].resource.id as string;
      expect(vsId).not.toBe('new-one');
      const provenance = await read(res.entry[3].response.location);
      expect(provenance.target.map((r: Json) => r.reference)).toEqual([`ValueSet/${vsId}`, 'CodeSystem/colours']);
      const questionnaire = await read(res.entry[4].response.location);
      expect(questionnaire.item[0].answerValueSet).toBe(`${BASE}/ValueSet/new-one`);
      const patient = await read(res.entry[5].response.location);
      expect(patient.identifier[0].system).toBe(CS);
      expect(patient.extension[0]).toEqual({ url: SD, valueCoding: { system: CS, code: 'blue' } });
      expect((await read(res.entry[1].response.location)).url).toBe(`${BASE}/ValueSet/new-one`);
    });

    test('a batch: each entry keeps its url', async () => {
      const res = await ok(tx([put(CS, codeSystem('colours')), put(VS, valueSet('b')), put(SD, structureDefinition())], 'batch'));
      expect(res.entry.map((e: Json) => e.response.status.slice(0, 1))).toEqual(['2', '2', '2']);
      expect((await read('CodeSystem/colours')).url).toBe(CS);
      expect((await read('ValueSet/b')).url).toBe(VS);
      expect((await read('StructureDefinition/favourite-colour')).url).toBe(SD);
    });

    test('a MessageDefinition, whose url R4 does not call absolute, keeps it as its fullUrl, as other canonical resources do', async () => {
      const MD = `${BASE}/MessageDefinition/admit-notice`;
      const md = { resourceType: 'MessageDefinition', id: 'admit-notice', url: MD, status: 'active', date: '2026-01-01', eventCoding: { system: 'http://example.org/events', code: 'admit' } };
      const res = await ok(tx([put(MD, md), post('urn:uuid:3b0c6c8e-5f7a-4d0e-9a55-0000000000c1', {
        resourceType: 'Provenance', recorded: '2026-01-01T00:00:00Z', agent: [{ who: { display: 'IG publisher' } }], target: [{ reference: MD }],
      })]));
      expect(res.entry.map((e: Json) => e.response.status.slice(0, 1))).toEqual(['2', '2']);
      expect((await read('MessageDefinition/admit-notice')).url).toBe(MD);
      expect((await read(res.entry[1].response.location)).target).toEqual([{ reference: 'MessageDefinition/admit-notice' }]);
      // In a batch too.
      const batch = await ok(tx([put(MD, { ...md, date: '2026-02-01' })], 'batch'));
      expect(batch.entry[0].response.status).toMatch(/^200 /);
      expect(await read('MessageDefinition/admit-notice')).toMatchObject({ url: MD, date: '2026-02-01' });
    });

    test('a contained canonical resource keeps its url, and links that are no identity are still replaced', async () => {
      const res = await ok(tx([
        post('urn:uuid:3b0c6c8e-5f7a-4d0e-9a55-0000000000b1', { resourceType: 'Binary', contentType: 'text/plain', data: 'aGk=' }),
        post('urn:uuid:3b0c6c8e-5f7a-4d0e-9a55-0000000000b2', {
          resourceType: 'Questionnaire', status: 'active',
          contained: [{ resourceType: 'ValueSet', id: 'inline', url: 'urn:uuid:3b0c6c8e-5f7a-4d0e-9a55-0000000000b1', status: 'active', compose: { include: [{ system: CS }] } }],
          item: [
            { linkId: 'colour', text: 'Colour', type: 'choice', answerValueSet: '#inline' },
            { linkId: 'file', text: 'File', type: 'attachment', initial: [{ valueAttachment: { contentType: 'text/plain', url: 'urn:uuid:3b0c6c8e-5f7a-4d0e-9a55-0000000000b1' } }] },
          ],
        }),
      ]));
      const binary = `Binary/${res.entry[0].resource.id}`;
      const questionnaire = await read(res.entry[1].response.location);
      expect(questionnaire.contained[0].url).toBe('urn:uuid:3b0c6c8e-5f7a-4d0e-9a55-0000000000b1');
      expect(questionnaire.item[1].initial[0].valueAttachment.url).toBe(binary);
    });
  });
});
