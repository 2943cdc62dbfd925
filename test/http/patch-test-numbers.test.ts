/**
 * A JSON Patch `test` compares numbers by their value as written (RFC 6902 4.6: "numerically equal"), not as
 * binary doubles: FHIR decimals keep their precision (R4 datatypes.html#decimal, and Cinder stores them as
 * written), so a test of `12345678901234567890.123456788` against a stored `...789`, or of `0.30000000000000001`
 * against `0.3`, fails (422, nothing written) where a double would call them equal, while `1.5`, `1.50` and
 * `15e-1` are one value. A `test` guards the operations after it: a guard that passes wrongly lets them write.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, type FhirClient } from '../helpers/fhir.ts';

const JSON_PATCH = { 'Content-Type': 'application/json-patch+json' };

await eachStore((kind, fresh) => {
  describe(`JSON Patch test of numbers (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      const body = '{"resourceType":"Observation","id":"o1","status":"final","code":{"text":"c"},"valueQuantity":{"value":12345678901234567890.123456789,"unit":"mg"},'
        + '"component":[{"code":{"text":"a"},"valueQuantity":{"value":0.3}},{"code":{"text":"b"},"valueQuantity":{"value":1.50}}]}';
      expect((await api.call('PUT', 'Observation/o1', body, { 'Content-Type': 'application/fhir+json' })).status).toBe(201);
    });
    afterAll(() => t.close());

    /** A patch of `test` then a status change, sent as its text (the numbers as written). */
    const guarded = (path: string, value: string) => api.call('PATCH', 'Observation/o1', `[{"op":"test","path":"${path}","value":${value}},{"op":"replace","path":"/status","value":"amended"}]`, JSON_PATCH);
    const version = async () => (await api.get('Observation/o1')).headers.get('etag');

    test('numbers that differ beyond a double\'s precision are not equal: 422, nothing written', async () => {
      for (const [path, value] of [
        ['/valueQuantity/value', '12345678901234567890.123456788'],
        ['/valueQuantity', '{"unit":"mg","value":12345678901234567890.123456788}'],
        ['/component/0/valueQuantity/value', '0.30000000000000001'],
        ['/component', '[{"code":{"text":"a"},"valueQuantity":{"value":0.30000000000000001}},{"code":{"text":"b"},"valueQuantity":{"value":1.5}}]'],
      ]) {
        await expectOutcome(await guarded(path!, value!), 422, 'processing');
        expect({ path, version: await version() }).toEqual({ path, version: 'W/"1"' });
      }
    });

    test('the same value however written is equal: the patch applies', async () => {
      expect((await api.call('PATCH', 'Observation/o1', '[{"op":"test","path":"/component/1/valueQuantity/value","value":15e-1},{"op":"test","path":"/component/1/valueQuantity/value","value":1.5},'
        + '{"op":"test","path":"/valueQuantity","value":{"unit":"mg","value":12345678901234567890.1234567890}},{"op":"replace","path":"/status","value":"amended"}]', JSON_PATCH)).status).toBe(200);
      expect(await version()).toBe('W/"2"');
    });
  });
});
