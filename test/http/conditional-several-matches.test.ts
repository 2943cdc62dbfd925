/**
 * A REST conditional update, patch or delete whose criteria match several resources is a 412 whose OperationOutcome
 * names the criteria (`expression`: each parameter once, as written), as a Bundle entry's names its `request.url`
 * and a conditional create's its `If-None-Exist`; it named nothing. Nothing is written.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, ids, type FhirClient, type Json } from '../helpers/fhir.ts';

const patient = (family: string, given: string, extra: Json = {}): Json => ({ resourceType: 'Patient', name: [{ family, given: [given] }], ...extra });
const JSON_PATCH = { 'Content-Type': 'application/json-patch+json' };

await eachStore((kind, fresh) => {
  describe(`a conditional write matching several resources (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let versions: () => Promise<string[]>;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.create(patient('Twin', 'Ann', { gender: 'female' }));
      await api.create(patient('Twin', 'Ann', { gender: 'female' }));
      versions = async () => (await api.search('Patient?family=Twin')).entry.map((e: Json) => `${e.resource.id}/${e.resource.meta.versionId}`).sort();
    });
    afterAll(() => t.close());

    test('a conditional update: 412 naming its criteria, each once, with their modifiers', async () => {
      const before = await versions();
      const res = await api.put('Patient?family:exact=Twin&given=Ann&given=ann&_count=5', patient('Twin', 'Ann', { active: true }));
      const outcome = await expectOutcome(res, 412);
      expect(outcome.issue[0].expression).toEqual(['family:exact', 'given']);
      expect(await versions()).toEqual(before);
    });

    test('a conditional patch: 412 naming its criteria', async () => {
      const before = await versions();
      const res = await api.call('PATCH', 'Patient?family=Twin', [{ op: 'add', path: '/active', value: true }], JSON_PATCH);
      expect((await expectOutcome(res, 412)).issue[0].expression).toEqual(['family']);
      const fhirpath = await api.call('PATCH', 'Patient?gender=female&family=Twin', {
        resourceType: 'Parameters',
        parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'add' }, { name: 'path', valueString: 'Patient' }, { name: 'name', valueString: 'active' }, { name: 'value', valueBoolean: true }] }],
      });
      expect((await expectOutcome(fhirpath, 412)).issue[0].expression).toEqual(['gender', 'family']);
      expect(await versions()).toEqual(before);
    });

    test('a conditional delete: 412 naming its criteria, and both stay', async () => {
      const res = await api.del('Patient?name=Twin&_id:not=nothing');
      expect((await expectOutcome(res, 412)).issue[0].expression).toEqual(['name', '_id:not']);
      expect(ids(await api.search('Patient?family=Twin'))).toHaveLength(2);
    });

    test('a conditional create still names If-None-Exist, and a transaction entry its request.url', async () => {
      const create = await api.post('Patient', patient('Twin', 'Ann'), { 'If-None-Exist': 'family=Twin' });
      expect((await expectOutcome(create, 412)).issue[0].expression).toEqual(['If-None-Exist']);
      const tx = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'DELETE', url: 'Patient?family=Twin' } }] });
      expect((await expectOutcome(tx, 412)).issue[0].expression).toEqual(['Bundle.entry[0].request.url']);
    });
  });
});
