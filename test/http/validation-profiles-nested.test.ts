/**
 * Profiles inside a resource: a slice chosen by the profile its value conforms to (discriminator
 * `profile`, R4 profiling.html), and the `meta.profile` of contained resources and of the entries of a
 * stored document or collection Bundle. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const NAMED = 'http://example.org/fhir/StructureDefinition/named-patient-2';
const WITH_NAMED = 'http://example.org/fhir/StructureDefinition/collection-with-named-patient';

const el = (id: string, min: number, max: string, extra: Json = {}) => {
  const path = id.replace(/:[^.]*/g, '');
  return { id, path, short: id, definition: id, min, max, base: { path, min: 0, max: '*' }, ...extra };
};
const sd = (url: string, type: string, elements: Json[]): Json => ({
  resourceType: 'StructureDefinition', url, name: url.slice(url.lastIndexOf('/') + 1).replace(/-/g, ''), status: 'active', kind: 'resource', abstract: false,
  type, baseDefinition: `http://hl7.org/fhir/StructureDefinition/${type}`, derivation: 'constraint', fhirVersion: '4.0.1', snapshot: { element: [el(type, 0, '*'), ...elements] },
});
/** A Patient with at least one name. */
const named = () => sd(NAMED, 'Patient', [el('Patient.name', 1, '*')]);
/** A Bundle with exactly one entry whose resource conforms to NAMED (slicing by profile at `resource`). */
const withNamed = () => sd(WITH_NAMED, 'Bundle', [
  el('Bundle.entry', 0, '*', { slicing: { discriminator: [{ type: 'profile', path: 'resource' }], rules: 'open' } }),
  el('Bundle.entry:namedPatient', 1, '1', { sliceName: 'namedPatient' }),
  el('Bundle.entry:namedPatient.resource', 1, '1', { type: [{ code: 'Patient', profile: [NAMED] }] }),
]);

const BY_TYPE = 'http://example.org/fhir/StructureDefinition/collection-with-a-patient';
/** A Bundle with exactly one Patient entry (slicing by type at `resource`). */
const byType = () => sd(BY_TYPE, 'Bundle', [
  el('Bundle.entry', 0, '*', { slicing: { discriminator: [{ type: 'type', path: 'resource' }], rules: 'open' } }),
  el('Bundle.entry:patient', 1, '1', { sliceName: 'patient' }),
  el('Bundle.entry:patient.resource', 1, '1', { type: [{ code: 'Patient' }] }),
]);

const entry = (resource: Json, i: number) => ({ fullUrl: `urn:uuid:00000000-0000-4000-8000-00000000000${i}`, resource });
const collection = (resources: Json[], profile?: string): Json => ({
  resourceType: 'Bundle', type: 'collection', ...(profile ? { meta: { profile: [profile] } } : {}), entry: resources.map(entry),
});
const errorsOf = (outcome: Json) => (outcome.issue as Json[]).filter((i) => i.severity === 'error');
const where = (issues: Json[]) => issues.map((i) => i.expression?.[0]).sort();

