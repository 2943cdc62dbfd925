/**
 * A transaction's conditional entries (`ifNoneExist`, conditional PUT, PATCH and DELETE URLs) whose `_has` or chain
 * reads a type other entries of the same transaction write, on both databases. A chain's or `_has`'s other side is
 * searched in the store, which holds the state before the transaction. That is the answer http.html's processing
 * order (DELETE, then POST, then PUT and PATCH) gives only where every write that the link would see comes in a later
 * step: a conditional DELETE beside creates and updates, a conditional create beside updates. Where a write of an
 * earlier step (a POST before a conditional PUT) or of the same step (another POST beside a conditional create, whose
 * order FHIR leaves undefined) changes the link's answer, the entry is refused with a 400 naming its condition, and
 * nothing is written; before, it was resolved against the stored state, unlike the conditional references beside it.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { bundlePoster, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const LOINC = 'http://loinc.org';
const obs = (id: string | undefined, code: string, patient: string): Json => ({
  resourceType: 'Observation', ...(id && { id }), status: 'final', code: { coding: [{ system: LOINC, code }] }, subject: { reference: `Patient/${patient}` },
});
const post = (resource: Json, ifNoneExist?: string) => ({ resource, request: { method: 'POST', url: resource.resourceType, ...(ifNoneExist && { ifNoneExist }) } });
const put = (resource: Json, url = `${resource.resourceType}/${resource.id}`) => ({ resource, request: { method: 'PUT', url } });
const del = (url: string) => ({ request: { method: 'DELETE', url } });
const patch = (url: string, value: string) => ({
  resource: { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'add' }, { name: 'path', valueString: 'Patient' }, { name: 'name', valueString: 'gender' }, { name: 'value', valueCode: value }] }] },
  request: { method: 'PATCH', url },
});
const transaction = (...entry: Json[]): Json => ({ resourceType: 'Bundle', type: 'transaction', entry });
const has = (code: string) => `_has:Observation:subject:code=${LOINC}|${code}`;

await eachStore((kind, fresh) => {
  describe(`transaction conditional entries through _has and chains of types the transaction writes (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let poster: ReturnType<typeof bundlePoster>;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      poster = bundlePoster(() => t, () => api);
      await api.put200({ resourceType: 'Patient', id: 'p1', identifier: [{ system: 'urn:s', value: 'a' }] });
      await api.put200({ resourceType: 'Patient', id: 'p2', identifier: [{ system: 'urn:s', value: 'b' }] });
      await api.put200(obs('o1', '1-8', 'p1'));
    });
    afterAll(() => t.close());

    const refused = async (bundle: Json, element: string, type: string) => {
      const outcome = await poster.nothingWritten(bundle, 400);
      expect(outcome.issue[0].expression).toEqual([element]);
      expect(outcome.issue[0].diagnostics).toContain(`reads ${type} through a chain or _has`);
    };

    test('a conditional PUT whose _has reads an Observation another entry creates: 400 naming request.url', async () => {
      await refused(transaction(post(obs(undefined, '2-6', 'p2')), put({ resourceType: 'Patient', gender: 'male' }, `Patient?${has('2-6')}`)), 'Bundle.entry[1].request.url', 'Observation');
    });

    test('a conditional PUT whose _has reads a stored Observation another entry re-codes: 400, not the Patient it no longer names', async () => {
      await refused(transaction(put(obs('o1', '3-4', 'p1')), put({ resourceType: 'Patient', gender: 'male' }, `Patient?${has('1-8')}`)), 'Bundle.entry[1].request.url', 'Observation');
    });

    test('a conditional PATCH whose _has reads an Observation another entry deletes: 400', async () => {
      await refused(transaction(del('Observation/o1'), patch(`Patient?${has('1-8')}`, 'male')), 'Bundle.entry[1].request.url', 'Observation');
    });

    test('an ifNoneExist whose _has reads an Observation another POST creates (an order FHIR leaves undefined): 400 naming ifNoneExist', async () => {
      await refused(transaction(post(obs(undefined, '2-6', 'p2')), post({ resourceType: 'Patient' }, has('2-6'))), 'Bundle.entry[1].request.ifNoneExist', 'Observation');
    });

    test('an ifNoneExist whose chain reads a Patient another entry deletes: 400', async () => {
      await refused(transaction(del('Patient/p2'), post(obs(undefined, '5-5', 'p2'), 'subject:Patient.identifier=urn:s|b')), 'Bundle.entry[1].request.ifNoneExist', 'Patient');
    });

    test('a conditional DELETE whose _has reads an Observation another DELETE removes (an order FHIR leaves undefined): 400', async () => {
      await refused(transaction(del('Observation/o1'), del(`Patient?${has('1-8')}`)), 'Bundle.entry[1].request.url', 'Observation');
    });

    test('a conditional DELETE reads the stored state whatever the POSTs and PUTs write (deletes come first)', async () => {
      await api.put200({ resourceType: 'Patient', id: 'p3' });
      await api.put200(obs('o3', '7-7', 'p3'));
      // The PUT takes o3's code away and the POST gives p2 that code: neither is seen, as deletes are processed first.
      const body = await poster.ok(transaction(del(`Patient?_has:Observation:subject:code=${LOINC}|7-7`), put(obs('o3', '8-8', 'p3')), post(obs(undefined, '7-7', 'p2'))));
      expect(body.entry[0].response.status).toMatch(/^20[04]/);
      expect((await api.get('Patient/p3')).status).toBe(410);
      expect((await api.get('Patient/p2')).status).toBe(200);
    });

    test('an ifNoneExist reads the stored state whatever the PUTs write (creates come before updates)', async () => {
      await api.put200({ resourceType: 'Patient', id: 'p4' });
      await api.put200(obs('o4', '6-6', 'p4'));
      // The PUT re-codes o4 after the creates: the conditional create finds p4 by the code o4 had.
      const body = await poster.ok(transaction(put(obs('o4', '6-7', 'p4')), post({ resourceType: 'Patient' }, `_has:Observation:subject:code=${LOINC}|6-6`)));
      expect(body.entry[1].response.status).toMatch(/^200/);
      expect(body.entry[1].response.location).toContain('Patient/p4');
    });

    test('an ifNoneExist whose chain names a Patient the Bundle creates finds the Observation an earlier entry creates of it, as one by one', async () => {
      const U = 'urn:uuid:7d3c1a52-4f0e-4b8e-9a61-2f9d8c0b1e11';
      const o = { resourceType: 'Observation', status: 'final', code: { coding: [{ system: LOINC, code: '4-4' }] }, subject: { reference: U } };
      const body = await poster.ok(transaction(
        { fullUrl: U, ...post({ resourceType: 'Patient', identifier: [{ system: 'urn:s', value: 'new' }] }) },
        post(o),
        post(o, `subject:Patient.identifier=urn:s|new&code=${LOINC}|4-4`),
      ));
      expect(body.entry.map((e: Json) => e.response.status.slice(0, 3))).toEqual(['201', '201', '200']);
      expect(body.entry[2].response.location).toBe(body.entry[1].response.location);
    });

    test('conditional entries whose links read types the transaction writes nothing of that meets them resolve as before', async () => {
      const body = await poster.ok(transaction(post(obs(undefined, '9-9', 'p2')), put({ resourceType: 'Patient', id: 'p1', identifier: [{ system: 'urn:s', value: 'a' }], gender: 'female' }, `Patient?${has('1-8')}`)));
      expect(body.entry[1].response.status).toMatch(/^200/);
      expect((await (await api.get('Patient/p1')).json()).gender).toBe('female');
    });
  });
});
