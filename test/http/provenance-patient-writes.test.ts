/**
 * Provenance written by a patient's token, on both databases. A Provenance targeting the patient's own Patient is in
 * the patient's compartment, and one that also targets another patient's record is that patient's to read (a
 * Provenance of a record of theirs, src/fhir/provenance-reach.ts): pa's token wrote one naming pb's Observation, and
 * pb's app (and the clinicians' `_revinclude=Provenance:target`) was shown pa's assertion about pb's record. A token
 * whose writes of Provenance are bound to a patient targets records of that patient alone (requireOwnTargets).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const observation = (id: string, patient: string) => ({ resourceType: 'Observation', id, status: 'final', code: { text: id }, subject: { reference: `Patient/${patient}` } });
const provenance = (targets: string[], extra: Json = {}): Json => ({
  resourceType: 'Provenance', target: targets.map((reference) => ({ reference })), recorded: '2024-01-02T03:04:05Z', agent: [{ who: { reference: 'Patient/pa' } }], ...extra,
});

await eachStore((kind, fresh) => {
  describe(`a patient's token writes no Provenance of another patient's record (${kind})`, () => {
    let t: TestApp;
    let pa: FhirClient;
    let pb: FhirClient;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      const admin = fhirClient(t, await t.token());
      // `moved` was pb's (version 1) and is pa's now.
      for (const r of [{ resourceType: 'Patient', id: 'pa' }, { resourceType: 'Patient', id: 'pb' }, observation('oa', 'pa'), observation('ob', 'pb'), observation('moved', 'pb'), observation('moved', 'pa')]) await admin.put200(r);
      pa = fhirClient(t, await craftToken(t, 'launch/patient patient/*.cruds', { patient: 'pa' }));
      pb = fhirClient(t, await craftToken(t, 'launch/patient patient/*.rs', { patient: 'pb' }));
    });
    afterAll(() => t.close());

    test("one targeting another patient's record beside the patient's own is refused, by every write path", async () => {
      const planted = provenance(['Patient/pa', 'Observation/ob'], { reason: [{ text: 'planted' }] });
      await expectOutcome(await pa.post('Provenance', planted), 403, 'forbidden');
      await expectOutcome(await pa.put('Provenance/planted', { ...planted, id: 'planted' }), 403, 'forbidden');
      await expectOutcome(await pa.post('Provenance', provenance(['Patient/pa', 'Observation/moved/_history/1'])), 403, 'forbidden');
      await expectOutcome(await pa.post('Provenance', provenance(['Patient/pa', `${t.fhir()}/Observation/ob`])), 403, 'forbidden');
      const tx = { resourceType: 'Bundle', type: 'transaction', entry: [{ fullUrl: 'urn:uuid:1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed', resource: planted, request: { method: 'POST', url: 'Provenance' } }] };
      await expectOutcome(await pa.post('', tx), 403, 'forbidden');
      // Its own Provenance is not widened to another patient's record by a patch either.
      const own = await pa.post('Provenance', provenance(['Patient/pa', 'Observation/oa']));
      expect(own.status).toBe(201);
      const id = ((await own.json()) as Json).id;
      const patch = [{ op: 'add', path: '/target/-', value: { reference: 'Observation/ob' } }];
      await expectOutcome(await pa.call('PATCH', `Provenance/${id}`, patch, { 'Content-Type': 'application/json-patch+json' }), 403, 'forbidden');
      // Nothing of pa's is shown to pb.
      const seen = await pb.search('Observation?_id=ob&_revinclude=Provenance:target');
      expect((seen.entry ?? []).map((e: Json) => e.resource.resourceType)).toEqual(['Observation']);
      expect((await pb.search('Provenance')).entry ?? []).toEqual([]);
    });

    test("one targeting the patient's own records is written, the current version of a record that moved to the patient too", async () => {
      for (const targets of [['Patient/pa', 'Observation/oa'], ['Patient/pa', 'Observation/oa', 'Observation/moved'], ['Patient/pa', 'Observation/moved/_history/2', 'Practitioner/unknown']]) {
        const res = await pa.post('Provenance', provenance(targets));
        expect({ targets, status: res.status }).toEqual({ targets, status: 201 });
      }
    });
  });
});