await eachStore((kind, fresh) => {
  describe(`profiles inside a resource (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const s of [named(), withNamed(), byType()]) await api.create(s);
    });
    afterAll(() => t.close());

    test("a collection's entries claiming profiles read the tenant's profile change token once, not once an entry", async () => {
      let reads = 0;
      const resources = t.store.resources;
      const changeToken = resources.changeToken.bind(resources);
      resources.changeToken = (...args: Parameters<typeof changeToken>) => (reads++, changeToken(...args));
      try {
        const entries = Array.from({ length: 200 }, () => ({ resourceType: 'Patient', meta: { profile: [NAMED] }, name: [{ family: 'Ng' }] }));
        expect((await api.post('Bundle', collection(entries))).status).toBe(201);
        expect(reads).toBeLessThanOrEqual(3);
        reads = 0;
        expect(((await (await api.post('Bundle/$validate', collection(entries))).json()) as Json).issue[0].severity).toBe('information');
        expect(reads).toBeLessThanOrEqual(3);
      } finally {
        resources.changeToken = changeToken;
      }
    });

    test('a slice chosen by profile: the entry whose Patient conforms fills it; none that conforms leaves it empty', async () => {
      const obs = { resourceType: 'Observation', status: 'final', code: { text: 'x' } };
      expect((await api.post('Bundle', collection([obs, { resourceType: 'Patient', name: [{ family: 'Ng' }] }], WITH_NAMED))).status).toBe(201);
      const refused = await expectOutcome(await api.post('Bundle', collection([obs, { resourceType: 'Patient', gender: 'male' }], WITH_NAMED)), 422);
      expect(where(refused.issue)).toEqual(['Bundle.entry']);
      expect(refused.issue[0].details.text).toContain('Bundle.entry:namedPatient');
      const two = await expectOutcome(await api.post('Bundle', collection([{ resourceType: 'Patient', name: [{ family: 'A' }] }, { resourceType: 'Patient', name: [{ family: 'B' }] }], WITH_NAMED)), 422);
      expect(two.issue[0].details.text).toContain('at most 1');
      // $validate evaluates the discriminator and no longer says it is not evaluated.
      const outcome = (await (await api.post('Bundle/$validate', collection([{ resourceType: 'Patient', name: [{ family: 'Ng' }] }], WITH_NAMED))).json()) as Json;
      expect(errorsOf(outcome)).toEqual([]);
      expect((outcome.issue as Json[]).filter((i) => i.code === 'not-supported')).toEqual([]);
    });

    test('a slice chosen by type at a resource: the resource\'s type is its resourceType', async () => {
      const obs = { resourceType: 'Observation', status: 'final', code: { text: 'x' } };
      expect((await api.post('Bundle', collection([obs, { resourceType: 'Patient' }], BY_TYPE))).status).toBe(201);
      const refused = await expectOutcome(await api.post('Bundle', collection([obs], BY_TYPE)), 422);
      expect(refused.issue[0].details.text).toContain('Bundle.entry:patient');
    });

    test('a contained resource\'s meta.profile is checked on write and in $validate', async () => {
      const obs = (patient: Json): Json => ({ resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: '#p' }, contained: [{ id: 'p', ...patient }] });
      const claiming = { resourceType: 'Patient', meta: { profile: [NAMED] } };
      const refused = await expectOutcome(await api.post('Observation', obs(claiming)), 422);
      expect(where(refused.issue)).toEqual(['Observation.contained[0].name']);
      expect(refused.issue[0].details.text).toContain(NAMED);
      expect((await api.post('Observation', obs({ ...claiming, name: [{ family: 'Ng' }] }))).status).toBe(201);
      const outcome = (await (await api.post('Observation/$validate', obs({ resourceType: 'Patient', meta: { profile: ['http://example.org/nowhere'] } }))).json()) as Json;
      expect(errorsOf(outcome)).toEqual([]);
      expect(where((outcome.issue as Json[]).filter((i) => i.code === 'not-supported'))).toEqual(['Observation.contained[0].meta.profile[0]']);
    });

    test('the entries of a stored collection or document Bundle are checked against the profiles they claim; a transaction\'s are written and checked each on its own', async () => {
      const claiming = (extra: Json = {}) => ({ resourceType: 'Patient', meta: { profile: [NAMED] }, ...extra });
      const refused = await expectOutcome(await api.post('Bundle', collection([{ resourceType: 'Observation', status: 'final', code: { text: 'x' } }, claiming()])), 422);
      expect(where(refused.issue)).toEqual(['Bundle.entry[1].resource.name']);
      expect((await api.post('Bundle', collection([claiming({ name: [{ family: 'Ng' }] })]))).status).toBe(201);
      const v = (await (await api.post('Bundle/$validate', collection([claiming()]))).json()) as Json;
      expect(where(errorsOf(v))).toEqual(['Bundle.entry[0].resource.name']);
      // In a transaction the entry is written as a Patient of its own, and refused at its place in the Bundle.
      const transaction = { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: claiming(), request: { method: 'POST', url: 'Patient' } }] };
      const tx = await api.post('', transaction);
      expect(where((await expectOutcome(tx, 422)).issue)).toEqual(['Bundle.entry[0].resource.name']);
      // $validate of the transaction (or of a batch) finds what its write refuses.
      expect(where(errorsOf((await (await api.post('Bundle/$validate', transaction)).json()) as Json))).toEqual(['Bundle.entry[0].resource.name']);
      expect(where(errorsOf((await (await api.post('Bundle/$validate', { ...transaction, type: 'batch' })).json()) as Json))).toEqual(['Bundle.entry[0].resource.name']);
    });
  });
});
