/**
 * `$everything` with a `_type` naming a type outside the compartment (Practitioner, Organization, Medication,
 * Binary), on both databases: R4's `_type` names the types of the resources returned, so those come as what
 * every record of the patient (or encounter) refers to, not only what the records of `_type`'s other types
 * refer to (`_type=Organization` answered nothing where the Patient names its managing Organization; HAPI FHIR's
 * issue 4844). The records read to find them are not returned, pages at every size add up to the same
 * resources, and a token's reach bounds the records read.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, fhirClient, link, type FhirClient, type Json } from '../helpers/fhir.ts';

const name = (e: Json) => `${e.resource.resourceType}/${e.resource.id}`;

/** Every page of an `$everything`: its matches and its includes, each as `Type/id`, in order. */
async function walk(api: FhirClient, first: string) {
  const matches: string[] = [];
  const included: string[] = [];
  let pages = 0;
  for (let next: string | undefined = first; next; pages++) {
    if (pages === 200) throw new Error(`${first}: more than 200 pages`);
    const b = await api.search(next);
    matches.push(...(b.entry ?? []).filter((e: Json) => e.search.mode === 'match').map(name));
    included.push(...(b.entry ?? []).filter((e: Json) => e.search.mode === 'include').map(name));
    next = link(b, 'next');
  }
  return { matches, included: [...new Set(included)].sort(), pages };
}

