/**
 * Concurrent PATCH of one resource (FHIR R4 http.html#patch): a patch without If-Match is defined on
 * the current version, so patches sent at once are each applied to the version they meet, none lost and
 * none refused, whether they reach one server or two sharing the database (CINDER_PROCESSES); with an
 * If-Match naming one version, one is applied and the others are 412. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, secondServer, type TestApp } from '../helpers/app.ts';
import type { Json } from '../helpers/fhir.ts';
import { storeTargets } from '../helpers/stores.ts';
import type { Store } from '../../src/store/types.ts';

const JSON_PATCH = { 'Content-Type': 'application/json-patch+json' };
const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`concurrent PATCH (${target.kind})`, () => {
    let t: TestApp;
    let token: string;
    let second: (path: string, init: RequestInit) => Response | Promise<Response>;
    let n = 0;

    beforeAll(async () => {
      const db = await target.migrated();
      t = await createTestApp({ store: db.open() });
      token = await t.token();
      // Another server on the same database, as a second process of CINDER_PROCESSES runs it.
      second = await secondServer(t, () => db.open());
    });
    afterAll(() => t.close());

    const servers = () => [t.request, second];
    async function patient(): Promise<string> {
      const id = `cp${++n}`;
      const res = await t.request(`${t.fhir()}/Patient/${id}`, fhirInit(token, 'PUT', {
        resourceType: 'Patient', id, identifier: [{ system: 'urn:cp', value: id }], name: [{ family: 'Chalmers', given: ['Peter'] }, { family: 'Windsor', given: ['W'] }],
      }));
      expect(res.status).toBe(201);
      return id;
    }
    const read = async (id: string): Promise<Json> => (await (await t.request(`${t.fhir()}/Patient/${id}`, fhirInit(token))).json()) as Json;
    const addGiven = (on: number, path: string, given: string, headers: Record<string, string> = {}) =>
      servers()[on]!(`${t.fhir()}/${path}`, fhirInit(token, 'PATCH', JSON.stringify([{ op: 'add', path: '/name/0/given/-', value: given }]), { ...JSON_PATCH, ...headers }));

    test('8 JSON Patches of one resource at once: each is applied, in some order, to the version it meets', async () => {
      const id = await patient();
      const given = Array.from({ length: 8 }, (_, i) => `G${i}`);
      const answers = await Promise.all(given.map((g) => addGiven(0, `Patient/${id}`, g)));
      expect(answers.map((r) => r.status)).toEqual(given.map(() => 200));
      const stored = await read(id);
      expect(stored.meta.versionId).toBe('9');
      expect(stored.name[0].given[0]).toBe('Peter');
      expect([...stored.name[0].given.slice(1)].sort()).toEqual(given);
    });

    test('FHIRPath and conditional patches at once, on two servers sharing the database: none is lost or refused', async () => {
      for (let round = 0; round < 3; round++) {
        const id = await patient();
        const given = Array.from({ length: 8 }, (_, i) => `R${round}G${i}`);
        const answers = await Promise.all(given.map((g, i) => {
          if (i % 4 === 1) return addGiven(i % 2, `Patient?identifier=urn:cp|${id}`, g);
          if (i % 4 !== 3) return addGiven(i % 2, `Patient/${id}`, g);
          const op = { name: 'operation', part: [{ name: 'type', valueCode: 'add' }, { name: 'path', valueString: 'Patient.name[0]' }, { name: 'name', valueString: 'given' }, { name: 'value', valueString: g }] };
          return servers()[i % 2]!(`${t.fhir()}/Patient/${id}`, fhirInit(token, 'PATCH', { resourceType: 'Parameters', parameter: [op] }));
        }));
        expect(answers.map((r) => r.status)).toEqual(given.map(() => 200));
        const stored = await read(id);
        expect(stored.meta.versionId).toBe('9');
        expect([...stored.name[0].given.slice(1)].sort()).toEqual(given);
      }
    });

    test('with If-Match of one version: one patch is applied, the others are 412 and write nothing', async () => {
      const id = await patient();
      const answers = await Promise.all(['A', 'B', 'C', 'D'].map((g, i) => addGiven(i % 2, `Patient/${id}`, g, { 'If-Match': 'W/"1"' })));
      expect(answers.map((r) => r.status).sort()).toEqual([200, 412, 412, 412]);
      expect((await read(id)).meta.versionId).toBe('2');
    });
  });
}

/**
 * A REST patch that keeps losing its race (another write lands between its read and its write on every
 * attempt, run deterministically from the store's read) stops after PATCH_ATTEMPTS: 409 when the client's
 * If-Match still holds on the version that won (`*`, or a list naming it), as without If-Match and as an
 * update (which locks the row, so `*` never fails it) or a transaction's PATCH entry answers; 412 only when
 * it no longer holds.
 */
