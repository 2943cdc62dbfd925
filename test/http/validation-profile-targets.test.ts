/**
 * A Reference's `targetProfile` that is a profile, and a `profile` discriminator through `resolve()`
 * (R4 profiling.html): checked where the target is held by the request (a contained resource, an entry
 * of the same Bundle), never read from the store. `$validate` and strict writes, on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const BASE = 'http://example.org/fhir/StructureDefinition/';
const ACTIVE = `${BASE}active-patient`;
const OBS = `${BASE}obs-active-subject`;
const OBS_UNKNOWN = `${BASE}obs-unknown-subject`;
const LINKED = `${BASE}linked-patient`;
const LIST = `${BASE}list-of-active-patients`;
const BY_TYPE = `${BASE}list-of-patients-and-groups`;

const el = (id: string, min: number, max: string, extra: Json = {}) => {
  const path = id.replace(/:[^.]*/g, '');
  return { id, path, short: id, definition: id, min, max, base: { path, min: 0, max: '*' }, ...extra };
};
const sd = (url: string, type: string, elements: Json[]): Json => ({
  resourceType: 'StructureDefinition', url, name: url.slice(url.lastIndexOf('/') + 1).replace(/-/g, ''), status: 'active', kind: 'resource', abstract: false,
  type, baseDefinition: `http://hl7.org/fhir/StructureDefinition/${type}`, derivation: 'constraint', fhirVersion: '4.0.1', snapshot: { element: [el(type, 0, '*'), ...elements] },
});
const ref = (...targetProfile: string[]) => ({ type: [{ code: 'Reference', targetProfile }] });

/** A Patient that is active. */
const active = () => sd(ACTIVE, 'Patient', [el('Patient.active', 1, '1', { fixedBoolean: true })]);
/** An Observation about an active Patient (a profile) or a Group (a core type). */
const obs = () => sd(OBS, 'Observation', [el('Observation.subject', 1, '1', ref(ACTIVE, 'http://hl7.org/fhir/StructureDefinition/Group'))]);
/** An Observation about a Patient of a profile Cinder does not know. */
const obsUnknown = () => sd(OBS_UNKNOWN, 'Observation', [el('Observation.subject', 1, '1', ref(`${BASE}nowhere`))]);
/** A Patient linked to Patients of this same profile (targets that refer to each other). */
const linked = () => sd(LINKED, 'Patient', [el('Patient.gender', 1, '1'), el('Patient.link', 0, '*'), el('Patient.link.other', 1, '1', ref(LINKED))]);
/** A List with one entry or more whose item is an active Patient, and no other entry (sliced by the profile of `item.resolve()`). */
const list = () => sd(LIST, 'List', [
  el('List.entry', 1, '*', { slicing: { discriminator: [{ type: 'profile', path: 'item.resolve()' }], rules: 'closed' } }),
  el('List.entry:active', 1, '*', { sliceName: 'active' }),
  el('List.entry:active.item', 1, '1', ref(ACTIVE)),
]);

/** A List of one Patient or more (a core type) and any active Patients (a profile's type), nothing else: sliced by the type of `item.resolve()`. */
const byType = () => sd(BY_TYPE, 'List', [
  el('List.entry', 1, '*', { slicing: { discriminator: [{ type: 'type', path: 'item.resolve()' }], rules: 'closed' } }),
  el('List.entry:patient', 1, '*', { sliceName: 'patient' }),
  el('List.entry:patient.item', 1, '1', ref('http://hl7.org/fhir/StructureDefinition/Patient')),
  el('List.entry:group', 0, '*', { sliceName: 'group' }),
  el('List.entry:group.item', 1, '1', ref(`${BASE}small-group`)),
]);
const smallGroup = () => sd(`${BASE}small-group`, 'Group', [el('Group.quantity', 0, '1', { maxValueUnsignedInt: 10 })]);

const errorsOf = (outcome: Json) => (outcome.issue as Json[]).filter((i) => i.severity === 'error');
const where = (issues: Json[]) => issues.map((i) => i.expression?.[0]).sort();
const observation = (subject: string, contained: Json[] = [], profile = OBS): Json => ({
  resourceType: 'Observation', meta: { profile: [profile] }, status: 'final', code: { text: 'x' }, subject: { reference: subject }, ...(contained.length ? { contained } : {}),
});
const patient = (id: string, extra: Json = {}): Json => ({ resourceType: 'Patient', id, ...extra });
const collection = (entries: [string, Json][]): Json => ({ resourceType: 'Bundle', type: 'collection', entry: entries.map(([fullUrl, resource]) => ({ fullUrl, resource })) });
const uuid = (n: number) => `urn:uuid:00000000-0000-4000-8000-00000000000${n}`;