await eachStore((kind, fresh) => {
  describe(`$everything with _type outside the compartment, on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Organization', id: 'org', name: 'Clinic' });
      await api.put200({ resourceType: 'Practitioner', id: 'gp' });
      await api.put200({ resourceType: 'Practitioner', id: 'doc' });
      await api.put200({ resourceType: 'Practitioner', id: 'lab' });
      await api.put200({ resourceType: 'Medication', id: 'med', code: { text: 'aspirin' } });
      await api.put200({ resourceType: 'Patient', id: 'p1', managingOrganization: { reference: 'Organization/org' }, generalPractitioner: [{ reference: 'Practitioner/gp' }] });
      await api.put200({ resourceType: 'Patient', id: 'p2', generalPractitioner: [{ reference: 'Practitioner/lab' }] });
      await api.put200({
        resourceType: 'Encounter', id: 'e1', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/p1' },
        participant: [{ individual: { reference: 'Practitioner/doc' } }],
      });
      await api.put200({ resourceType: 'Observation', id: 'o1', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/p1' }, encounter: { reference: 'Encounter/e1' }, performer: [{ reference: 'Practitioner/lab' }] });
      await api.put200({ resourceType: 'Observation', id: 'o2', status: 'final', code: { text: 'y' }, subject: { reference: 'Patient/p1' } });
      await api.put200({ resourceType: 'MedicationRequest', id: 'mr1', status: 'active', intent: 'order', subject: { reference: 'Patient/p1' }, medicationReference: { reference: 'Medication/med' }, encounter: { reference: 'Encounter/e1' } });
    });
    afterAll(() => t.close());

    test('a type outside the compartment alone: what every record of the patient refers to, and no matches', async () => {
      expect(await walk(api, 'Patient/p1/$everything?_type=Organization,Practitioner')).toMatchObject({
        matches: [], included: ['Organization/org', 'Practitioner/doc', 'Practitioner/gp', 'Practitioner/lab'],
      });
      expect((await walk(api, 'Patient/p1/$everything?_type=Organization')).included).toEqual(['Organization/org']);
      expect((await walk(api, 'Patient/p1/$everything?_type=Medication')).included).toEqual(['Medication/med']);
      // The type level: every patient's.
      expect((await walk(api, 'Patient/$everything?_type=Practitioner')).included).toEqual(['Practitioner/doc', 'Practitioner/gp', 'Practitioner/lab']);
    });

    test('beside a type of the compartment: its records as matches, and the outside type from every record', async () => {
      const r = await walk(api, 'Patient/p1/$everything?_type=Observation,Practitioner');
      expect(r.matches).toEqual(['Observation/o1', 'Observation/o2']);
      // `gp` is named by the Patient, `doc` by the Encounter, neither by an Observation.
      expect(r.included).toEqual(['Practitioner/doc', 'Practitioner/gp', 'Practitioner/lab']);
      // Without an outside type, as before: what the matches of `_type` refer to, of `_type`'s types.
      expect(await walk(api, 'Patient/p1/$everything?_type=Observation,Encounter')).toMatchObject({ matches: ['Encounter/e1', 'Observation/o1', 'Observation/o2'], included: [] });
    });

    test('pages at every size add up to the same resources', async () => {
      for (const count of [1, 2, 3, 7]) {
        const r = await walk(api, `Patient/p1/$everything?_type=Observation,Practitioner&_count=${count}`);
        expect({ count, matches: r.matches, included: r.included }).toEqual({
          count, matches: ['Observation/o1', 'Observation/o2'], included: ['Practitioner/doc', 'Practitioner/gp', 'Practitioner/lab'],
        });
      }
    });

    test('Encounter/$everything alike', async () => {
      expect(await walk(api, 'Encounter/e1/$everything?_type=Practitioner,Medication')).toMatchObject({
        matches: [], included: ['Medication/med', 'Practitioner/doc', 'Practitioner/lab'],
      });
    });

    test('the records read are those the token may list: none of a type it may not', async () => {
      const noObservations = fhirClient(t, await craftToken(t, 'patient/Patient.rs patient/Encounter.rs patient/Practitioner.rs', { patient: 'p1' }));
      expect(await walk(noObservations, 'Patient/p1/$everything?_type=Practitioner')).toMatchObject({ matches: [], included: ['Practitioner/doc', 'Practitioner/gp'] });
    });

    test('a record naming more than a page includes, after records of no _type resource, is on the page that read them: no page comes back empty', async () => {
      // pz and its Encounter name no Practitioner; oz names 1,001, past a page's 1,000 includes. The page that read pz and
      // its Encounter ended before oz and came back empty (an information alone), oz a page of its own after it.
      const zs = Array.from({ length: 1_001 }, (_, i) => `z${String(i).padStart(4, '0')}`);
      const put = (resource: Json) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
      expect((await api.post('', {
        resourceType: 'Bundle', type: 'transaction', entry: [
          ...zs.map((id) => put({ resourceType: 'Practitioner', id })),
          put({ resourceType: 'Patient', id: 'pz' }),
          put({ resourceType: 'Encounter', id: 'ez', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/pz' } }),
          put({ resourceType: 'Observation', id: 'oz', status: 'final', code: { text: 'z' }, subject: { reference: 'Patient/pz' }, performer: zs.map((id) => ({ reference: `Practitioner/${id}` })) }),
        ],
      })).status).toBe(200);
      for (const query of ['Patient/pz/$everything?_type=Practitioner', 'Patient/pz/$everything?_type=Practitioner&_count=1', 'Patient/pz/$everything?_type=Observation,Practitioner&_count=2']) {
        const pages: { entries: string[]; issues: string[] }[] = [];
        for (let next: string | undefined = query; next; pages.length) {
          if (pages.length === 10) throw new Error(`${query}: more than 10 pages`);
          const b = await api.search(next);
          pages.push({
            entries: (b.entry ?? []).filter((e: Json) => e.search.mode !== 'outcome').map(name),
            issues: (b.entry ?? []).filter((e: Json) => e.search.mode === 'outcome').flatMap((e: Json) => e.resource.issue.map((i: Json) => `${i.severity} ${i.code}: ${i.diagnostics}`)),
          });
          next = link(b, 'next');
        }
        // One page: the first 1,000 Practitioners oz names, and one warning that the rest are left out, naming oz as
        // the record whose references pass the includes' cap (everything-lone-warning.test.ts).
        const typed = query.includes('Observation');
        expect({ query, pages: pages.map((p) => ({ entries: p.entries.length, issues: p.issues })) }).toEqual({
          query, pages: [{ entries: 1_000 + (typed ? 1 : 0), issues: [
            'warning too-costly: Observation/oz refers to 1001 resources, more than a page includes (1000): 1000 are included and the others left out; read them by the references Observation/oz holds',
          ] }],
        });
        expect(pages[0]!.entries.filter((e) => e.startsWith('Practitioner/')).sort()).toEqual(zs.slice(0, 1_000).map((id) => `Practitioner/${id}`));
      }
    }, 60_000);
  });
});
