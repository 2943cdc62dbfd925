import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { BASE, createTestApp, type TestApp } from '../helpers/app.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

let t: TestApp;
let api: FhirClient;
const base = `${BASE}/tenants/t1/fhir/R4`;
/** Every patient id any fixture refers to (and some it does not). */
const CANDIDATES = ['p1', 'p2', 'p3', 'p4', 'p5', 'p9', 'g1', 'x1', 'o1', 'pr1'];

/** The patients whose compartment holds `type/id`, as the store's compartment index says. */
async function compartments(type: string, id: string): Promise<string[]> {
  const found: string[] = [];
  for (const patient of CANDIDATES) {
    const rows = await t.store.resources.search('t1', { type, where: [{ kind: 'id', ids: [id] }], compartment: patient, sort: [], count: 10 });
    if (rows.length > 0) found.push(patient);
  }
  return found;
}

/** Every resource of `type` in one patient's compartment. */
async function members(type: string, patient: string): Promise<string[]> {
  const rows = await t.store.resources.search('t1', { type, compartment: patient, sort: [], count: 100 });
  return rows.map((r) => r.id);
}

async function put(resource: Json): Promise<void> {
  await api.put200(resource);
}

beforeAll(async () => {
  t = await createTestApp();
  api = fhirClient(t, await t.token());
});
afterAll(() => t.close());

