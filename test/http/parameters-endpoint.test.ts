/**
 * Parameters has no RESTful endpoint (FHIR R4 parameters.html: "a non-persisted resource used to pass
 * information into and back from an operation. It has no other use, and there is no RESTful endpoint
 * associated with it"). Every REST interaction on `/Parameters` is a 404 OperationOutcome with code
 * `not-supported`, as HAPI FHIR answers a type it serves no provider for; so is a Bundle entry naming
 * it (that entry alone in a batch), and `cinder import` refuses it. The CapabilityStatement leaves it
 * out. Operations whose bodies are Parameters keep working. A Parameters stored by an earlier Cinder
 * stays in the database but is no longer served: not read, searched, in system history or exported.
 * On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createCliEnv } from '../helpers/cli.ts';
import { download, finish, kickOff } from '../helpers/export.ts';
import { bundlePoster, countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { storeTargets, type StoreDatabase } from '../helpers/stores.ts';
import { firstVersions } from '../helpers/versions.ts';

const PARAMETERS = { resourceType: 'Parameters', parameter: [{ name: 'x', valueString: 'y' }] };
const JSON_PATCH = { 'Content-Type': 'application/json-patch+json' };
const FORM = { 'Content-Type': 'application/x-www-form-urlencoded' };

/** Asserts the 404 not-supported refusal of the Parameters type and returns its issue. */
async function expectNoEndpoint(res: Response): Promise<Json> {
  const outcome = await expectOutcome(res, 404, 'not-supported');
  expect(outcome.issue[0].details.text).toContain('Parameters has no RESTful endpoint');
  return outcome.issue[0];
}

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`Parameters has no RESTful endpoint (${target.kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let token: string;
    const poster = bundlePoster(() => t, () => api);

    beforeAll(async () => {
      const store = (await target.migrated()).open();
      await store.migrate();
      t = await createTestApp({ store });
      token = await t.token();
      api = fhirClient(t, token);
      await api.put200({ resourceType: 'Patient', id: 'p1', name: [{ family: 'Params' }] });
    });
    afterAll(() => t.close());

    test('every REST interaction on /Parameters is 404 not-supported, and nothing is stored', async () => {
      const before = await countVersions(t);
      const calls: [string, string, unknown?, Record<string, string>?][] = [
        ['POST', 'Parameters', PARAMETERS],
        ['POST', 'Parameters', PARAMETERS, { 'If-None-Exist': 'identifier=x' }],
        ['GET', 'Parameters'],
        ['GET', 'Parameters?_id=a'],
        ['POST', 'Parameters/_search', '_id=a', FORM],
        ['GET', 'Parameters/a'],
        ['PUT', 'Parameters/a', { ...PARAMETERS, id: 'a' }],
        ['PUT', 'Parameters?_id=a', PARAMETERS],
        ['PATCH', 'Parameters/a', [{ op: 'add', path: '/id', value: 'a' }], JSON_PATCH],
        ['PATCH', 'Parameters?_id=a', [{ op: 'add', path: '/id', value: 'a' }], JSON_PATCH],
        ['DELETE', 'Parameters/a'],
        ['DELETE', 'Parameters?_id=a'],
        ['GET', 'Parameters/a/_history'],
        ['GET', 'Parameters/a/_history/1'],
        ['GET', 'Parameters/_history'],
        ['POST', 'Parameters/a', PARAMETERS],
        ['POST', 'Parameters/$validate', PARAMETERS],
        ['GET', 'Parameters/a/$validate'],
        ['GET', 'Patient/p1/Parameters'],
      ];
      for (const [method, path, body, headers] of calls) {
        const res = await api.call(method, path, body, headers);
        expect({ call: `${method} ${path}`, status: res.status }).toEqual({ call: `${method} ${path}`, status: 404 });
        await expectNoEndpoint(res);
      }
      expect(await countVersions(t)).toBe(before);
      await expectOutcome(await api.get('?_type=Parameters'), 400);
      await expectOutcome(await api.get('?_type=Patient,Parameters'), 400);
    });

    test('the CapabilityStatement lists no Parameters resource', async () => {
      const cs = (await (await t.request(`${api.base}/metadata`)).json()) as Json;
      const types = (cs.rest[0].resource as Json[]).map((r) => r.type);
      expect(types).not.toContain('Parameters');
      expect(types).toContain('Patient');
    });

    test('a batch refuses each entry naming Parameters alone; a transaction with one writes nothing', async () => {
      const out = await poster.ok({
        resourceType: 'Bundle', type: 'batch', entry: [
          { resource: PARAMETERS, request: { method: 'POST', url: 'Parameters' } },
          { resource: { ...PARAMETERS, id: 'b' }, request: { method: 'PUT', url: 'Parameters/b' } },
          { request: { method: 'GET', url: 'Parameters/b' } },
          { request: { method: 'GET', url: 'Parameters?_id=b' } },
          { request: { method: 'DELETE', url: 'Parameters/b' } },
          { resource: { resourceType: 'Patient', name: [{ family: 'BesideParameters' }] }, request: { method: 'POST', url: 'Patient' } },
        ],
      });
      expect(out.entry.map((e: Json) => e.response.status)).toEqual([...Array(5).fill('404 Not Found'), '201 Created']);
      for (const [i, e] of (out.entry as Json[]).slice(0, 5).entries()) {
        expect(e.response.outcome.issue).toMatchObject([{ severity: 'error', code: 'not-supported', expression: [`Bundle.entry[${i}].request.url`] }]);
        expect(e.response.outcome.issue[0].details.text).toStartWith(`Bundle.entry[${i}]: Parameters has no RESTful endpoint`);
      }
      const outcome = await poster.nothingWritten({
        resourceType: 'Bundle', type: 'transaction', entry: [
          { resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } },
          { resource: PARAMETERS, request: { method: 'POST', url: 'Parameters' } },
        ],
      }, 404);
      expect(outcome.issue).toMatchObject([{ code: 'not-supported', expression: ['Bundle.entry[1].request.url'] }]);
    });

    test('operations taking Parameters bodies still work', async () => {
      const validated = await api.post('Patient/$validate', { resourceType: 'Parameters', parameter: [{ name: 'resource', resource: { resourceType: 'Patient' } }] });
      expect(validated.status).toBe(200);
      expect(((await validated.json()) as Json).issue[0].severity).toBe('information');
      const gender = 'http://hl7.org/fhir/ValueSet/administrative-gender';
      const code = await api.post('ValueSet/$validate-code', { resourceType: 'Parameters', parameter: [{ name: 'url', valueUri: gender }, { name: 'code', valueCode: 'male' }, { name: 'system', valueUri: 'http://hl7.org/fhir/administrative-gender' }] });
      expect(code.status).toBe(200);
      expect(((await code.json()) as Json).parameter[0]).toEqual({ name: 'result', valueBoolean: true });
      const expanded = await api.post('ValueSet/$expand', { resourceType: 'Parameters', parameter: [{ name: 'url', valueUri: gender }] });
      expect(expanded.status).toBe(200);
      expect(((await expanded.json()) as Json).expansion.total).toBe(4);
      const lookup = await api.post('CodeSystem/$lookup', { resourceType: 'Parameters', parameter: [{ name: 'system', valueUri: 'http://hl7.org/fhir/administrative-gender' }, { name: 'code', valueCode: 'male' }] });
      expect(lookup.status).toBe(200);
      const patched = await api.call('PATCH', 'Patient/p1', {
        resourceType: 'Parameters',
        parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'add' }, { name: 'path', valueString: 'Patient' }, { name: 'name', valueString: 'active' }, { name: 'value', valueBoolean: true }] }],
      });
      expect(patched.status).toBe(200);
      expect(((await patched.json()) as Json).active).toBe(true);
      const everything = await api.post('Patient/p1/$everything', { resourceType: 'Parameters', parameter: [{ name: '_count', valueInteger: 10 }] });
      expect(everything.status).toBe(200);
      const exported = await api.post('$export', { resourceType: 'Parameters', parameter: [{ name: '_type', valueString: 'Patient' }] }, { Prefer: 'respond-async' });
      expect(exported.status).toBe(202);
    });

    test('a Parameters stored by an earlier Cinder stays in the database but is not served', async () => {
      await t.store.resources.write('t1', (w) => w.insertNew(firstVersions([{ ...PARAMETERS, id: 'legacy' }], t.clock.now())));
      expect(await t.store.resources.read('t1', 'Parameters', 'legacy')).not.toBeNull();
      await expectNoEndpoint(await api.get('Parameters/legacy'));
      await expectNoEndpoint(await api.del('Parameters/legacy'));
      const all = await api.search('?_id=legacy,p1');
      expect((all.entry as Json[]).map((e) => e.resource.resourceType)).toEqual(['Patient']);
      const history = await api.search('_history?_count=100');
      expect((history.entry as Json[]).map((e) => e.resource?.resourceType ?? e.request.url)).not.toContain('Parameters');
      expect((history.entry as Json[]).length).toBeGreaterThan(0);
      const manifest = await finish(t, token, await kickOff(t, token, '/$export'));
      expect(manifest.output.map((o) => o.type)).toContain('Patient');
      expect(manifest.output.map((o) => o.type)).not.toContain('Parameters');
      expect(Object.keys(await download(t, token, manifest.output))).not.toContain('Parameters');
      const refused = await t.request(`${api.base}/$export?_type=Parameters`, { headers: { Authorization: `Bearer ${token}`, Prefer: 'respond-async' } });
      expect((await expectOutcome(refused, 400, 'not-supported')).issue[0].details.text).toContain('Parameters has no RESTful endpoint');
      expect(await t.store.resources.read('t1', 'Parameters', 'legacy')).not.toBeNull();
    });
  });

  describe(`cinder import refuses Parameters (${target.kind})`, () => {
    let cli: ReturnType<typeof createCliEnv>;
    let db: StoreDatabase;
    beforeAll(async () => {
      db = await target.migrated();
      cli = createCliEnv({ CINDER_DATABASE_URL: db.url });
      expect((await cli.run(['tenant', 'create', 't1'])).code).toBe(0);
    });
    afterAll(() => cli.close());

    test('an NDJSON line, a document, a collection entry and a batch entry holding a Parameters fail; the rest is imported', async () => {
      const ndjson = join(cli.dir, 'lines.ndjson');
      writeFileSync(ndjson, [{ resourceType: 'Patient', id: 'i1' }, { ...PARAMETERS, id: 'i2' }].map((r) => JSON.stringify(r)).join('\n') + '\n');
      const lines = await cli.run(['import', '--tenant', 't1', '--json', ndjson]);
      expect(JSON.parse(lines.stdout)).toMatchObject({ imported: 1, failed: 1, errors: [{ line: 2, message: expect.stringContaining('Parameters has no RESTful endpoint') }] });
      const document = join(cli.dir, 'document.json');
      writeFileSync(document, JSON.stringify(PARAMETERS));
      expect(JSON.parse((await cli.run(['import', '--tenant', 't1', '--json', document])).stdout)).toMatchObject({ imported: 0, failed: 1 });
      const collection = join(cli.dir, 'collection.json');
      writeFileSync(collection, JSON.stringify({ resourceType: 'Bundle', type: 'collection', entry: [{ resource: { resourceType: 'Patient', id: 'i3' } }, { resource: PARAMETERS }] }));
      const c = JSON.parse((await cli.run(['import', '--tenant', 't1', '--json', collection])).stdout);
      expect(c).toMatchObject({ imported: 1, failed: 1 });
      expect(JSON.stringify(c.errors)).toContain('Parameters has no RESTful endpoint');
      const batch = join(cli.dir, 'batch.json');
      writeFileSync(batch, JSON.stringify({ resourceType: 'Bundle', type: 'batch', entry: [
        { resource: { resourceType: 'Patient', id: 'i4' }, request: { method: 'PUT', url: 'Patient/i4' } },
        { resource: PARAMETERS, request: { method: 'POST', url: 'Parameters' } },
      ] }));
      expect(JSON.parse((await cli.run(['import', '--tenant', 't1', '--json', batch])).stdout)).toMatchObject({ imported: 1, failed: 1 });
      const store = db.open();
      expect(await store.resources.count('t1', { type: 'Parameters', sort: [], count: 0 })).toBe(0);
      expect(await store.resources.count('t1', { type: 'Patient', sort: [], count: 0 })).toBe(3);
    });
  });
}
