/**
 * Topic discovery in the CapabilityStatement (R5 Backport IG 1.1.0, R4): Subscription's entry names the
 * backport-subscription profile and, one capabilitystatement-subscriptiontopic-canonical extension each, the
 * canonical URLs of the tenant's active SubscriptionTopics, as the next `metadata` after a write shows them,
 * and another server on the database within 250 ms. On both databases.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CHECK_INTERVAL_MS } from '../../src/fhir/subscriptions/hub.ts';
import { validateResource } from '../../src/fhir/validation/validate.ts';
import { createTestApp, fhirInit, secondServer, type TestApp } from '../helpers/app.ts';
import { createCliEnv } from '../helpers/cli.ts';
import type { Json } from '../helpers/fhir.ts';
import { storeTargets, type StoreDatabase } from '../helpers/stores.ts';

const X5 = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.';
const PROFILE = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/backport-subscription';
const CANONICAL = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/capabilitystatement-subscriptiontopic-canonical';
const SERVER_R4 = 'http://hl7.org/fhir/uv/subscriptions-backport/CapabilityStatement/backport-subscription-server-r4';

/** A SubscriptionTopic as the IG stores one in R4: a Basic, its status a modifierExtension. */
function topic(url: string, status?: string, version?: string, extra: Json[] = []): Json {
  return {
    resourceType: 'Basic',
    code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
    ...(status !== undefined && { modifierExtension: [{ url: `${X5}status`, valueCode: status }] }),
    extension: [
      { url: `${X5}url`, valueUri: url },
      ...(version !== undefined ? [{ url: `${X5}version`, valueString: version }] : []),
      { url: `${X5}resourceTrigger`, extension: [{ url: 'resource', valueUri: 'Encounter' }] },
      ...extra,
    ],
  };
}

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((x) => x.cleanup())), 60_000);

