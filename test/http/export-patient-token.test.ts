/**
 * Bulk export with a patient in context (SMART `patient/` scopes): Patient and Group exports hold the
 * token's patient's compartment alone, as its searches do; a system export is refused; the job, its
 * status and its files belong to the client and that patient. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { download, eachStore, finish, kickOff, patient, put, refs, type Manifest } from '../helpers/export.ts';
import { craftToken, expectOutcome, type Json } from '../helpers/fhir.ts';

const obs = (id: string, subject: string, category: string, extra: Json = {}) => ({
  resourceType: 'Observation', id, status: 'final', subject: { reference: `Patient/${subject}` }, code: { text: id },
  category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: category }] }], ...extra,
});
const encounter = (id: string, subject: string) => ({ resourceType: 'Encounter', id, status: 'finished', class: { code: 'AMB' }, subject: { reference: `Patient/${subject}` } });
const group = (id: string, members: string[]) => ({ resourceType: 'Group', id, type: 'person', actual: true, member: members.map((m) => ({ entity: { reference: `Patient/${m}` } })) });
const provenance = (id: string, target: string) => ({ resourceType: 'Provenance', id, target: [{ reference: target }], recorded: '2025-01-01T00:00:00Z', agent: [{ who: { reference: 'Practitioner/doc' } }] });
const params = (...ids: string[]) => ({ resourceType: 'Parameters', parameter: ids.map((id) => ({ name: 'patient', valueReference: { reference: `Patient/${id}` } })) });

/** pa's compartment: Observation `oba` is pb's, performed by pa; Group `g` holds pa and pb. */
const PA = ['Encounter/ea', 'Group/g', 'Observation/oa', 'Observation/oa-vs', 'Observation/oba', 'Patient/pa', 'Provenance/prov-a'];

