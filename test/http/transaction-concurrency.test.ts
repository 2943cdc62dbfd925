/**
 * Transactions changing the same resources at once, each in its own order: the resources an entry
 * changes are locked together, in key order, before the first write, so they wait for each other
 * and all commit; none deadlocks (which PostgreSQL would end after a second, one of them a 409).
 * On both databases (SQLite has one writer, so there only the outcome is checked).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import type { Json } from '../helpers/fhir.ts';

await eachStore((kind, fresh) => {
  describe(`concurrent transactions (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const ids = ['a', 'b', 'c', 'd', 'e', 'f'];

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      for (const id of ids) {
        const res = await t.request(`${t.fhir()}/Patient/${id}`, fhirInit(token, 'PUT', { resourceType: 'Patient', id, identifier: [{ system: 'urn:test', value: id }] }));
        expect(res.status).toBe(201);
      }
    });
    afterAll(() => t.close());

    /**
     * A transaction updating `order`'s Patients (by id, or by identifier where `conditional`), in that
     * order, to a birth date of the round's `which`th transaction: each changes them (one that changes
     * nothing writes no version).
     */
    const transaction = (order: string[], round: number, which: number, conditional = false) => t.request(t.fhir(), fhirInit(token, 'POST', {
      resourceType: 'Bundle', type: 'transaction',
      entry: order.map((id) => ({
        resource: { resourceType: 'Patient', ...(conditional ? {} : { id }), identifier: [{ system: 'urn:test', value: id }], birthDate: `${1950 + round}-0${which}` },
        request: { method: 'PUT', url: conditional ? `Patient?identifier=urn:test|${id}` : `Patient/${id}` },
      })),
    }));

    test('the same resources in opposite orders, by id and conditionally: every transaction commits', async () => {
      const rounds = 8;
      const statuses: number[] = [];
      for (let round = 0; round < rounds; round++) {
        const answers = await Promise.all([
          transaction(ids, round, 1), transaction([...ids].reverse(), round, 2),
          transaction(['c', 'a', 'e'], round, 3), transaction(['e', 'c', 'a'], round, 4, true),
        ]);
        for (const res of answers) {
          statuses.push(res.status);
          await res.text();
        }
      }
      expect(statuses).toEqual(new Array(rounds * 4).fill(200));
      // Every transaction wrote a version of each of its Patients: 1 + 2 per round, and 2 more for a, c, e.
      const versions = async (id: string) => (((await (await t.request(`${t.fhir()}/Patient/${id}`, fhirInit(token))).json()) as Json).meta.versionId);
      expect(await Promise.all(ids.map(versions))).toEqual(ids.map((id) => String(1 + rounds * (['a', 'c', 'e'].includes(id) ? 4 : 2))));
    });
  });
});

