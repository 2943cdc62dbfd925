/**
 * A conditional create (`If-None-Exist`, a Bundle entry's `ifNoneExist`) or a conditional update that creates
 * must write a resource its own condition finds, or a repeat of the request creates another: refused with a
 * 400 naming the condition (HAPI FHIR's HAPI-0929), alike in REST, a transaction and a batch. A transaction's
 * entries of one condition shared one write however it was written, so the second of two such POSTs "found"
 * the first's resource, where the same two requests made one after another created two. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const patient = (value: string, extra: Json = {}): Json => ({ resourceType: 'Patient', identifier: [{ system: 'urn:s', value }], ...extra });
const bundle = (type: string, entry: Json[]) => ({ resourceType: 'Bundle', type, entry });
const U1 = 'urn:uuid:8b0f3e42-4c1b-4d7e-9f55-0a4c2a1d0001';
const U2 = 'urn:uuid:8b0f3e42-4c1b-4d7e-9f55-0a4c2a1d0002';

await eachStore((kind, fresh) => {
  describe(`a conditional create meets its own condition (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const count = async (query: string) => ((await api.search(`${query}&_summary=count`)) as Json).total as number;
    beforeAll(async () => {
      // Subscriptions below name an endpoint on this machine, never called (no Patient meets their criteria).
      t = await createTestApp({ store: await fresh(), env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    test('REST: If-None-Exist that the resource does not meet is a 400 naming the header, and nothing is written', async () => {
      const before = await count('Patient?active=true');
      const outcome = await expectOutcome(await api.post('Patient', patient('other', { active: true }), { 'If-None-Exist': 'identifier=urn:s|wanted' }), 400, 'invalid');
      expect(outcome.issue[0].expression).toEqual(['If-None-Exist']);
      expect(outcome.issue[0].diagnostics).toContain("'Patient?identifier=urn:s|wanted'");
      // An `_id` the server does not give a create is never met.
      await expectOutcome(await api.post('Patient', patient('x', { active: true }), { 'If-None-Exist': '_id=chosen' }), 400, 'invalid');
      expect(await count('Patient?active=true')).toBe(before);
      // One that meets it is created, and found by the repeat.
      expect((await api.post('Patient', patient('met'), { 'If-None-Exist': 'identifier=urn:s|met' })).status).toBe(201);
      expect((await api.post('Patient', patient('met'), { 'If-None-Exist': 'identifier=urn:s|met' })).status).toBe(200);
      expect(await count('Patient?identifier=urn:s|met')).toBe(1);
    });

    test('REST: a conditional update that would create a resource its condition misses is a 400', async () => {
      await expectOutcome(await api.put('Patient?identifier=urn:s|put-wanted', patient('put-other')), 400, 'invalid');
      await expectOutcome(await api.put('Patient?identifier=urn:s|put-wanted', patient('put-other', { id: 'put-id' })), 400, 'invalid');
      expect(await count('Patient?identifier=urn:s|put-other')).toBe(0);
      expect((await api.get('Patient/put-id')).status).toBe(404);
      expect((await api.put('Patient?identifier=urn:s|put-met', patient('put-met'))).status).toBe(201);
    });

    test('a transaction of two entries of one condition their resources do not meet is refused, as the two requests would not share one', async () => {
      const res = await api.post('', bundle('transaction', [
        { fullUrl: U1, request: { method: 'POST', url: 'Patient', ifNoneExist: 'identifier=urn:s|tx-wanted' }, resource: patient('tx-a', { active: true }) },
        { fullUrl: U2, request: { method: 'POST', url: 'Patient', ifNoneExist: 'identifier=urn:s|tx-wanted' }, resource: patient('tx-b', { active: true }) },
      ]));
      const outcome = await expectOutcome(res, 400, 'invalid');
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[0].request.ifNoneExist']);
      expect(await count('Patient?identifier=urn:s|tx-a,urn:s|tx-b')).toBe(0);
    });

    test("a transaction's condition may name another entry's resource, judged once every entry is written", async () => {
      const entries = (identifier: string) => [
        { request: { method: 'POST', url: 'Observation', ifNoneExist: `subject=${U1}&code=urn:c|w` }, resource: { resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'urn:c', code: 'w' }] }, subject: { reference: U1 } } },
        { fullUrl: U1, request: { method: 'POST', url: 'Patient', ifNoneExist: `identifier=urn:s|${identifier}` }, resource: patient(identifier) },
        { request: { method: 'POST', url: 'Observation', ifNoneExist: `subject:Patient.identifier=urn:s|${identifier}&code=urn:c|h` }, resource: { resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'urn:c', code: 'h' }] }, subject: { reference: U1 } } },
      ];
      const first = (await (await api.post('', bundle('transaction', entries('chained')))).json()) as Json;
      expect(first.entry.map((e: Json) => e.response.status.slice(0, 3))).toEqual(['201', '201', '201']);
      // The same Bundle again finds all three.
      const again = (await (await api.post('', bundle('transaction', entries('chained')))).json()) as Json;
      expect(again.entry.map((e: Json) => e.response.status.slice(0, 3))).toEqual(['200', '200', '200']);
    });

    test('an entry whose condition finds the resource an earlier entry creates follows it, however the condition is written', async () => {
      const pair = async (first: [Json, string | undefined], second: [Json, string]) => {
        const res = await api.post('', bundle('transaction', [
          { request: { method: 'POST', url: 'Patient', ...(first[1] === undefined ? {} : { ifNoneExist: first[1] }) }, resource: first[0] },
          { fullUrl: U2, request: { method: 'POST', url: 'Patient', ifNoneExist: second[1] }, resource: second[0] },
          { request: { method: 'POST', url: 'Observation' }, resource: { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: U2 } } },
        ]));
        expect(res.status).toBe(200);
        const body = (await res.json()) as Json;
        expect(body.entry.map((e: Json) => e.response.status.slice(0, 3))).toEqual(['201', '200', '201']);
        // One resource, which the second entry answers and the Observation refers to.
        expect(body.entry[1].response.location).toBe(body.entry[0].response.location);
        expect(body.entry[2].resource.subject.reference).toBe(`Patient/${body.entry[0].resource.id}`);
      };
      // Each pair, sent as two requests one after the other, creates one Patient: in a transaction it created two.
      await pair([patient('w1'), 'identifier=urn:s|w1'], [patient('w1'), 'identifier=urn:s|w1&identifier=urn:s|w1']);
      await pair([patient('w2'), 'identifier=urn:s|w2'], [patient('w2'), 'identifier=urn:s|w2,urn:s|other']);
      await pair([patient('w3'), 'identifier=urn:s|w3'], [patient('w3'), 'identifier=w3']);
      const both = patient('w4');
      both.identifier.push({ system: 'urn:s', value: 'w5' });
      await pair([both, 'identifier=urn:s|w4'], [both, 'identifier=urn:s|w5']);
      await pair([patient('w6'), undefined], [patient('w6'), 'identifier=urn:s|w6']);
      for (const v of ['w1', 'w2', 'w3', 'w4', 'w6']) expect([v, await count(`Patient?identifier=urn:s|${v}`)]).toEqual([v, 1]);

      // Two earlier entries' resources met: 412, as two stored matches are; nothing is written.
      const two = await api.post('', bundle('transaction', [
        { request: { method: 'POST', url: 'Patient' }, resource: patient('w7') },
        { request: { method: 'POST', url: 'Patient' }, resource: patient('w7') },
        { request: { method: 'POST', url: 'Patient', ifNoneExist: 'identifier=w7' }, resource: patient('w7') },
      ]));
      expect((await expectOutcome(two, 412)).issue[0].expression).toEqual(['Bundle.entry[2].request.ifNoneExist']);
      // A conditional update of what an earlier entry creates, with other content: two entries would change one resource.
      await expectOutcome(await api.post('', bundle('transaction', [
        { request: { method: 'POST', url: 'Patient', ifNoneExist: 'identifier=urn:s|w8' }, resource: patient('w8') },
        { request: { method: 'PUT', url: 'Patient?identifier=w8' }, resource: patient('w8', { active: true }) },
      ])), 400);
      expect(await count('Patient?identifier=w7,w8')).toBe(0);
    });

    test("an earlier entry referring to a conditional entry planned after it is found by a condition naming that entry's fullUrl", async () => {
      const P = 'urn:uuid:8b0f3e42-4c1b-4d7e-9f55-0a4c2a1d0003';
      const obs = { resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'urn:c', code: 'later' }] }, identifier: [{ system: 'urn:o', value: 'later' }], subject: { reference: P }, valueString: 'x' };
      const entries = [
        { request: { method: 'POST', url: 'Observation', ifNoneExist: 'identifier=urn:o|later' }, resource: obs },
        { fullUrl: P, request: { method: 'POST', url: 'Patient', ifNoneExist: 'identifier=urn:s|later' }, resource: patient('later') },
        { request: { method: 'POST', url: 'Observation', ifNoneExist: `subject=${P}&code=urn:c|later` }, resource: obs },
      ];
      const first = (await (await api.post('', bundle('transaction', entries))).json()) as Json;
      // The third finds the first's Observation (its subject the Patient the second creates): it created a second one.
      expect(first.entry.map((e: Json) => e.response.status.slice(0, 3))).toEqual(['201', '201', '200']);
      expect(first.entry[2].response.location).toBe(first.entry[0].response.location);
      expect(await count('Observation?identifier=urn:o|later')).toBe(1);
      // And the Bundle sent again finds all three (it was a 412: two Observations met the third's condition).
      const again = await api.post('', bundle('transaction', entries));
      expect(again.status).toBe(200);
      expect(((await again.json()) as Json).entry.map((e: Json) => e.response.status.slice(0, 3))).toEqual(['200', '200', '200']);
    });

    test('among many entries, a condition follows the one whose resource it finds: by its most selective token, a string prefix or a chain', async () => {
      // Stored Patients for chains to reach: q0 … q11.
      await api.post('', bundle('transaction', Array.from({ length: 12 }, (_, i) => ({ request: { method: 'PUT', url: `Patient/q${i}` }, resource: { resourceType: 'Patient', id: `q${i}`, identifier: [{ system: 'urn:q', value: `q${i}` }] } }))));
      const obs = (i: number, extra: Json = {}): Json => ({
        resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'urn:c', code: 'many' }] }, identifier: [{ system: 'urn:o', value: `o${i}` }], subject: { reference: `Patient/q${i}` }, valueString: 'x', ...extra,
      });
      const named = (i: number): Json => ({ resourceType: 'Patient', name: [{ family: `Family${i}z`, given: [`Given${i}`] }] });
      const contained = obs(11, { contained: [{ resourceType: 'Patient', id: 'c', identifier: [{ system: 'urn:q', value: 'inner' }] }], subject: { reference: '#c' } });
      const entries: Json[] = [
        // More than the few matched one by one: twelve Observations of one code, twelve Patients named apart.
        ...Array.from({ length: 11 }, (_, i) => ({ request: { method: 'POST', url: 'Observation' }, resource: obs(i) })),
        { request: { method: 'POST', url: 'Observation' }, resource: contained },
        ...Array.from({ length: 12 }, (_, i) => ({ request: { method: 'POST', url: 'Patient' }, resource: named(i) })),
        // Each finds one of them: the code every one holds and an identifier; a chain to a stored Patient; a chain to a contained one; a family's start.
        { request: { method: 'POST', url: 'Observation', ifNoneExist: 'code=urn:c|many&identifier=urn:o|o5' }, resource: obs(5) },
        { request: { method: 'POST', url: 'Observation', ifNoneExist: 'code=urn:c|many&subject:Patient.identifier=urn:q|q7' }, resource: obs(7) },
        { request: { method: 'POST', url: 'Observation', ifNoneExist: 'code=urn:c|many&subject:Patient.identifier=urn:q|inner' }, resource: contained },
        { request: { method: 'POST', url: 'Patient', ifNoneExist: 'family=family3&given=Given3' }, resource: named(3) },
      ];
      const res = await api.post('', bundle('transaction', entries));
      expect(res.status).toBe(200);
      const body = (await res.json()) as Json;
      const location = (i: number) => body.entry[i].response.location;
      expect(body.entry.slice(24).map((e: Json) => e.response.status.slice(0, 3))).toEqual(['200', '200', '200', '200']);
      expect([location(24), location(25), location(26), location(27)]).toEqual([location(5), location(7), location(11), location(15)]);
      expect(await count('Observation?code=urn:c|many')).toBe(12);
      expect(await count('Patient?family=family3z')).toBe(1);
    });

    test("a conditional reference with _has finds, among many resources the transaction updates, the one a stored resource refers to", async () => {
      await api.post('', bundle('transaction', Array.from({ length: 10 }, (_, i) => ({ request: { method: 'PUT', url: `Patient/h${i}` }, resource: { resourceType: 'Patient', id: `h${i}`, active: false } }))));
      await api.create({ resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'urn:c', code: 'has' }] }, subject: { reference: 'Patient/h3' }, valueString: 'x' });
      // Stored, none is active: only the transaction's own versions meet the condition.
      const res = await api.post('', bundle('transaction', [
        ...Array.from({ length: 10 }, (_, i) => ({ request: { method: 'PUT', url: `Patient/h${i}` }, resource: { resourceType: 'Patient', id: `h${i}`, active: true } })),
        { request: { method: 'POST', url: 'Observation' }, resource: { resourceType: 'Observation', status: 'final', code: { text: 'y' }, subject: { reference: 'Patient?active=true&_has:Observation:subject:code=urn:c|has' }, valueString: 'y' } },
      ]));
      expect(res.status).toBe(200);
      expect(((await res.json()) as Json).entry[10].resource.subject.reference).toBe('Patient/h3');
    });

    test("a batch's entry that misses its condition is a 400 of its own; the others are written", async () => {
      const res = (await (await api.post('', bundle('batch', [
        { request: { method: 'POST', url: 'Patient', ifNoneExist: 'identifier=urn:s|b-wanted' }, resource: patient('b-other') },
        { request: { method: 'POST', url: 'Patient', ifNoneExist: 'identifier=urn:s|b-met' }, resource: patient('b-met') },
      ]))).json()) as Json;
      expect(res.entry.map((e: Json) => e.response.status.slice(0, 3))).toEqual(['400', '201']);
      expect(res.entry[0].response.outcome.issue[0].expression).toEqual(['Bundle.entry[0].request.ifNoneExist']);
      expect(await count('Patient?identifier=urn:s|b-other')).toBe(0);
    });

    // The server stores a Subscription written `requested` as `active`: what is stored is judged, not what was sent.
    const subscription = (endpoint: string): Json => ({ resourceType: 'Subscription', status: 'requested', reason: 'own', criteria: 'Patient?family=own', channel: { type: 'rest-hook', endpoint } });
    const asStored = (endpoint: string, status: string) => `url=${endpoint}&status=${status}`;

    test('REST: the condition is judged on the resource as the server stores it (a Subscription requested is stored active)', async () => {
      const missed = 'http://127.0.0.1:9/own-rest-missed';
      await expectOutcome(await api.post('Subscription', subscription(missed), { 'If-None-Exist': asStored(missed, 'requested') }), 400, 'invalid');
      await expectOutcome(await api.put(`Subscription?${asStored(missed, 'requested')}`, subscription(missed)), 400, 'invalid');
      expect(await count(`Subscription?url=${missed}`)).toBe(0);
      const met = 'http://127.0.0.1:9/own-rest-met';
      expect((await api.post('Subscription', subscription(met), { 'If-None-Exist': asStored(met, 'active') })).status).toBe(201);
      expect((await api.post('Subscription', subscription(met), { 'If-None-Exist': asStored(met, 'active') })).status).toBe(200);
      const put = 'http://127.0.0.1:9/own-rest-put';
      expect((await api.put(`Subscription?${asStored(put, 'active')}`, subscription(put))).status).toBe(201);
      expect(await count(`Subscription?url=${met},${put}`)).toBe(2);
    });

    test('a transaction judges the condition on the resource as the server stores it, as REST does', async () => {
      const missed = 'http://127.0.0.1:9/own-tx-missed';
      for (const request of [
        { method: 'POST', url: 'Subscription', ifNoneExist: asStored(missed, 'requested') },
        { method: 'PUT', url: `Subscription?${asStored(missed, 'requested')}` },
      ]) {
        const res = await api.post('', bundle('transaction', [{ fullUrl: U1, request, resource: subscription(missed) }]));
        await expectOutcome(res, 400, 'invalid');
      }
      expect(await count(`Subscription?url=${missed}`)).toBe(0);
      const met = 'http://127.0.0.1:9/own-tx-met';
      const put = 'http://127.0.0.1:9/own-tx-put';
      const entries = [
        { fullUrl: U1, request: { method: 'POST', url: 'Subscription', ifNoneExist: asStored(met, 'active') }, resource: subscription(met) },
        { fullUrl: U2, request: { method: 'PUT', url: `Subscription?${asStored(put, 'active')}` }, resource: subscription(put) },
      ];
      const first = (await (await api.post('', bundle('transaction', entries))).json()) as Json;
      expect(first.entry.map((e: Json) => e.response.status.slice(0, 3))).toEqual(['201', '201']);
      const again = (await (await api.post('', bundle('transaction', entries))).json()) as Json;
      expect(again.entry[0].response.status.slice(0, 3)).toBe('200');
      expect(await count(`Subscription?url=${met},${put}`)).toBe(2);
    });

    test("a transaction whose other entry's resource meets the condition only as stored leaves one resource of it, not two", async () => {
      const both = 'http://127.0.0.1:9/own-tx-both';
      const res = await api.post('', bundle('transaction', [
        { request: { method: 'POST', url: 'Subscription' }, resource: subscription(both) },
        { request: { method: 'POST', url: 'Subscription', ifNoneExist: asStored(both, 'active') }, resource: subscription(both) },
      ]));
      const outcome = await expectOutcome(res, 412);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[1].request.ifNoneExist']);
      expect(await count(`Subscription?url=${both}`)).toBe(0);
    });

    test("a patient's token's conditional creates meet their condition beside resources out of its reach that meet it too (another patient's, outside its scope filter): created, as REST creates them, not a 412", async () => {
      const CAT = 'http://terminology.hl7.org/CodeSystem/observation-category';
      const obs = (patient: string, category: string): Json => ({
        resourceType: 'Observation', status: 'final', category: [{ coding: [{ system: CAT, code: category }] }],
        code: { coding: [{ system: 'urn:own-reach', code: 'x' }] }, subject: { reference: `Patient/${patient}` },
      });
      for (const id of ['reach-a', 'reach-b']) expect((await api.put(`Patient/${id}`, { resourceType: 'Patient', id })).status).toBe(201);
      expect((await api.put('Observation/reach-other', { ...obs('reach-b', 'laboratory'), id: 'reach-other' })).status).toBe(201);
      expect((await api.put('Observation/reach-vital', { ...obs('reach-a', 'vital-signs'), id: 'reach-vital' })).status).toBe(201);
      const mine = fhirClient(t, await craftToken(t, `patient/Patient.rs patient/Observation.cruds?category=${CAT}|laboratory`, { patient: 'reach-a' }));
      const condition = 'code=urn:own-reach|x';
      const res = await mine.post('', bundle('transaction', [{ request: { method: 'POST', url: 'Observation', ifNoneExist: condition }, resource: obs('reach-a', 'laboratory') }]));
      expect(res.status).toBe(200);
      expect(((await res.json()) as Json).entry[0].response.status.slice(0, 3)).toBe('201');
      // REST alike: the same request again finds the one it created.
      expect((await mine.post('Observation', obs('reach-a', 'laboratory'), { 'If-None-Exist': condition })).status).toBe(200);
      expect(await count(`Observation?${condition}`)).toBe(3);
    });
  });
});
