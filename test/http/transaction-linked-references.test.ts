/**
 * A transaction's conditional reference whose `_has` or chain reads a type the same transaction writes (creates,
 * updates, patches or deletes), on both databases. Conditional references are resolved against the state the
 * transaction leaves (FHIR R4 http.html "Conditional References"; HAPI FHIR matches the resources its transaction
 * writes too): a link's other side is the stored resources the transaction keeps and those it writes, so
 * `Patient?_has:Observation:subject:code=y` beside the Observation that gives a Patient that code finds that Patient,
 * and beside an update that takes the code away from a stored Observation no longer finds the Patient it named. None or
 * several matches are a 412 naming the reference's element, and nothing is written. Two such references whose
 * answers depend on which is resolved first (each reads a type whose written resource holds the other) are a 400; one
 * that reads a resource holding another waits for it, whatever their order in the Bundle. Before, every such
 * reference was refused with a 400.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { bundlePoster, craftToken, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const LOINC = 'http://loinc.org';
const SCT = 'http://snomed.info/sct';
const obs = (id: string | undefined, code: string, patient: string): Json => ({
  resourceType: 'Observation', ...(id && { id }), status: 'final', code: { coding: [{ system: LOINC, code }] }, subject: { reference: patient.includes(':') || patient.includes('?') ? patient : `Patient/${patient}` },
});
const condition = (reference: string, code?: string): Json => ({ resourceType: 'Condition', ...(code && { code: { coding: [{ system: SCT, code }] } }), subject: { reference } });
const report = (reference: string): Json => ({ resourceType: 'DiagnosticReport', status: 'final', code: { text: 'r' }, result: [{ reference }] });
const post = (resource: Json, fullUrl?: string) => ({ ...(fullUrl && { fullUrl }), resource, request: { method: 'POST', url: resource.resourceType } });
const put = (resource: Json) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
const transaction = (...entry: Json[]): Json => ({ resourceType: 'Bundle', type: 'transaction', entry });
const has = (code: string) => `Patient?_has:Observation:subject:code=${LOINC}|${code}`;

await eachStore((kind, fresh) => {
  describe(`conditional references through _has and chains of types the transaction writes (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let poster: ReturnType<typeof bundlePoster>;
    /** The resources the entries of a committed transaction wrote, read back, in entry order. */
    const written = async (body: Json): Promise<Json[]> => Promise.all(body.entry.map(async (e: Json) => (await api.get(e.response.location)).json()));

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      poster = bundlePoster(() => t, () => api);
      await api.put200({ resourceType: 'Patient', id: 'p1', identifier: [{ system: 'urn:s', value: 'a' }] });
      await api.put200({ resourceType: 'Patient', id: 'p2' });
      await api.put200(obs('o1', '1-8', 'p1'));
    });
    afterAll(() => t.close());

    test('a _has through an Observation the transaction creates finds the Patient it names', async () => {
      const [, c] = await written(await poster.ok(transaction(post(obs(undefined, '2-6', 'p2')), post(condition(has('2-6'))))));
      expect(c.subject.reference).toBe('Patient/p2');
    });

    test('a _has through a stored Observation the transaction updates reads its new content, not the Patient it no longer names', async () => {
      await api.put200({ resourceType: 'Patient', id: 'p5' });
      await api.put200(obs('o5', '5-1', 'p5'));
      const [, , c] = await written(await poster.ok(transaction(put(obs('o5', '5-2', 'p5')), post(obs(undefined, '5-1', 'p2')), post(condition(has('5-1'))))));
      expect(c.subject.reference).toBe('Patient/p2');
    });

    test('a _has through a stored Observation the transaction deletes: 412 "matches nothing" naming the element, nothing written', async () => {
      await api.put200({ resourceType: 'Patient', id: 'p6' });
      await api.put200(obs('o6', '6-1', 'p6'));
      const outcome = await poster.nothingWritten(transaction({ request: { method: 'DELETE', url: 'Observation/o6' } }, post(condition(has('6-1')))), 412);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[1].resource.subject']);
      expect(outcome.issue[0].diagnostics).toContain('matches nothing');
    });

    test('a _has that the stored and the written Observations together answer with two Patients: 412 naming the element', async () => {
      await api.put200({ resourceType: 'Patient', id: 'p7' });
      await api.put200(obs('o7', '7-1', 'p7'));
      const outcome = await poster.nothingWritten(transaction(post(obs(undefined, '7-1', 'p2')), post(condition(has('7-1')))), 412);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[1].resource.subject']);
      expect(outcome.issue[0].diagnostics).toContain('matches more than one resource');
    });

    test('a chain through a Patient the transaction updates reads its new identifier', async () => {
      await api.put200({ resourceType: 'Patient', id: 'p8', identifier: [{ system: 'urn:s', value: 'p8-old' }] });
      await api.put200(obs('o8', '8-1', 'p8'));
      const moved = put({ resourceType: 'Patient', id: 'p8', identifier: [{ system: 'urn:s', value: 'p8-new' }] });
      const outcome = await poster.nothingWritten(transaction(moved, post(report('Observation?subject:Patient.identifier=urn:s|p8-old'))), 412);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[1].resource.result[0]']);
      const [, r] = await written(await poster.ok(transaction(moved, post(report('Observation?subject:Patient.identifier=urn:s|p8-new')))));
      expect(r.result[0].reference).toBe('Observation/o8');
    });

    test('a chain and a _has through resources the transaction creates, each by its fullUrl, find the new ones', async () => {
      const P = 'urn:uuid:0b7f3c9e-2d41-4f6a-9c1e-5a8b7d6c4e21';
      const O = 'urn:uuid:1c8e4dab-3e52-4a7b-8d2f-6b9c8e7d5f32';
      const body = await poster.ok(transaction(
        post({ resourceType: 'Patient', identifier: [{ system: 'urn:s', value: 'p9' }] }, P),
        post(obs(undefined, '9-1', P), O),
        post(report('Observation?subject:Patient.identifier=urn:s|p9')),
        post(condition(has('9-1'))),
      ));
      const [p, o, r, c] = await written(body);
      expect(r.result[0].reference).toBe(`Observation/${o.id}`);
      expect(c.subject.reference).toBe(`Patient/${p.id}`);
    });

    test('a reference that reads a resource holding another such reference waits for it, whatever their order in the Bundle', async () => {
      const encounter = (value: string): Json => ({ resourceType: 'Encounter', identifier: [{ system: 'urn:e', value }], status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' }, subject: { reference: 'Patient/p2' } });
      const byEncounter = (value: string) => `Patient?_has:Encounter:subject:identifier=urn:e|${value}`;
      // The Condition's _has reads the Observation, whose subject is itself resolved through the Encounter.
      const [c, o] = await written(await poster.ok(transaction(post(condition(has('w-1'))), post(obs(undefined, 'w-1', byEncounter('w-1'))), post(encounter('w-1')))));
      expect(o.subject.reference).toBe('Patient/p2');
      expect(c.subject.reference).toBe('Patient/p2');
      // A reference without a chain or _has that reads such an Observation waits for it too.
      const [r, o2] = await written(await poster.ok(transaction(post(report(`Observation?code=${LOINC}|w-2&subject=Patient/p2`)), post(obs(undefined, 'w-2', byEncounter('w-2'))), post(encounter('w-2')))));
      expect(r.result[0].reference).toBe(`Observation/${o2.id}`);
    });

    test('two such references whose answers depend on which is resolved first: 400 naming the first, nothing written', async () => {
      const outcome = await poster.nothingWritten(transaction(
        post(obs(undefined, '10-1', `Patient?_has:Condition:subject:code=${SCT}|1001`)),
        post(condition(has('10-1'), '1001')),
      ), 400);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[0].resource.subject']);
      expect(outcome.issue[0].diagnostics).toContain('Bundle.entry[1].resource.subject');
    });

    test('a canonical chain through a Questionnaire the transaction creates finds the stored response that names it', async () => {
      const url = 'http://example.org/Questionnaire/intake-two';
      await api.put200({ resourceType: 'QuestionnaireResponse', id: 'qr2', questionnaire: url, status: 'completed' });
      const derived = { resourceType: 'Observation', status: 'final', code: { text: 'intake' }, derivedFrom: [{ reference: 'QuestionnaireResponse?questionnaire.title=IntakeTwo' }] };
      expect((await poster.nothingWritten(transaction(post(derived)), 412)).issue[0].expression).toEqual(['Bundle.entry[0].resource.derivedFrom[0]']);
      const [, o] = await written(await poster.ok(transaction(post({ resourceType: 'Questionnaire', url, title: 'IntakeTwo', status: 'active' }), post(derived))));
      expect(o.derivedFrom[0].reference).toBe('QuestionnaireResponse/qr2');
    });

    test('a reference walking a Location hierarchy beside a chain through a Patient the transaction updates', async () => {
      await api.put200({ resourceType: 'Location', id: 'ward' });
      await api.put200({ resourceType: 'Location', id: 'room', partOf: { reference: 'Location/ward' } });
      await api.put200({ resourceType: 'Patient', id: 'p14', identifier: [{ system: 'urn:s', value: 'p14-old' }] });
      await api.put200({ resourceType: 'Encounter', id: 'e14', status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' }, subject: { reference: 'Patient/p14' }, location: [{ location: { reference: 'Location/room' } }] });
      const moved = put({ resourceType: 'Patient', id: 'p14', identifier: [{ system: 'urn:s', value: 'p14-new' }] });
      const c = { resourceType: 'Condition', subject: { reference: 'Patient/p14' }, encounter: { reference: 'Encounter?location:below=Location/ward&subject:Patient.identifier=urn:s|p14-new' } };
      const [, written1] = await written(await poster.ok(transaction(moved, post(c))));
      expect(written1.encounter.reference).toBe('Encounter/e14');
    });

    test('a patient-bound token resolves such a reference within its compartment, the written Observations included', async () => {
      await api.put200({ resourceType: 'Patient', id: 'pc1' });
      await api.put200({ resourceType: 'Patient', id: 'pc2' });
      await api.put200(obs('oc2', 'c-1', 'pc2'));
      const bundle = transaction(post(obs(undefined, 'c-1', 'pc1')), post(condition(has('c-1'))));
      // For the admin, the stored Observation of pc2 and the written one of pc1: two Patients.
      expect((await poster.nothingWritten(bundle, 412)).issue[0].expression).toEqual(['Bundle.entry[1].resource.subject']);
      const mine = fhirClient(t, await craftToken(t, 'patient/*.cruds', { patient: 'pc1' }));
      const body = await poster.ok(bundle, mine);
      expect((await (await api.get(body.entry[1].response.location)).json()).subject.reference).toBe('Patient/pc1');
    });

    test("a batch resolves each entry on its own: another entry's write is not seen before it is committed, the entry's own is", async () => {
      const focus = { ...obs(undefined, 'b-3', 'p2'), focus: [{ reference: has('b-3') }] };
      const batch = { resourceType: 'Bundle', type: 'batch', entry: [post(condition(has('b-1'))), post(obs(undefined, 'b-1', 'p2')), post(focus)] };
      const body = await poster.ok(batch);
      expect(body.entry.map((e: Json) => e.response.status.slice(0, 3))).toEqual(['412', '201', '201']);
      expect(body.entry[0].response.outcome.issue[0].expression).toEqual(['Bundle.entry[0].resource.subject']);
      expect((await (await api.get(body.entry[2].response.location)).json()).focus[0].reference).toBe('Patient/p2');
      // The same first two entries in a transaction: its reference finds the Patient the other entry's Observation names.
      const [c] = await written(await poster.ok(transaction(post(condition(has('b-4'))), post(obs(undefined, 'b-4', 'p2')))));
      expect(c.subject.reference).toBe('Patient/p2');
    });

    test('the same references where the transaction writes nothing the chain or _has would read resolve as before', async () => {
      // An Observation of another code, and the Patient p2, which no chain's condition names.
      const body = await poster.ok(transaction(post(obs(undefined, '9-9', 'p2')), put({ resourceType: 'Patient', id: 'p2', gender: 'male' }), post(condition(has('1-8'))), post(report('Observation?subject:Patient.identifier=urn:s|a'))));
      const [, , c, r] = await written(body);
      expect(c.subject.reference).toBe('Patient/p1');
      expect(r.result[0].reference).toBe('Observation/o1');
    });
  });
});
