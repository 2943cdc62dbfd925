/**
 * Writes and imports that need only part of what is stored of a large resource read no more of it: a topic-based
 * Subscription's matching reads the version a write replaced only for a test of it (queryCriteria.previous, a
 * fhirPathCriteria naming `%previous`, a deletion it takes); a DELETE reads the version it deletes only for a
 * SubscriptionTopic; `$import` tells a refused line that changes a large resource, or an AuditEvent it may not change,
 * by the stored text's length, and keeps one equal to it by the version it found, reading the text once. On both
 * databases, through the REST API and `$import`; the stored texts of MiBs the store hands out are counted (a work
 * count, not a timing), and what is matched, recorded and kept is asserted as before.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import type { Json } from '../helpers/fhir.ts';
import { putVersion } from '../../src/fhir/crud.ts';
import { operatorAccess } from '../../src/fhir/access.ts';
import type { Resource } from '../../src/fhir/resource.ts';
import type { ResourceRepo, ResourceWriter, Store } from '../../src/store/types.ts';

/** Base64 of `n` bytes that repeat nowhere within a MiB (a multiple of 3: no padding). */
function base64(n: number, seed: number): string {
  const bytes = new Uint8Array(n);
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    bytes[i] = x >>> 24;
  }
  return Buffer.from(bytes).toString('base64');
}

const DATA = base64(1536 * 1024, 11);
/** A stored text at least this long is one of the large resources (2 MiB of base64 in each). */
const LARGE = 1 << 20;

const document = (id: string, status: string, data = DATA): Json => ({
  resourceType: 'DocumentReference', id, status,
  subject: { display: 'Peter Chalmers' },
  content: [{ attachment: { contentType: 'application/pdf', title: 'discharge summary', data } }],
});

const X5 = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.';
const BP = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/';
const sub = (url: string, value: Json) => ({ url, ...value });

/** A SubscriptionTopic (as Basic) on DocumentReference with these interactions and trigger parts. */
function topic(url: string, interactions: string[], trigger: Json[] = []): Json {
  return {
    resourceType: 'Basic',
    code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
    extension: [
      { url: `${X5}url`, valueUri: url },
      {
        url: `${X5}resourceTrigger`,
        extension: [sub('resource', { valueUri: 'DocumentReference' }), ...interactions.map((i) => sub('supportedInteraction', { valueCode: i })), ...trigger],
      },
      { url: `${X5}canFilterBy`, extension: [sub('resource', { valueUri: 'DocumentReference' }), sub('filterParameter', { valueString: 'status' })] },
      { url: `${X5}status`, valueCode: 'active' },
    ],
  };
}

/** Legacy data strict validation refuses (gender outside its required binding), with a photo of MiBs. */
const legacy = (id: string, family = 'Legacy'): Json => ({
  resourceType: 'Patient', id, gender: 'banana', name: [{ family }], photo: [{ contentType: 'image/png', data: DATA }],
});
/** An AuditEvent whose entity.query holds MiBs of base64. */
const audit = (id: string, outcome = '0'): Json => ({
  resourceType: 'AuditEvent', id, recorded: '2026-01-01T00:00:00Z', outcome,
  type: { system: 'http://terminology.hl7.org/CodeSystem/audit-event-type', code: 'rest' },
  agent: [{ requestor: true, who: { display: 'importer' } }],
  source: { observer: { display: 'archive' } },
  entity: [{ what: { display: 'a search' }, query: DATA }],
});

