/**
 * The profiles a tenant's CapabilityStatement lists (R4 `rest.resource.supportedProfile`, which Inferno's US
 * Core test "Capability Statement lists support for required US Core Profiles" reads): the canonical URL of each
 * of the tenant's StructureDefinitions that constrains a resource type and is not retired, on that type's
 * entry, sorted, beside Subscription's backport profile; as the next `metadata` after a write shows them, and
 * another server on the database (or `cinder import`) within 250 ms. On both databases.
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

const US_CORE = 'http://hl7.org/fhir/us/core/StructureDefinition/';
const BACKPORT = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/backport-subscription';

/** A profile of `type` whose snapshot asks `minPath` to be there (a constraint: what a write claiming it is held to). */
function profile(url: string, type: string, extra: Json = {}, minPath = 'identifier'): Json {
  const el = (path: string, min: number) => ({ id: path, path, short: path, definition: path, min, max: '*', base: { path, min: 0, max: '*' }, isModifier: false, isSummary: false });
  return {
    resourceType: 'StructureDefinition', url, name: 'P', status: 'active', kind: 'resource', abstract: false,
    type, baseDefinition: `http://hl7.org/fhir/StructureDefinition/${type}`, derivation: 'constraint', fhirVersion: '4.0.1',
    snapshot: { element: [el(type, 0), el(`${type}.${minPath}`, 1)] },
    ...extra,
  };
}

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((x) => x.cleanup())), 60_000);

