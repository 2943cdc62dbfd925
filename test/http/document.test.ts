/**
 * `Composition/{id}/$document` (R4 Composition-document, documents.html) on both databases: the document
 * Bundle (Composition first, every resource it refers to once, a List's items, absolute fullUrls,
 * identifier and timestamp), the type-level form with `id`, GET and POST, `persist`, each error, and access
 * (a resource the token may not read is a 403, never left out).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, craftToken, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const entries = (b: Json) => (b.entry as Json[]).map((e) => `${e.resource.resourceType}/${e.resource.id}`);

await eachStore((kind, fresh) => {
  describe(`Composition/$document (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const composition = (id: string, extra: Json = {}) => ({
      resourceType: 'Composition', id, status: 'final', type: { text: 'Discharge summary' }, date: '2026-01-10', title: 'Discharge',
      subject: { reference: 'Patient/p1' }, author: [{ reference: 'Practitioner/dr' }], ...extra,
    });
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Patient', id: 'p1', managingOrganization: { reference: 'Organization/far' } });
      await api.put200({ resourceType: 'Patient', id: 'p2' });
      await api.put200({ resourceType: 'Organization', id: 'org', name: 'Hospital' });
      await api.put200({ resourceType: 'Organization', id: 'far', name: 'Far' });
      await api.put200({ resourceType: 'Practitioner', id: 'dr' });
      await api.put200({ resourceType: 'Practitioner', id: 'nurse' });
      await api.put200({ resourceType: 'Encounter', id: 'e1', status: 'finished', class: { code: 'IMP' }, subject: { reference: 'Patient/p1' } });
      for (const id of ['o1', 'o2', 'o3']) {
        await api.put200({ resourceType: 'Observation', id, status: 'final', code: { text: id }, subject: { reference: 'Patient/p1' }, performer: [{ reference: 'Practitioner/nurse' }], valueQuantity: { value: 1.5, unit: 'mg' } });
      }
      // A decimal as written (1.50), which the document keeps.
      expect((await api.put('Observation/o3', '{"resourceType":"Observation","id":"o3","status":"final","code":{"text":"o3"},"subject":{"reference":"Patient/p1"},"valueQuantity":{"value":1.50,"unit":"mg"}}')).status).toBe(200);
      await api.put200({ resourceType: 'List', id: 'meds', status: 'current', mode: 'snapshot', subject: { reference: 'Patient/p1' }, entry: [{ item: { reference: 'Observation/o3' } }, { item: { reference: 'Observation/o1' } }] });
      await api.put200(composition('c1', {
        encounter: { reference: 'Encounter/e1' },
        attester: [{ mode: 'legal', party: { reference: `${t.fhir()}/Practitioner/dr` } }],
        custodian: { reference: 'Organization/org' },
        section: [
          { title: 'Results', author: [{ reference: 'Practitioner/nurse' }], entry: [{ reference: 'Observation/o2' }, { reference: 'Observation/o1' }] },
          { title: 'Medications', entry: [{ reference: 'List/meds' }], section: [{ title: 'Nested', entry: [{ reference: 'Observation/o2' }, { reference: '#inline' }] }] },
        ],
        contained: [{ resourceType: 'Observation', id: 'inline', status: 'final', code: { text: 'inline' } }],
      }));
    });
    afterAll(() => t.close());

    /** What c1's document holds, in order: the Composition, then its references in document order, then the List's items. */
    const C1 = [
      'Composition/c1', 'Patient/p1', 'Practitioner/dr', 'Encounter/e1', 'Organization/org', 'Practitioner/nurse',
      'Observation/o2', 'Observation/o1', 'List/meds', 'Observation/o3',
    ];

    test('a document Bundle: the Composition first, every resource it refers to once, a List\'s items; absolute fullUrls, identifier, timestamp', async () => {
      t.clock.advance(60_000);
      const res = await api.get('Composition/c1/$document');
      expect(res.status).toBe(200);
      const b = (await res.json()) as Json;
      expect(b.resourceType).toBe('Bundle');
      expect(b.type).toBe('document');
      expect(b.timestamp).toBe(new Date(t.clock.now()).toISOString());
      expect(b.identifier.system).toBe('urn:ietf:rfc:3986');
      expect(b.identifier.value).toMatch(/^urn:uuid:[0-9a-f-]{36}$/);
      expect(entries(b)).toEqual(C1);
      for (const e of b.entry as Json[]) expect(e.fullUrl).toBe(`${t.fhir()}/${e.resource.resourceType}/${e.resource.id}`);
      // Resources the referenced ones refer to further (the patient's organization) are not gathered.
      expect(entries(b)).not.toContain('Organization/far');
      // Stored text as is: the decimal keeps its written form.
      expect(await (await api.get('Composition/c1/$document')).text()).toContain('"value":1.50');
      // Each document is a new one: never the same identifier.
      const again = (await (await api.get('Composition/c1/$document')).json()) as Json;
      expect(again.identifier.value).not.toBe(b.identifier.value);
    });

    test('the type-level form with id (a plain id or its URL), and POST with a Parameters body', async () => {
      expect(entries((await (await api.get('Composition/$document?id=c1')).json()) as Json)).toEqual(C1);
      expect(entries((await (await api.get(`Composition/$document?id=${encodeURIComponent(`${t.fhir()}/Composition/c1`)}`)).json()) as Json)).toEqual(C1);
      const post = await api.post('Composition/$document', { resourceType: 'Parameters', parameter: [{ name: 'id', valueUri: 'c1' }] });
      expect(post.status).toBe(200);
      expect(entries((await post.json()) as Json)).toEqual(C1);
      const instance = await api.post('Composition/c1/$document', { resourceType: 'Parameters', parameter: [{ name: 'persist', valueBoolean: false }] });
      expect(instance.status).toBe(200);
      expect(entries((await instance.json()) as Json)).toEqual(C1);
    });

    test('a version-specific reference gives that version', async () => {
      await api.put200({ resourceType: 'Practitioner', id: 'versioned', name: [{ family: 'One' }] });
      await api.put200({ resourceType: 'Practitioner', id: 'versioned', name: [{ family: 'Two' }] });
      await api.put200(composition('cv', { author: [{ reference: 'Practitioner/versioned/_history/1' }] }));
      const b = (await (await api.get('Composition/cv/$document')).json()) as Json;
      expect(entries(b)).toEqual(['Composition/cv', 'Patient/p1', 'Practitioner/versioned']);
      expect(b.entry[2].resource.name[0].family).toBe('One');
    });

    test('a Binary (a stylesheet, an attachment) is an entry like any other resource', async () => {
      await api.put200({ resourceType: 'Binary', id: 'css', contentType: 'text/css', data: 'Ym9keSB7fQ==' });
      await api.put200(composition('cb', { section: [{ title: 'Attachment', entry: [{ reference: 'Binary/css' }] }] }));
      const b = (await (await api.get('Composition/cb/$document')).json()) as Json;
      expect(entries(b)).toEqual(['Composition/cb', 'Patient/p1', 'Practitioner/dr', 'Binary/css']);
      expect(b.entry[3].resource).toMatchObject({ resourceType: 'Binary', contentType: 'text/css', data: 'Ym9keSB7fQ==' });
    });

    test('persist=true stores the document as a Bundle: 201, Location, readable as stored', async () => {
      const before = await countVersions(t);
      // By GET it changes nothing (operations.html: GET for what is idempotent): a 405 naming persist.
      const get = await expectOutcome(await api.get('Composition/c1/$document?persist=true'), 405);
      expect(get.issue[0].expression).toEqual(['persist']);
      expect(await countVersions(t)).toBe(before);
      const res = await api.post('Composition/c1/$document', { resourceType: 'Parameters', parameter: [{ name: 'persist', valueBoolean: true }] });
      expect(res.status).toBe(201);
      const b = (await res.json()) as Json;
      expect(b.id).toBeString();
      expect(res.headers.get('location')).toBe(`${t.fhir()}/Bundle/${b.id}/_history/1`);
      expect(await countVersions(t)).toBe(before + 1);
      const read = (await (await api.get(`Bundle/${b.id}`)).json()) as Json;
      expect(read.type).toBe('document');
      expect(read.identifier).toEqual(b.identifier);
      expect(entries(read)).toEqual(C1);
      // persist in the URL of a POST, as any operation's parameter.
      expect((await api.post('Composition/$document?id=c1&persist=true', { resourceType: 'Parameters' })).status).toBe(201);
      // Create on Bundle is needed; without it nothing is stored.
      const reader = fhirClient(t, await craftToken(t, 'system/*.rs'));
      await expectOutcome(await reader.post('Composition/c1/$document', { resourceType: 'Parameters', parameter: [{ name: 'persist', valueBoolean: true }] }), 403);
      expect(await countVersions(t)).toBe(before + 2);
    });

    test('errors: each names its parameter or reference', async () => {
      await expectOutcome(await api.get('Composition/nope/$document'), 404);
      await api.put200(composition('gone'));
      await api.del('Composition/gone');
      await expectOutcome(await api.get('Composition/gone/$document'), 410);
      const cases: [string, number, string][] = [
        ['Composition/$document', 400, 'id'],
        ['Composition/c1/$document?id=c1', 400, 'id'],
        ['Composition/$document?id=c1&id=c2', 400, 'id'],
        ['Composition/$document?id=http%3A%2F%2Fother.org%2Ffhir%2FComposition%2Fc1', 400, 'id'],
        ['Composition/$document?id=Patient%2Fp1', 400, 'id'],
        ['Composition/c1/$document?persist=yes', 400, 'persist'],
        ['Composition/c1/$document?graph=http%3A%2F%2Fexample.org%2FGraphDefinition%2Fg', 400, 'graph'],
      ];
      // A parameter $document does not take is ignored, or a 400 naming it under strict handling.
      expect((await api.get('Composition/c1/$document?_count=2')).status).toBe(200);
      expect((await expectOutcome(await api.get('Composition/c1/$document?_count=2', { prefer: 'handling=strict' }), 400)).issue[0].expression).toEqual(['_count']);
      for (const [path, status, expression] of cases) {
        const o = await expectOutcome(await api.get(path), status);
        expect({ path, expression: o.issue[0].expression }).toEqual({ path, expression: [expression] });
      }
      // A referenced resource that is unknown, deleted, on another server or conditional: the document cannot be complete.
      await api.put200({ resourceType: 'Practitioner', id: 'left' });
      await api.del('Practitioner/left');
      const broken: [Json, string][] = [
        [{ section: [{ entry: [{ reference: 'Observation/missing' }] }] }, 'Composition.section[0].entry[0]'],
        [{ author: [{ reference: 'Practitioner/dr' }, { reference: 'Practitioner/left' }] }, 'Composition.author[1]'],
        [{ custodian: { reference: 'http://other.org/fhir/Organization/x' } }, 'Composition.custodian'],
        [{ custodian: { reference: 'Organization?identifier=x' } }, 'Composition.custodian'],
      ];
      for (const [extra, at] of broken) {
        await api.put200(composition('broken', extra));
        const o = await expectOutcome(await api.get('Composition/broken/$document'), 422);
        expect({ at, expression: o.issue[0].expression }).toEqual({ at, expression: [at] });
      }
      // A List's missing item too.
      await api.put200({ resourceType: 'List', id: 'holes', status: 'current', mode: 'snapshot', entry: [{ item: { reference: 'Observation/missing' } }] });
      await api.put200(composition('broken', { section: [{ entry: [{ reference: 'List/holes' }] }] }));
      expect((await expectOutcome(await api.get('Composition/broken/$document'), 422)).issue[0].expression).toEqual(['List.entry[0].item']);
      // Methods: no PUT or DELETE of an operation.
      expect((await api.del('Composition/c1/$document')).status).toBeGreaterThanOrEqual(400);
    });

    test('access: every resource must be readable (a 403 naming it, never left out); a patient token reads its own documents', async () => {
      await expectOutcome(await fhirClient(t, await craftToken(t, 'system/Observation.rs')).get('Composition/c1/$document'), 403);
      // Practitioner is not readable: the document is refused, naming the author.
      const noPractitioner = fhirClient(t, await craftToken(t, 'system/Composition.rs system/Patient.rs system/Encounter.rs system/Observation.rs system/Organization.rs system/List.rs'));
      expect((await expectOutcome(await noPractitioner.get('Composition/c1/$document'), 403)).issue[0].expression).toEqual(['Composition.author[0]']);
      // A patient-context token: its own patient's document (the practitioners and organizations read by type) ...
      const own = fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'p1' }));
      const res = await own.get('Composition/c1/$document');
      expect(res.status).toBe(200);
      expect(entries((await res.json()) as Json)).toEqual(C1);
      // ... but not one holding another patient's resource,
      await api.put200({ resourceType: 'Observation', id: 'theirs', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/p2' } });
      await api.put200(composition('mixed', { section: [{ entry: [{ reference: 'Observation/theirs' }] }] }));
      expect((await expectOutcome(await own.get('Composition/mixed/$document'), 403)).issue[0].expression).toEqual(['Composition.section[0].entry[0]']);
      // ... nor another patient's Composition.
      await api.put200(composition('c2', { subject: { reference: 'Patient/p2' } }));
      await expectOutcome(await own.get('Composition/c2/$document'), 403);
      // Another tenant's token.
      await expectOutcome(await fhirClient(t, await t.tokenFor('t2', ['system/*.*']), 't1').get('Composition/c1/$document'), 403);
    });

    test("a persisted document is no shared record: no patient's token reads, searches or writes the Bundle", async () => {
      const stored = (await (await api.post('Composition/c1/$document', { resourceType: 'Parameters', parameter: [{ name: 'persist', valueBoolean: true }] })).json()) as Json;
      const other = fhirClient(t, await craftToken(t, 'patient/*.cruds', { patient: 'p2' }));
      // p2's token gets none of p1's document (its Observations, its Patient), by read, search, history or $graphql.
      await expectOutcome(await other.get(`Bundle/${stored.id}`), 403);
      await expectOutcome(await other.get('Bundle?type=document'), 403);
      await expectOutcome(await other.get(`Bundle/${stored.id}/_history`), 403);
      const gql = await other.post('$graphql', JSON.stringify({ query: `{ Bundle(id: "${stored.id}") { id } }` }), { 'Content-Type': 'application/json' });
      expect(JSON.stringify(await gql.json())).not.toContain('Observation');
      // Nor can a patient's token persist one, where every patient's token could read it.
      await expectOutcome(await fhirClient(t, await craftToken(t, 'patient/*.cruds', { patient: 'p1' })).post('Composition/c1/$document', { resourceType: 'Parameters', parameter: [{ name: 'persist', valueBoolean: true }] }), 403);
      // A user/ or system/ scope grants Bundle.
      expect((await fhirClient(t, await craftToken(t, 'patient/*.rs user/Bundle.rs', { patient: 'p2' })).get(`Bundle/${stored.id}`)).status).toBe(200);
    });

    test('the CapabilityStatement lists $document on Composition', async () => {
      const cs = (await (await api.get('metadata')).json()) as Json;
      const comp = cs.rest[0].resource.find((r: Json) => r.type === 'Composition');
      expect(comp.operation).toContainEqual({ name: 'document', definition: 'http://hl7.org/fhir/OperationDefinition/Composition-document' });
    });
  });

  describe(`Composition/$document reads a level's resources together (${kind})`, () => {
    test('one store query per type and level, the Composition read alone; the same document in the same order', async () => {
      const store = await fresh();
      // Every resource read and search the store is asked for, by method and type.
      const calls: string[] = [];
      const counted = new Set(['read', 'vread', 'search']);
      const resources = new Proxy(store.resources, {
        get(target, prop, receiver) {
          const value = Reflect.get(target, prop, receiver) as unknown;
          if (typeof value !== 'function' || !counted.has(String(prop))) return value;
          return (...args: unknown[]) => {
            const what = args[1] as string | { type: string };
            calls.push(`${String(prop)} ${typeof what === 'string' ? what : what.type}`);
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        },
      });
      const t = await createTestApp({ store: { ...store, resources } });
      try {
        const api = fhirClient(t, await t.token());
        await api.put200({ resourceType: 'Patient', id: 'p1' });
        const practitioners = Array.from({ length: 5 }, (_, i) => `dr${i}`);
        for (const id of practitioners) await api.put200({ resourceType: 'Practitioner', id });
        const observations = Array.from({ length: 40 }, (_, i) => `o${String(i).padStart(2, '0')}`);
        for (const id of observations) await api.put200({ resourceType: 'Observation', id, status: 'final', code: { text: id }, subject: { reference: 'Patient/p1' } });
        // The List holds ten Observations the sections do not, and two they do (gathered once).
        const listed = observations.slice(30);
        await api.put200({ resourceType: 'List', id: 'l1', status: 'current', mode: 'snapshot', entry: [...listed, 'o00', 'o05'].map((id) => ({ item: { reference: `Observation/${id}` } })) });
        // Referenced in a shuffled order: the document follows the Composition's order, not the store's.
        const inSections = observations.slice(0, 30).reverse();
        await api.put200({
          resourceType: 'Composition', id: 'big', status: 'final', type: { text: 'Summary' }, date: '2026-01-10', title: 'Summary',
          subject: { reference: 'Patient/p1' }, author: practitioners.map((id) => ({ reference: `Practitioner/${id}` })),
          section: [{ title: 'Results', entry: inSections.map((id) => ({ reference: `Observation/${id}` })) }, { title: 'Lists', entry: [{ reference: 'List/l1' }] }],
        });
        calls.length = 0;
        const res = await api.get('Composition/big/$document');
        expect(res.status).toBe(200);
        expect(entries((await res.json()) as Json)).toEqual([
          'Composition/big', 'Patient/p1', ...practitioners.map((id) => `Practitioner/${id}`), ...inSections.map((id) => `Observation/${id}`),
          'List/l1', ...listed.map((id) => `Observation/${id}`),
        ]);
        expect(calls.sort()).toEqual(['read Composition', 'search List', 'search Observation', 'search Observation', 'search Patient', 'search Practitioner']);
      } finally {
        await t.close();
      }
    });
  });
});
