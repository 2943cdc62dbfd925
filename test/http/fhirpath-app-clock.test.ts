/**
 * FHIRPath's `now()`, `today()` and `timeOfDay()` read the app's clock wherever the server evaluates FHIRPath
 * for a request: a FHIRPath Patch's `where()` criteria (REST and in a transaction) and `$graphql`'s `@slice`
 * paths, as search and validation do. The test app's clock stands at 2026-01-15T10:00:00Z, not the machine's.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

/** A FHIRPath Patch deleting what `path` selects. */
const deleting = (path: string): Json => ({
  resourceType: 'Parameters',
  parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'delete' }, { name: 'path', valueString: path }] }],
});

await eachStore((kind, fresh) => {
  describe(`FHIRPath reads the app's clock (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let day: string;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      day = new Date(t.clock.now()).toISOString().slice(0, 10);
    });
    afterAll(() => t.close());

    const patient = (id: string) => api.put200({
      resourceType: 'Patient', id, identifier: [{ system: 'urn:day', value: day }, { system: 'urn:day', value: '1999-12-31' }],
    });
    const values = async (id: string) => (((await (await api.get(`Patient/${id}`)).json()) as Json).identifier as Json[]).map((i) => i.value);

    test("a FHIRPath Patch's where() sees today() and now() of the app's clock", async () => {
      await patient('today');
      const res = await api.call('PATCH', 'Patient/today', deleting('Patient.identifier.where(value = today().toString())'), { 'Content-Type': 'application/fhir+json' });
      expect(res.status).toBe(200);
      expect(await values('today')).toEqual(['1999-12-31']);

      await patient('now');
      // now() is the clock's instant (to the millisecond): its date part is the clock's day.
      const now = await api.call('PATCH', 'Patient/now', deleting('Patient.identifier.where(value = now().toString().substring(0, 10))'), { 'Content-Type': 'application/fhir+json' });
      expect(now.status).toBe(200);
      expect(await values('now')).toEqual(['1999-12-31']);
    });

    test("a transaction's FHIRPath Patch entry reads the app's clock too", async () => {
      await patient('tx');
      const bundle = {
        resourceType: 'Bundle', type: 'transaction',
        entry: [{ resource: deleting('Patient.identifier.where(value = today().toString())'), request: { method: 'PATCH', url: 'Patient/tx' } }],
      };
      expect((await api.post('', bundle)).status).toBe(200);
      expect(await values('tx')).toEqual(['1999-12-31']);
    });

    test("$graphql's @slice paths read the app's clock", async () => {
      await patient('sliced');
      const res = await api.post('$graphql', JSON.stringify({ query: '{ Patient(id: "sliced") { identifier @slice(path: "(value = today().toString()).toString()") { value } } }' }), { 'Content-Type': 'application/json' });
      expect(res.status).toBe(200);
      const body = (await res.json()) as Json;
      expect(body.errors).toBeUndefined();
      expect(body.data.Patient).toEqual({ identifier: [{ 'value.true': day }, { 'value.false': '1999-12-31' }] });
    });
  });
});