for (const target of targets) {
  describe(`CapabilityStatement supportedProfile (${target.kind})`, () => {
    let t: TestApp;
    let token: string;
    let database: StoreDatabase;
    const call = (method: string, path: string, body?: unknown) => t.request(`${t.fhir()}/${path}`, fhirInit(token, method, body));
    const created = async (body: Json) => {
      const res = await call('POST', 'StructureDefinition', body);
      expect(res.status).toBe(201);
      return (await res.json()) as Json;
    };
    /** The statement as a client without a token reads it. */
    const metadata = async (query = '', tenant = 't1', request: (path: string, init: RequestInit) => Response | Promise<Response> = (p, i) => t.request(p, i)) => {
      const res = await request(`${t.fhir(tenant)}/metadata${query}`, {});
      expect(res.status).toBe(200);
      return (await res.json()) as Json;
    };
    /** Each type's supportedProfile, for the types that have one. */
    const listed = (cs: Json) => Object.fromEntries((cs.rest[0].resource as Json[]).filter((r) => r.supportedProfile !== undefined).map((r) => [r.type, r.supportedProfile]));

    beforeAll(async () => {
      database = await target.migrated();
      const store = database.open();
      await store.migrate();
      t = await createTestApp({ store });
      token = await t.token();
      // A second tenant, with no profile of its own.
      await t.tokenFor('t2', ['system/*.*']);
    });
    afterEach(async () => {
      const found = (await (await call('GET', 'StructureDefinition?_count=100&_elements=id')).json()) as Json;
      for (const e of (found.entry ?? []) as Json[]) expect((await call('DELETE', `StructureDefinition/${e.resource.id}`)).status).toBe(200);
    });
    afterAll(() => t.close());

    test('a tenant holding US Core\'s patient profile lists it on Patient, and enforces it; another tenant lists none but Subscription\'s', async () => {
      expect(listed(await metadata())).toEqual({ Subscription: [BACKPORT] });
      const sd = await created(profile(`${US_CORE}us-core-patient`, 'Patient', { version: '6.1.0' }));
      const cs = await metadata();
      expect(listed(cs)).toEqual({ Patient: [`${US_CORE}us-core-patient`], Subscription: [BACKPORT] });
      // What the statement says is supported is what a write claiming it is held to.
      const claimed = { resourceType: 'Patient', meta: { profile: [`${US_CORE}us-core-patient`] } };
      expect((await call('POST', 'Patient', claimed)).status).toBe(422);
      expect((await call('POST', 'Patient', { ...claimed, identifier: [{ value: '1' }] })).status).toBe(201);
      expect(listed(await metadata('', 't2'))).toEqual({ Subscription: [BACKPORT] });
      expect(validateResource(cs, 'strict').filter((i) => i.severity === 'error')).toEqual([]);
      // Gone with its deletion, in the next metadata.
      expect((await call('DELETE', `StructureDefinition/${sd.id}`)).status).toBe(200);
      expect(listed(await metadata())).toEqual({ Subscription: [BACKPORT] });
    });

    test('profiles are listed sorted and once per url, drafts too; retired ones, other derivations and kinds are not', async () => {
      const ids: string[] = [];
      const make = async (body: Json) => ids.push((await created(body)).id as string);
      await make(profile(`${US_CORE}us-core-observation-lab`, 'Observation', {}, 'status'));
      await make(profile(`${US_CORE}us-core-blood-pressure`, 'Observation', { version: '6.1.0' }, 'status'));
      await make(profile(`${US_CORE}us-core-blood-pressure`, 'Observation', { version: '7.0.0' }, 'status'));
      await make(profile('http://example.org/fhir/StructureDefinition/draft-condition', 'Condition', { status: 'draft' }, 'code'));
      await make(profile('http://example.org/fhir/StructureDefinition/retired-condition', 'Condition', { status: 'retired' }, 'code'));
      await make(profile('http://example.org/fhir/StructureDefinition/my-subscription', 'Subscription', {}, 'reason'));
      // A specialization, a logical model and a profile of a data type constrain no resource type.
      await make(profile('http://example.org/fhir/StructureDefinition/special', 'Patient', { derivation: 'specialization', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/DomainResource' }));
      await make(profile('http://example.org/fhir/StructureDefinition/logical', 'Patient', { kind: 'logical' }));
      await make(profile('http://example.org/fhir/StructureDefinition/my-address', 'Address', { kind: 'complex-type' }, 'city'));
      const cs = await metadata();
      expect(listed(cs)).toEqual({
        Condition: ['http://example.org/fhir/StructureDefinition/draft-condition'],
        Observation: [`${US_CORE}us-core-blood-pressure`, `${US_CORE}us-core-observation-lab`],
        Subscription: ['http://example.org/fhir/StructureDefinition/my-subscription', BACKPORT],
      });
      // A draft retired, and an active one made retired, are no longer listed.
      const draft = (await (await call('GET', `StructureDefinition/${ids[3]}`)).json()) as Json;
      expect((await call('PUT', `StructureDefinition/${ids[3]}`, { ...draft, status: 'retired' })).status).toBe(200);
      const lab = (await (await call('GET', `StructureDefinition/${ids[0]}`)).json()) as Json;
      expect((await call('PUT', `StructureDefinition/${ids[0]}`, { ...lab, status: 'retired' })).status).toBe(200);
      expect(listed(await metadata())).toEqual({
        Observation: [`${US_CORE}us-core-blood-pressure`],
        Subscription: ['http://example.org/fhir/StructureDefinition/my-subscription', BACKPORT],
      });
      for (const id of ids) expect((await call('DELETE', `StructureDefinition/${id}`)).status).toBe(200);
      expect(listed(await metadata())).toEqual({ Subscription: [BACKPORT] });
    });

    test('_summary=true and _elements=rest keep supportedProfile, _elements=format has no rest; XML has it', async () => {
      const sd = await created(profile(`${US_CORE}us-core-patient`, 'Patient'));
      for (let round = 0; round < 2; round++) {
        expect(listed(await metadata('?_summary=true'))).toEqual({ Patient: [`${US_CORE}us-core-patient`], Subscription: [BACKPORT] });
        expect(listed(await metadata('?_elements=rest'))).toEqual({ Patient: [`${US_CORE}us-core-patient`], Subscription: [BACKPORT] });
        expect((await metadata('?_elements=format')).rest).toBeUndefined();
      }
      const xml = await (await t.request(`${t.fhir()}/metadata`, { headers: { Accept: 'application/fhir+xml' } })).text();
      expect(xml).toContain(`<type value="Patient"/><supportedProfile value="${US_CORE}us-core-patient"/>`);
      expect((await call('DELETE', `StructureDefinition/${sd.id}`)).status).toBe(200);
    });

    test('another server on the database (CINDER_PROCESSES=2) shows a profile written through the first within 250 ms', async () => {
      const second = await secondServer(t, () => database.open());
      expect(listed(await metadata('', 't1', second))).toEqual({ Subscription: [BACKPORT] });
      const sd = await created(profile(`${US_CORE}us-core-patient`, 'Patient'));
      t.clock.advance(CHECK_INTERVAL_MS);
      expect(listed(await metadata('', 't1', second))).toEqual({ Patient: [`${US_CORE}us-core-patient`], Subscription: [BACKPORT] });
      expect((await call('DELETE', `StructureDefinition/${sd.id}`)).status).toBe(200);
      t.clock.advance(CHECK_INTERVAL_MS);
      expect(listed(await metadata('', 't1', second))).toEqual({ Subscription: [BACKPORT] });
    });

    test('a profile stored by cinder import is listed within 250 ms', async () => {
      const cli = createCliEnv({ CINDER_DATABASE_URL: database.url });
      try {
        const file = join(cli.dir, 'profiles.ndjson');
        writeFileSync(file, `${JSON.stringify({ ...profile(`${US_CORE}us-core-patient`, 'Patient'), id: 'us-core-patient' })}\n`);
        const run = await cli.run(['import', '--tenant', 't1', file]);
        expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
        t.clock.advance(CHECK_INTERVAL_MS);
        expect(listed(await metadata())).toEqual({ Patient: [`${US_CORE}us-core-patient`], Subscription: [BACKPORT] });
      } finally {
        cli.close();
      }
    });
  });
}
