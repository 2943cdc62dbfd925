/**
 * Compartment searches beyond the Patient's (src/fhir/compartments.ts): `{Compartment}/{id}/{type}` and
 * `{Compartment}/{id}/*` in the Encounter, Practitioner, RelatedPerson and Device compartments as R4's
 * CompartmentDefinitions place resources in them (their parameters ORed), with other parameters,
 * `_include`, `_total`, paging, `_search` forms and batch entries, on both stores; a patient's token
 * reaches no further than its patient through them.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, link, matchesOfAllPages, type FhirClient, type Json } from '../helpers/fhir.ts';

const obs = (id: string, patient: string, extra: Json) => ({ resourceType: 'Observation', id, status: 'final', code: { text: 'x' }, subject: { reference: patient }, ...extra });
const FIXTURES: Json[] = [
  { resourceType: 'Patient', id: 'p1' },
  { resourceType: 'Patient', id: 'p2' },
  { resourceType: 'Practitioner', id: 'pr1' },
  { resourceType: 'Practitioner', id: 'pr2' },
  { resourceType: 'RelatedPerson', id: 'rp1', patient: { reference: 'Patient/p1' } },
  { resourceType: 'Device', id: 'd1' },
  { resourceType: 'Encounter', id: 'e1', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/p1' }, participant: [{ individual: { reference: 'Practitioner/pr1' } }] },
  { resourceType: 'Encounter', id: 'e2', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/p2' }, participant: [{ individual: { reference: 'Practitioner/pr1' } }] },
  obs('o1', 'Patient/p1', { encounter: { reference: 'Encounter/e1' }, performer: [{ reference: 'Practitioner/pr1' }] }),
  obs('o6', 'Patient/p1', { encounter: { reference: 'Encounter/e1' }, contained: [{ resourceType: 'Practitioner', id: 'inner' }], performer: [{ reference: '#inner' }] }),
  obs('o2', 'Patient/p1', { status: 'preliminary', encounter: { reference: 'Encounter/e1' }, performer: [{ reference: 'RelatedPerson/rp1' }] }),
  obs('o3', 'Patient/p2', { encounter: { reference: 'Encounter/e2' }, performer: [{ reference: 'Practitioner/pr1' }] }),
  obs('o4', 'Device/d1', {}),
  obs('o5', 'Patient/p2', { device: { reference: 'Device/d1' } }),
  // In p2's compartment (subject) and p1's (performer).
  obs('o7', 'Patient/p2', { performer: [{ reference: 'Patient/p1' }] }),
  { resourceType: 'Condition', id: 'c1', subject: { reference: 'Patient/p1' }, encounter: { reference: 'Encounter/e1' }, asserter: { reference: 'Practitioner/pr2' } },
];

/** `Type/id` of a searchset's entries of `mode`, sorted. */
const keys = (b: Json, mode = 'match') => ((b.entry ?? []) as Json[]).filter((e) => e.search?.mode === mode).map((e) => `${e.resource.resourceType}/${e.resource.id}`).sort();