describe('Patient compartment rows on write (R4 CompartmentDefinition/patient)', () => {
  test('Observation: subject and performer, Patient references only', async () => {
    await put({
      resourceType: 'Observation', id: 'obs1', status: 'final', code: { text: 'x' },
      subject: { reference: 'Patient/p1' },
      performer: [{ reference: 'Patient/p2' }, { reference: 'Practitioner/pr1' }, { reference: 'RelatedPerson/x1' }],
      focus: [{ reference: 'Patient/p3' }],
      hasMember: [{ reference: 'Observation/o1' }],
    });
    expect(await compartments('Observation', 'obs1')).toEqual(['p1', 'p2']);
    await put({ resourceType: 'Observation', id: 'obs-group', status: 'final', code: { text: 'x' }, subject: { reference: 'Group/g1' } });
    expect(await compartments('Observation', 'obs-group')).toEqual([]);
  });

  test('reference forms: absolute URL and versioned references count, contained and logical ones do not', async () => {
    await put({ resourceType: 'Observation', id: 'obs-abs', status: 'final', code: { text: 'x' }, subject: { reference: `${base}/Patient/p5` } });
    expect(await compartments('Observation', 'obs-abs')).toEqual(['p5']);
    await put({ resourceType: 'Observation', id: 'obs-ver', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/p4/_history/2' } });
    expect(await compartments('Observation', 'obs-ver')).toEqual(['p4']);
    await put({
      resourceType: 'Observation', id: 'obs-contained', status: 'final', code: { text: 'x' },
      contained: [{ resourceType: 'Patient', id: 'inner' }], subject: { reference: '#inner' },
    });
    expect(await compartments('Observation', 'obs-contained')).toEqual([]);
    await put({
      resourceType: 'Observation', id: 'obs-logical', status: 'final', code: { text: 'x' },
      subject: { identifier: { system: 'urn:mrn', value: 'p1' } },
    });
    expect(await compartments('Observation', 'obs-logical')).toEqual([]);
  });

  test('Encounter: subject', async () => {
    await put({
      resourceType: 'Encounter', id: 'enc1', status: 'finished', class: { code: 'AMB' },
      subject: { reference: 'Patient/p1' }, participant: [{ individual: { reference: 'Practitioner/pr1' } }],
    });
    expect(await compartments('Encounter', 'enc1')).toEqual(['p1']);
  });

  test('AllergyIntolerance: patient, recorder, asserter', async () => {
    await put({
      resourceType: 'AllergyIntolerance', id: 'ai1', clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical', code: 'active' }] }, patient: { reference: 'Patient/p1' },
      recorder: { reference: 'Patient/p2' }, asserter: { reference: 'Patient/p3' },
    });
    expect(await compartments('AllergyIntolerance', 'ai1')).toEqual(['p1', 'p2', 'p3']);
    await put({
      resourceType: 'AllergyIntolerance', id: 'ai2', clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical', code: 'active' }] }, patient: { reference: 'Patient/p4' },
      recorder: { reference: 'Practitioner/pr1' }, asserter: { reference: 'RelatedPerson/x1' },
    });
    expect(await compartments('AllergyIntolerance', 'ai2')).toEqual(['p4']);
  });

  test('Provenance: the Patient targets', async () => {
    await put({
      resourceType: 'Provenance', id: 'prov1', recorded: '2026-01-01T00:00:00Z',
      target: [{ reference: 'Observation/obs1' }, { reference: 'Patient/p2' }, { reference: 'Patient/p9' }],
      agent: [{ who: { reference: 'Patient/p1' } }],
    });
    expect(await compartments('Provenance', 'prov1')).toEqual(['p2', 'p9']);
  });

  test('Patient: itself and the patients it links to', async () => {
    await put({ resourceType: 'Patient', id: 'p1', link: [{ other: { reference: 'Patient/p9' }, type: 'seealso' }, { other: { reference: 'RelatedPerson/x1' }, type: 'seealso' }] });
    expect(await compartments('Patient', 'p1')).toEqual(['p1', 'p9']);
    await put({ resourceType: 'Patient', id: 'p2', generalPractitioner: [{ reference: 'Practitioner/pr1' }] });
    expect(await compartments('Patient', 'p2')).toEqual(['p2']);
  });

  test('MedicationRequest: subject only (not requester, not performer)', async () => {
    await put({
      resourceType: 'MedicationRequest', id: 'mr1', status: 'active', intent: 'order',
      medicationCodeableConcept: { text: 'aspirin' }, subject: { reference: 'Patient/p3' },
      requester: { reference: 'Patient/p2' }, performer: { reference: 'Patient/p4' },
    });
    expect(await compartments('MedicationRequest', 'mr1')).toEqual(['p3']);
  });

  test('types outside the compartment get no rows', async () => {
    await put({ resourceType: 'Practitioner', id: 'pr1' });
    await put({ resourceType: 'Organization', id: 'org1', name: 'x', partOf: { reference: 'Organization/o1' } });
    expect(await compartments('Practitioner', 'pr1')).toEqual([]);
    expect(await compartments('Organization', 'org1')).toEqual([]);
  });
});

describe('compartment rows follow updates and deletes', () => {
  test('an update replaces the rows; a delete removes them; a re-create restores them', async () => {
    await put({ resourceType: 'Encounter', id: 'enc-move', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/p1' } });
    expect(await members('Encounter', 'p1')).toContain('enc-move');
    await put({ resourceType: 'Encounter', id: 'enc-move', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/p2' } });
    expect(await compartments('Encounter', 'enc-move')).toEqual(['p2']);
    expect(await members('Encounter', 'p1')).not.toContain('enc-move');
    await put({ resourceType: 'Encounter', id: 'enc-move', status: 'finished', class: { code: 'AMB' } });
    expect(await compartments('Encounter', 'enc-move')).toEqual([]);
    await put({ resourceType: 'Encounter', id: 'enc-move', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/p3' } });
    expect(await compartments('Encounter', 'enc-move')).toEqual(['p3']);
    expect((await api.del('Encounter/enc-move')).status).toBe(200);
    expect(await compartments('Encounter', 'enc-move')).toEqual([]);
    expect(await members('Encounter', 'p3')).toEqual([]);
    await put({ resourceType: 'Encounter', id: 'enc-move', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/p3' } });
    expect(await members('Encounter', 'p3')).toEqual(['enc-move']);
  });

  test('a patient deleted from the store leaves its own row gone', async () => {
    await put({ resourceType: 'Patient', id: 'p5' });
    expect(await members('Patient', 'p5')).toEqual(['p5']);
    await api.del('Patient/p5');
    expect(await members('Patient', 'p5')).toEqual([]);
    // Resources that point at it stay in its compartment (the compartment is defined by their references).
    expect(await members('Observation', 'p5')).toEqual(['obs-abs']);
  });

  test('writes inside a transaction maintain the rows too', async () => {
    const res = await api.post(base, {
      resourceType: 'Bundle', type: 'transaction',
      entry: [
        { fullUrl: 'urn:uuid:9e0f5d3e-0000-4000-8000-000000000001', resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } },
        {
          resource: { resourceType: 'Condition', subject: { reference: 'urn:uuid:9e0f5d3e-0000-4000-8000-000000000001' }, asserter: { reference: 'Patient/p4' } },
          request: { method: 'POST', url: 'Condition' },
        },
      ],
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Json;
    const patientId = body.entry[0].resource.id as string;
    const conditionId = body.entry[1].resource.id as string;
    expect(await members('Condition', patientId)).toEqual([conditionId]);
    expect(await members('Condition', 'p4')).toEqual([conditionId]);
  });
});