for (const target of targets) {
  describe(`CapabilityStatement topic discovery (${target.kind})`, () => {
    let t: TestApp;
    let token: string;
    let database: StoreDatabase;
    const call = (method: string, path: string, body?: unknown) => t.request(`${t.fhir()}/${path}`, fhirInit(token, method, body));
    const created = async (body: Json) => {
      const res = await call('POST', 'Basic', body);
      expect(res.status).toBe(201);
      return (await res.json()) as Json;
    };
    /** Deletes every topic of t1. */
    const clear = async () => {
      const found = (await (await call('GET', 'Basic?code=SubscriptionTopic&_count=100')).json()) as Json;
      for (const e of (found.entry ?? []) as Json[]) expect((await call('DELETE', `Basic/${e.resource.id}`)).status).toBe(200);
    };
    /** The statement as a client without a token reads it. */
    const metadata = async (query = '', request: (path: string, init: RequestInit) => Response | Promise<Response> = (p, i) => t.request(p, i), tenant = 't1') => {
      const res = await request(`${t.fhir(tenant)}/metadata${query}`, {});
      expect(res.status).toBe(200);
      return (await res.json()) as Json;
    };
    const subscriptionEntry = (cs: Json) => (cs.rest[0].resource as Json[]).find((r) => r.type === 'Subscription')!;
    /** The canonicals the statement lists, or undefined when Subscription's entry has no extension at all. */
    const listed = (cs: Json) => (subscriptionEntry(cs).extension as Json[] | undefined)?.map((e) => {
      expect(e.url).toBe(CANONICAL);
      return e.valueCanonical as string;
    });

    beforeAll(async () => {
      database = await target.migrated();
      const store = database.open();
      await store.migrate();
      t = await createTestApp({ store });
      token = await t.token();
    });
    afterEach(() => clear());
    afterAll(() => t.close());

    test('Subscription\'s entry names the backport-subscription profile, and no topic while the tenant has none', async () => {
      const cs = await metadata();
      expect(cs.instantiates).toContain(SERVER_R4);
      expect(subscriptionEntry(cs).supportedProfile).toEqual([PROFILE]);
      expect(subscriptionEntry(cs).extension).toBeUndefined();
      // No other entry has a profile or an extension.
      expect((cs.rest[0].resource as Json[]).filter((r) => r.supportedProfile || r.extension).map((r) => r.type)).toEqual(['Subscription']);
    });

    test('each active topic\'s url is listed, sorted, as the next metadata after its create, update or delete shows it; draft and retired ones are not', async () => {
      const a = await created(topic('http://example.org/topics/a', 'active'));
      expect(listed(await metadata())).toEqual(['http://example.org/topics/a']);
      const b = await created(topic('http://example.org/topics/0-b', 'draft'));
      await created(topic('http://example.org/topics/c'));
      expect(listed(await metadata())).toEqual(['http://example.org/topics/a']);
      expect((await call('PUT', `Basic/${b.id}`, { ...topic('http://example.org/topics/0-b', 'active'), id: b.id })).status).toBe(200);
      expect(listed(await metadata())).toEqual(['http://example.org/topics/0-b', 'http://example.org/topics/a']);
      expect((await call('PUT', `Basic/${a.id}`, { ...topic('http://example.org/topics/a', 'retired'), id: a.id })).status).toBe(200);
      expect(listed(await metadata())).toEqual(['http://example.org/topics/0-b']);
      expect((await call('DELETE', `Basic/${b.id}`)).status).toBe(200);
      expect(listed(await metadata())).toBeUndefined();
      // A transaction's topic, and a topic's status as a plain extension.
      const bundle = {
        resourceType: 'Bundle', type: 'transaction',
        entry: [{ request: { method: 'POST', url: 'Basic' }, resource: topic('urn:uuid:7d0c5b58-0fb6-4c47-9f4c-2a3a4bfc8d21', undefined, undefined, [{ url: `${X5}status`, valueCode: 'active' }]) }],
      };
      expect((await call('POST', '', bundle)).status).toBe(200);
      expect(listed(await metadata())).toEqual(['urn:uuid:7d0c5b58-0fb6-4c47-9f4c-2a3a4bfc8d21']);
      // Another tenant's statement lists its own topics: none.
      await t.tokenFor('t2', ['system/*.read']);
      expect(listed(await metadata('', undefined, 't2'))).toBeUndefined();
      await clear();
      expect(listed(await metadata())).toBeUndefined();
    });

    test('a versioned topic is listed as url|version too; a url two active topics share as url|version alone, the canonical a Subscription names either by', async () => {
      const one = await created(topic('http://example.org/topics/v', 'active', '1'));
      const two = await created(topic('http://example.org/topics/v', 'active', '2'));
      expect(listed(await metadata())).toEqual(['http://example.org/topics/v|1', 'http://example.org/topics/v|2']);
      // Once the other is retired, the url alone names the one left, as does url|version still.
      expect((await call('PUT', `Basic/${two.id}`, { ...topic('http://example.org/topics/v', 'retired', '2'), id: two.id })).status).toBe(200);
      expect(listed(await metadata())).toEqual(['http://example.org/topics/v', 'http://example.org/topics/v|1']);
      // A draft of that url changes nothing: a Subscription may name active topics alone.
      await created(topic('http://example.org/topics/v', 'draft', '3'));
      expect(listed(await metadata())).toEqual(['http://example.org/topics/v', 'http://example.org/topics/v|1']);
    });

    test('the statement with topics is valid R4; _summary=true leaves them out with the other extensions, _summary=data and XML keep them', async () => {
      const url = 'http://example.org/topics/shapes';
      await created(topic(url, 'active'));
      const cs = await metadata();
      expect(subscriptionEntry(cs).extension).toEqual([{ url: CANONICAL, valueCanonical: url }]);
      expect(validateResource(cs, 'strict').filter((i) => i.severity === 'error')).toEqual([]);
      for (let round = 0; round < 2; round++) {
        const summary = subscriptionEntry(await metadata('?_summary=true'));
        expect(summary.extension).toBeUndefined();
        expect(summary.supportedProfile).toEqual([PROFILE]);
        expect(listed(await metadata('?_summary=data'))).toEqual([url]);
      }
      const xml = await (await t.request(`${t.fhir()}/metadata`, { headers: { Accept: 'application/fhir+xml' } })).text();
      expect(xml).toContain(`<extension url="${CANONICAL}"><valueCanonical value="${url}"/></extension>`);
      expect(xml).toContain(`<supportedProfile value="${PROFILE}"/>`);
    });

    test('another server on the database (CINDER_PROCESSES=2) shows a topic written through the first within 250 ms', async () => {
      const second = await secondServer(t, () => database.open());
      expect(listed(await metadata('', second))).toBeUndefined();
      const made = await created(topic('http://example.org/topics/elsewhere', 'active'));
      t.clock.advance(CHECK_INTERVAL_MS);
      expect(listed(await metadata('', second))).toEqual(['http://example.org/topics/elsewhere']);
      expect((await call('DELETE', `Basic/${made.id}`)).status).toBe(200);
      t.clock.advance(CHECK_INTERVAL_MS);
      expect(listed(await metadata('', second))).toBeUndefined();
    });

    test('a topic stored by cinder import that does not parse is not listed; one that parses is', async () => {
      const cli = createCliEnv({ CINDER_DATABASE_URL: database.url });
      try {
        const file = join(cli.dir, 'topics.ndjson');
        const unparseable = topic('http://example.org/topics/unparseable', 'active', undefined, [{ url: `${X5}eventTrigger`, extension: [{ url: 'description', valueMarkdown: 'x' }] }]);
        writeFileSync(file, [unparseable, topic('http://example.org/topics/imported', 'active')].map((r) => JSON.stringify(r)).join('\n') + '\n');
        const run = await cli.run(['import', '--tenant', 't1', file]);
        expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
        t.clock.advance(CHECK_INTERVAL_MS);
        expect((await (await call('GET', 'Basic?code=SubscriptionTopic&_summary=count')).json() as Json).total).toBe(2);
        expect(listed(await metadata())).toEqual(['http://example.org/topics/imported']);
      } finally {
        cli.close();
      }
    });

    test('metadata answers 200 when the topics cannot be read, listing the last ones read', async () => {
      const store = (await target.migrated()).open();
      await store.migrate();
      let failing = false;
      const changeToken = store.resources.changeToken.bind(store.resources);
      const flaky = { ...store, resources: { ...store.resources, changeToken: (tenant: string, types: string[]) => (failing ? Promise.reject(new Error('database gone')) : changeToken(tenant, types)) } };
      const other = await createTestApp({ store: flaky });
      try {
        const tok = await other.token();
        expect((await other.request(`${other.fhir()}/Basic`, fhirInit(tok, 'POST', topic('http://example.org/topics/kept', 'active')))).status).toBe(201);
        expect(listed(await metadata('', (p, i) => other.request(p, i)))).toEqual(['http://example.org/topics/kept']);
        failing = true;
        other.clock.advance(CHECK_INTERVAL_MS);
        expect(listed(await metadata('', (p, i) => other.request(p, i)))).toEqual(['http://example.org/topics/kept']);
        failing = false;
        other.clock.advance(CHECK_INTERVAL_MS);
        expect(listed(await metadata('', (p, i) => other.request(p, i)))).toEqual(['http://example.org/topics/kept']);
      } finally {
        await other.close();
      }
    });
  });
}
