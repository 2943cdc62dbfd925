/**
 * A conditional update or delete acts on the resource its search matched, as that resource was: when
 * another request changes or deletes it between the search and the write, the write must not land on
 * it (bringing a deleted match back, or writing over a resource that no longer matches) but search
 * again. Without that, a conditional update racing a conditional delete and a conditional create of the
 * same identifier left two live resources matching it (seen with CINDER_PROCESSES=2 on both databases).
 * The other request is run deterministically in the window: the store's search is wrapped so that,
 * once armed, it runs that request right after answering the conditional's search.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import type { Json } from '../helpers/fhir.ts';
import type { Store } from '../../src/store/types.ts';

await eachStore((kind, fresh) => {
  describe(`a conditional write whose match changes before it writes (${kind})`, () => {
    let t: TestApp;
    let token: string;
    /** Run once, right after the next search of the store answers. */
    let between: (() => Promise<unknown>) | undefined;
    /** Run once, right after the next read of a resource by id answers. */
    let afterRead: (() => Promise<unknown>) | undefined;

    beforeAll(async () => {
      const store = await fresh();
      const resources: Store['resources'] = Object.create(store.resources);
      resources.search = async (tenant, query) => {
        const rows = await store.resources.search(tenant, query);
        const run = between;
        between = undefined;
        if (run) await run();
        return rows;
      };
      resources.read = async (tenant, type, id) => {
        const row = await store.resources.read(tenant, type, id);
        const run = afterRead;
        afterRead = undefined;
        if (run) await run();
        return row;
      };
      // An own property: the store's may be read-only.
      const wrapped: Store = Object.create(store, { resources: { value: resources } });
      t = await createTestApp({ store: wrapped });
      token = await t.token();
    });
    afterAll(() => t.close());

    const patient = (value: string | undefined, extra: Json = {}) =>
      ({ resourceType: 'Patient', ...(value ? { identifier: [{ system: 'urn:mrn', value }] } : {}), ...extra });
    const call = async (path: string, method = 'GET', body?: unknown, headers: Record<string, string> = {}) => {
      const res = await t.request(`${t.fhir()}/${path}`, fhirInit(token, method, body, headers));
      return { status: res.status, body: (res.status === 204 ? {} : await res.json()) as Json };
    };
    const created = async (value: string) => {
      const r = await call('Patient', 'POST', patient(value));
      expect(r.status).toBe(201);
      return r.body.id as string;
    };
    const matching = async (value: string) => ((await call(`Patient?identifier=urn:mrn|${value}`)).body.entry ?? []).map((e: Json) => e.resource.id as string);

    test('REST conditional update, its match deleted meanwhile: it creates anew, and the deleted match stays deleted', async () => {
      const a = await created('u1');
      between = () => call(`Patient/${a}`, 'DELETE');
      const r = await call('Patient?identifier=urn:mrn|u1', 'PUT', patient('u1', { active: true }));
      expect(r.status).toBe(201);
      expect(r.body.id).not.toBe(a);
      expect((await call(`Patient/${a}`)).status).toBe(410);
      expect(await matching('u1')).toEqual([r.body.id]);
    });

    test('REST conditional update, its match changed to another identifier meanwhile: that resource is not written over', async () => {
      const a = await created('u2');
      between = () => call(`Patient/${a}`, 'PUT', patient('other-u2', { id: a }));
      const r = await call('Patient?identifier=urn:mrn|u2', 'PUT', patient('u2', { active: true }));
      expect(r.status).toBe(201);
      expect(r.body.id).not.toBe(a);
      const kept = await call(`Patient/${a}`);
      expect(kept.body.meta.versionId).toBe('2');
      expect(kept.body.identifier[0].value).toBe('other-u2');
      expect(await matching('u2')).toEqual([r.body.id]);
    });

    test('REST conditional update, its match updated meanwhile but still matching: written over the new version', async () => {
      const a = await created('u3');
      between = () => call(`Patient/${a}`, 'PUT', patient('u3', { id: a, gender: 'female' }));
      const r = await call('Patient?identifier=urn:mrn|u3', 'PUT', patient('u3', { active: true }));
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ id: a, active: true, meta: { versionId: '3' } });
    });

    test("REST conditional update with If-Match: judged against the version the search matched", async () => {
      const a = await created('u4');
      expect((await call('Patient?identifier=urn:mrn|u4', 'PUT', patient('u4', { active: true }), { 'If-Match': 'W/"2"' })).status).toBe(412);
      const r = await call('Patient?identifier=urn:mrn|u4', 'PUT', patient('u4', { active: true }), { 'If-Match': 'W/"1"' });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ id: a, meta: { versionId: '2' } });
    });

    test('REST conditional delete, its match changed to another identifier meanwhile: nothing is deleted', async () => {
      const a = await created('d1');
      between = () => call(`Patient/${a}`, 'PUT', patient('other-d1', { id: a }));
      const r = await call('Patient?identifier=urn:mrn|d1', 'DELETE');
      expect(r.status).toBeLessThan(300);
      const kept = await call(`Patient/${a}`);
      expect(kept.status).toBe(200);
      expect(kept.body.meta.versionId).toBe('2');
    });

    test('REST conditional patch, its match changed to another identifier meanwhile: that resource is not patched, and nothing matches now (404)', async () => {
      const a = await created('cp1');
      between = () => call(`Patient/${a}`, 'PUT', patient('other-cp1', { id: a }));
      const jsonPatch = { 'Content-Type': 'application/json-patch+json' };
      const r = await call('Patient?identifier=urn:mrn|cp1', 'PATCH', JSON.stringify([{ op: 'add', path: '/active', value: true }]), jsonPatch);
      expect(r.status).toBe(404);
      const kept = await call(`Patient/${a}`);
      expect(kept.body.meta.versionId).toBe('2');
      expect(kept.body.active).toBeUndefined();
      // Still matching after the other write: patched on the new version.
      const b = await created('cp2');
      between = () => call(`Patient/${b}`, 'PUT', patient('cp2', { id: b, gender: 'other' }));
      const ok = await call('Patient?identifier=urn:mrn|cp2', 'PATCH', JSON.stringify([{ op: 'add', path: '/active', value: true }]), jsonPatch);
      expect(ok.status).toBe(200);
      expect(ok.body).toMatchObject({ id: b, gender: 'other', active: true, meta: { versionId: '3' } });
    });

    test('transaction: a conditional PUT entry whose match was deleted meanwhile creates anew', async () => {
      const a = await created('t1');
      between = () => call(`Patient/${a}`, 'DELETE');
      const r = await call('', 'POST', {
        resourceType: 'Bundle', type: 'transaction',
        entry: [{ resource: patient('t1', { active: true }), request: { method: 'PUT', url: 'Patient?identifier=urn:mrn|t1' } }],
      });
      expect(r.status).toBe(200);
      const entry = r.body.entry[0];
      expect(entry.response.status).toBe('201 Created');
      expect(entry.resource.id).not.toBe(a);
      expect((await call(`Patient/${a}`)).status).toBe(410);
      expect(await matching('t1')).toEqual([entry.resource.id]);
    });

    test('transaction and batch: a conditional DELETE entry whose match changed meanwhile deletes nothing', async () => {
      for (const type of ['transaction', 'batch']) {
        const value = `t2-${type}`;
        const a = await created(value);
        between = () => call(`Patient/${a}`, 'PUT', patient(`other-${value}`, { id: a }));
        const r = await call('', 'POST', { resourceType: 'Bundle', type, entry: [{ request: { method: 'DELETE', url: `Patient?identifier=urn:mrn|${value}` } }] });
        expect(r.status).toBe(200);
        expect(r.body.entry[0].response.status).toMatch(/^2/);
        expect((await call(`Patient/${a}`)).status).toBe(200);
      }
    });

    test('a conditional update matching a core ValueSet the tenant never stored writes the tenant\'s own version of that id, version 2 after the core one (no stored version to hold to)', async () => {
      const url = 'http://hl7.org/fhir/ValueSet/administrative-gender';
      const rest = await call(`ValueSet?url=${url}`, 'PUT', { resourceType: 'ValueSet', url, status: 'draft' });
      expect(rest.status).toBe(201);
      expect(rest.body).toMatchObject({ id: 'administrative-gender', meta: { versionId: '2' } });
      const jurisdiction = 'http://hl7.org/fhir/ValueSet/jurisdiction';
      const r = await call('', 'POST', {
        resourceType: 'Bundle', type: 'transaction',
        entry: [{ resource: { resourceType: 'ValueSet', url: jurisdiction, status: 'draft' }, request: { method: 'PUT', url: `ValueSet?url=${jurisdiction}` } }],
      });
      expect(r.status).toBe(200);
      expect(r.body.entry[0]).toMatchObject({ response: { status: '201 Created' }, resource: { id: 'jurisdiction', status: 'draft' } });
    });

    test("transaction and batch: a PATCH entry whose resource another request changed meanwhile is applied again to the new version, as REST PATCH is (it was a 409)", async () => {
      for (const type of ['transaction', 'batch']) {
        const a = await created(`p-${type}`);
        afterRead = () => call(`Patient/${a}`, 'PUT', patient(`p-${type}`, { id: a, gender: 'female' }));
        const r = await call('', 'POST', {
          resourceType: 'Bundle', type,
          entry: [{
            resource: { resourceType: 'Binary', contentType: 'application/json-patch+json', data: btoa(JSON.stringify([{ op: 'add', path: '/active', value: true }])) },
            request: { method: 'PATCH', url: `Patient/${a}` },
          }],
        });
        expect(r.status).toBe(200);
        expect(r.body.entry[0].response.status).toBe('200 OK');
        const now = await call(`Patient/${a}`);
        expect(now.body).toMatchObject({ gender: 'female', active: true, meta: { versionId: '3' } });
      }
    });

    test("a PATCH entry with ifMatch of the version another request replaced is still the client's 412", async () => {
      const a = await created('p-ifmatch');
      afterRead = () => call(`Patient/${a}`, 'PUT', patient('p-ifmatch', { id: a, gender: 'male' }));
      const r = await call('', 'POST', {
        resourceType: 'Bundle', type: 'transaction',
        entry: [{
          resource: { resourceType: 'Binary', contentType: 'application/json-patch+json', data: btoa(JSON.stringify([{ op: 'add', path: '/active', value: true }])) },
          request: { method: 'PATCH', url: `Patient/${a}`, ifMatch: 'W/"1"' },
        }],
      });
      expect(r.status).toBe(412);
      expect((await call(`Patient/${a}`)).body.meta.versionId).toBe('2');
    });
  });
});
