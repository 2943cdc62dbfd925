/**
 * SMART's JavaScript client (`fhirclient`) making the FHIR calls of an app against Cinder on a real
 * port: its Node build fetches through `cross-fetch`, which it binds when it loads, so it cannot be
 * pointed at `app.request()`. Its `client.create`, `update`, `delete` and `patch` helpers and its
 * `request` options (`pageLimit`, `flat`, `onPage`, `resolveReferences`, `graph`, `includeResponse`),
 * `pages()`, `resources()` and `patient.request` (which reads the CapabilityStatement to pick the
 * patient parameter). The browser tests (test/browser) run its authorization flows; these run the
 * calls they leave out. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import smart from 'fhirclient';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createClient, createTenant } from '../../src/auth/admin.ts';
import { eachStore } from '../helpers/export.ts';
import type { Json } from '../helpers/fhir.ts';
import { startCinder, type Cinder } from '../helpers/server.ts';

type FhirClient = ReturnType<ReturnType<typeof smart>['client']>;

/** An HttpError's status, or the value when the call succeeded. */
const statusOf = (call: Promise<unknown>) => call.then((v) => ({ value: v }), (e: { status?: number }) => ({ status: e.status }));

await eachStore((kind, fresh) => {
  describe(`fhirclient against Cinder (${kind})`, () => {
    let cinder: Cinder;
    let token: Json;
    /** A client of the tenant's FHIR base with the token (and `patient` in its context when given). */
    const client = (patient?: string): FhirClient =>
      smart({} as IncomingMessage, {} as ServerResponse).client({ serverUrl: cinder.fhir('t1'), tokenResponse: { ...token, ...(patient ? { patient } : {}) } });

    beforeAll(async () => {
      const store = await fresh();
      cinder = await startCinder({ store });
      await createTenant(store, cinder.clock, 't1');
      const admin = await createClient(store, cinder.clock, { tenant: 't1', name: 'app', scopes: ['system/*.*'] });
      const res = await fetch(`${cinder.url}/oauth2/token`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: 'Basic ' + btoa(`${admin.client.clientId}:${admin.clientSecret}`) },
        body: 'grant_type=client_credentials',
      });
      token = (await res.json()) as Json;
    });
    afterAll(() => cinder.stop());

    test('create, update with If-Match, patch, delete', async () => {
      const c = client();
      // includeResponse: the 201 with its Location, and the resource as stored.
      const { response, body } = (await c.create({ resourceType: 'Patient', name: [{ family: 'Hopper' }] }, { includeResponse: true })) as unknown as { response: Response; body: Json };
      expect(response.status).toBe(201);
      expect(response.headers.get('location')).toBe(`${cinder.fhir('t1')}/Patient/${body.id}/_history/1`);
      const updated = (await c.update({ ...body, gender: 'female' }, { headers: { 'If-Match': 'W/"1"' } })) as Json;
      expect(updated.meta.versionId).toBe('2');
      expect(await statusOf(c.update({ ...updated, gender: 'male' }, { headers: { 'If-Match': 'W/"1"' } }))).toEqual({ status: 412 });
      // patch() sends `Prefer: return=presentation` (sic): an unknown preference, ignored; the resource comes back.
      const patched = (await c.patch(`Patient/${body.id}`, [{ op: 'add', path: '/active', value: true }])) as Json;
      expect([patched.meta.versionId, patched.active, patched.gender]).toEqual(['3', true, 'female']);
      expect(await statusOf(c.patch(`Patient/${body.id}`, [{ op: 'test', path: '/active', value: false }]))).toEqual({ status: 422 });
      // History, followed page by page as a search is.
      const versions = (await c.request(`Patient/${body.id}/_history?_count=1`, { pageLimit: 0, flat: true })) as Json[];
      expect(versions.map((v) => v.meta.versionId)).toEqual(['3', '2', '1']);
      const deleted = (await c.delete(`Patient/${body.id}`)) as Json;
      expect(deleted.resourceType).toBe('OperationOutcome');
      expect(await statusOf(c.request(`Patient/${body.id}`))).toEqual({ status: 410 });
    });

    test('a create answered without a body (Prefer: return=minimal) is read back from its Location', async () => {
      const c = client();
      const created = (await c.create({ resourceType: 'Patient', active: false }, { headers: { Prefer: 'return=minimal' } })) as Json;
      expect([created.resourceType, created.meta.versionId, created.active]).toEqual(['Patient', '1', false]);
    });

    test('request: pages followed (pageLimit, flat, onPage), pages() and resources(), references resolved', async () => {
      const c = client();
      const p = (await c.create({ resourceType: 'Patient', name: [{ family: 'Paged' }] })) as Json;
      for (let i = 0; i < 5; i++) {
        await c.create({ resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'urn:codes', code: `o${i}` }], text: `o${i}` }, subject: { reference: `Patient/${p.id}` } });
      }
      const query = `Observation?subject=Patient/${p.id}&_sort=code&_count=2`;
      const all = (await c.request(query, { pageLimit: 0, flat: true })) as Json[];
      expect(all.map((o) => o.code.text)).toEqual(['o0', 'o1', 'o2', 'o3', 'o4']);
      expect(((await c.request(query, { pageLimit: 2, flat: true })) as Json[]).map((o) => o.code.text)).toEqual(['o0', 'o1', 'o2', 'o3']);
      const first = (await c.request(query)) as Json;
      expect([first.resourceType, first.entry.length, first.link.some((l: Json) => l.relation === 'next')]).toEqual(['Bundle', 2, true]);
      const sizes: number[] = [];
      await c.request(query, { pageLimit: 0, onPage: (page: Json) => void sizes.push(page.entry.length) });
      expect(sizes).toEqual([2, 2, 1]);
      const pages: number[] = [];
      for await (const page of c.pages(query)) pages.push(page.entry?.length ?? 0);
      expect(pages).toEqual([2, 2, 1]);
      let count = 0;
      for await (const r of c.resources(`${cinder.fhir('t1')}/${query}`)) count += r.resourceType === 'Observation' ? 1 : 0;
      expect(count).toBe(5);

      // resolveReferences: each subject read and mounted in place (graph), or returned beside the data.
      const mounted = (await c.request(query, { flat: true, resolveReferences: 'subject' })) as Json[];
      expect(mounted.map((o) => [o.subject.resourceType, o.subject.id])).toEqual([['Patient', p.id], ['Patient', p.id]]);
      const apart = (await c.request(query, { flat: true, resolveReferences: ['subject'], graph: false })) as { data: Json[]; references: Record<string, Json> };
      expect(apart.data[0]!.subject).toEqual({ reference: `Patient/${p.id}` });
      expect(Object.keys(apart.references)).toEqual([`Patient/${p.id}`]);
    });

    test('patient.request adds the patient parameter the CapabilityStatement names for each type', async () => {
      const c = client();
      const ids: string[] = [];
      for (const family of ['InContext', 'Other']) {
        const p = (await c.create({ resourceType: 'Patient', name: [{ family }] })) as Json;
        ids.push(p.id);
        await c.create({ resourceType: 'Observation', status: 'final', code: { text: family }, subject: { reference: `Patient/${p.id}` } });
        await c.create({ resourceType: 'Condition', subject: { reference: `Patient/${p.id}` }, code: { text: family } });
        await c.create({
          resourceType: 'Encounter', status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
          subject: { reference: `Patient/${p.id}` },
        });
      }
      const inContext = client(ids[0]);
      expect(inContext.patient.id).toBe(ids[0]!);
      expect(((await inContext.patient.read()) as Json).name[0].family).toBe('InContext');
      for (const type of ['Observation', 'Condition', 'Encounter']) {
        const found = (await inContext.patient.request(type, { pageLimit: 0, flat: true })) as Json[];
        expect(found.map((r) => r.subject.reference)).toEqual([`Patient/${ids[0]}`]);
      }
      expect(((await inContext.patient.request('Patient', { flat: true })) as Json[]).map((r) => r.id)).toEqual([ids[0]]);
      expect(await c.getFhirRelease()).toBe(4);
    });
  });
});
