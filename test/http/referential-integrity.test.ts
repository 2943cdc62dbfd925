/** CINDER_REFERENTIAL_INTEGRITY on REST writes: create, update, transaction and batch, on both databases. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { BASE, createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, craftToken, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const base = `${BASE}/tenants/t1/fhir/R4`;
const obs = (subject: string, extra: Json = {}) => ({ resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: subject }, ...extra });
const bundle = (type: string, entry: Json[]) => ({ resourceType: 'Bundle', type, entry });
const post = (resource: Json, fullUrl?: string) => ({ ...(fullUrl ? { fullUrl } : {}), resource, request: { method: 'POST', url: resource.resourceType } });
const put = (resource: Json) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });

/** The issues of a refused write: code, expression and the reference named in the text. */
const issues = (outcome: Json) => outcome.issue.map((i: Json) => ({ code: i.code, expression: i.expression, text: i.diagnostics }));

await eachStore((kind, fresh) => {
  describe(`referential integrity on (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), env: { CINDER_REFERENTIAL_INTEGRITY: 'on' } });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Patient', id: 'p1' });
      await api.put200({ resourceType: 'Patient', id: 'gone' });
      expect((await api.del('Patient/gone')).status).toBe(200);
    });
    afterAll(() => t.close());

    /** Asserts a 422 with one `not-found` issue per expression, and that nothing was written. */
    async function refused(send: () => Response | Promise<Response>, expressions: string[]): Promise<Json> {
      const before = await countVersions(t);
      const outcome = await expectOutcome(await send(), 422, 'not-found');
      expect(issues(outcome).map((i: Json) => [i.code, i.expression])).toEqual(expressions.map((e) => ['not-found', [e]]));
      expect(await countVersions(t)).toBe(before);
      return outcome;
    }

    test('create: a reference to an existing resource is accepted, in every local form', async () => {
      for (const ref of ['Patient/p1', 'Patient/p1/_history/1', `${base}/Patient/p1`, `${base}/Patient/p1/_history/1`]) {
        expect((await api.post('Observation', obs(ref))).status).toBe(201);
      }
    });

    test('create: a reference to a missing or deleted resource is 422 naming each element; nothing is written', async () => {
      const outcome = await refused(
        () => api.post('Observation', obs('Patient/nobody', { performer: [{ reference: 'Patient/p1' }, { reference: `${base}/Practitioner/nobody` }], focus: [{ reference: 'Patient/gone' }] })),
        ['Observation.subject.reference', 'Observation.performer[1].reference', 'Observation.focus[0].reference'],
      );
      expect(outcome.issue[0].diagnostics).toContain("'Patient/nobody'");
      expect(outcome.issue[1].diagnostics).toContain(`'${base}/Practitioner/nobody'`);
      expect(outcome.issue[2].diagnostics).toContain('Patient/gone');
    });

    test('the built-in R4 CodeSystems and ValueSets are targets like stored resources', async () => {
      const focus = [{ reference: 'ValueSet/administrative-gender' }, { reference: `${base}/CodeSystem/v2-0203` }];
      expect((await api.post('Observation', obs('Patient/p1', { focus }))).status).toBe(201);
      await refused(() => api.post('Observation', obs('Patient/p1', { focus: [{ reference: 'ValueSet/no-such-value-set' }] })), ['Observation.focus[0].reference']);
    });

    test('contained, urn:, conditional-looking and other servers\' references are not checked', async () => {
      const res = await api.post('Observation', {
        ...obs('#pat'), contained: [{ resourceType: 'Patient', id: 'pat' }],
        performer: [{ reference: 'urn:uuid:0e6b7c1c-0000-4000-8000-000000000001' }, { reference: 'http://other.example/fhir/Practitioner/x' }],
        focus: [{ reference: 'https://cinder.test.evil/tenants/t1/fhir/R4/Patient/nobody' }],
      });
      expect(res.status).toBe(201);
    });

    test('references inside contained resources are checked', async () => {
      await refused(
        () => api.post('Observation', {
          ...obs('Patient/p1'), performer: [{ reference: '#c' }, { reference: '#r' }],
          contained: [{ resourceType: 'Practitioner', id: 'c' }, { resourceType: 'PractitionerRole', id: 'r', organization: { reference: 'Organization/none' } }],
        }),
        ['Observation.contained[1].organization.reference'],
      );
    });

    test('update: a missing target is 422 and the stored version stays; a resource may refer to itself', async () => {
      await api.put200(obs('Patient/p1', { id: 'o1' }));
      await refused(() => api.put('Observation/o1', { id: 'o1', ...obs('Patient/nobody') }), ['Observation.subject.reference']);
      expect((await (await api.get('Observation/o1')).json()).subject.reference).toBe('Patient/p1');
      const self = await api.put('Patient/self', { resourceType: 'Patient', id: 'self', link: [{ other: { reference: 'Patient/self' }, type: 'seealso' }] });
      expect(self.status).toBe(201);
    });

    test('conditional create and update go through the same check', async () => {
      await refused(() => api.post('Observation', obs('Patient/nobody'), { 'If-None-Exist': 'identifier=none|1' }), ['Observation.subject.reference']);
      await refused(() => api.put('Observation?identifier=none|2', obs('Patient/nobody')), ['Observation.subject.reference']);
    });

    test('transaction: targets written by the same Bundle count, by urn:uuid or by id', async () => {
      const res = await api.post(base, bundle('transaction', [
        post(obs('urn:uuid:7a1c0000-0000-4000-8000-000000000001'), undefined),
        post({ resourceType: 'Patient' }, 'urn:uuid:7a1c0000-0000-4000-8000-000000000001'),
        put(obs('Patient/tx-new', { id: 'o-tx' })),
        put({ resourceType: 'Patient', id: 'tx-new' }),
      ]));
      expect(res.status).toBe(200);
      expect((await res.json()).entry.map((e: Json) => e.response.status)).toEqual(['201 Created', '201 Created', '201 Created', '201 Created']);
    });

    test('transaction: a missing target refuses the whole Bundle, naming the entry\'s element', async () => {
      const outcome = await refused(
        () => api.post(base, bundle('transaction', [
          put({ resourceType: 'Patient', id: 'tx-a' }),
          post({ resourceType: 'Encounter', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/tx-a' } }),
          post(obs('Patient/nobody')),
        ])),
        ['Bundle.entry[2].resource.subject.reference'],
      );
      expect(outcome.issue[0].diagnostics).toContain('Patient/nobody');
      expect((await api.get('Patient/tx-a')).status).toBe(404);
    });

    test('transaction: a target the same Bundle deletes does not count', async () => {
      await api.put200({ resourceType: 'Patient', id: 'doomed' });
      await refused(
        () => api.post(base, bundle('transaction', [{ request: { method: 'DELETE', url: 'Patient/doomed' } }, post(obs('Patient/doomed'))])),
        ['Bundle.entry[1].resource.subject.reference'],
      );
      expect((await api.get('Patient/doomed')).status).toBe(200);
    });

    test('batch: an entry with a missing target fails alone with 422', async () => {
      const res = await api.post(base, bundle('batch', [
        post(obs('Patient/p1')),
        post(obs('Patient/nobody')),
        put({ resourceType: 'Patient', id: 'batch-ok', link: [{ other: { reference: 'Patient/p1' }, type: 'seealso' }] }),
      ]));
      expect(res.status).toBe(200);
      const entries = (await res.json()).entry as Json[];
      expect(entries.map((e) => e.response.status)).toEqual(['201 Created', '422 Unprocessable Entity', '201 Created']);
      expect(issues(entries[1]!.response.outcome)).toEqual([
        { code: 'not-found', expression: ['Bundle.entry[1].resource.subject.reference'], text: expect.stringContaining('Patient/nobody') },
      ]);
    });

    test('patch: a missing target is 422 and nothing is written, alone or in a transaction', async () => {
      await api.put200(obs('Patient/p1', { id: 'patched' }));
      const jsonPatch = [{ op: 'replace', path: '/subject/reference', value: 'Patient/nobody' }];
      await refused(() => api.call('PATCH', 'Observation/patched', jsonPatch, { 'Content-Type': 'application/json-patch+json' }), ['Observation.subject.reference']);
      const binary = { resourceType: 'Binary', contentType: 'application/json-patch+json', data: Buffer.from(JSON.stringify(jsonPatch)).toString('base64') };
      await refused(() => api.post(base, bundle('transaction', [{ resource: binary, request: { method: 'PATCH', url: 'Observation/patched' } }])), ['Observation.subject.reference']);
      const ok = [{ op: 'replace', path: '/subject/reference', value: 'urn:uuid:0d1e2f30-0000-4000-8000-000000000009' }];
      const res = await api.post(base, bundle('transaction', [
        post({ resourceType: 'Patient' }, 'urn:uuid:0d1e2f30-0000-4000-8000-000000000009'),
        { resource: { ...binary, data: Buffer.from(JSON.stringify(ok)).toString('base64') }, request: { method: 'PATCH', url: 'Observation/patched' } },
      ]));
      const body = (await res.json()) as Json;
      expect(res.status).toBe(200);
      expect(body.entry[1].resource.subject.reference).toBe(`Patient/${body.entry[0].resource.id}`);
    });

    test("a token that reads a type in part is told nothing of targets out of its reach: another patient's resource answers as a missing one", async () => {
      await api.put200({ resourceType: 'Patient', id: 'pa' });
      await api.put200({ resourceType: 'Patient', id: 'pb' });
      await api.put200({ resourceType: 'Encounter', id: 'ea', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/pa' } });
      await api.put200({ resourceType: 'Encounter', id: 'eb', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/pb' } });
      await api.put200({ resourceType: 'Encounter', id: 'emergency', status: 'finished', class: { code: 'EMER' }, subject: { reference: 'Patient/pa' } });
      const patientApp = fhirClient(t, await craftToken(t, 'patient/*.cruds', { patient: 'pa' }));
      const forPa = (encounter: string) => obs('Patient/pa', { encounter: { reference: encounter } });
      expect((await patientApp.post('Observation', forPa('Encounter/ea'))).status).toBe(201);
      const other = await refused(() => patientApp.post('Observation', forPa('Encounter/eb')), ['Observation.encounter.reference']);
      const none = await refused(() => patientApp.post('Observation', forPa('Encounter/nope')), ['Observation.encounter.reference']);
      // The same words for both, but for the reference itself.
      expect(other.issue[0].diagnostics.replaceAll('Encounter/eb', 'X')).toBe(none.issue[0].diagnostics.replaceAll('Encounter/nope', 'X'));
      expect(other.issue[0].diagnostics).toContain('which does not exist or is outside what the access token may read');
      // In a transaction too, where what the Bundle itself writes counts.
      const tx = await patientApp.post('', bundle('transaction', [post(forPa('Encounter/eb'))]));
      expect(tx.status).toBe(422);
      // A SMART v2 scope filter on the target type: an Encounter outside it is as one that does not exist.
      const filtered = fhirClient(t, await craftToken(t, 'system/Observation.crus system/Encounter.rs?class=AMB'));
      expect((await filtered.post('Observation', obs('Patient/pb', { encounter: { reference: 'Encounter/eb' } }))).status).toBe(201);
      const outside = await refused(() => filtered.post('Observation', obs('Patient/pb', { encounter: { reference: 'Encounter/emergency' } })), ['Observation.encounter.reference']);
      expect(outside.issue[0].diagnostics).toContain('outside what the access token may read');
      // A token that reads the type whole is told exactly, as before.
      expect((await api.post('Observation', obs('Patient/pb', { encounter: { reference: 'Encounter/emergency' } }))).status).toBe(201);
    });

    test('a token that reads Binaries through their securityContext is told nothing of Binaries out of its reach', async () => {
      await api.put200({ resourceType: 'Patient', id: 'pf', gender: 'female' });
      await api.put200({ resourceType: 'Patient', id: 'pm', gender: 'male' });
      await api.put200({ resourceType: 'Binary', id: 'bf', contentType: 'text/plain', data: 'aGk=', securityContext: { reference: 'Patient/pf' } });
      await api.put200({ resourceType: 'Binary', id: 'bm', contentType: 'text/plain', data: 'aGk=', securityContext: { reference: 'Patient/pm' } });
      await api.put200({ resourceType: 'Binary', id: 'bnone', contentType: 'text/plain', data: 'aGk=' });
      const list = (binary: string) => ({ resourceType: 'List', status: 'current', mode: 'working', entry: [{ item: { reference: `Binary/${binary}` } }] });
      const female = fhirClient(t, await craftToken(t, 'system/List.cruds system/Binary.rs system/Patient.rs?gender=female'));
      expect((await female.post('List', list('bf'))).status).toBe(201);
      expect((await female.post('List', list('bnone'))).status).toBe(201);
      expect((await female.get('Binary/bm')).status).toBe(403);
      const out = await refused(() => female.post('List', list('bm')), ['List.entry[0].item.reference']);
      const none = await refused(() => female.post('List', list('nope')), ['List.entry[0].item.reference']);
      expect(out.issue[0].diagnostics.replaceAll('Binary/bm', 'X')).toBe(none.issue[0].diagnostics.replaceAll('Binary/nope', 'X'));
      expect(out.issue[0].diagnostics).toContain('outside what the access token may read');
      // Without read of Patient, no Binary with a Patient context is in reach; a token reading every type is told exactly.
      const binaryOnly = fhirClient(t, await craftToken(t, 'system/List.cruds system/Binary.rs'));
      await refused(() => binaryOnly.post('List', list('bf')), ['List.entry[0].item.reference']);
      expect((await binaryOnly.post('List', list('bnone'))).status).toBe(201);
      expect((await api.post('List', list('bm'))).status).toBe(201);
    });

    test('deleting a resource others refer to is allowed', async () => {
      await api.put200({ resourceType: 'Patient', id: 'referred' });
      await api.put200(obs('Patient/referred', { id: 'refers' }));
      expect((await api.del('Patient/referred')).status).toBe(200);
      expect((await api.get('Observation/refers')).status).toBe(200);
    });
  });

  describe(`referential integrity off, the default (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    test('dangling references are stored as sent', async () => {
      expect(t.config.referentialIntegrity).toBe('off');
      expect((await api.post('Observation', obs('Patient/later'))).status).toBe(201);
      expect((await api.put('Observation/o', { id: 'o', ...obs('Patient/later') })).status).toBe(201);
      const res = await api.post(base, bundle('transaction', [post(obs('Patient/later'))]));
      expect(res.status).toBe(200);
    });
  });
});