await eachStore((kind, fresh) => {
  describe(`compartment searches in the Encounter, Practitioner, RelatedPerson and Device compartments (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let patient: FhirClient;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const r of FIXTURES) await api.put200(r);
      patient = fhirClient(t, await craftToken(t, 'launch/patient patient/*.rs', { patient: 'p1' }));
    });
    afterAll(() => t.close());

    test('{Compartment}/{id}/{type} finds the resources whose compartment parameters refer to the focal resource', async () => {
      const cases: [string, string[]][] = [
        ['Encounter/e1/Observation', ['Observation/o1', 'Observation/o2', 'Observation/o6']],
        ['Encounter/e1/Condition', ['Condition/c1']],
        ['Encounter/e1/Encounter', ['Encounter/e1']],
        ['Practitioner/pr1/Observation', ['Observation/o1', 'Observation/o3']],
        ['Practitioner/pr1/Encounter', ['Encounter/e1', 'Encounter/e2']],
        ['Practitioner/pr2/Condition', ['Condition/c1']],
        ['Practitioner/pr1/Practitioner', ['Practitioner/pr1']],
        ['RelatedPerson/rp1/Observation', ['Observation/o2']],
        ['RelatedPerson/rp1/RelatedPerson', ['RelatedPerson/rp1']],
        // Observation.subject and Observation.device, ORed.
        ['Device/d1/Observation', ['Observation/o4', 'Observation/o5']],
        // A type outside the compartment has nothing in it.
        ['Device/d1/Patient', []],
        ['Encounter/nothing/Observation', []],
      ];
      for (const [path, expected] of cases) expect({ path, found: keys(await api.search(path)) }).toEqual({ path, found: expected });
    });

    test('the other search parameters, _include, _total and paging apply within the compartment', async () => {
      expect(keys(await api.search('Encounter/e1/Observation?status=final'))).toEqual(['Observation/o1', 'Observation/o6']);
      expect(keys(await api.search('Practitioner/pr1/Observation?subject=Patient/p2'))).toEqual(['Observation/o3']);
      const included = await api.search('Encounter/e1/Observation?_include=Observation:performer&_total=accurate');
      expect(included.total).toBe(3);
      expect(keys(included, 'include')).toEqual(['Practitioner/pr1', 'RelatedPerson/rp1']);
      const revincluded = await api.search('Practitioner/pr1/Encounter?_revinclude=Observation:encounter');
      expect(keys(revincluded, 'include')).toEqual(['Observation/o1', 'Observation/o2', 'Observation/o3', 'Observation/o6']);
      expect((await api.search('Practitioner/pr1/*?_summary=count')).total).toBe(5);
      expect((await api.search('Encounter/e1/Observation?_sort=-_id')).entry.map((e: Json) => e.resource.id)).toEqual(['o6', 'o2', 'o1']);
      const first = await api.search('Practitioner/pr1/Observation?_count=1');
      expect(link(first, 'self')).toContain('/Practitioner/pr1/Observation?');
      expect(link(first, 'next')).toContain('/Practitioner/pr1/Observation?');
      expect((await matchesOfAllPages(api, 'Practitioner/pr1/Observation?_count=1')).sort()).toEqual(['o1', 'o3']);
      expect((await matchesOfAllPages(api, 'Encounter/e1/*?_count=1')).sort()).toEqual(['c1', 'e1', 'o1', 'o2', 'o6']);
      // Contained resources: those of the compartment's members (their containers, _containedType's default).
      expect(keys(await api.search('Encounter/e1/Practitioner?_contained=true'))).toEqual(['Observation/o6']);
      expect(keys(await api.search('Encounter/e2/Practitioner?_contained=true'))).toEqual([]);
    });

    test('{Compartment}/{id}/* searches every member type; _type within them; the _search form and batch entries too', async () => {
      expect(keys(await api.search('Encounter/e1/*'))).toEqual(['Condition/c1', 'Encounter/e1', 'Observation/o1', 'Observation/o2', 'Observation/o6']);
      expect(keys(await api.search('Practitioner/pr1/*'))).toEqual(['Encounter/e1', 'Encounter/e2', 'Observation/o1', 'Observation/o3', 'Practitioner/pr1']);
      expect(keys(await api.search('Device/d1/*?_type=Observation'))).toEqual(['Observation/o4', 'Observation/o5']);
      await expectOutcome(await api.get('Encounter/e1/*?_type=Patient'), 400);
      const form = await api.call('POST', 'RelatedPerson/rp1/Observation/_search', 'status=preliminary', { 'Content-Type': 'application/x-www-form-urlencoded' });
      expect(form.status).toBe(200);
      expect(keys((await form.json()) as Json)).toEqual(['Observation/o2']);
      const batch = await api.post('', {
        resourceType: 'Bundle', type: 'batch',
        entry: [{ request: { method: 'GET', url: 'Practitioner/pr1/Encounter' } }, { request: { method: 'GET', url: 'Device/d1/*' } }],
      });
      expect(batch.status).toBe(200);
      const [a, b] = ((await batch.json()) as Json).entry as Json[];
      expect(keys(a!.resource)).toEqual(['Encounter/e1', 'Encounter/e2']);
      expect(keys(b!.resource)).toEqual(['Observation/o4', 'Observation/o5']);
      const transaction = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'GET', url: 'Encounter/e1/Condition' } }] });
      expect(transaction.status).toBe(200);
      expect(keys(((await transaction.json()) as Json).entry[0].resource)).toEqual(['Condition/c1']);
      const unknown = await expectOutcome(await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'GET', url: 'Procedure/x/Observation' } }] }), 404);
      expect(unknown.issue[0].expression).toEqual(['Bundle.entry[0].request.url']);
      // What is no compartment stays a 404.
      await expectOutcome(await api.get('Observation/o1/Patient'), 404);
      // A type that is none is a 404 naming it, as `GET /NotAType` is (http.html: "resource type not supported"; HAPI FHIR too).
      const text = (o: Json) => o.issue[0].diagnostics as string;
      const plain = text(await expectOutcome(await api.get('NotAType'), 404));
      expect(plain).toContain("'NotAType'");
      expect(text(await expectOutcome(await api.get('Patient/p1/NotAType'), 404))).toBe(plain);
      expect(text(await expectOutcome(await api.get('NotAType/x/Observation'), 404))).toBe(plain);
      expect(text(await expectOutcome(await api.get('Observation/o1/Patient'), 404))).toContain("'Observation' is not a compartment");
      // An instance operation not served is said to be one, as `Patient/$foo` is (it read 'Unknown resource type').
      expect(text(await expectOutcome(await api.get('Patient/p1/$foo'), 404))).toBe('Operation $foo is not supported on Patient/p1');
      const entry = await expectOutcome(await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'GET', url: 'Patient/p1/NotAType' } }] }), 404);
      expect([text(entry), entry.issue[0].expression]).toEqual([`Bundle.entry[0]: ${plain}`, ['Bundle.entry[0].request.url']]);
    });

    test("a patient's token finds its patient's records alone through another compartment", async () => {
      expect(keys(await patient.search('Practitioner/pr1/Observation'))).toEqual(['Observation/o1']);
      expect(keys(await patient.search('Practitioner/pr1/Encounter'))).toEqual(['Encounter/e1']);
      expect(keys(await patient.search('Encounter/e2/Observation'))).toEqual([]);
      expect(keys(await patient.search('Device/d1/Observation'))).toEqual([]);
      // Practitioner is no Patient compartment type: read as a search of it is.
      expect(keys(await patient.search('Practitioner/pr1/*'))).toEqual(['Encounter/e1', 'Observation/o1', 'Practitioner/pr1']);
      expect((await patient.search('Practitioner/pr1/Observation?_total=accurate')).total).toBe(1);
      // Another patient's compartment holds, for the token, what is in its own patient's too (as a read and `$everything` judge).
      expect((await patient.get('Observation/o7')).status).toBe(200);
      expect(keys(await patient.search('Patient/p2/Observation'))).toEqual(['Observation/o7']);
      expect((await patient.search('Patient/p2/Observation?_total=accurate')).total).toBe(1);
      expect(keys(await patient.search('Patient/p2/*'))).toEqual(['Observation/o7']);
      expect(keys(await patient.search('Patient/p2/Encounter'))).toEqual([]);
      expect(keys(await patient.search('Patient/p1/Observation'))).toEqual(['Observation/o1', 'Observation/o2', 'Observation/o6', 'Observation/o7']);
    });
  });
});
