/**
 * A request body whose object gives a member name twice is refused (R4 json.html: "Property names SHALL
 * be unique"), where JSON.parse would keep the last silently: a 400 naming the second one's path, in a
 * resource, deep in a transaction's entries, in a large object, and written with escapes; nothing is
 * written. Names that repeat across objects (siblings, nesting, array items) are no duplicate. On both
 * databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

await eachStore((kind, fresh) => {
  describe(`a member name given twice (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    const refused = async (method: string, path: string, text: string, expression: string) => {
      const before = await countVersions(t);
      const outcome = await expectOutcome(await api.call(method, path, text), 400);
      expect({ path, expression: outcome.issue[0].expression }).toEqual({ path, expression: [expression] });
      expect(outcome.issue[0].diagnostics).toContain('SHALL be unique');
      expect(await countVersions(t)).toBe(before);
    };

    test('in a resource, its nested elements and its contained resources, is a 400 naming the second one', async () => {
      await refused('POST', 'Patient', '{"resourceType":"Patient","id":"a","active":true,"id":"b"}', 'Patient.id');
      await refused('PUT', 'Patient/p1', '{"resourceType":"Patient","id":"p1","name":[{"family":"A"},{"given":["B"],"family":"C","family":"D"}]}', 'Patient.name[1].family');
      await refused('POST', 'Observation', JSON.stringify({ resourceType: 'Observation', status: 'final', code: { text: 'x' } }).replace('"code":{"text":"x"}', '"code":{"text":"x","text" : "y"}'), 'Observation.code.text');
      await refused('POST', 'Patient', '{"resourceType":"Patient","contained":[{"resourceType":"Organization","id":"o","name":"A","name":"B"}]}', 'Patient.contained[0].name');
      // Written with an escape, the name is still `id` as JSON.parse reads it.
      await refused('POST', 'Patient', '{"resourceType":"Patient","id":"a","\\u0069d":"b"}', 'Patient.id');
    });

    test('in a transaction entry, and in an object of many names, is refused too', async () => {
      const tx = JSON.stringify({
        resourceType: 'Bundle', type: 'transaction',
        entry: [
          { request: { method: 'POST', url: 'Patient' }, resource: { resourceType: 'Patient', gender: 'male' } },
          { request: { method: 'POST', url: 'Patient' }, resource: { resourceType: 'Patient', gender: 'female' } },
        ],
      }).replace('"gender":"female"', '"gender":"female","gender":"male"');
      await refused('POST', '', tx, 'Bundle.entry[1].resource.gender');
      const many: string[] = [];
      for (let i = 0; i < 200; i++) many.push(`"valueString${i}":"${i}"`);
      const extension = `{"url":"http://example.org/x",${many.join(',')},"valueString7":"again"}`;
      await refused('POST', 'Patient', `{"resourceType":"Patient","extension":[${extension}]}`, 'Patient.extension[0].valueString7');
    });

    test('names that repeat in other objects are no duplicate, and the resource is written as sent', async () => {
      const text = '{"resourceType":"Patient","id":"ok","name":[{"family":"A","given":["x"]},{"family":"B","given":["y"]}],'
        + '"contact":[{"name":{"family":"C"},"telecom":[{"system":"phone","value":"1"},{"system":"email","value":"e"}]}],'
        + '"extension":[{"url":"http://example.org/a","extension":[{"url":"b","valueString":"1"},{"url":"c","valueString":"2"}]}]}';
      const res = await api.call('PUT', 'Patient/ok', text);
      expect(res.status).toBe(201);
      const stored = (await (await api.get('Patient/ok')).json()) as Json;
      expect(stored.name.map((n: Json) => n.family)).toEqual(['A', 'B']);
      expect(stored.contact[0].telecom).toHaveLength(2);
    });
  });
});
