/**
 * A conditional create's condition may name this server's FHIR base (`{fhir_base}/Patient?identifier=...`,
 * http.html's `[base]/[type]?[search parameters]`), as HAPI FHIR takes it, in `If-None-Exist` and in a Bundle
 * entry's `request.ifNoneExist`; another server's base (or another tenant's) stays a 400 naming that base.
 * On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { bundlePoster, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

await eachStore((kind, fresh) => {
  describe(`a conditional create naming the base (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const bundles = bundlePoster(() => t, () => api);
    const patient = (value: string) => ({ resourceType: 'Patient', identifier: [{ system: 'urn:base', value }] });

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    test("If-None-Exist with this server's base creates once, then matches", async () => {
      const condition = `${t.fhir()}/Patient?identifier=urn:base|a`;
      const first = await api.post('Patient', patient('a'), { 'If-None-Exist': condition });
      expect(first.status).toBe(201);
      const id = ((await first.json()) as Json).id;
      const again = await api.post('Patient', patient('a'), { 'If-None-Exist': condition });
      expect(again.status).toBe(200);
      expect(((await again.json()) as Json).id).toBe(id);
      // The base alone, with the query: the type is the one posted to.
      const bare = await api.post('Patient', patient('a'), { 'If-None-Exist': `${t.fhir()}?identifier=urn:base|a` });
      expect(bare.status).toBe(200);
    });

    test("a Bundle entry's ifNoneExist with this server's base matches as its relative form does", async () => {
      const entry = (value: string) => ({ request: { method: 'POST', url: 'Patient', ifNoneExist: `${t.fhir()}/Patient?identifier=urn:base|${value}` }, resource: patient(value) });
      for (const type of ['transaction', 'batch']) {
        const out = await bundles.ok({ resourceType: 'Bundle', type, entry: [entry(`b-${type}`)] });
        expect(out.entry[0].response.status).toBe('201 Created');
        const again = await bundles.ok({ resourceType: 'Bundle', type, entry: [entry(`b-${type}`)] });
        expect(again.entry[0].response.status).toBe('200 OK');
      }
    });

    test("another server's base, or another tenant's, is a 400 naming it", async () => {
      for (const other of ['http://elsewhere.test/fhir', t.fhir('t2')]) {
        const res = await api.post('Patient', patient('c'), { 'If-None-Exist': `${other}/Patient?identifier=urn:base|c` });
        const outcome = await expectOutcome(res, 400, 'invalid');
        expect(outcome.issue[0].expression).toEqual(['If-None-Exist']);
        expect(outcome.issue[0].details.text).toContain(`another server's base '${other}'`);
        const entry = { request: { method: 'POST', url: 'Patient', ifNoneExist: `${other}/Patient?identifier=urn:base|c` }, resource: patient('c') };
        const refused = await bundles.nothingWritten({ resourceType: 'Bundle', type: 'transaction', entry: [entry] }, 400);
        expect(refused.issue[0].expression).toEqual(['Bundle.entry[0].request.ifNoneExist']);
        expect(refused.issue[0].details.text).toContain(`another server's base '${other}'`);
      }
      // Another type under this base is still the type's error.
      const res = await api.post('Patient', patient('c'), { 'If-None-Exist': `${t.fhir()}/Observation?identifier=urn:base|c` });
      expect((await expectOutcome(res, 400, 'invalid')).issue[0].details.text).toContain("names type 'Observation', expected Patient");
    });
  });
});
