/**
 * A conditional write whose criteria match nothing, where that is the client's error: a REST conditional patch is a
 * 404 whose OperationOutcome names the criteria (`expression`: each parameter once, as written), as its 412 for
 * several matches does (it named nothing), and a Bundle entry's names its `request.url`; an If-Match on a conditional
 * update or delete that matches nothing is a 412 naming the If-Match header (a Bundle entry's `request.ifMatch`).
 * Nothing is written.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const JSON_PATCH = { 'Content-Type': 'application/json-patch+json' };
const FHIRPATH_PATCH: Json = {
  resourceType: 'Parameters',
  parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'add' }, { name: 'path', valueString: 'Patient' }, { name: 'name', valueString: 'active' }, { name: 'value', valueBoolean: true }] }],
};

await eachStore((kind, fresh) => {
  describe(`a conditional write matching nothing (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.create({ resourceType: 'Patient', name: [{ family: 'Other' }] });
    });
    afterAll(() => t.close());

    test('a conditional patch: 404 naming its criteria, each once, with their modifiers', async () => {
      const before = await countVersions(t);
      const res = await api.call('PATCH', 'Patient?family:exact=Nobody&given=Ann&given=ann&_count=5', [{ op: 'add', path: '/active', value: true }], JSON_PATCH);
      const outcome = await expectOutcome(res, 404);
      expect(outcome.issue[0].expression).toEqual(['family:exact', 'given']);
      const fhirpath = await api.call('PATCH', 'Patient?gender=female&family=Nobody', FHIRPATH_PATCH);
      expect((await expectOutcome(fhirpath, 404)).issue[0].expression).toEqual(['gender', 'family']);
      expect(await countVersions(t)).toBe(before);
    });

    test('a conditional update or delete with If-Match: 412 naming If-Match', async () => {
      const before = await countVersions(t);
      const update = await api.put('Patient?family=Nobody', { resourceType: 'Patient', active: true }, { 'If-Match': 'W/"1"' });
      expect((await expectOutcome(update, 412)).issue[0].expression).toEqual(['If-Match']);
      const del = await api.del('Patient?family=Nobody', { 'If-Match': 'W/"1"' });
      expect((await expectOutcome(del, 412)).issue[0].expression).toEqual(['If-Match']);
      expect(await countVersions(t)).toBe(before);
    });

    test("a conditional update creating what its own condition would not find: 400 naming the criteria, as a transaction entry's names its request.url", async () => {
      const before = await countVersions(t);
      const res = await api.put('Patient?_id=nobody&family=Nobody', { resourceType: 'Patient', name: [{ family: 'Nobody' }] });
      expect((await expectOutcome(res, 400)).issue[0].expression).toEqual(['_id', 'family']);
      expect(await countVersions(t)).toBe(before);
    });

    test('a condition of more values than a search takes: 400 naming its parameters', async () => {
      const values = Array.from({ length: 1001 }, (_, i) => `urn:s|v${i}`).join(',');
      const create = await api.post('Patient', { resourceType: 'Patient' }, { 'If-None-Exist': `identifier=${values}&_count=1` });
      expect((await expectOutcome(create, 400)).issue[0].expression).toEqual(['identifier']);
      const search = await api.get(`Patient?identifier=${values}&family=a,b`);
      expect((await expectOutcome(search, 400)).issue[0].expression).toEqual(['identifier', 'family']);
    });

    test('a transaction: the patch entry names its request.url, the If-Match entry its request.ifMatch', async () => {
      const before = await countVersions(t);
      const patch = await api.post('', {
        resourceType: 'Bundle', type: 'transaction',
        entry: [{ request: { method: 'PATCH', url: 'Patient?family=Nobody' }, resource: FHIRPATH_PATCH }],
      });
      expect((await expectOutcome(patch, 404)).issue[0].expression).toEqual(['Bundle.entry[0].request.url']);
      const update = await api.post('', {
        resourceType: 'Bundle', type: 'transaction',
        entry: [{ request: { method: 'PUT', url: 'Patient?family=Nobody', ifMatch: 'W/"1"' }, resource: { resourceType: 'Patient', active: true } }],
      });
      expect((await expectOutcome(update, 412)).issue[0].expression).toEqual(['Bundle.entry[0].request.ifMatch']);
      expect(await countVersions(t)).toBe(before);
    });
  });
});