await eachStore((kind, fresh) => {
  describe(`export with a patient-context token (${kind})`, () => {
    let t: TestApp;
    const as = (scope: string, who = 'pa') => craftToken(t, scope, { patient: who });
    const get = async (token: string, path: string) => t.request(t.fhir() + path, fhirInit(token));
    const post = async (token: string, path: string, body: Json) => t.request(t.fhir() + path, fhirInit(token, 'POST', body));
    /** Kick-off, run, manifest and every output file (downloaded with the same token). */
    const exported = async (token: string, path: string): Promise<{ manifest: Manifest; files: string[] }> => {
      const manifest = await finish(t, token, await kickOff(t, token, path));
      return { manifest, files: refs(await download(t, token, manifest.output)) };
    };

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      for (const id of ['pa', 'pb', 'pc']) await put(t, patient(id));
      await put(t, obs('oa', 'pa', 'laboratory'));
      await put(t, obs('oa-vs', 'pa', 'vital-signs'));
      await put(t, obs('ob', 'pb', 'laboratory'));
      await put(t, obs('oba', 'pb', 'laboratory', { performer: [{ reference: 'Patient/pa' }] }));
      await put(t, encounter('ea', 'pa'));
      await put(t, encounter('eb', 'pb'));
      await put(t, { resourceType: 'Practitioner', id: 'doc' });
      await put(t, group('g', ['pa', 'pb']));
      await put(t, group('h', ['pb', 'pc']));
      await put(t, provenance('prov-a', 'Patient/pa'));
      await put(t, provenance('prov-b', 'Patient/pb'));
      await put(t, provenance('prov-oa', 'Observation/oa'));
      await put(t, provenance('prov-ob', 'Observation/ob'));
    });
    afterAll(() => t.close());

    test("Patient/$export holds the token's patient's compartment alone", async () => {
      const token = await as('launch/patient patient/*.rs');
      const { manifest, files } = await exported(token, '/Patient/$export');
      expect(files).toEqual(PA);
      expect(manifest.error).toEqual([]);
      // _type narrows it, as for any token; a type outside the compartment is refused as for any token.
      expect((await exported(token, '/Patient/$export?_type=Observation,Patient')).files).toEqual(['Observation/oa', 'Observation/oa-vs', 'Observation/oba', 'Patient/pa']);
      await expectOutcome(await get(token, '/Patient/$export?_type=Practitioner'), 400);
    });

    test('a scope filter narrows its type, and a type the scopes do not cover is left out', async () => {
      const token = await as('patient/Observation.rs?category=laboratory patient/Patient.rs');
      expect((await exported(token, '/Patient/$export')).files).toEqual(['Observation/oa', 'Observation/oba', 'Patient/pa']);
      expect((await exported(token, '/Patient/$export?_type=Observation')).files).toEqual(['Observation/oa', 'Observation/oba']);
      await expectOutcome(await get(token, '/Patient/$export?_type=Observation,Encounter'), 403, 'forbidden');
    });

    test("patient may name the token's own patient, not another (403)", async () => {
      const token = await as('patient/*.rs');
      const other = await expectOutcome(await post(token, '/Patient/$export', params('pb')), 403, 'forbidden');
      expect(other.issue[0].expression).toEqual(['patient']);
      await expectOutcome(await post(token, '/Patient/$export', params('pa', 'pc')), 403, 'forbidden');
      const own = await post(token, '/Patient/$export', params('pa'));
      expect(own.status).toBe(202);
      const manifest = await finish(t, token, own.headers.get('content-location')!);
      expect(refs(await download(t, token, manifest.output))).toEqual(PA);
    });

    test("Group/$export covers the token's patient alone, in a Group it is a member of; any other is a 403", async () => {
      const token = await as('patient/*.rs');
      expect((await exported(token, '/Group/g/$export')).files).toEqual(PA);
      const outside = await expectOutcome(await get(token, '/Group/h/$export'), 403, 'forbidden');
      expect(outside.issue[0].diagnostics ?? outside.issue[0].details?.text).toContain('Group');
      await expectOutcome(await get(token, '/Group/missing/$export'), 404);
      // A token whose Group reads are lifted still exports its own patient alone, and only as a member.
      const lifted = await as('patient/*.rs user/Group.rs');
      expect((await exported(lifted, '/Group/g/$export?_type=Observation')).files).toEqual(['Observation/oa', 'Observation/oa-vs', 'Observation/oba']);
      await expectOutcome(await get(lifted, '/Group/h/$export?_type=Observation'), 403, 'forbidden');
    });

    test('a system export is refused: a system export is for system and user scopes', async () => {
      const token = await as('launch/patient patient/*.rs');
      for (const path of ['/$export', '/$export?_type=Observation']) {
        const outcome = await expectOutcome(await get(token, path), 403, 'forbidden');
        expect(outcome.issue[0].expression).toEqual(['_type']);
        expect(JSON.stringify(outcome)).toContain('Patient/$export');
      }
    });

    test('nothing exportable for the token is a 403 naming _type, not a 202 that exports nothing', async () => {
      const observations = await as('patient/Observation.rs');
      for (const prefer of [{}, { Prefer: 'handling=lenient' }] as Record<string, string>[]) {
        const res = await t.request(t.fhir() + '/Patient/$export?_type=Patient', fhirInit(observations, 'GET', undefined, prefer));
        expect((await expectOutcome(res, 403, 'forbidden')).issue[0].expression).toEqual(['_type']);
      }
      const practitioners = await as('patient/Practitioner.rs');
      expect((await expectOutcome(await get(practitioners, '/Patient/$export'), 403, 'forbidden')).issue[0].expression).toEqual(['_type']);
      expect((await expectOutcome(await get(practitioners, '/Group/g/$export'), 403, 'forbidden')).issue[0].expression).toEqual(['_type']);
      // The same for a system token whose scopes reach no exported type.
      const system = await t.tokenFor('t1', ['system/Practitioner.read']);
      expect((await expectOutcome(await get(system, '/Patient/$export'), 403, 'forbidden')).issue[0].expression).toEqual(['_type']);
    });

    test("another patient's token of the same app neither sees, downloads nor cancels the job", async () => {
      const token = await as('patient/*.rs');
      const status = await kickOff(t, token, '/Patient/$export');
      const manifest = await finish(t, token, status);
      const file = manifest.output.find((o) => o.type === 'Observation')!.url;
      const others = [await as('patient/*.rs', 'pb'), await craftToken(t, 'system/*.rs')];
      for (const other of others) {
        expect((await t.request(status, fhirInit(other))).status).toBe(404);
        expect((await t.request(file, fhirInit(other))).status).toBe(404);
        expect((await t.request(status, fhirInit(other, 'DELETE'))).status).toBe(404);
      }
      // The same patient with narrower scopes: the types it reads, not the others.
      const narrower = await as('patient/Observation.rs');
      expect((await t.request(file, fhirInit(narrower))).status).toBe(200);
      expect((await t.request(manifest.output.find((o) => o.type === 'Patient')!.url, fhirInit(narrower))).status).toBe(403);
      expect((await t.request(status, fhirInit(token, 'DELETE'))).status).toBe(202);
    });

    test("a type a user/system scope lifts is exported whole, as before; its file is not for the patient's bound token", async () => {
      const token = await as('patient/*.rs user/Observation.rs');
      const all = ['Observation/oa', 'Observation/oa-vs', 'Observation/ob', 'Observation/oba'];
      expect((await exported(token, '/Patient/$export?_type=Observation')).files).toEqual(all);
      expect((await exported(token, '/$export?_type=Observation')).files).toEqual(all);
      // Beside bound types: Observation whole, the others the patient's alone.
      const { manifest, files } = await exported(token, '/Patient/$export?_type=Observation,Encounter,Patient');
      expect(files).toEqual(['Encounter/ea', ...all, 'Patient/pa']);
      const bound = await as('patient/*.rs');
      expect((await t.request(manifest.output.find((o) => o.type === 'Observation')!.url, fhirInit(bound))).status).toBe(403);
      expect((await t.request(manifest.output.find((o) => o.type === 'Encounter')!.url, fhirInit(bound))).status).toBe(200);
    });

    test('with read access to all Provenance: the Provenance of what the token reads, its patient\'s records or a lifted type\'s', async () => {
      const patientOnly = await as('patient/*.rs user/Provenance.rs');
      expect((await exported(patientOnly, '/Patient/$export?_type=Provenance')).files).toEqual(['Provenance/prov-a', 'Provenance/prov-oa']);
      const observations = await as('patient/*.rs user/Provenance.rs user/Observation.rs');
      expect((await exported(observations, '/Patient/$export?_type=Provenance')).files).toEqual(['Provenance/prov-a', 'Provenance/prov-oa', 'Provenance/prov-ob']);
      // Its patient/ scopes alone: the Provenance in its compartment, which targets the Patient.
      expect((await exported(await as('patient/*.rs'), '/Patient/$export?_type=Provenance')).files).toEqual(['Provenance/prov-a']);
    });

    test('a filtered user/ scope beside a patient/ one is kept to the patient, and with no patient to nothing', async () => {
      t.clock.advance(60_001); // past the minute in which the tests before started the (crafted) client's exports
      const scope = 'patient/Observation.rs user/Observation.rs?category=laboratory user/Patient.rs user/Group.rs';
      // With the patient: the patient's Observations (the patient/ scope), never another's laboratory results.
      expect((await exported(await as(scope), '/Patient/$export?_type=Observation')).files).toEqual(['Observation/oa', 'Observation/oa-vs', 'Observation/oba']);
      // With none (no token is issued so: scopesWithoutPatient; a crafted one): nothing of Observation, in any export.
      const none = await craftToken(t, scope);
      for (const path of ['/Patient/$export', '/$export', '/Group/h/$export']) {
        expect((await exported(none, path)).files.filter((ref) => ref.startsWith('Observation/'))).toEqual([]);
      }
    });
  });
});