for (const target of targets) {
  describe(`a PATCH that loses every race (${target.kind})`, () => {
    let t: TestApp;
    let token: string;
    /** Writes of the resource to run, one right after each read of it by id. */
    let racing: { id: string; left: number; deleteLast?: boolean } | undefined;
    let n = 0;

    beforeAll(async () => {
      const store = (await target.migrated()).open();
      const resources: Store['resources'] = Object.create(store.resources);
      resources.read = async (tenant, type, id) => {
        const row = await store.resources.read(tenant, type, id);
        if (racing?.id === id && racing.left > 0) {
          racing.left--;
          const res = racing.left === 0 && racing.deleteLast
            ? await t.request(`${t.fhir()}/Patient/${id}`, fhirInit(token, 'DELETE'))
            : await t.request(`${t.fhir()}/Patient/${id}`, fhirInit(token, 'PUT', { ...body(id, '2000-01-01'), multipleBirthInteger: racing.left }));
          expect(res.status).toBe(200);
        }
        return row;
      };
      t = await createTestApp({ store: Object.create(store, { resources: { value: resources } }) as Store });
      token = await t.token();
    });
    afterAll(() => t.close());

    const body = (id: string, birthDate: string) => ({ resourceType: 'Patient', id, birthDate });
    async function patient(): Promise<string> {
      const id = `lost${++n}`;
      expect((await t.request(`${t.fhir()}/Patient/${id}`, fhirInit(token, 'PUT', body(id, '2000-01-01')))).status).toBe(201);
      return id;
    }
    const setGender = (id: string, headers: Record<string, string>) => t.request(`${t.fhir()}/Patient/${id}`,
      fhirInit(token, 'PATCH', JSON.stringify([{ op: 'add', path: '/gender', value: 'female' }]), { ...JSON_PATCH, ...headers }));
    /** Patches `id` with a write racing each of its 5 attempts; returns the status, the outcome's code and the version then current. */
    async function lost(headers: Record<string, string>, deleteLast = false): Promise<[number, string, string]> {
      const id = await patient();
      racing = { id, left: 5, deleteLast };
      const res = await setGender(id, headers);
      racing = undefined;
      const history = (await (await t.request(`${t.fhir()}/Patient/${id}/_history`, fhirInit(token))).json()) as Json;
      expect(history.entry.some((e: Json) => e.resource?.gender !== undefined)).toBe(false);
      return [res.status, ((await res.json()) as Json).issue[0].code, history.entry[0].response?.etag ?? history.entry[0].resource.meta.versionId];
    }

    test('If-Match: * held on every version: 409, as without If-Match', async () => {
      expect(await lost({ 'If-Match': '*' })).toEqual([409, 'conflict', 'W/"6"']);
      expect(await lost({})).toEqual([409, 'conflict', 'W/"6"']);
    });

    test('a list naming the version that won the last race: 409; a list it no longer names: 412', async () => {
      expect(await lost({ 'If-Match': 'W/"1", W/"2", W/"3", W/"4", W/"5", W/"6"' })).toEqual([409, 'conflict', 'W/"6"']);
      expect(await lost({ 'If-Match': 'W/"1", W/"2", W/"3", W/"4", W/"5"' })).toEqual([412, 'conflict', 'W/"6"']);
    });

    test('the last race lost to a delete: 410, as the next attempt would find it, with If-Match: * or without', async () => {
      expect(await lost({ 'If-Match': '*' }, true)).toEqual([410, 'deleted', 'W/"6"']);
      expect(await lost({}, true)).toEqual([410, 'deleted', 'W/"6"']);
    });

    test("a transaction's and a batch's PATCH entry with ifMatch * that lose every race: 409, as REST PATCH", async () => {
      for (const type of ['transaction', 'batch']) {
        const id = await patient();
        // More writes than the Bundle's attempts: each attempt's plan reads the Patient and loses to the next.
        racing = { id, left: 50 };
        const entry = {
          resource: { resourceType: 'Binary', contentType: 'application/json-patch+json', data: Buffer.from(JSON.stringify([{ op: 'add', path: '/gender', value: 'female' }])).toString('base64') },
          request: { method: 'PATCH', url: `Patient/${id}`, ifMatch: '*' },
        };
        const res = await t.request(t.fhir(), fhirInit(token, 'POST', { resourceType: 'Bundle', type, entry: [entry] }));
        racing = undefined;
        const answer = (await res.json()) as Json;
        if (type === 'transaction') expect([res.status, answer.issue[0].code]).toEqual([409, 'conflict']);
        else expect([res.status, answer.entry[0].response.status]).toEqual([200, '409 Conflict']);
        expect(((await (await t.request(`${t.fhir()}/Patient/${id}`, fhirInit(token))).json()) as Json).gender).toBeUndefined();
      }
    });

    test('one race lost, the next attempt patches the version that won it', async () => {
      const id = await patient();
      racing = { id, left: 1 };
      const res = await setGender(id, { 'If-Match': '*' });
      expect([res.status, ((await res.json()) as Json).meta.versionId]).toEqual([200, '3']);
    });
  });
}
