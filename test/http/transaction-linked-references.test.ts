/**
 * A transaction's conditional reference whose `_has` or chain reads a type the same transaction writes (creates,
 * updates, patches or deletes), on both databases. Conditional references are resolved against the state the
 * transaction leaves (bundle-conditional.ts), but a chain's or `_has`'s other side is searched in the store, which
 * does not hold the transaction's writes: `Patient?_has:Observation:subject:code=y` beside the Observation that gives
 * the Patient that code was a 412 "matches nothing", and beside an update that took the code away from the stored
 * Observation it resolved to that Patient all the same (a reference the state left behind does not support). Such a
 * reference is refused with a 400 naming the entry's element and the type, and nothing is written; the same reference
 * in a transaction whose writes of the type it reads meet nothing of the chain or `_has` resolves as before.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { bundlePoster, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const LOINC = 'http://loinc.org';
const obs = (id: string | undefined, code: string, patient: string): Json => ({
  resourceType: 'Observation', ...(id && { id }), status: 'final', code: { coding: [{ system: LOINC, code }] }, subject: { reference: `Patient/${patient}` },
});
const condition = (reference: string): Json => ({ resourceType: 'Condition', subject: { reference } });
const post = (resource: Json) => ({ resource, request: { method: 'POST', url: resource.resourceType } });
const put = (resource: Json) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
const transaction = (...entry: Json[]): Json => ({ resourceType: 'Bundle', type: 'transaction', entry });

await eachStore((kind, fresh) => {
  describe(`conditional references through _has and chains of types the transaction writes (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let poster: ReturnType<typeof bundlePoster>;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      poster = bundlePoster(() => t, () => api);
      await api.put200({ resourceType: 'Patient', id: 'p1', identifier: [{ system: 'urn:s', value: 'a' }] });
      await api.put200({ resourceType: 'Patient', id: 'p2' });
      await api.put200(obs('o1', '1-8', 'p1'));
    });
    afterAll(() => t.close());

    test('a _has through an Observation the transaction creates: 400 naming the element, not 412 "matches nothing"', async () => {
      const outcome = await poster.nothingWritten(transaction(post(obs(undefined, '2-6', 'p2')), post(condition(`Patient?_has:Observation:subject:code=${LOINC}|2-6`))), 400);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[1].resource.subject']);
      expect(outcome.issue[0].diagnostics).toContain('Observation');
    });

    test('a _has through a stored Observation the transaction updates: 400, not the Patient it no longer names', async () => {
      const bundle = transaction(put(obs('o1', '3-4', 'p1')), post(obs(undefined, '1-8', 'p2')), post(condition(`Patient?_has:Observation:subject:code=${LOINC}|1-8`)));
      const outcome = await poster.nothingWritten(bundle, 400);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[2].resource.subject']);
    });

    test('a _has through a stored Observation the transaction deletes: 400, not the Patient only the deleted one named', async () => {
      const bundle = transaction({ request: { method: 'DELETE', url: 'Observation/o1' } }, post(condition(`Patient?_has:Observation:subject:code=${LOINC}|1-8`)));
      const outcome = await poster.nothingWritten(bundle, 400);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[1].resource.subject']);
    });

    test('a chain through a Patient the transaction updates: 400', async () => {
      const report = { resourceType: 'DiagnosticReport', status: 'final', code: { text: 'r' }, result: [{ reference: 'Observation?subject:Patient.identifier=urn:s|a' }] };
      const outcome = await poster.nothingWritten(transaction(put({ resourceType: 'Patient', id: 'p1', identifier: [{ system: 'urn:s', value: 'b' }] }), post(report)), 400);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[1].resource.result[0]']);
      expect(outcome.issue[0].diagnostics).toContain('Patient');
    });

    test('the same references where the transaction writes nothing the chain or _has would read resolve as before', async () => {
      // An Observation of another code, and the Patient p2, which no chain's condition names.
      const body = await poster.ok(transaction(post(obs(undefined, '9-9', 'p2')), put({ resourceType: 'Patient', id: 'p2', gender: 'male' }), post(condition(`Patient?_has:Observation:subject:code=${LOINC}|1-8`)), post({ resourceType: 'DiagnosticReport', status: 'final', code: { text: 'r' }, result: [{ reference: 'Observation?subject:Patient.identifier=urn:s|a' }] })));
      const [, , c, r] = await Promise.all(body.entry.map(async (e: Json) => (await api.get(e.response.location)).json()));
      expect(c.subject.reference).toBe('Patient/p1');
      expect(r.result[0].reference).toBe('Observation/o1');
    });
  });
});
