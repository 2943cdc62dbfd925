/**
 * A Provenance of a patient's record is within that patient's token's reach, on both databases. R4's
 * Patient CompartmentDefinition puts a Provenance in a patient's compartment only when a `target` is the
 * Patient itself, but EHRs write one per record (`target` = `Observation/x`), US Core requires
 * `_revinclude=Provenance:target` on every profile's search and ONC's single-patient API tests run them
 * with a patient launch's token. So (src/fhir/provenance-reach.ts), under a patient-limited token allowed
 * to read Provenance, a Provenance is within reach when it is in the compartment or when one of its
 * targets, however many it has, is a record of the patient (in the compartment) that the token may read
 * (its type's scope and filters); and every way of asking answers alike:
 *  - read, vread, instance history, a batch's GET;
 *  - a search of Provenance (none, `_id`, `target`, across types), paged, counted;
 *  - `_revinclude=Provenance:target` (also `:iterate`, `Provenance:*`) and an `_include` landing on one;
 *  - a reference to one that a write makes under referential integrity, a Binary's securityContext;
 *  - nothing else is widened: a Provenance of another patient's record, of a shared record (a
 *    Practitioner), of an unknown one, or of a record outside the token's filters stays a 403, and
 *    is neither found nor included.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, link, matchesOfAllPages, type FhirClient, type Json } from '../helpers/fhir.ts';

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
        // An Observation of p1 about two Provenance (Observation:focus may name any resource).
        { ...observation('of1', 'p1'), focus: [{ reference: 'Provenance/prov-o1' }, { reference: 'Provenance/prov-o2' }, { reference: 'Provenance/prov-far' }] },
      ]) await admin.put200(r);
      for (const id of ['prov-gone', 'prov-gone-o2']) expect((await admin.del(`Provenance/${id}`)).status).toBeLessThan(300);
    });
    afterAll(() => t.close());

    const refs = (bundle: Json, mode: string) =>
      (bundle.entry ?? []).filter((e: Json) => e.search?.mode === mode).map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`).sort();

    test('_revinclude=Provenance:target adds the Provenance of the patient\'s matches, and no other', async () => {
      const api = await as(PATIENT_TOKEN);
      const b = await api.search('Observation?patient=p1&_revinclude=Provenance:target');
      expect(refs(b, 'match')).toEqual(['Observation/lab1', 'Observation/o1', 'Observation/of1']);
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
        'Observation/lab1', 'Observation/o1', 'Observation/of1', 'Provenance/prov-abs', 'Provenance/prov-both', 'Provenance/prov-dr2',
        'Provenance/prov-far', 'Provenance/prov-lab1', 'Provenance/prov-o1', 'Provenance/prov-p1',
      ]);
    });

    test('a Provenance naming a record of the patient is read, vread and its history read', async () => {
      const api = await as(PATIENT_TOKEN);
      for (const id of ['prov-o1', 'prov-both', 'prov-abs', 'prov-p1', 'prov-dr2', 'prov-far']) {
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
      // Another patient's record, a shared record, an unknown one.
      for (const id of ['prov-o2', 'prov-dr', 'prov-unknown']) {
        for (const path of [`Provenance/${id}`, `Provenance/${id}/_history/1`, `Provenance/${id}/_history`]) {
          const res = await api.get(path);
          expect({ path, status: res.status }).toEqual({ path, status: 403 });
        }
      }
      const body = (await (await api.get('Provenance/prov-o2')).json()) as Json;
      expect(body.issue[0].diagnostics).toContain('none of its targets is a record of that patient the token may read');
    });

    test('a Provenance naming the patient\'s record past its 100th target is read as it is found', async () => {
      const api = await as(PATIENT_TOKEN);
      for (const path of ['Provenance/prov-far', 'Provenance/prov-far/_history/1', 'Provenance/prov-far/_history']) {
        expect({ path, status: (await api.get(path)).status }).toEqual({ path, status: 200 });
      }
      expect(refs(await api.search('Provenance?target=Observation/o1&_id=prov-far'), 'match')).toEqual(['Provenance/prov-far']);
      expect(refs(await api.search('Observation?_id=o1&_revinclude=Provenance:target'), 'include')).toContain('Provenance/prov-far');
      // Past the first 500 distinct targets of a type too (their records are looked up 500 at a time).
      await admin.put200(provenance('prov-many', [...Array.from({ length: 600 }, (_, i) => `Observation/x${i}`), 'Observation/o1']));
      expect((await api.get('Provenance/prov-many')).status).toBe(200);
      expect(refs(await api.search('Provenance?_id=prov-many'), 'match')).toEqual(['Provenance/prov-many']);
      expect((await admin.del('Provenance/prov-many')).status).toBeLessThan(300);
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

    test('a _revinclude holds only the Provenance of matches the token may read, where its searches reach further', async () => {
      // Searches of every Observation of the patient, reads of laboratory ones alone: the vital signs are
      // matched, but their Provenance, which a read refuses, is not included.
      const split = await as('launch/patient patient/Observation.s patient/Observation.r?category=http://terminology.hl7.org/CodeSystem/observation-category|laboratory patient/Provenance.rs');
      const b = await split.search('Observation?patient=p1&_revinclude=Provenance:target');
      expect(refs(b, 'match')).toEqual(['Observation/lab1', 'Observation/o1', 'Observation/of1']);
      expect(refs(b, 'include')).toEqual(['Provenance/prov-lab1']);
      expect((await split.get('Provenance/prov-o1')).status).toBe(403);
      // Searches alone, no reads of Observation: none of their Provenance.
      const searchOnly = await as('launch/patient patient/Observation.s patient/Provenance.rs');
      expect(refs(await searchOnly.search('Observation?patient=p1&_revinclude=Provenance:target'), 'include')).toEqual([]);
      expect((await searchOnly.get('Provenance/prov-lab1')).status).toBe(403);
    });

    const READABLE = ['prov-abs', 'prov-both', 'prov-dr2', 'prov-far', 'prov-lab1', 'prov-o1', 'prov-p1'];

    test('a search of Provenance finds every Provenance the token reads, paged and counted, and no other', async () => {
      const api = await as(PATIENT_TOKEN);
      expect(refs(await api.search('Provenance'), 'match')).toEqual(READABLE.map((id) => `Provenance/${id}`));
      expect((await matchesOfAllPages(api, 'Provenance?_count=2')).sort()).toEqual(READABLE);
      expect((await matchesOfAllPages(api, 'Provenance?_count=3&_sort=-_lastUpdated')).sort()).toEqual(READABLE);
      expect((await api.search('Provenance?_summary=count')).total).toBe(READABLE.length);
      expect((await api.search('Provenance?_count=2&_total=accurate')).total).toBe(READABLE.length);
      // `_id` finds what a read answers, and nothing else.
      for (const id of ['prov-o1', 'prov-far', 'prov-p1', 'prov-o2', 'prov-dr', 'prov-unknown', 'prov-gone']) {
        const found = refs(await api.search(`Provenance?_id=${id}`), 'match');
        expect({ id, found }).toEqual({ id, found: READABLE.includes(id) ? [`Provenance/${id}`] : [] });
      }
      // Across types, as in one.
      expect(refs(await api.search('?_type=Provenance&_count=100'), 'match')).toEqual(READABLE.map((id) => `Provenance/${id}`));
      // The token's Provenance filter narrows them, and the targets' filters the records that count.
      const dr2 = await as('launch/patient patient/Observation.rs patient/Provenance.rs?agent=Practitioner/dr2');
      expect(refs(await dr2.search('Provenance'), 'match')).toEqual(['Provenance/prov-dr2']);
      const lab = await as('launch/patient patient/Observation.rs?category=http://terminology.hl7.org/CodeSystem/observation-category|laboratory patient/Provenance.rs');
      expect(refs(await lab.search('Provenance'), 'match')).toEqual(['Provenance/prov-lab1', 'Provenance/prov-p1']);
      // Without a scope on Observation, the Observations' Provenance are not the token's.
      const noObs = await as('launch/patient patient/Patient.rs patient/Provenance.rs');
      expect(refs(await noObs.search('Provenance'), 'match')).toEqual(['Provenance/prov-p1']);
      expect((await noObs.get('Provenance/prov-o1')).status).toBe(403);
      // Another patient's token finds its own.
      const p2 = await as(PATIENT_TOKEN, 'p2');
      expect(refs(await p2.search('Provenance'), 'match')).toEqual(['Provenance/prov-both', 'Provenance/prov-far', 'Provenance/prov-o2']);
      // A compartment search keeps the compartment.
      expect(refs(await api.search('Patient/p1/Provenance'), 'match')).toEqual(['Provenance/prov-p1']);
    });

    test('an _include landing on a Provenance includes it when a read answers it', async () => {
      const api = await as(PATIENT_TOKEN);
      const b = await api.search('Observation?_id=of1&_include=Observation:focus');
      expect(refs(b, 'include')).toEqual(['Provenance/prov-far', 'Provenance/prov-o1']);
      expect(refs(await api.search('Observation?_id=of1&_include=Observation:*'), 'include')).toEqual(['Patient/p1', 'Provenance/prov-far', 'Provenance/prov-o1']);
      // `Patient/$everything` holds the compartment's Provenance, and those its resources refer to that a read answers.
      const everything = (await api.search('Patient/p1/$everything?_count=1000')).entry.map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`);
      expect(everything.filter((r: string) => r.startsWith('Provenance/')).sort()).toEqual(['Provenance/prov-far', 'Provenance/prov-o1', 'Provenance/prov-p1']);
    });

    test('a _revinclude of Provenance from a shared record includes those a read answers', async () => {
      const api = await as(`${PATIENT_TOKEN} patient/Practitioner.rs`);
      const b = await api.search('Practitioner?_id=dr1&_revinclude=Provenance:agent');
      expect(refs(b, 'include')).toEqual(READABLE.filter((id) => id !== 'prov-dr2').map((id) => `Provenance/${id}`));
      expect(refs(await api.search('Practitioner?_id=dr1&_revinclude=Provenance:*'), 'include')).toEqual(READABLE.filter((id) => id !== 'prov-dr2').map((id) => `Provenance/${id}`));
    });

    test('a Binary whose securityContext is a Provenance is read as that Provenance is', async () => {
      const binary = async (context: string) => {
        const res = await admin.post('Binary', { resourceType: 'Binary', contentType: 'text/plain', data: 'aGk=', securityContext: { reference: context } });
        expect(res.status).toBe(201);
        return ((await res.json()) as Json).id as string;
      };
      const ofO1 = await binary('Provenance/prov-o1');
      const ofO2 = await binary('Provenance/prov-o2');
      const api = await as(`${PATIENT_TOKEN} patient/Binary.r`);
      expect((await api.get(`Binary/${ofO1}`, { Accept: 'application/fhir+json' })).status).toBe(200);
      await expectOutcome(await api.get(`Binary/${ofO2}`, { Accept: 'application/fhir+json' }), 403, 'forbidden');
    });

    test('a search of Provenance finds those in the compartment, and those of the records its `target` names within reach', async () => {
      const api = await as(PATIENT_TOKEN);
      expect(refs(await api.search('Provenance?patient=p1'), 'match')).toEqual(['Provenance/prov-p1']);
      const ofO1 = ['Provenance/prov-abs', 'Provenance/prov-both', 'Provenance/prov-dr2', 'Provenance/prov-far', 'Provenance/prov-o1'];
      for (const q of ['target=Observation/o1', 'target=Observation/o1,Observation/o2', `target=${admin.base}/Observation/o1`, 'target:Observation=o1', 'target=Observation/o1,Patient/p1&_sort=-_lastUpdated']) {
        const b = await api.search(`Provenance?${q}`);
        expect({ q, found: refs(b, 'match') }).toEqual({ q, found: q.includes('Patient/p1') ? [...ofO1, 'Provenance/prov-p1'].sort() : ofO1 });
      }
      expect((await api.search('Provenance?target=Observation/o1&_summary=count')).total).toBe(5);
      // Another patient's record: those naming one of the patient's records too; a shared record, an unknown one: none.
      for (const q of ['target=Observation/o2', 'target:missing=false&target=Observation/o2']) {
        expect({ q, found: refs(await api.search(`Provenance?${q}`), 'match') }).toEqual({ q, found: ['Provenance/prov-both', 'Provenance/prov-far'] });
      }
      for (const q of ['target=Practitioner/dr1', 'target=Observation/nowhere']) {
        expect({ q, found: refs(await api.search(`Provenance?${q}`), 'match') }).toEqual({ q, found: [] });
      }
      // The targets' scope filters apply: the laboratory Observation's Provenance alone.
      const lab = await as('launch/patient patient/Observation.rs?category=http://terminology.hl7.org/CodeSystem/observation-category|laboratory patient/Provenance.rs');
      expect(refs(await lab.search('Provenance?target=Observation/o1'), 'match')).toEqual([]);
      expect(refs(await lab.search('Provenance?target=Observation/lab1,Observation/o1'), 'match')).toEqual(['Provenance/prov-lab1']);
      // Another patient's token finds none of p1's but those naming a record of its own too.
      const p2 = await as(PATIENT_TOKEN, 'p2');
      expect(refs(await p2.search('Provenance?target=Observation/o1'), 'match')).toEqual(['Provenance/prov-both', 'Provenance/prov-far']);
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
      // A search finds what the reads answer: the index holds no version, so those it finds are checked as a read checks them.
      expect(refs(await p1.search('Provenance?target=Observation/mv'), 'match')).toEqual(['Provenance/prov-mv2']);
      expect((await p1.search('Provenance?target=Observation/mv&_summary=count')).total).toBe(1);
      expect(refs(await p2.search('Provenance?target=Observation/rv'), 'match')).toEqual(['Provenance/prov-rvcur']);
      const P1 = ['prov-cat1', 'prov-cat2', 'prov-mv2', 'prov-rvp'];
      expect(refs(await p1.search('Provenance'), 'match')).toEqual(P1.map((id) => `Provenance/${id}`));
      expect((await p1.search('Provenance?_summary=count')).total).toBe(P1.length);
      expect((await p1.search('Provenance?_count=1&_total=accurate')).total).toBe(P1.length);
      expect((await matchesOfAllPages(p1, 'Provenance?_count=1')).sort()).toEqual(P1);
      expect(refs(await p1.search('Provenance?_id=prov-mv1'), 'match')).toEqual([]);
      expect(refs(await p2.search('Provenance'), 'match')).toEqual(['Provenance/prov-rvcur']);
      expect(refs(await p2.search('?_type=Provenance'), 'match')).toEqual(['Provenance/prov-rvcur']);
    });

    test('a page tells nothing of a Provenance out of reach: its length, its next link and _offset count those within', async () => {
      const p1 = await as(PATIENT_TOKEN);
      const page = async (query: string) => {
        const b = await p1.search(query);
        return { query, ids: refs(b, 'match'), next: link(b, 'next') !== undefined };
      };
      // `prov-mv1` (p2's version of `mv`) sorts before `prov-mv2`: a page of one read it, left it out and
      // linked on, telling that one more matched, of any criteria `_filter` could put to it.
      for (const query of [
        'Provenance?target=Observation/mv&_count=1',
        'Provenance?target=Observation/mv&_count=1&_sort=recorded',
        'Provenance?target=Observation/mv&_count=1&_sort=_lastUpdated',
        '?_type=Provenance&_id=prov-mv1,prov-mv2&_count=1',
        '?_type=Provenance&_id=prov-mv1,prov-mv2&_count=1&_sort=_lastUpdated',
        `Provenance?_count=1&_filter=${encodeURIComponent('_id eq prov-mv1 or _id eq prov-mv2')}`,
      ]) expect(await page(query)).toEqual({ query, ids: ['Provenance/prov-mv2'], next: false });
      // `_offset` counts the matches within reach: the first is `prov-mv2`, and there is no second.
      for (const sort of ['', '&_sort=recorded']) {
        expect((await page(`Provenance?target=Observation/mv&_offset=0${sort}`)).ids).toEqual(['Provenance/prov-mv2']);
        expect((await page(`Provenance?target=Observation/mv&_offset=1${sort}`)).ids).toEqual([]);
      }
      // Paged one by one, every page is full.
      for (const sort of ['', '&_sort=recorded', '&_sort=-_lastUpdated']) {
        let next: string | undefined = `Provenance?_count=1${sort}`;
        const seen: string[] = [];
        while (next !== undefined) {
          const b: Json = await p1.search(next);
          expect({ sort, entries: (b.entry ?? []).length }).toEqual({ sort, entries: 1 });
          seen.push(...refs(b, 'match'));
          next = link(b, 'next');
        }
        expect(seen.sort()).toEqual(['Provenance/prov-cat1', 'Provenance/prov-cat2', 'Provenance/prov-mv2', 'Provenance/prov-rvp']);
      }
    });

    test('a version outside the token\'s scope filters gives no reach to its Provenance', async () => {
      const lab = await as(LAB_TOKEN);
      expect((await lab.get('Provenance/prov-cat1')).status).toBe(403);
      expect((await lab.get('Provenance/prov-cat2')).status).toBe(200);
      expect(refs(await lab.search('Observation?_id=cat&_revinclude=Provenance:target'), 'include')).toEqual(['Provenance/prov-cat2']);
      expect(refs(await lab.search('Provenance?target=Observation/cat'), 'match')).toEqual(['Provenance/prov-cat2']);
      expect(refs(await lab.search('Provenance'), 'match')).toEqual(['Provenance/prov-cat2', 'Provenance/prov-rvp']);
      // Without the filter, every version of `cat` is p1's: both are found and read.
      const all = await as(PATIENT_TOKEN);
      expect(refs(await all.search('Provenance?target=Observation/cat'), 'match')).toEqual(['Provenance/prov-cat1', 'Provenance/prov-cat2']);
      expect((await all.get('Provenance/prov-cat1')).status).toBe(200);
    });
  });

  describe(`a reference a patient's token writes to a Provenance, under referential integrity (${kind})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), env: { CINDER_REFERENTIAL_INTEGRITY: 'on' } });
      const admin = fhirClient(t, await t.token());
      for (const r of [
        { resourceType: 'Patient', id: 'p1' }, { resourceType: 'Patient', id: 'p2' }, { resourceType: 'Practitioner', id: 'dr1' },
        observation('o1', 'p1'), observation('o2', 'p2'), observation('mv', 'p2'),
        provenance('prov-o1', ['Observation/o1']), provenance('prov-o2', ['Observation/o2']),
        provenance('prov-p1', ['Patient/p1']), provenance('prov-mv1', ['Observation/mv/_history/1']),
      ]) await admin.put200(r);
      await admin.put200(observation('mv', 'p1'));
    });
    afterAll(() => t.close());

    test('counts the Provenance a read answers, and no other', async () => {
      const api = fhirClient(t, await craftToken(t, 'launch/patient patient/Observation.crus patient/Provenance.rs', { patient: 'p1' }));
      const focused = (id: string, target: string) => ({ ...observation(id, 'p1'), focus: [{ reference: target }] });
      for (const target of ['Provenance/prov-o1', 'Provenance/prov-p1']) {
        const res = await api.put(`Observation/f-${target.slice(11)}`, focused(`f-${target.slice(11)}`, target));
        expect({ target, status: res.status }).toEqual({ target, status: 201 });
      }
      // Another patient's record's, and one naming a version of `mv` that was p2's: not found, in the same words as a missing one.
      for (const target of ['Provenance/prov-o2', 'Provenance/prov-mv1', 'Provenance/nowhere']) {
        const outcome = await expectOutcome(await api.put('Observation/f-x', focused('f-x', target)), 422, 'not-found');
        expect(outcome.issue[0].expression).toEqual(['Observation.focus[0].reference']);
        expect(outcome.issue[0].diagnostics).toContain('which does not exist or is outside what the access token may read');
      }
    });
  });
});
