/**
 * A Provenance of a patient's record is within that patient's token's reach, on both databases. R4's
 * Patient CompartmentDefinition puts a Provenance in a patient's compartment only when a `target` is the
 * Patient itself, but EHRs write one per record (`target` = `Observation/x`), US Core requires
 * `_revinclude=Provenance:target` on every profile's search and ONC's single-patient API tests run them
 * with a patient launch's token. So (src/fhir/provenance-reach.ts), under a patient-limited token allowed
 * to read Provenance:
 *  - `_revinclude=Provenance:target` (also `:iterate`, `Provenance:*`) adds the Provenance naming a
 *    record of the patient among the resources it follows, under the token's Provenance scope filters;
 *  - read, vread and instance history of a Provenance are allowed when one of its first 100 targets is a
 *    record of the patient (in the compartment) that the token may read (its type's scope and filters);
 *  - nothing else is widened: a Provenance of another patient's record, of a shared record (a
 *    Practitioner), of an unknown one, or of a record outside the token's filters stays a 403 and
 *    is not included;
 *  - a search of Provenance finds those of the compartment, and those targeting the records of the
 *    patient within the token's reach that its `target` parameter names (`Provenance?target=Observation/x`).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const provenance = (id: string, targets: string[], extra: Json = {}): Json => ({
  resourceType: 'Provenance', id, target: targets.map((reference) => ({ reference })), recorded: '2024-01-02T03:04:05Z',
  agent: [{ who: { reference: 'Practitioner/dr1' } }], ...extra,
});
const observation = (id: string, patient: string, category = 'vital-signs'): Json => ({
  resourceType: 'Observation', id, status: 'final', code: { text: id }, subject: { reference: `Patient/${patient}` },
  category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: category }] }],
});

await eachStore((kind, fresh) => {
  describe(`a Provenance of a patient's record under that patient's token (${kind})`, () => {
    let t: TestApp;
    let admin: FhirClient;
    const as = async (scopes: string, patient = 'p1') => fhirClient(t, await craftToken(t, scopes, { patient }));
    const PATIENT_TOKEN = 'launch/patient patient/Patient.rs patient/Observation.rs patient/Provenance.rs';
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      admin = fhirClient(t, await t.token());
      const base = admin.base;
      for (const r of [
        { resourceType: 'Patient', id: 'p1' }, { resourceType: 'Patient', id: 'p2' }, { resourceType: 'Practitioner', id: 'dr1' },
        observation('o1', 'p1'), observation('o2', 'p2'), observation('lab1', 'p1', 'laboratory'),
        provenance('prov-o1', ['Observation/o1']),
        provenance('prov-o2', ['Observation/o2']),
        provenance('prov-both', ['Observation/o2', 'Observation/o1']),
        provenance('prov-dr', ['Practitioner/dr1']),
        provenance('prov-p1', ['Patient/p1']),
        provenance('prov-lab1', ['Observation/lab1']),
        provenance('prov-abs', [`${base}/Observation/o1/_history/1`]),
        provenance('prov-unknown', ['Observation/nowhere']),
        provenance('prov-far', [...Array.from({ length: 100 }, () => 'Observation/o2'), 'Observation/o1']),
        provenance('prov-dr2', ['Observation/o1'], { agent: [{ who: { reference: 'Practitioner/dr2' } }] }),
        provenance('prov-gone', ['Observation/o1']),
        provenance('prov-gone-o2', ['Observation/o2']),
      ]) await admin.put200(r);
      for (const id of ['prov-gone', 'prov-gone-o2']) expect((await admin.del(`Provenance/${id}`)).status).toBeLessThan(300);
    });
    afterAll(() => t.close());

    const refs = (bundle: Json, mode: string) =>
      (bundle.entry ?? []).filter((e: Json) => e.search?.mode === mode).map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`).sort();

    test('_revinclude=Provenance:target adds the Provenance of the patient\'s matches, and no other', async () => {
      const api = await as(PATIENT_TOKEN);
      const b = await api.search('Observation?patient=p1&_revinclude=Provenance:target');
      expect(refs(b, 'match')).toEqual(['Observation/lab1', 'Observation/o1']);
      expect(refs(b, 'include')).toEqual(['Provenance/prov-abs', 'Provenance/prov-both', 'Provenance/prov-dr2', 'Provenance/prov-far', 'Provenance/prov-lab1', 'Provenance/prov-o1']);
      // `Provenance:*` and `Provenance:target:Observation` reach them alike; `:Patient` only the compartment's.
      expect(refs(await api.search('Observation?_id=o1&_revinclude=Provenance:*'), 'include')).toEqual(['Provenance/prov-abs', 'Provenance/prov-both', 'Provenance/prov-dr2', 'Provenance/prov-far', 'Provenance/prov-o1']);
      expect(refs(await api.search('Observation?_id=o1&_revinclude=Provenance:target:Observation'), 'include')).toEqual(['Provenance/prov-abs', 'Provenance/prov-both', 'Provenance/prov-dr2', 'Provenance/prov-far', 'Provenance/prov-o1']);
      expect(refs(await api.search('Patient?_id=p1&_revinclude=Provenance:target'), 'include')).toEqual(['Provenance/prov-p1']);
      // Another patient's records are not searched at all (403 or nothing), nor is their Provenance included.
      const other = await api.get('Observation?_id=o2&_revinclude=Provenance:target');
      expect(refs(await other.json(), 'include')).toEqual([]);
    });

    test(':iterate follows the included records to their Provenance', async () => {
      const api = await as(PATIENT_TOKEN);
      const b = await api.search('Patient?_id=p1&_revinclude=Observation:subject&_revinclude:iterate=Provenance:target');
      expect(refs(b, 'include')).toEqual([
        'Observation/lab1', 'Observation/o1', 'Provenance/prov-abs', 'Provenance/prov-both', 'Provenance/prov-dr2',
        'Provenance/prov-far', 'Provenance/prov-lab1', 'Provenance/prov-o1', 'Provenance/prov-p1',
      ]);
    });

    test('a Provenance naming a record of the patient is read, vread and its history read', async () => {
      const api = await as(PATIENT_TOKEN);
      for (const id of ['prov-o1', 'prov-both', 'prov-abs', 'prov-p1', 'prov-dr2']) {
        const res = await api.get(`Provenance/${id}`);
        expect({ id, status: res.status }).toEqual({ id, status: 200 });
      }
      expect((await api.get('Provenance/prov-o1/_history/1')).status).toBe(200);
      // Deleted, it is gone (410), as its read was within reach; another patient's deleted one stays a 403.
      expect((await api.get('Provenance/prov-gone')).status).toBe(410);
      expect((await api.get('Provenance/prov-gone-o2')).status).toBe(403);
      // A batch's GET entries read as the REST read does.
      const batch = await api.post('', { resourceType: 'Bundle', type: 'batch', entry: ['prov-o1', 'prov-o2'].map((id) => ({ request: { method: 'GET', url: `Provenance/${id}` } })) });
      expect(((await batch.json()) as Json).entry.map((e: Json) => e.response.status.slice(0, 3))).toEqual(['200', '403']);
      const history = await api.get('Provenance/prov-o1/_history');
      expect(history.status).toBe(200);
      expect(((await history.json()) as Json).entry.map((e: Json) => e.resource.id)).toEqual(['prov-o1']);
    });

    test('a Provenance naming no readable record of the patient stays a 403', async () => {
      const api = await as(PATIENT_TOKEN);
      // Another patient's record, a shared record, an unknown one, and one named past the first 100 targets.
      for (const id of ['prov-o2', 'prov-dr', 'prov-unknown', 'prov-far']) {
        for (const path of [`Provenance/${id}`, `Provenance/${id}/_history/1`, `Provenance/${id}/_history`]) {
          const res = await api.get(path);
          expect({ path, status: res.status }).toEqual({ path, status: 403 });
        }
      }
      const body = (await (await api.get('Provenance/prov-far')).json()) as Json;
      expect(body.issue[0].diagnostics).toContain('first 100 targets');
    });

    test('the token must read Provenance, and the targets\' and Provenance\'s own scope filters apply', async () => {
      // No Provenance scope: nothing included, no read.
      const none = await as('launch/patient patient/Observation.rs');
      expect(refs(await none.search('Observation?patient=p1&_revinclude=Provenance:target'), 'include')).toEqual([]);
      expect((await none.get('Provenance/prov-o1')).status).toBe(403);
      // Laboratory Observations alone: the Provenance of another category's record is not within reach.
      const lab = await as('launch/patient patient/Observation.rs?category=http://terminology.hl7.org/CodeSystem/observation-category|laboratory patient/Provenance.rs');
      expect((await lab.get('Provenance/prov-lab1')).status).toBe(200);
      expect((await lab.get('Provenance/prov-o1')).status).toBe(403);
      expect(refs(await lab.search('Observation?patient=p1&_revinclude=Provenance:target'), 'include')).toEqual(['Provenance/prov-lab1']);
      // The Provenance's own filter: only those whose agent is dr2.
      const dr2 = await as('launch/patient patient/Observation.rs patient/Provenance.rs?agent=Practitioner/dr2');
      expect((await dr2.get('Provenance/prov-dr2')).status).toBe(200);
      expect((await dr2.get('Provenance/prov-o1')).status).toBe(403);
      expect(refs(await dr2.search('Observation?patient=p1&_revinclude=Provenance:target'), 'include')).toEqual(['Provenance/prov-dr2']);
    });

    test('a search of Provenance finds those in the compartment, and those of the records its `target` names within reach', async () => {
      const api = await as(PATIENT_TOKEN);
      expect(refs(await api.search('Provenance'), 'match')).toEqual(['Provenance/prov-p1']);
      expect(refs(await api.search('Provenance?patient=p1'), 'match')).toEqual(['Provenance/prov-p1']);
      const ofO1 = ['Provenance/prov-abs', 'Provenance/prov-both', 'Provenance/prov-dr2', 'Provenance/prov-far', 'Provenance/prov-o1'];
      for (const q of ['target=Observation/o1', 'target=Observation/o1,Observation/o2', `target=${admin.base}/Observation/o1`, 'target:Observation=o1', 'target=Observation/o1,Patient/p1&_sort=-_lastUpdated']) {
        const b = await api.search(`Provenance?${q}`);
        expect({ q, found: refs(b, 'match') }).toEqual({ q, found: q.includes('Patient/p1') ? [...ofO1, 'Provenance/prov-p1'].sort() : ofO1 });
      }
      expect((await api.search('Provenance?target=Observation/o1&_summary=count')).total).toBe(5);
      // Another patient's record, a shared record, an unknown one: nothing beyond the compartment.
      for (const q of ['target=Observation/o2', 'target=Practitioner/dr1', 'target=Observation/nowhere', 'target:missing=false&target=Observation/o2']) {
        expect({ q, found: refs(await api.search(`Provenance?${q}`), 'match') }).toEqual({ q, found: [] });
      }
      // The targets' scope filters apply: the laboratory Observation's Provenance alone.
      const lab = await as('launch/patient patient/Observation.rs?category=http://terminology.hl7.org/CodeSystem/observation-category|laboratory patient/Provenance.rs');
      expect(refs(await lab.search('Provenance?target=Observation/o1'), 'match')).toEqual([]);
      expect(refs(await lab.search('Provenance?target=Observation/lab1,Observation/o1'), 'match')).toEqual(['Provenance/prov-lab1']);
      // Another patient's token finds none of p1's.
      const p2 = await as(PATIENT_TOKEN, 'p2');
      expect(refs(await p2.search('Provenance?target=Observation/o1'), 'match')).toEqual([]);
      expect(refs(await p2.search('Provenance?target=Observation/o2'), 'match')).toEqual(['Provenance/prov-both', 'Provenance/prov-far', 'Provenance/prov-o2']);
    });
  });

  describe(`a version-specific target names that version (${kind})`, () => {
    let t: TestApp;
    let admin: FhirClient;
    const as = async (scopes: string, patient = 'p1') => fhirClient(t, await craftToken(t, scopes, { patient }));
    const PATIENT_TOKEN = 'launch/patient patient/Patient.rs patient/Observation.rs patient/Provenance.rs';
    const LAB_TOKEN = 'launch/patient patient/Observation.rs?category=http://terminology.hl7.org/CodeSystem/observation-category|laboratory patient/Provenance.rs';
    const refs = (bundle: Json, mode: string) =>
      (bundle.entry ?? []).filter((e: Json) => e.search?.mode === mode).map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`).sort();
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      admin = fhirClient(t, await t.token());
      // `mv` was p2's and is p1's now (a misfiled result corrected), `rv` the reverse; `cat` is p1's
      // throughout, a vital sign first and a laboratory result now.
      for (const r of [
        { resourceType: 'Patient', id: 'p1' }, { resourceType: 'Patient', id: 'p2' },
        observation('mv', 'p2'), observation('rv', 'p1'), observation('cat', 'p1'),
        provenance('prov-mv1', ['Observation/mv/_history/1']),
        provenance('prov-rv1', ['Observation/rv/_history/1']),
        provenance('prov-rvp', ['Patient/p1', 'Observation/rv/_history/1']),
        provenance('prov-cat1', ['Observation/cat/_history/1']),
      ]) await admin.put200(r);
      for (const r of [
        observation('mv', 'p1'), observation('rv', 'p2'), observation('cat', 'p1', 'laboratory'),
        provenance('prov-mv2', ['Observation/mv/_history/2']),
        provenance('prov-rvcur', ['Observation/rv']),
        provenance('prov-cat2', ['Observation/cat/_history/2']),
      ]) await admin.put200(r);
    });
    afterAll(() => t.close());

    test('a record moved between patients opens neither one\'s Provenance to the other', async () => {
      const p1 = await as(PATIENT_TOKEN);
      const p2 = await as(PATIENT_TOKEN, 'p2');
      const status = async (api: FhirClient, path: string) => ({ path, status: (await api.get(path)).status });
      // The Provenance of p2's version of `mv` is not p1's, though `mv` is p1's now; that of its version 2 is.
      for (const [path, code] of [['Provenance/prov-mv1', 403], ['Provenance/prov-mv1/_history/1', 403], ['Provenance/prov-mv1/_history', 403], ['Provenance/prov-mv2', 200]] as const) {
        expect(await status(p1, path)).toEqual({ path, status: code });
      }
      // The Provenance of p1's version of `rv` (and p1's compartment's) is not p2's, though `rv` is p2's now.
      for (const path of ['Provenance/prov-rv1', 'Provenance/prov-rvp']) expect(await status(p2, path)).toEqual({ path, status: 403 });
      expect(refs(await p1.search('Observation?_id=mv&_revinclude=Provenance:target'), 'include')).toEqual(['Provenance/prov-mv2']);
      expect(refs(await p2.search('Observation?_id=rv&_revinclude=Provenance:target'), 'include')).toEqual(['Provenance/prov-rvcur']);
      // A version-specific _include reads p1's version of `rv`: it is not p1's record now, so its Provenance are not followed.
      const included = await p1.search('Provenance?patient=p1&_include=Provenance:target&_revinclude:iterate=Provenance:target');
      expect(refs(included, 'include')).toEqual(['Observation/rv', 'Patient/p1']);
      // A `target` search cannot tell the version a Provenance names: a record once another patient's widens nothing.
      expect(refs(await p1.search('Provenance?target=Observation/mv'), 'match')).toEqual([]);
      expect((await p1.search('Provenance?target=Observation/mv&_summary=count')).total).toBe(0);
      expect(refs(await p2.search('Provenance?target=Observation/rv'), 'match')).toEqual([]);
    });

    test('a version outside the token\'s scope filters gives no reach to its Provenance', async () => {
      const lab = await as(LAB_TOKEN);
      expect((await lab.get('Provenance/prov-cat1')).status).toBe(403);
      expect((await lab.get('Provenance/prov-cat2')).status).toBe(200);
      expect(refs(await lab.search('Observation?_id=cat&_revinclude=Provenance:target'), 'include')).toEqual(['Provenance/prov-cat2']);
      expect(refs(await lab.search('Provenance?target=Observation/cat'), 'match')).toEqual([]);
      // Without the filter, every version of `cat` is p1's: both are found and read.
      const all = await as(PATIENT_TOKEN);
      expect(refs(await all.search('Provenance?target=Observation/cat'), 'match')).toEqual(['Provenance/prov-cat1', 'Provenance/prov-cat2']);
      expect((await all.get('Provenance/prov-cat1')).status).toBe(200);
    });

    test('a target search looks through the histories of at most 50 records', async () => {
      const entry = (resources: Json[]) => ({ resourceType: 'Bundle', type: 'transaction', entry: resources.map((r) => ({ resource: r, request: { method: 'PUT', url: `${r.resourceType}/${r.id}` } })) });
      const ids = Array.from({ length: 51 }, (_, i) => `h${i}`);
      for (const code of ['vital-signs', 'laboratory']) {
        const res = await admin.post('', entry(ids.flatMap((id) => [observation(id, 'p1', code), provenance(`prov-${id}`, [`Observation/${id}`])])));
        expect(res.status).toBe(200);
      }
      const api = await as(PATIENT_TOKEN);
      const targets = ids.map((id) => `Observation/${id}`).join(',');
      expect((await api.search(`Provenance?target=${targets}&_summary=count`)).total).toBe(50);
      expect((await api.search(`Provenance?target=${ids.slice(0, 50).map((id) => `Observation/${id}`).join(',')}&_summary=count`)).total).toBe(50);
    });
  });
});