await eachStore((kind, fresh) => {
  describe(`target profiles and resolve() discriminators (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const validate = async (resource: Json) => (await (await api.post(`${resource.resourceType}/$validate`, resource)).json()) as Json;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const d of [active(), obs(), obsUnknown(), linked(), list(), byType(), smallGroup()]) await api.create(d);
    });
    afterAll(() => t.close());

    test('a contained target must conform to one of the target profiles, or be of a core type named beside them', async () => {
      expect(errorsOf(await validate(observation('#p', [patient('p', { active: true })])))).toEqual([]);
      const inactive = errorsOf(await validate(observation('#p', [patient('p', { active: false })])));
      expect(where(inactive)).toEqual(['Observation.subject']);
      expect(inactive[0]).toMatchObject({ code: 'structure' });
      expect(inactive[0].details.text).toContain(`the target #p (Patient) conforms to none of the profiles it may have (${ACTIVE})`);
      expect(errorsOf(await validate(observation('#g', [{ resourceType: 'Group', id: 'g', type: 'person', actual: true }])))).toEqual([]);
      // A Device is a target R4 allows, but neither the profile's core types nor its profiles' types.
      const device = errorsOf(await validate(observation('#d', [{ resourceType: 'Device', id: 'd' }])));
      expect(where(device)).toEqual(['Observation.subject.reference']);
      expect(device[0].details.text).toContain('a reference to Device is not allowed');
    });

    test('a target in the same Bundle is found by its fullUrl, absolute or relative to the referring entry\'s', async () => {
      const byUrn = (isActive: boolean) => collection([[uuid(1), observation(uuid(2))], [uuid(2), patient('p', { active: isActive })]]);
      expect(errorsOf(await validate(byUrn(true)))).toEqual([]);
      expect(where(errorsOf(await validate(byUrn(false))))).toEqual(['Bundle.entry[0].resource.subject']);
      const relative = collection([['http://example.org/fhir/Observation/o', observation('Patient/p')], ['http://example.org/fhir/Patient/p', patient('p', { active: false })]]);
      expect(where(errorsOf(await validate(relative)))).toEqual(['Bundle.entry[0].resource.subject']);
    });

    test('a stored target is not read; a target profile Cinder does not know is a warning in $validate', async () => {
      const stored = await api.create(patient('x', { active: false }));
      const outcome = await validate(observation(`Patient/${stored.id}`));
      expect(errorsOf(outcome)).toEqual([]);
      // Its type, read off the reference, is still judged where the profiles narrow R4's targets (Device is one of R4's).
      const device = errorsOf(await validate(observation('Device/d1')));
      expect(where(device)).toEqual(['Observation.subject.reference']);
      expect(device[0].details.text).toContain('a reference to Device is not allowed');
      const unknown = await validate(observation('#p', [patient('p')], OBS_UNKNOWN));
      expect(errorsOf(unknown)).toEqual([]);
      const warned = (unknown.issue as Json[]).filter((i) => i.code === 'not-supported');
      expect(where(warned)).toEqual(['Observation.subject']);
      expect(warned[0].details.text).toContain(`${BASE}nowhere`);
    });

    test('targets that refer to each other are checked once each, and the check ends', async () => {
      const pair = (gender?: string) => collection([
        [uuid(1), { resourceType: 'Patient', meta: { profile: [LINKED] }, gender: 'female', link: [{ other: { reference: uuid(2) }, type: 'seealso' }] }],
        [uuid(2), { resourceType: 'Patient', ...(gender ? { gender } : {}), link: [{ other: { reference: uuid(1) }, type: 'seealso' }] }],
      ]);
      expect(errorsOf(await validate(pair('male')))).toEqual([]);
      expect(where(errorsOf(await validate(pair())))).toEqual(['Bundle.entry[0].resource.link[0].other']);
    });

    test('strict writes (a stored Bundle, a transaction): refused for a held target that conforms to no target profile, not for a stored one', async () => {
      const refused = await expectOutcome(await api.post('Observation', observation('#p', [patient('p', { active: false })])), 422);
      expect(where(refused.issue)).toEqual(['Observation.subject']);
      expect((await api.post('Observation', observation('#p', [patient('p', { active: true })]))).status).toBe(201);
      expect((await api.post('Observation', observation('Patient/x'))).status).toBe(201);
      expect(where((await expectOutcome(await api.post('Observation', observation('Device/d1')), 422)).issue)).toEqual(['Observation.subject.reference']);
      const inBundle = await expectOutcome(await api.post('Bundle', collection([[uuid(1), observation(uuid(2))], [uuid(2), patient('p', { active: false })]])), 422);
      expect(where(inBundle.issue)).toEqual(['Bundle.entry[0].resource.subject']);
      // A transaction's entries resolve each other as the transaction writes them.
      const transaction = (isActive: boolean): Json => ({
        resourceType: 'Bundle', type: 'transaction', entry: [
          { fullUrl: uuid(1), resource: observation(uuid(2)), request: { method: 'POST', url: 'Observation' } },
          { fullUrl: uuid(2), resource: { resourceType: 'Patient', active: isActive }, request: { method: 'POST', url: 'Patient' } },
        ],
      });
      const refusedTransaction = await expectOutcome(await api.post('', transaction(false)), 422);
      expect(where(refusedTransaction.issue)).toEqual(['Bundle.entry[0].resource.subject']);
      expect((await api.post('', transaction(true))).status).toBe(200);
    });

    test('a profile discriminator through resolve() slices by the held target; a stored one leaves the slicing unevaluated', async () => {
      const withEntries = (contained: Json[], items: string[]): Json => ({
        resourceType: 'List', meta: { profile: [LIST] }, status: 'current', mode: 'working', ...(contained.length ? { contained } : {}), entry: items.map((reference) => ({ item: { reference } })),
      });
      expect(errorsOf(await validate(withEntries([patient('a', { active: true }), patient('b', { active: true })], ['#a', '#b'])))).toEqual([]);
      // The inactive Patient's entry is in no slice (closed), and the slice `active` then has none (min 1).
      const inactive = errorsOf(await validate(withEntries([patient('i', { active: false })], ['#i'])));
      expect(where(inactive)).toEqual(['List.entry', 'List.entry[0]']);
      expect(inactive.map((i) => i.details.text).join('\n')).toContain('List.entry:active: at least 1 required');
      // A stored target: neither counted nor refused, and $validate says the slicing was not evaluated.
      const stored = await validate(withEntries([], ['Patient/x']));
      expect(errorsOf(stored)).toEqual([]);
      expect(where((stored.issue as Json[]).filter((i) => i.code === 'not-supported'))).toEqual(['List.entry']);
      expect((await api.post('List', withEntries([], ['Patient/x']))).status).toBe(201);
      expect((await expectOutcome(await api.post('List', withEntries([patient('i', { active: false })], ['#i'])), 422)).issue.length).toBeGreaterThan(0);
      // In a collection, an entry's urn reference resolves to another entry.
      const listed = (isActive: boolean) => collection([[uuid(1), withEntries([], [uuid(2)])], [uuid(2), patient('p', { active: isActive })]]);
      expect(errorsOf(await validate(listed(true)))).toEqual([]);
      expect(where(errorsOf(await validate(listed(false))))).toEqual(['Bundle.entry[0].resource.entry', 'Bundle.entry[0].resource.entry[0]']);
    });

    test('a type discriminator through resolve() slices by the held target\'s type, a profile\'s type too', async () => {
      const listOf = (contained: Json[]): Json => ({
        resourceType: 'List', meta: { profile: [BY_TYPE] }, status: 'current', mode: 'working', ...(contained.length ? { contained } : {}), entry: contained.map((c) => ({ item: { reference: `#${c.id}` } })),
      });
      const group = { resourceType: 'Group', id: 'g', type: 'person', actual: true };
      expect(errorsOf(await validate(listOf([patient('p'), group])))).toEqual([]);
      // A Device is of neither type (closed), and no Patient leaves the slice `patient` empty.
      expect(where(errorsOf(await validate(listOf([{ resourceType: 'Device', id: 'd' }, group]))))).toEqual(['List.entry', 'List.entry[0]']);
      expect(errorsOf(await validate({ ...listOf([]), entry: [{ item: { reference: 'Patient/x' } }] }))).toEqual([]);
    });
  });
});
