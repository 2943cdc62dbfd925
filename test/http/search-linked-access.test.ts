/**
 * Chains and `_has` read resources of other types (src/fhir/search.ts guardLinked), on both databases:
 * the token must be allowed to search those types, and their SMART v2 scope filters and a
 * patient-context token's compartment narrow what a chain or `_has` reaches, so a query cannot learn
 * through them what a search of those types would not show. The same holds in bulk export's `_typeFilter`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { TestApp } from '../helpers/app.ts';
import { download, finish, kickOff, refs } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { appOnFresh } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';

const CAT = 'http://terminology.hl7.org/CodeSystem/condition-category';
const DIABETES = '44054006';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`chains and _has reach what the token may search, on ${target.kind}`, () => {
    let t: TestApp;
    let admin: FhirClient;
    const ids = async (api: FhirClient, query: string) => ((await api.search(query)).entry ?? []).map((e: Json) => e.resource.id as string).sort();
    const client = async (scope: string, patient?: string) => fhirClient(t, await craftToken(t, scope, patient ? { patient } : {}));

    beforeAll(async () => {
      ({ t, api: admin } = await appOnFresh(target));
      await admin.put200({ resourceType: 'Patient', id: 'p1', gender: 'female', name: [{ family: 'Alpha' }] });
      await admin.put200({ resourceType: 'Patient', id: 'p2', gender: 'male', name: [{ family: 'Beta' }] });
      // o1 is p1's, performed by p2 (a Patient outside p1's compartment).
      await admin.put200({ resourceType: 'Observation', id: 'o1', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/p1' }, performer: [{ reference: 'Patient/p2' }] });
      await admin.put200({ resourceType: 'Observation', id: 'o2', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/p2' } });
      for (const [id, patient, category] of [['c1', 'p1', 'problem-list-item'], ['c2', 'p2', 'encounter-diagnosis']] as const) {
        await admin.put200({
          resourceType: 'Condition', id, subject: { reference: `Patient/${patient}` },
          category: [{ coding: [{ system: CAT, code: category }] }], code: { coding: [{ system: 'http://snomed.info/sct', code: DIABETES }] },
        });
      }
    });
    afterAll(() => t.close());

    test('a chain or _has into a type the token may not search is a 403', async () => {
      const obs = await client('system/Observation.rs');
      await expectOutcome(await obs.get('Observation?subject:Patient.family=alpha'), 403);
      expect(await ids(obs, 'Observation?subject=Patient/p1')).toEqual(['o1']);
      const patients = await client('system/Patient.rs');
      await expectOutcome(await patients.get(`Patient?_has:Condition:patient:code=${DIABETES}`), 403);
      // Nested: the inner hop is checked too.
      const both = await client('system/Observation.rs system/Patient.rs');
      await expectOutcome(await both.get(`Observation?subject:Patient._has:Condition:patient:code=${DIABETES}`), 403);
      expect(await ids(both, 'Observation?subject:Patient.family=alpha')).toEqual(['o1']);
    });

    test('the other type\'s scope filter narrows what a chain or _has reaches', async () => {
      expect(await ids(admin, 'Observation?subject:Patient.family=beta')).toEqual(['o2']);
      const women = await client('system/Observation.rs system/Patient.rs?gender=female');
      expect(await ids(women, 'Observation?subject:Patient.family=beta')).toEqual([]);
      expect(await ids(women, 'Observation?subject:Patient.family=alpha')).toEqual(['o1']);
      expect(await ids(admin, `Patient?_has:Condition:patient:code=${DIABETES}`)).toEqual(['p1', 'p2']);
      const problems = await client('system/Patient.rs system/Condition.rs?category=problem-list-item');
      expect(await ids(problems, `Patient?_has:Condition:patient:code=${DIABETES}`)).toEqual(['p1']);
    });

    test("a patient-context token's chain reaches only its compartment", async () => {
      expect(await ids(admin, 'Observation?performer:Patient.family=beta')).toEqual(['o1']);
      const p1 = await client('patient/*.rs', 'p1');
      expect(await ids(p1, 'Observation?performer:Patient.family=beta')).toEqual([]);
      expect(await ids(p1, 'Observation?subject:Patient.family=alpha')).toEqual(['o1']);
      expect(await ids(p1, `Patient?_has:Condition:patient:code=${DIABETES}`)).toEqual(['p1']);
    });

    test("a patient-context token's :below / :above walks only its compartment", async () => {
      // p2's e1 and e2 (e2 part of e1); p1's e3 part of p2's e2, and e4 part of p2's e1.
      const encounter = (id: string, patient: string, partOf?: string) => admin.put200({
        resourceType: 'Encounter', id, status: 'finished', class: { code: 'AMB' }, subject: { reference: `Patient/${patient}` }, ...(partOf ? { partOf: { reference: `Encounter/${partOf}` } } : {}),
      });
      await encounter('e1', 'p2');
      await encounter('e2', 'p2', 'e1');
      await encounter('e3', 'p1', 'e2');
      await encounter('e4', 'p1', 'e1');
      expect(await ids(admin, 'Encounter?part-of:below=Encounter/e1')).toEqual(['e2', 'e3', 'e4']);
      const p1 = await client('patient/*.rs', 'p1');
      // Only what its own records name: e4 is part of e1 directly; that e3 is, through p2's e2, it may not learn.
      expect(await ids(p1, 'Encounter?part-of:below=Encounter/e1')).toEqual(['e4']);
      expect(await ids(p1, 'Encounter?part-of=Encounter/e2')).toEqual(['e3']);
      // Upwards from e3: p2's e2 is named by e3 itself, but that e2 is part of e1 is p2's.
      expect(await ids(admin, 'Encounter?part-of:above=Encounter/e3')).toEqual(['e2', 'e3', 'e4']);
      expect(await ids(p1, 'Encounter?part-of:above=Encounter/e3')).toEqual(['e3']);
    });

    test('_list: the items of Lists, ORed by comma, ANDed when repeated; List access is needed', async () => {
      await admin.put200({ resourceType: 'List', id: 'l1', status: 'current', mode: 'working', entry: [
        { item: { reference: 'Patient/p1' } }, { item: { reference: 'Patient/p2' } }, { item: { reference: 'Observation/o1' } },
      ] });
      await admin.put200({ resourceType: 'List', id: 'l2', status: 'current', mode: 'working', entry: [{ item: { reference: 'Patient/p2' } }] });
      expect(await ids(admin, 'Patient?_list=l1')).toEqual(['p1', 'p2']);
      expect(await ids(admin, 'Patient?_list=l2')).toEqual(['p2']);
      expect(await ids(admin, 'Patient?_list=l1&_list=l2')).toEqual(['p2']);
      expect(await ids(admin, 'Patient?_list=l2,l1&gender=female')).toEqual(['p1']);
      expect(await ids(admin, 'Observation?_list=l1')).toEqual(['o1']);
      expect(await ids(admin, 'Observation?_list=l2')).toEqual([]);
      expect(await ids(admin, 'Patient?_list=nope')).toEqual([]);
      await expectOutcome(await admin.get('Patient?_list=$current-problems'), 400);
      await expectOutcome(await admin.get('Patient?_list:exact=l1'), 400);
      await expectOutcome(await (await client('system/Patient.rs')).get('Patient?_list=l1'), 403);
      expect(await ids(await client('system/Patient.rs system/List.rs'), 'Patient?_list=l1')).toEqual(['p1', 'p2']);
    });

    test('_list names a List by id, List/id or its URL under this tenant\'s base', async () => {
      await admin.put200({ resourceType: 'List', id: 'l3', status: 'current', mode: 'working', entry: [{ item: { reference: 'Patient/p1' } }] });
      expect(await ids(admin, 'Patient?_list=List/l3')).toEqual(['p1']);
      expect(await ids(admin, `Patient?_list=${admin.base}/List/l3`)).toEqual(['p1']);
      expect(await ids(admin, `Patient?_list=${encodeURIComponent(`${admin.base}/List/l3,l1`)}`)).toEqual(['p1', 'p2']);
      expect(await ids(admin, 'Patient?_list=http://other.example/fhir/List/l3')).toEqual([]);
      expect(await ids(admin, `Patient?_filter=${encodeURIComponent('_list eq List/l3')}`)).toEqual(['p1']);
      for (const value of ['Patient/p1', 'List/l3/_history/1', 'http://other.example/fhir/Patient/p1', 'List/']) {
        const body = await expectOutcome(await admin.get(`Patient?_list=${encodeURIComponent(value)}`), 400, 'invalid');
        expect(body.issue[0].expression).toEqual(['_list']);
      }
    });

    test('_list with a functional list: the items of the current Lists of that kind (R4 lifecycle.html)', async () => {
      const LOINC = 'http://loinc.org';
      const USE = 'http://terminology.hl7.org/CodeSystem/list-example-use-codes';
      const condition = (id: string, patient: string) => admin.put200({ resourceType: 'Condition', id, subject: { reference: `Patient/${patient}` }, code: { text: id } });
      const allergy = (id: string) => admin.put200({
        resourceType: 'AllergyIntolerance', id, patient: { reference: 'Patient/p1' }, code: { text: id },
        clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical', code: 'active' }] },
      });
      const list = (id: string, status: string, system: string, code: string, patient: string, items: string[]) => admin.put200({
        resourceType: 'List', id, status, mode: 'working', code: { coding: [{ system, code }] }, subject: { reference: `Patient/${patient}` },
        entry: items.map((item) => ({ item: { reference: item } })),
      });
      await condition('fl-c1', 'p1');
      await condition('fl-c2', 'p1');
      await condition('fl-c3', 'p2');
      await allergy('fl-a1');
      await allergy('fl-a2');
      // p1's problem list, the one it replaced (retired), and p2's, coded by LOINC and by the R4 example use code.
      await list('fl-problems', 'current', LOINC, '46105-3', 'p1', ['Condition/fl-c1']);
      await list('fl-problems-old', 'retired', LOINC, '46105-3', 'p1', ['Condition/fl-c2']);
      await list('fl-problems-p2', 'current', USE, 'problems', 'p2', ['Condition/fl-c3']);
      await list('fl-allergies', 'current', LOINC, '48765-2', 'p1', ['AllergyIntolerance/fl-a1']);
      await list('fl-drug-allergies', 'current', LOINC, '52472-8', 'p1', ['AllergyIntolerance/fl-a2']);
      expect(await ids(admin, 'Condition?patient=p1&_list=$current-problems')).toEqual(['fl-c1']);
      expect(await ids(admin, 'Condition?_list=$current-problems')).toEqual(['fl-c1', 'fl-c3']);
      expect(await ids(admin, 'Condition?_list=$current-problems,fl-problems-old')).toEqual(['fl-c1', 'fl-c2', 'fl-c3']);
      expect(await ids(admin, 'AllergyIntolerance?patient=p1&_list=$current-allergies')).toEqual(['fl-a1', 'fl-a2']);
      expect(await ids(admin, 'AllergyIntolerance?_list=$current-drug-allergies')).toEqual(['fl-a2']);
      expect(await ids(admin, 'MedicationStatement?_list=$current-medications')).toEqual([]);
      for (const q of ['Patient?_list=$current-problems', 'Condition?_list=$current-nonsense']) {
        expect((await expectOutcome(await admin.get(q), 400)).issue[0].expression).toEqual(['_list']);
      }
      // List/$find: the patient's current list of that kind (the latest updated of several), or 404.
      const find = async (query: string) => {
        const res = await admin.get(`List/$find?${query}`);
        expect(res.status).toBe(200);
        return ((await res.json()) as Json).id;
      };
      expect(await find('patient=p1&name=$current-problems')).toBe('fl-problems');
      expect(await find('patient=p1&name=current-problems')).toBe('fl-problems');
      expect(await find('patient=p2&name=$current-problems')).toBe('fl-problems-p2');
      expect(await find('patient=p1&name=$current-allergies')).toBe('fl-drug-allergies');
      expect(await find('patient=p1&name=$current-drug-allergies')).toBe('fl-drug-allergies');
      await expectOutcome(await admin.get('List/$find?patient=p1&name=$current-medications'), 404);
      for (const [q, expr] of [['name=$current-problems', 'patient'], ['patient=p1&name=$nonsense', 'name'], ['patient=p1&patient=p2&name=$current-problems', 'patient']]) {
        expect((await expectOutcome(await admin.get(`List/$find?${q}`), 400)).issue[0].expression).toEqual([expr]);
      }
      await expectOutcome(await (await client('system/Condition.rs')).get('List/$find?patient=p1&name=$current-problems'), 403);
      const cap = (await (await admin.get('metadata')).json()) as Json;
      const listCap = (cap.rest as Json[])[0]!.resource.find((r: Json) => r.type === 'List');
      expect(listCap.operation).toContainEqual({ name: 'find', definition: 'http://hl7.org/fhir/OperationDefinition/List-find' });
    });

    test('bulk export: _typeFilter chains reach what the kick-off token may search', async () => {
      const token = await craftToken(t, 'system/Observation.rs system/Patient.rs?gender=female');
      const query = `/$export?_type=Observation&_typeFilter=${encodeURIComponent('Observation?subject:Patient.family=beta,Observation?subject:Patient.family=alpha')}`;
      const manifest = await finish(t, token, await kickOff(t, token, query, { Prefer: 'respond-async' }));
      expect(refs(await download(t, token, manifest.output))).toEqual(['Observation/o1']);
      const observationsOnly = await craftToken(t, 'system/Observation.rs');
      const res = await t.request(`${t.fhir()}/$export?_type=Observation&_typeFilter=${encodeURIComponent('Observation?subject:Patient.family=alpha')}`, {
        headers: { Authorization: `Bearer ${observationsOnly}`, Prefer: 'respond-async' },
      });
      await expectOutcome(res, 403);
    });
  });
}
