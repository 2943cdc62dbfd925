/**
 * Provenance written by a patient's token, on both databases. A Provenance targeting the patient's own Patient is in
 * the patient's compartment, and one that also targets another patient's record is that patient's to read (a
 * Provenance of a record of theirs, src/fhir/provenance-reach.ts): pa's token wrote one naming pb's Observation, and
 * pb's app (and the clinicians' `_revinclude=Provenance:target`) was shown pa's assertion about pb's record. A token
 * whose writes of Provenance are bound to a patient targets records of that patient alone (requireOwnTargets), records
 * that exist: one targeting `Observation/future` was pb's to read once an operator wrote `future` for pb, and a 403 for
 * pb's record beside a 201 for no record told pa which ids were another patient's.
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

    test("one targeting a record not written yet is refused as one targeting another patient's, by every write path", async () => {
      const admin = fhirClient(t, await t.token());
      await admin.put200(observation('gone', 'pa'));
      expect((await admin.del('Observation/gone')).status).toBe(200);
      // The same words whether the target is another patient's or nothing at all: only the reference differs.
      const answer = async (res: Response, reference: string) => {
        const body = await expectOutcome(res, 403, 'forbidden');
        return { diagnostics: body.issue[0].diagnostics.replace(reference, 'REF'), expression: body.issue[0].expression };
      };
      const theirs = await answer(await pa.post('Provenance', provenance(['Patient/pa', 'Observation/ob'])), 'Observation/ob');
      expect(theirs.expression).toEqual(['Provenance.target[1].reference']);
      for (const ref of ['Observation/future', 'Observation/gone', 'Observation/oa/_history/7', 'Observation/oa/_history/x']) {
        expect({ ref, answer: await answer(await pa.post('Provenance', provenance(['Patient/pa', ref])), ref) }).toEqual({ ref, answer: theirs });
      }
      const future = provenance(['Patient/pa', 'Observation/future'], { id: 'early' });
      await expectOutcome(await pa.put('Provenance/early', future), 403, 'forbidden');
      await expectOutcome(await pa.post('Provenance', future, { 'If-None-Exist': '_id=early' }), 403, 'forbidden');
      await expectOutcome(await pa.put('Provenance?_id=early', future), 403, 'forbidden');
      const own = (await (await pa.post('Provenance', provenance(['Patient/pa', 'Observation/oa']))).json()) as Json;
      const patch = [{ op: 'add', path: '/target/-', value: { reference: 'Observation/future' } }];
      await expectOutcome(await pa.call('PATCH', `Provenance/${own.id}`, patch, { 'Content-Type': 'application/json-patch+json' }), 403, 'forbidden');
      // A transaction that writes nothing of the target: refused, naming the entry's target.
      const lone = { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: future, request: { method: 'PUT', url: 'Provenance/early' } }] };
      const refused = await expectOutcome(await pa.post('', lone), 403, 'forbidden');
      expect(refused.issue[0].expression).toEqual(['Bundle.entry[0].resource.target[1].reference']);
      // Judged after its writes, the refusal leaves nothing written.
      const withOwn = { ...lone, entry: [{ resource: observation('written-then-undone', 'pa'), request: { method: 'PUT', url: 'Observation/written-then-undone' } }, ...lone.entry] };
      await expectOutcome(await pa.post('', withOwn), 403, 'forbidden');
      expect((await admin.get('Observation/written-then-undone')).status).toBe(404);
      expect((await admin.get('Provenance/early')).status).toBe(404);
      // A batch's entry is judged as it is written: the target must exist then.
      const batch = await pa.post('', { resourceType: 'Bundle', type: 'batch', entry: [{ resource: provenance(['Patient/pa', 'Observation/future']), request: { method: 'POST', url: 'Provenance' } }] });
      expect(batch.status).toBe(200);
      const answered = ((await batch.json()) as Json).entry[0].response;
      expect({ status: answered.status, expression: answered.outcome.issue[0].expression }).toEqual({ status: '403 Forbidden', expression: ['Bundle.entry[0].resource.target[1].reference'] });
      // The operator writes `future` for pb later: pb is shown nothing of pa's.
      await admin.put200(observation('future', 'pb'));
      const seen = await pb.search('Observation?_id=future&_revinclude=Provenance:target');
      expect((seen.entry ?? []).map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`)).toEqual(['Observation/future']);
      expect((await admin.search('Provenance?target=Observation/future')).entry ?? []).toEqual([]);
    });

    test('a transaction writes one targeting a record another of its entries writes, before or after it', async () => {
      const urn = 'urn:uuid:4f1c2a7e-9b3d-4c5e-8f6a-1d2e3f4a5b6c';
      const bundle = {
        resourceType: 'Bundle', type: 'transaction', entry: [
          // Written first (POST before PUT), its target `tx-later` by the PUT after it.
          { resource: provenance(['Patient/pa', 'Observation/tx-later']), request: { method: 'POST', url: 'Provenance' } },
          { resource: observation('tx-later', 'pa'), request: { method: 'PUT', url: 'Observation/tx-later' } },
          // Written after its target, created by a POST with a fullUrl.
          { resource: provenance(['Patient/pa', urn], { id: 'tx-after' }), request: { method: 'PUT', url: 'Provenance/tx-after' } },
          { fullUrl: urn, resource: { ...observation('x', 'pa'), id: undefined }, request: { method: 'POST', url: 'Observation' } },
        ],
      };
      const res = await pa.post('', bundle);
      const body = (await res.json()) as Json;
      expect({ status: res.status, entries: body.entry?.map((e: Json) => e.response.status) }).toEqual({ status: 200, entries: ['201 Created', '201 Created', '201 Created', '201 Created'] });
      const later = await pa.search('Observation?_id=tx-later&_revinclude=Provenance:target');
      expect((later.entry ?? []).map((e: Json) => e.resource.resourceType).sort()).toEqual(['Observation', 'Provenance']);
      const written = (await (await pa.get('Provenance/tx-after')).json()) as Json;
      expect(written.target[1].reference).toStartWith('Observation/');
    });
  });
});
