/**
 * A transaction's conditional entries (`ifNoneExist`, conditional PUT, PATCH and DELETE URLs) whose `_has` or chain
 * reads a type other entries of the same transaction write, on both databases. Each is searched in the state
 * http.html's processing order (DELETE, then POST, then PUT and PATCH) gives it: the writes of the earlier steps seen
 * (a conditional PUT finds the Patient an Observation the Bundle creates names; an `ifNoneExist` does not find what a
 * DELETE removes), those of later steps not, and the entry's own write, and what refers to it, left out. Where the
 * writes of its own step (another POST beside a conditional create, a PUT beside a conditional PUT, a DELETE beside a
 * conditional DELETE, whose order FHIR leaves undefined) would change its answer, the entry is refused with a 400
 * naming its condition, and nothing is written. Before, every entry whose link read an earlier or the same step's
 * writes was refused.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { bundlePoster, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const LOINC = 'http://loinc.org';
const obs = (id: string | undefined, code: string, patient: string): Json => ({
  resourceType: 'Observation', ...(id && { id }), status: 'final', code: { coding: [{ system: LOINC, code }] }, subject: { reference: patient.startsWith('urn:') ? patient : `Patient/${patient}` },
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

    test('a conditional PUT whose _has reads an Observation another entry creates updates the Patient it names (creates come before updates)', async () => {
      await api.put200({ resourceType: 'Patient', id: 'p12', identifier: [{ system: 'urn:s', value: 'p12' }] });
      const body = await poster.ok(transaction(post(obs(undefined, '2-6', 'p12')), put({ resourceType: 'Patient', identifier: [{ system: 'urn:s', value: 'p12' }], gender: 'male' }, `Patient?${has('2-6')}`)));
      expect(body.entry[1].response.status).toMatch(/^200/);
      expect(body.entry[1].response.location).toContain('Patient/p12/');
      expect((await (await api.get('Patient/p12')).json()).gender).toBe('male');
    });

    test('conditional PUTs whose answers follow from one another (an Encounter of the Patient the other PUT finds) are planned until they settle', async () => {
      const encounter = (subject: string, status: string): Json => ({ resourceType: 'Encounter', status, class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' }, subject: { reference: subject } });
      await api.put200({ resourceType: 'Patient', id: 'p13' });
      await api.put200({ ...encounter('Patient/p13', 'in-progress'), id: 'e13' });
      const UA = 'urn:uuid:8b3f5e4d-2a1c-4b0d-9c8f-6c5b4a3f2e1d';
      const body = await poster.ok(transaction(
        post(obs(undefined, '13-1', 'p13')),
        { fullUrl: UA, ...put({ resourceType: 'Patient', gender: 'female' }, `Patient?${has('13-1')}`) },
        post(obs(undefined, '13-2', UA)),
        put(encounter(UA, 'finished'), `Encounter?patient._has:Observation:subject:code=${LOINC}|13-2`),
      ));
      expect(body.entry.map((e: Json) => e.response.status.slice(0, 3))).toEqual(['201', '200', '201', '200']);
      expect((await (await api.get('Patient/p13')).json()).gender).toBe('female');
      expect((await (await api.get('Encounter/e13')).json()).status).toBe('finished');
    });

    test('a conditional PUT whose _has reads the Observations the POSTs create of two Patients: 412 naming request.url, nothing written', async () => {
      const outcome = await poster.nothingWritten(transaction(post(obs(undefined, '2-7', 'p1')), post(obs(undefined, '2-7', 'p2')), put({ resourceType: 'Patient', gender: 'male' }, `Patient?${has('2-7')}`)), 412);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[2].request.url']);
    });

    test("a conditional PUT whose _has reads only the Bundle's new Observations of the Patient it writes: the stored state answers, and it creates", async () => {
      const U = 'urn:uuid:5e0c2b1a-9d8f-4e7a-b6c5-3f2e1d0c9b8a';
      const body = await poster.ok(transaction(
        { fullUrl: U, ...put({ resourceType: 'Patient', gender: 'other' }, `Patient?${has('11-11')}`) },
        post(obs(undefined, '11-11', U)),
      ));
      expect(body.entry.map((e: Json) => e.response.status.slice(0, 3))).toEqual(['201', '201']);
      const o = await (await api.get(body.entry[1].response.location)).json();
      expect(body.entry[0].response.location).toContain(`${o.subject.reference}/_history/`);
    });

    test("an ifNoneExist whose _has reads only the Bundle's new Observations of the Patient it creates: the stored state answers, and it creates", async () => {
      const U = 'urn:uuid:6f1d3c2b-0e9a-4f8b-a7d6-4a3f2e1d0cb9';
      const body = await poster.ok(transaction({ fullUrl: U, ...post({ resourceType: 'Patient' }, has('12-12')) }, post(obs(undefined, '12-12', U))));
      expect(body.entry.map((e: Json) => e.response.status.slice(0, 3))).toEqual(['201', '201']);
    });

    test('a conditional PUT whose _has reads a stored Observation another entry re-codes: 400, not the Patient it no longer names', async () => {
      await refused(transaction(put(obs('o1', '3-4', 'p1')), put({ resourceType: 'Patient', gender: 'male' }, `Patient?${has('1-8')}`)), 'Bundle.entry[1].request.url', 'Observation');
    });

    test('a conditional PATCH whose _has reads an Observation another entry deletes finds nothing (deletes come first): 404', async () => {
      const outcome = await poster.nothingWritten(transaction(del('Observation/o1'), patch(`Patient?${has('1-8')}`, 'male')), 404);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[1].request.url']);
    });

    test('an ifNoneExist whose _has reads an Observation another POST creates (an order FHIR leaves undefined): 400 naming ifNoneExist', async () => {
      await refused(transaction(post(obs(undefined, '2-6', 'p2')), post({ resourceType: 'Patient' }, has('2-6'))), 'Bundle.entry[1].request.ifNoneExist', 'Observation');
    });

    test('an ifNoneExist whose _has reads an Observation another entry deletes does not find its Patient (deletes come first): it creates', async () => {
      await api.put200({ resourceType: 'Patient', id: 'p10' });
      await api.put200(obs('o10', '10-10', 'p10'));
      // The new Patient meets its condition through the Observation the Bundle creates of it (else the create is a 400: requireFoundByCondition).
      const U = 'urn:uuid:7a2e4d3c-1f0b-4a9c-b8e7-5b4a3f2e1dca';
      const body = await poster.ok(transaction(del('Observation/o10'), { fullUrl: U, ...post({ resourceType: 'Patient' }, has('10-10')) }, post(obs(undefined, '10-10', U))));
      expect(body.entry.map((e: Json) => e.response.status.slice(0, 3))).toEqual(['204', '201', '201']);
      expect(body.entry[1].response.location).not.toContain('Patient/p10/');
    });

    test('an ifNoneExist that only the stored state matched with a Patient another entry updates is judged on what it finds after the deletes', async () => {
      await api.put200({ resourceType: 'Patient', id: 'p15' });
      await api.put200(obs('o15', '15-1', 'p15'));
      const U = 'urn:uuid:9c4a6f5e-3b2d-4c1e-8d9a-7d6c5b4a3f2e';
      const body = await poster.ok(transaction(
        del('Observation/o15'),
        { fullUrl: U, ...post({ resourceType: 'Patient' }, has('15-1')) },
        post(obs(undefined, '15-1', U)),
        put({ resourceType: 'Patient', id: 'p15', gender: 'male' }),
      ));
      expect(body.entry.map((e: Json) => e.response.status.slice(0, 3))).toEqual(['204', '201', '201', '200']);
      expect(body.entry[1].response.location).not.toContain('Patient/p15/');
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
