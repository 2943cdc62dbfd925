/**
 * References to other servers (R4 search.html, reference: a relative reference and the absolute URL it
 * resolves to are the same reference; another server's URL is another resource), on both databases:
 * searched, chained, included, revincluded, in compartments and to patient-context tokens, and a
 * database indexed by the model before, which took such a URL for this tenant's resource, reindexed;
 * `patient:missing` counts another server's URL naming a Patient, as `patient=<url>` finds it.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { compartmentsOf, storedIndex } from '../../src/fhir/indexer.ts';
import { INDEX_MODEL, reindex } from '../../src/fhir/reindex.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, fhirClient, readableUnder, type FhirClient, type Json } from '../helpers/fhir.ts';

const OTHER = 'http://other.org/fhir';
const LOINC = 'http://loinc.org';

const observation = (id: string, subject: string, extra: Json = {}): Json => ({
  resourceType: 'Observation', id, status: 'final', code: { coding: [{ system: LOINC, code: '718-7' }] }, subject: { reference: subject }, ...extra,
});

await eachStore((kind, fresh) => {
  describe(`references to other servers on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    let base: string;
    const entries = async (query: string, client = api): Promise<{ id: string; mode: string | undefined }[]> =>
      ((await client.search(query)).entry ?? []).map((e: Json) => ({ id: `${e.resource.resourceType}/${e.resource.id}`, mode: e.search?.mode }));
    const matches = async (query: string, client = api) => (await entries(query, client)).filter((e) => e.mode !== 'include').map((e) => e.id).sort();
    const included = async (query: string) => (await entries(query)).filter((e) => e.mode === 'include').map((e) => e.id).sort();

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      base = t.fhir();
      await api.put200({ resourceType: 'Patient', id: 'p1', name: [{ family: 'Smith' }] });
      await api.put200({ resourceType: 'Patient', id: 'p2', name: [{ family: 'Jones' }] });
      await api.put200({ resourceType: 'Practitioner', id: 'dr1', name: [{ family: 'House' }] });
      await api.put200(observation('rel', 'Patient/p1'));
      await api.put200(observation('own', `${base}/Patient/p1`, { performer: [{ reference: `${base}/Practitioner/dr1` }] }));
      await api.put200(observation('ext', `${OTHER}/Patient/p1`, { performer: [{ reference: `${OTHER}/Practitioner/dr1` }] }));
      await api.put200(observation('ext2', `${OTHER}/Patient/p2`));
      // Another tenant's URL on this server is not this tenant's resource either.
      await api.put200(observation('tenant2', `${t.fhir('t2')}/Patient/p1`));
    });
    afterAll(() => t.close());

    test('a search by Type/id or id finds relative references and absolute ones under the tenant\'s base, not other servers\'', async () => {
      for (const q of ['subject=Patient/p1', 'subject=p1', 'patient=p1', 'subject:Patient=p1', `subject=${base}/Patient/p1`, `patient=${base}/Patient/p1`]) {
        expect({ q, found: await matches(`Observation?${q}`) }).toEqual({ q, found: ['Observation/own', 'Observation/rel'] });
      }
      expect(await matches('Observation?subject=Patient/p2')).toEqual([]);
      expect(await matches('Observation?performer=Practitioner/dr1')).toEqual(['Observation/own']);
    });

    test('another server\'s URL finds the references that name it as written', async () => {
      expect(await matches(`Observation?subject=${OTHER}/Patient/p1`)).toEqual(['Observation/ext']);
      expect(await matches(`Observation?patient=${OTHER}/Patient/p1`)).toEqual(['Observation/ext']);
      expect(await matches(`Observation?subject:Patient=${OTHER}/Patient/p2`)).toEqual(['Observation/ext2']);
      expect(await matches(`Observation?subject=${t.fhir('t2')}/Patient/p1`)).toEqual(['Observation/tenant2']);
      expect(await matches(`Observation?subject=${OTHER}/Patient/p1,Patient/p2`)).toEqual(['Observation/ext']);
      expect(await matches(`Observation?_filter=${encodeURIComponent(`subject ne "${OTHER}/Patient/p1"`)}`)).toEqual(['Observation/ext2', 'Observation/own', 'Observation/rel', 'Observation/tenant2']);
      expect(await matches(`Observation?_filter=${encodeURIComponent(`subject ne "${base}/Patient/p1"`)}`)).toEqual(['Observation/ext', 'Observation/ext2', 'Observation/tenant2']);
      // It is a reference for `:missing`.
      expect(await matches('Observation?subject:missing=true')).toEqual([]);
    });

    test('chains, _has, _include and _revinclude follow local references alone', async () => {
      expect(await matches('Observation?subject:Patient.name=smith')).toEqual(['Observation/own', 'Observation/rel']);
      expect(await matches('Observation?subject:Patient.name=jones')).toEqual([]);
      expect(await matches('Patient?_has:Observation:subject:code=718-7')).toEqual(['Patient/p1']);
      expect(await included('Observation?_id=ext&_include=Observation:subject&_include=Observation:performer')).toEqual([]);
      expect(await included('Observation?_id=own&_include=Observation:*')).toEqual(['Patient/p1', 'Practitioner/dr1']);
      expect(await included('Patient?_id=p1&_revinclude=Observation:subject')).toEqual(['Observation/own', 'Observation/rel']);
      expect(await included('Practitioner?_id=dr1&_revinclude=Observation:performer')).toEqual(['Observation/own']);
    });

    test('a reference to another server\'s patient puts the resource in no compartment here', async () => {
      expect(await matches('Patient/p1/Observation')).toEqual(['Observation/own', 'Observation/rel']);
      expect(await matches('Patient/p2/Observation')).toEqual([]);
      const everything = await api.get('Patient/p1/$everything');
      const ids = ((await everything.json()) as Json).entry.map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`);
      expect(ids.filter((id: string) => id.startsWith('Observation/')).sort()).toEqual(['Observation/own', 'Observation/rel']);
      // A patient-context token of p1 reads and finds its own, and neither reads nor finds the other server's p1's.
      const p1 = fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'p1' }));
      expect(await matches('Observation', p1)).toEqual(['Observation/own', 'Observation/rel']);
      expect((await p1.get('Observation/own')).status).toBe(200);
      expect((await p1.get('Observation/ext')).status).toBe(403);
      // Nor may it write one.
      const write = fhirClient(t, await craftToken(t, 'patient/*.*', { patient: 'p1' }));
      expect((await write.put('Observation/ext3', observation('ext3', `${OTHER}/Patient/p1`))).status).toBe(403);
      expect((await write.put('Observation/own2', observation('own2', `${base}/Patient/p1`))).status).toBe(201);
    });

    test('a database indexed by the model before is reindexed from its resources holding absolute references', async () => {
      const store = t.store;
      // Model 7 took any URL ending in Type/id for this tenant's resource: `ext` was Patient/p1's.
      const old = (content: string) => {
        const resource = JSON.parse(content) as Json;
        return { index: storedIndex(resource, OTHER), compartments: compartmentsOf(resource, OTHER) };
      };
      const page = await store.resources.indexing.page(0, 1000);
      const ext = page.find((r) => r.id === 'ext')!;
      await store.resources.write('t1', (w) => w.replaceIndex([{ type: ext.type, id: ext.id, versionId: ext.versionId, ...old(ext.content) }]));
      await store.resources.indexing.setState({ model: 7, after: 0 });
      expect(await matches('Observation?subject=Patient/p1')).toEqual(['Observation/ext', 'Observation/own', 'Observation/own2', 'Observation/rel']);
      expect(await matches('Patient/p1/Observation')).toContain('Observation/ext');

      const run = await reindex(store, { fhirBase: (tenant) => t.fhir(tenant) });
      // Only the resources holding an absolute reference were rebuilt.
      expect(run.rebuilt).toBe(page.filter((r) => /"reference":"http/.test(r.content)).length);
      expect(run.rebuilt).toBeGreaterThanOrEqual(5);
      expect(await store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
      expect(await matches('Observation?subject=Patient/p1')).toEqual(['Observation/own', 'Observation/own2', 'Observation/rel']);
      expect(await matches(`Observation?subject=${OTHER}/Patient/p1`)).toEqual(['Observation/ext']);
      expect(await matches('Patient/p1/Observation')).toEqual(['Observation/own', 'Observation/own2', 'Observation/rel']);
    });

    test('patient:missing counts another server\'s URL naming a Patient, exactly where patient=<url> finds it, in SQL and in memory', async () => {
      // Subjects by URL (code `url`), and whether absoluteType reads a Patient in them.
      const urls: [string, string, boolean][] = [
        ['u1', `${OTHER}/Patient/p1`, true],
        ['u2', 'https://other.org/Patient/p3/_history/2', true],
        ['u3', 'HTTP://OTHER.ORG/base/Patient/p5', true],
        ['u4', `${OTHER}/Group/g1`, false],
        ['u5', `${OTHER}/Patient/p1/x`, false],
        ['u6', 'http://Patient/p9', false],
        ['u7', `${OTHER}/Patient/bad_id`, false],
        ['u8', `${OTHER}/Patient/_history/2`, false],
      ];
      const code = { coding: [{ system: LOINC, code: 'url' }] };
      for (const [id, url] of urls) await api.put200(observation(id, url, { code }));
      await api.put200(observation('u-none', 'Patient/p1', { code, subject: undefined }));
      await api.put200(observation('u-local', 'Patient/p1', { code }));
      const ids = [...urls.map(([id]) => id), 'u-none', 'u-local'];
      const naming = urls.filter(([, , patient]) => patient).map(([id]) => `Observation/${id}`);
      const readable = async (query: string) => (await readableUnder(t, 'Observation', query, ids)).map((id) => `Observation/${id}`);
      for (const [id, url, patient] of urls) {
        const found = (await matches(`Observation?code=url&patient=${encodeURIComponent(url)}`)).includes(`Observation/${id}`);
        expect({ url, found }).toEqual({ url, found: patient });
      }
      const present = [...naming, 'Observation/u-local'].sort();
      const absent = ids.map((id) => `Observation/${id}`).filter((id) => !present.includes(id)).sort();
      expect(await matches('Observation?code=url&patient:missing=false')).toEqual(present);
      expect(await matches('Observation?code=url&patient:missing=true')).toEqual(absent);
      expect(await readable('code=url&patient:missing=false')).toEqual(present);
      expect(await readable('code=url&patient:missing=true')).toEqual(absent);
      // Counted, and driving a search that nothing else drives (the planner's last resort).
      expect(((await api.search('Observation?code=url&patient:missing=true&_summary=count')) as Json).total).toBe(absent.length);
      expect((await matches('Observation?patient:missing=true')).filter((id) => id.startsWith('Observation/u'))).toEqual(absent);
      expect(await matches('Observation?code=url&subject:missing=true')).toEqual(['Observation/u-none']);
    });
  });
});
