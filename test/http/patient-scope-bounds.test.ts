/**
 * What a patient's token reaches when its `patient/` scopes come with system/user scopes, and what it
 * may write (SMART App Launch 2.x: `patient/` scopes are for "the current patient"; a token's access is
 * what each of its scopes grants, none widening another). A system/user scope lifts the patient's
 * bound only for what it grants itself: the same permission on the type, without a filter. A patient's
 * token writes only what is in its patient's compartment and no other patient's, and no type outside
 * that compartment. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { accessFromScopes } from '../../src/auth/scopes.ts';
import { mayDownload, mayExport } from '../../src/export/types-param.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, craftToken, expectOutcome, fhirClient, ids, type FhirClient, type Json } from '../helpers/fhir.ts';

const obs = (id: string, patient: string, category: string, extra: Json = {}): Json => ({
  resourceType: 'Observation', id, status: 'final', subject: { reference: `Patient/${patient}` }, code: { text: id },
  category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: category }] }], ...extra,
});

test('the bound is per permission: a scope lifts it only for what it grants unfiltered', () => {
  const limit = (scope: string, type: string, perm: 'r' | 's' | 'c') => accessFromScopes(scope.split(' '), 'app', 'pa').patientLimit(type, perm);
  expect(limit('patient/Observation.rs user/Observation.c', 'Observation', 'r')).toBe('pa');
  expect(limit('patient/Observation.rs user/Observation.c', 'Observation', 's')).toBe('pa');
  expect(limit('patient/Observation.rs user/Observation.rs?category=vital-signs', 'Observation', 'r')).toBe('pa');
  expect(limit('patient/*.rs system/Patient.rs', 'Patient', 'r')).toBeUndefined();
  expect(limit('patient/*.rs system/Patient.rs', 'Observation', 'r')).toBe('pa');
  expect(limit('patient/*.rs user/Patient.s', 'Patient', 's')).toBeUndefined();
  expect(limit('patient/*.rs user/Patient.s', 'Patient', 'r')).toBe('pa');
  // Exports of a type whole (a system export): a patient's bound keeps it out, whatever creates a user scope allows.
  expect(mayExport(accessFromScopes(['patient/*.rs', 'user/*.c'], 'app', 'pa'), 'Observation')).toBe(false);
  expect(mayExport(accessFromScopes(['patient/*.rs', 'user/Observation.rs'], 'app', 'pa'), 'Observation')).toBe(true);
  // Export files: a bound type's file is for a token bound to the patient the job was bound to.
  const bound = { bound: { patient: 'pa', types: ['Observation'] } };
  expect(mayDownload(accessFromScopes(['patient/*.rs'], 'app', 'pa'), 'Observation', bound)).toBe(true);
  expect(mayDownload(accessFromScopes(['patient/*.rs'], 'app', 'pb'), 'Observation', bound)).toBe(false);
  expect(mayDownload(accessFromScopes(['patient/*.rs'], 'app', 'pa'), 'Observation', {})).toBe(false);
  expect(mayDownload(accessFromScopes(['patient/*.rs'], 'app', 'pa'), 'Encounter', bound)).toBe(false);
  expect(mayDownload(accessFromScopes(['patient/*.rs', 'user/Observation.rs'], 'app', 'pb'), 'Observation', bound)).toBe(true);
});

await eachStore((kind, fresh) => {
  describe(`a patient's token beside system/user scopes, and its writes (${kind})`, () => {
    let t: TestApp;
    let admin: FhirClient;
    const as = async (scope: string) => {
      const token = await craftToken(t, scope, { patient: 'pa' });
      return { token, api: fhirClient(t, token) };
    };

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      admin = fhirClient(t, await t.token());
      for (const [id, family] of [['pa', 'Alpha'], ['pb', 'Beta'], ['pc', 'Gamma']]) await admin.put200({ resourceType: 'Patient', id, name: [{ family }] });
      await admin.put200(obs('oa', 'pa', 'laboratory'));
      await admin.put200(obs('oa-vs', 'pa', 'vital-signs'));
      await admin.put200(obs('ob', 'pb', 'laboratory'));
      await admin.put200(obs('ob-vs', 'pb', 'vital-signs'));
      // pb's Observation that pa performed: in both compartments.
      await admin.put200(obs('oba', 'pb', 'laboratory', { performer: [{ reference: 'Patient/pa' }] }));
      await admin.put200({ resourceType: 'Practitioner', id: 'doc', name: [{ family: 'Doc' }] });
      await admin.put200({ resourceType: 'Group', id: 'g', type: 'person', actual: true, member: [{ entity: { reference: 'Patient/pa' } }, { entity: { reference: 'Patient/pb' } }] });
    });
    afterAll(() => t.close());

    const readStatus = async (token: string, path: string) => (await t.request(`${t.fhir()}/${path}`, fhirInit(token))).status;

    test('a create-only, delete-only or filtered user/system scope does not widen reads, searches or counts of the type', async () => {
      for (const scope of ['patient/Observation.rs user/Observation.c', 'patient/Observation.rs system/Observation.c', 'patient/*.rs user/Observation.d',
        'patient/Observation.rs user/Observation.rs?category=vital-signs']) {
        const { token, api } = await as(scope);
        expect({ scope, status: await readStatus(token, 'Observation/ob') }).toEqual({ scope, status: 403 });
        expect({ scope, found: ids(await api.search('Observation?_count=50')).sort() }).toEqual({ scope, found: ['oa', 'oa-vs', 'oba'] });
        expect((await api.search('Observation?_summary=count')).total).toBe(3);
      }
      // A read-only user scope on Patient lifts reads of Patient alone; a search-only one, searches alone.
      const reads = await as('patient/*.rs system/Patient.rs');
      expect(await readStatus(reads.token, 'Patient/pb')).toBe(200);
      expect(await readStatus(reads.token, 'Observation/ob')).toBe(403);
      const searches = await as('patient/*.rs user/Patient.s');
      expect(await readStatus(searches.token, 'Patient/pb')).toBe(403);
      expect(ids(await searches.api.search('Patient?name=Beta'))).toEqual(['pb']);
    });

    test('type and system history stay refused beside a create-only scope', async () => {
      const { token } = await as('patient/*.rs system/*.c');
      await expectOutcome(await t.request(`${t.fhir()}/_history`, fhirInit(token)), 403, 'forbidden');
      await expectOutcome(await t.request(`${t.fhir()}/Observation/_history`, fhirInit(token)), 403, 'forbidden');
    });

    test('instance history beside a filtered scope keeps the patient bound: another patient\'s matching record is a 403', async () => {
      const { token, api } = await as('patient/Patient.rs patient/Observation.rs?category=laboratory');
      // ob is pb's laboratory Observation: it meets the filter, but is out of pa's compartment.
      expect(await readStatus(token, 'Observation/ob')).toBe(403);
      await expectOutcome(await t.request(`${t.fhir()}/Observation/ob/_history`, fhirInit(token)), 403, 'forbidden');
      await expectOutcome(await t.request(`${t.fhir()}/Observation/ob-vs/_history`, fhirInit(token)), 403, 'forbidden');
      for (const id of ['oa', 'oba']) expect(await readStatus(token, `Observation/${id}/_history`)).toBe(200);
      // A record that moved to pa shows only its versions in pa's compartment.
      await admin.put200(obs('moved', 'pb', 'laboratory'));
      await admin.put200(obs('moved', 'pa', 'laboratory', { status: 'amended' }));
      const history = (await (await t.request(`${t.fhir()}/Observation/moved/_history`, fhirInit(token))).json()) as Json;
      expect(history.entry.map((e: Json) => e.resource.meta.versionId)).toEqual(['2']);
      // A batch's history entry likewise.
      const batch = (await (await api.post(api.base, { resourceType: 'Bundle', type: 'batch', entry: [{ request: { method: 'GET', url: 'Observation/ob/_history' } }] })).json()) as Json;
      expect(batch.entry[0].response.status).toStartWith('403');
    });

    test('$everything of a Patient the token may read holds each bound type to the token\'s own patient', async () => {
      // pd links to pa (a duplicate record): pd is in pa's compartment, pd's Observation is not.
      await admin.put200({ resourceType: 'Patient', id: 'pd', link: [{ other: { reference: 'Patient/pa' }, type: 'seealso' }] });
      await admin.put200(obs('od', 'pd', 'laboratory'));
      const everything = async (token: string, path: string): Promise<string[]> => {
        const res = await t.request(`${t.fhir()}/${path}`, fhirInit(token));
        expect(res.status).toBe(200);
        return (((await res.json()) as Json).entry ?? []).map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`).sort();
      };
      const own = await as('patient/*.rs');
      expect(await readStatus(own.token, 'Patient/pd')).toBe(200);
      expect(await readStatus(own.token, 'Observation/od')).toBe(403);
      expect(await everything(own.token, 'Patient/pd/$everything')).toEqual(['Patient/pd']);
      // A system/Patient scope reads every Patient, and every Patient's $everything, but no other patient's Observations.
      const patients = await as('patient/*.rs system/Patient.rs');
      const ofPb = await everything(patients.token, 'Patient/pb/$everything');
      expect(ofPb).toContain('Patient/pb');
      expect(ofPb.filter((r) => r.startsWith('Observation/'))).toEqual(['Observation/oba']);
      const all = await everything(patients.token, 'Patient/$everything?_count=1000');
      expect(all.filter((r) => r.startsWith('Patient/'))).toEqual(['Patient/pa', 'Patient/pb', 'Patient/pc', 'Patient/pd']);
      const records = (list: string[]) => [...new Set(list.filter((r) => !r.startsWith('Patient/') && !r.startsWith('Practitioner/')))];
      expect(records(all)).toEqual(records(await everything(own.token, 'Patient/pa/$everything?_count=1000')));
      expect(all).not.toContain('Observation/ob');
      expect(all).not.toContain('Observation/od');
    });

    test('a deleted record is judged by the content it deleted: another patient\'s, or one outside a scope filter, is a 403, not a 410', async () => {
      await admin.put200(obs('del-b', 'pb', 'laboratory'));
      await admin.put200(obs('del-a', 'pa', 'laboratory'));
      await admin.put200(obs('del-a-vs', 'pa', 'vital-signs'));
      await admin.put200({ resourceType: 'Patient', id: 'pgone' });
      for (const path of ['Observation/del-b', 'Observation/del-a', 'Observation/del-a-vs', 'Patient/pgone']) expect((await admin.del(path)).status).toBe(200);
      const own = await as('patient/*.rs');
      for (const path of ['Observation/del-b', 'Observation/del-b/_history/2', 'Patient/pgone', 'Patient/pgone/$everything']) {
        await expectOutcome(await t.request(`${t.fhir()}/${path}`, fhirInit(own.token)), 403, 'forbidden');
      }
      for (const path of ['Observation/del-a', 'Observation/del-a/_history/2', 'Observation/del-a-vs']) expect({ path, status: await readStatus(own.token, path) }).toEqual({ path, status: 410 });
      // A batch's read entry answers as the read.
      const batch = (await (await own.api.post(own.api.base, { resourceType: 'Bundle', type: 'batch', entry: [{ request: { method: 'GET', url: 'Observation/del-b' } }] })).json()) as Json;
      expect(batch.entry[0].response.status).toStartWith('403');
      // A transaction's, checked before its writes, likewise (its own deletion stays a 410).
      const transaction = (url: string) => own.api.post(own.api.base, { resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'GET', url } }] });
      await expectOutcome(await transaction('Observation/del-b'), 403, 'forbidden');
      await expectOutcome(await transaction('Observation/del-b/_history/2'), 403, 'forbidden');
      await expectOutcome(await transaction('Observation/del-a'), 410);
      const labs = await as('patient/Observation.rs?category=laboratory');
      expect(await readStatus(labs.token, 'Observation/del-a')).toBe(410);
      await expectOutcome(await t.request(`${t.fhir()}/Observation/del-a-vs`, fhirInit(labs.token)), 403, 'forbidden');
      const systemLabs = fhirClient(t, await craftToken(t, 'system/Observation.rs?category=laboratory'));
      expect((await systemLabs.get('Observation/del-b')).status).toBe(410);
      await expectOutcome(await systemLabs.get('Observation/del-a-vs/_history/2'), 403, 'forbidden');
      // Unlimited access: a deletion is a 410.
      expect((await admin.get('Observation/del-a-vs')).status).toBe(410);
    });

    test('writes: its own patient\'s records alone, none of another patient\'s it is merely named in, no shared record', async () => {
      const { token } = await as('patient/*.cruds');
      const before = await countVersions(t);
      const send = (method: string, path: string, body?: Json) => t.request(`${t.fhir()}/${path}`, fhirInit(token, method, body));
      // Another patient's Observation that pa performed, or a Condition pa asserted about pc.
      await expectOutcome(await send('POST', 'Observation', obs('x1', 'pb', 'laboratory', { performer: [{ reference: 'Patient/pa' }] })), 403, 'forbidden');
      await expectOutcome(await send('POST', 'Condition', { resourceType: 'Condition', subject: { reference: 'Patient/pc' }, asserter: { reference: 'Patient/pa' } }), 403, 'forbidden');
      await expectOutcome(await send('PUT', 'Observation/oba', obs('oba', 'pb', 'laboratory', { performer: [{ reference: 'Patient/pa' }], status: 'amended' })), 403, 'forbidden');
      await expectOutcome(await send('DELETE', 'Observation/oba'), 403, 'forbidden');
      // A Group of pa and pb, and records outside the compartment (shared by every user).
      await expectOutcome(await send('PUT', 'Group/g', { resourceType: 'Group', id: 'g', type: 'person', actual: true, member: [{ entity: { reference: 'Patient/pa' } }, { entity: { reference: 'Patient/pc' } }] }), 403, 'forbidden');
      await expectOutcome(await send('PUT', 'Practitioner/doc', { resourceType: 'Practitioner', id: 'doc', name: [{ family: 'Hacked' }] }), 403, 'forbidden');
      await expectOutcome(await send('POST', 'Medication', { resourceType: 'Medication', code: { text: 'x' } }), 403, 'forbidden');
      const tx = await send('POST', '', { resourceType: 'Bundle', type: 'transaction', entry: [
        { resource: obs('t1', 'pa', 'laboratory'), request: { method: 'PUT', url: 'Observation/t1' } },
        { resource: { resourceType: 'Practitioner', id: 'doc', name: [{ family: 'Hacked' }] }, request: { method: 'PUT', url: 'Practitioner/doc' } },
      ] });
      await expectOutcome(tx, 403, 'forbidden');
      expect(await countVersions(t)).toBe(before);
      // Its own: created, updated, deleted; shared records still readable.
      expect((await send('POST', 'Observation', obs('mine', 'pa', 'laboratory'))).status).toBe(201);
      expect((await send('PUT', 'Observation/oa', { ...obs('oa', 'pa', 'laboratory'), status: 'amended' })).status).toBe(200);
      expect((await send('DELETE', 'Observation/oa-vs')).status).toBe(200);
      expect(await readStatus(token, 'Practitioner/doc')).toBe(200);
      expect(await readStatus(token, 'Observation/oba')).toBe(200);
      // Another patient's deleted record is not created again as its own (its history, and what refers to it, are pb's).
      await admin.put200(obs('gone-b', 'pb', 'laboratory'));
      expect((await admin.del('Observation/gone-b')).status).toBe(200);
      await expectOutcome(await send('PUT', 'Observation/gone-b', obs('gone-b', 'pa', 'laboratory')), 403, 'forbidden');
      const tx2 = await send('POST', '', { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: obs('gone-b', 'pa', 'laboratory'), request: { method: 'PUT', url: 'Observation/gone-b' } }] });
      await expectOutcome(tx2, 403, 'forbidden');
      // Its own deleted record is.
      expect((await send('PUT', 'Observation/oa-vs', obs('oa-vs', 'pa', 'vital-signs'))).status).toBe(201);
    });
  });
});