await eachStore((kind, fresh) => {
  describe(`large stored texts read only where needed (${kind})`, () => {
    let t: TestApp;
    let token: string;
    /** How many stored texts of LARGE characters or more the store handed out while counting. */
    const reads = { large: 0 };
    const note = (content: string | undefined) => {
      if (content !== undefined && content.length >= LARGE) reads.large++;
    };
    const counted = (store: Store): Store => {
      const resources: ResourceRepo = Object.create(store.resources);
      resources.read = async (tenant, type, id) => {
        const v = await store.resources.read(tenant, type, id);
        note(v?.content);
        return v;
      };
      resources.measured = async (tenant, type, id) => {
        const v = await store.resources.measured(tenant, type, id);
        note(v?.content);
        return v;
      };
      resources.write = (tenant, fn) => store.resources.write(tenant, (w) => {
        const counting: ResourceWriter = {
          ...w,
          current: async (type, id) => {
            const v = await w.current(type, id);
            note(v?.content);
            return v;
          },
          measured: async (type, id) => {
            const v = await w.measured(type, id);
            note(v?.content);
            return v;
          },
          vread: async (type, id, versionId) => {
            const v = await w.vread(type, id, versionId);
            note(v?.content);
            return v;
          },
          search: async (query) => {
            const found = await w.search(query);
            for (const v of found) note(v.content);
            return found;
          },
        };
        return fn(counting);
      });
      return new Proxy(store, { get: (target, key) => (key === 'resources' ? resources : Reflect.get(target, key)) });
    };
    /** The large texts read while `fn` runs (its responses' bodies read). */
    const largeReads = async (fn: () => Promise<unknown>): Promise<number> => {
      reads.large = 0;
      await fn();
      return reads.large;
    };

    const hook = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: async (req) => (await req.arrayBuffer(), new Response(null, { status: 200 })) });
    let file = '';
    const source = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response(file) });
    const call = async (method: string, path: string, body?: unknown, want?: number): Promise<Json> => {
      const res = await t.request(`${t.fhir()}/${path}`, fhirInit(token, method, body));
      const text = await res.text();
      if (want !== undefined) expect({ status: res.status, body: res.status === want ? '' : text.slice(0, 500) }).toEqual({ status: want, body: '' });
      return text ? (JSON.parse(text) as Json) : {};
    };
    const drain = async () => {
      for (let i = 0; i < 50 && (await t.app.subscriptions.runOnce()) > 0; i++);
    };
    /** An active rest-hook Subscription to topic `url`, with `filters` (`DocumentReference?status=...`). */
    const subscribe = async (url: string, filters: string[] = []): Promise<string> => {
      const created = await call('POST', 'Subscription', {
        resourceType: 'Subscription', status: 'requested', reason: 'test', criteria: url,
        ...(filters.length && { _criteria: { extension: filters.map((f) => ({ url: `${BP}backport-filter-criteria`, valueString: f })) } }),
        channel: { type: 'rest-hook', endpoint: `http://127.0.0.1:${hook.port}/hook`, payload: 'application/fhir+json', _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: 'id-only' }] } },
      }, 201);
      await drain();
      expect((await call('GET', `Subscription/${created.id}`)).status).toBe('active');
      return created.id as string;
    };
    const off = async (id: string) => {
      const current = await call('GET', `Subscription/${id}`);
      await call('PUT', `Subscription/${id}`, { ...current, status: 'off' }, 200);
      await drain();
    };
    /** The focus of each event recorded for Subscription `id`, in order (`DocumentReference/x`, or '' for none). */
    const events = async (id: string): Promise<string[]> => {
      const bundle = await call('GET', `Subscription/${id}/$events?content=id-only`, undefined, 200);
      const status = (bundle.entry as Json[])[0]!.resource as Json;
      return (status.parameter as Json[]).filter((p) => p.name === 'notification-event')
        .map((p) => ((p.part as Json[]).find((x) => x.name === 'focus')?.valueReference as Json | undefined)?.reference?.replace(`${t.fhir()}/`, '') ?? '');
    };

    beforeAll(async () => {
      t = await createTestApp({ store: counted(await fresh()), env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true', CINDER_IMPORT_ALLOW_PRIVATE: 'true' } });
      token = await t.token();
    });
    afterAll(async () => {
      await t.app.imports.stop();
      hook.stop(true);
      source.stop(true);
      await t.close();
    });

    test('an update of a large resource a topic watches reads nothing of the version it replaces, and a DELETE no trigger takes reads nothing of it', async () => {
      await call('POST', 'Basic', topic('http://example.org/topics/documents', ['create', 'update']), 201);
      const s = await subscribe('http://example.org/topics/documents');
      await call('PUT', 'DocumentReference/big1', document('big1', 'current'), 201);
      // Another length: the update's own lookup measures the stored text, and the topic's interaction needs no more.
      expect(await largeReads(() => call('PUT', 'DocumentReference/big1', document('big1', 'superseded'), 200))).toBe(0);
      expect(await largeReads(() => call('DELETE', 'DocumentReference/big1', undefined, 200))).toBe(0);
      expect(await events(s)).toEqual(['DocumentReference/big1', 'DocumentReference/big1']);
      // The same text again is read to be compared, and is no event.
      await call('PUT', 'DocumentReference/big1', document('big1', 'current'), 201);
      expect(await largeReads(() => call('PUT', 'DocumentReference/big1', document('big1', 'current'), 200))).toBe(1);
      expect(await events(s)).toHaveLength(3);
      await off(s);
      // With no Subscription at all, a DELETE reads nothing of what it deletes either.
      expect(await largeReads(() => call('DELETE', 'DocumentReference/big1', undefined, 200))).toBe(0);
      expect((await t.request(`${t.fhir()}/DocumentReference/big1`, fhirInit(token))).status).toBe(410);
    });

    test('a fhirPathCriteria reads the version replaced only when it names %previous, and matches as before', async () => {
      await call('POST', 'Basic', topic('http://example.org/topics/superseded-now', ['update'], [sub('fhirPathCriteria', { valueString: "%current.status = 'superseded'" })]), 201);
      await call('POST', 'Basic', topic('http://example.org/topics/superseded-from-current', ['update'], [sub('fhirPathCriteria', { valueString: "%previous.status = 'current' and %current.status = 'superseded'" })]), 201);
      await call('PUT', 'DocumentReference/big2', document('big2', 'current'), 201);
      await call('PUT', 'DocumentReference/big3', document('big3', 'entered-in-error'), 201);
      const now = await subscribe('http://example.org/topics/superseded-now');
      expect(await largeReads(() => call('PUT', 'DocumentReference/big2', document('big2', 'superseded'), 200))).toBe(0);
      expect(await events(now)).toEqual(['DocumentReference/big2']);
      await off(now);
      const from = await subscribe('http://example.org/topics/superseded-from-current');
      // Read once here (the version replaced, for %previous), though two Subscriptions' triggers evaluate it.
      const second = await subscribe('http://example.org/topics/superseded-from-current');
      await call('PUT', 'DocumentReference/big2', document('big2', 'current'), 200);
      expect(await largeReads(() => call('PUT', 'DocumentReference/big2', document('big2', 'superseded'), 200))).toBe(1);
      await call('PUT', 'DocumentReference/big3', document('big3', 'superseded'), 200);
      expect(await events(from)).toEqual(['DocumentReference/big2']);
      expect(await events(second)).toEqual(['DocumentReference/big2']);
      await off(from);
      await off(second);
    });

    test("queryCriteria.previous and a deletion a trigger takes are matched on the version replaced, read in the write's transaction", async () => {
      await call('POST', 'Basic', topic('http://example.org/topics/retired', ['update'], [{
        url: 'queryCriteria',
        extension: [sub('previous', { valueString: 'status=current' }), sub('current', { valueString: 'status=superseded' }), sub('requireBoth', { valueBoolean: true })],
      }]), 201);
      await call('POST', 'Basic', topic('http://example.org/topics/removed', ['delete']), 201);
      await call('PUT', 'DocumentReference/big4', document('big4', 'current'), 201);
      await call('PUT', 'DocumentReference/big5', document('big5', 'entered-in-error'), 201);
      const retired = await subscribe('http://example.org/topics/retired');
      const removed = await subscribe('http://example.org/topics/removed', ['DocumentReference?status=current']);
      expect(await largeReads(() => call('PUT', 'DocumentReference/big4', document('big4', 'superseded'), 200))).toBe(1);
      await call('PUT', 'DocumentReference/big5', document('big5', 'superseded'), 200);
      expect(await events(retired)).toEqual(['DocumentReference/big4']);
      await call('PUT', 'DocumentReference/big4', document('big4', 'current'), 200);
      // A deletion is matched on the version it deleted (its status filter): that of big4 only.
      expect(await largeReads(() => call('DELETE', 'DocumentReference/big4', undefined, 200))).toBe(1);
      await call('DELETE', 'DocumentReference/big5', undefined, 200);
      expect((await events(removed)).length).toBe(1);
      await off(retired);
      await off(removed);
    });

    const runImport = async (type: string, lines: Json[]): Promise<Json> => {
      file = lines.map((r) => JSON.stringify(r)).join('\n') + '\n';
      const kick = await t.request(`${t.fhir()}/$import`, fhirInit(token, 'POST', {
        resourceType: 'Parameters',
        parameter: [
          { name: 'inputFormat', valueCode: 'application/fhir+ndjson' },
          { name: 'input', part: [{ name: 'type', valueCode: type }, { name: 'url', valueUri: `http://127.0.0.1:${source.port}/${type}.ndjson` }] },
        ],
      }));
      expect(kick.status).toBe(202);
      await t.app.imports.runOnce();
      return (await (await t.request(kick.headers.get('content-location')!, fhirInit(token))).json()) as Json;
    };

    test('$import reads a large stored resource once for a refused line equal to it, and not at all for one that changes it', async () => {
      await t.store.resources.write('t1', async (w) => {
        for (const id of ['lp1', 'lp2']) await putVersion(w, legacy(id) as unknown as Resource, id, { now: t.clock.now(), access: operatorAccess }, 'PUT');
      });
      let status: Json = {};
      // Before: the line equal to its stored version was read before it was queued and again in its batch, the changed one once.
      expect(await largeReads(async () => (status = await runImport('Patient', [legacy('lp1'), legacy('lp2', 'Changed')])))).toBe(1);
      expect(status.output).toEqual([expect.objectContaining({ count: 1, unchanged: 1 })]);
      const issues = (status.error as Json[])[0]!.outcome.issue as Json[];
      expect(issues.map((i) => [i.severity, i.location[0]])).toEqual([['error', 'Line[2]'], ['information', 'Line[1]'], ['warning', 'Line[1]']]);
      for (const id of ['lp1', 'lp2']) expect((await t.store.resources.read('t1', 'Patient', id))!.versionId).toBe(1);
    });

    test('$import refuses a line changing a large stored AuditEvent without reading it, and keeps one equal to it', async () => {
      await t.store.resources.write('t1', (w) => putVersion(w, audit('la1') as unknown as Resource, 'la1', { now: t.clock.now(), access: operatorAccess }, 'PUT'));
      let status: Json = {};
      expect(await largeReads(async () => (status = await runImport('AuditEvent', [audit('la1', '12')])))).toBe(0);
      expect(status.output).toEqual([expect.objectContaining({ count: 0, unchanged: 0 })]);
      expect((status.error as Json[])[0]!.count).toBe(1);
      expect(JSON.stringify((status.error as Json[])[0]!.outcome)).toContain('the audit trail is append-only');
      // The same AuditEvent again is read to be compared, and kept.
      status = await runImport('AuditEvent', [audit('la1')]);
      expect(status.output).toEqual([expect.objectContaining({ count: 1, unchanged: 1 })]);
      expect((await t.store.resources.read('t1', 'AuditEvent', 'la1'))!.versionId).toBe(1);
    });
  });
});