await eachStore((kind, fresh) => {
  describe(`a write by another request between a transaction's validation and its commit (${kind})`, () => {
    let t: TestApp;
    let token: string;
    // Run when the transaction resolves its Subscription's endpoint host: after its entries are planned,
    // rewritten and validated (the steps a large Bundle paces, letting other requests run), before its commit.
    let meanwhile: (() => Promise<unknown>) | undefined;
    beforeAll(async () => {
      const resolveHost = async () => {
        const write = meanwhile;
        meanwhile = undefined;
        if (write) await write();
        return ['198.51.100.1'];
      };
      t = await createTestApp({ store: await fresh(), resolveHost });
      token = await t.token();
    });
    afterAll(() => t.close());

    /** A Subscription entry whose endpoint (a host of its own: hosts resolved are remembered) the transaction resolves before its commit. */
    const hook = (host: string): Json => ({
      resource: { resourceType: 'Subscription', status: 'requested', reason: 'r', criteria: 'Observation?status=final', channel: { type: 'rest-hook', endpoint: `https://${host}.example/notify`, payload: 'application/fhir+json' } },
      request: { method: 'POST', url: 'Subscription' },
    });
    const send = (entry: Json[]) => t.request(t.fhir(), fhirInit(token, 'POST', { resourceType: 'Bundle', type: 'transaction', entry }));
    const put = (id: string, body: Json) => t.request(`${t.fhir()}/Patient/${id}`, fhirInit(token, 'PUT', { resourceType: 'Patient', id, ...body }));
    const read = async (ref: string) => (await t.request(`${t.fhir()}/${ref}`, fhirInit(token))).json() as Promise<Json>;

    test('its update held to a version is a 412 and writes nothing; its patch applies to what the other request wrote', async () => {
      expect((await put('held-a', { name: [{ family: 'Lee' }] })).status).toBe(201);
      expect((await put('held-b', { name: [{ family: 'Kim' }] })).status).toBe(201);
      const patch = { resource: { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'add' }, { name: 'path', valueString: 'Patient' }, { name: 'name', valueString: 'birthDate' }, { name: 'value', valueDate: '1970-01-01' }] }] }, request: { method: 'PATCH', url: 'Patient/held-a' } };
      const update = { resource: { resourceType: 'Patient', id: 'held-b', name: [{ family: 'FromBundle' }] }, request: { method: 'PUT', url: 'Patient/held-b', ifMatch: 'W/"1"' } };
      const statuses: number[] = [];
      meanwhile = async () => {
        for (const [id, body] of [['held-a', { name: [{ family: 'Lee' }], gender: 'female' }], ['held-b', { name: [{ family: 'Kim' }], gender: 'male' }]] as const) statuses.push((await put(id, body)).status);
      };
      const res = await send([patch, update, hook('update-held')]);
      expect(statuses).toEqual([200, 200]);
      expect([res.status, ((await res.json()) as Json).issue[0].expression]).toEqual([412, ['Bundle.entry[1].request.ifMatch']]);
      const [a, b] = [await read('Patient/held-a'), await read('Patient/held-b')];
      expect([a.gender, a.birthDate, b.gender, b.name[0].family]).toEqual(['female', undefined, 'male', 'Kim']);
      // The patch alone: planned on version 2, which another request replaces before the commit; planned again on version 3.
      meanwhile = async () => statuses.push((await put('held-a', { name: [{ family: 'Lee' }], gender: 'other' })).status);
      const patched = await send([patch, hook('patch-held')]);
      expect([patched.status, statuses]).toEqual([200, [200, 200, 200]]);
      const now = await read('Patient/held-a');
      expect([now.meta.versionId, now.gender, now.birthDate]).toEqual(['4', 'other', '1970-01-01']);
    });

    test("its conditional create's match, deleted meanwhile, is searched again: the Bundle creates, and its entries refer to what it created", async () => {
      const identifier = [{ system: 'http://example.org/mrn', value: 'held-create' }];
      expect((await put('held-c', { identifier })).status).toBe(201);
      let deleted = 0;
      meanwhile = async () => (deleted = (await t.request(`${t.fhir()}/Patient/held-c`, fhirInit(token, 'DELETE'))).status);
      const res = await send([
        { fullUrl: 'urn:uuid:00000000-0000-4000-8000-00000000000c', resource: { resourceType: 'Patient', identifier }, request: { method: 'POST', url: 'Patient', ifNoneExist: 'identifier=http://example.org/mrn|held-create' } },
        { resource: { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: 'urn:uuid:00000000-0000-4000-8000-00000000000c' } }, request: { method: 'POST', url: 'Observation' } },
        hook('create-held'),
      ]);
      expect([deleted, res.status]).toEqual([200, 200]);
      const answer = (await res.json()) as Json;
      // Not 200 for Patient/held-c, deleted before the commit, with an Observation naming it.
      expect(answer.entry[0].response.status).toBe('201 Created');
      const created = `Patient/${answer.entry[0].resource.id}`;
      expect(created).not.toBe('Patient/held-c');
      expect(answer.entry[1].resource.subject).toEqual({ reference: created });
      expect((await read(created)).identifier).toEqual(identifier);
    });
  });
});
