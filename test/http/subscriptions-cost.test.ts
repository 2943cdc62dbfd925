/**
 * What a write costs a tenant with many Subscriptions whose criteria chain or `_has` (hub.ts match,
 * lookups.ts), on both databases: the linked side a write's resources name is read once for all of them,
 * not once per Subscription inside the write's transaction, and the notifications are exactly those
 * each criteria's search gives, also where the linked side is too large to be matched in memory.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import type { ResourceRepo, Store } from '../../src/store/types.ts';
import { CANDIDATES } from '../../src/fhir/subscriptions/lookups.ts';

const LOINC = 'http://loinc.org';
const SUBS = 20;

await eachStore((kind, fresh) => {
  describe(`Subscriptions with chained and _has criteria (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    /** The types of the store searches run while `counting`, in a write's transaction (ResourceWriter.search) or not. */
    const searched: string[] = [];
    let counting = false;
    const listing = (store: Store): Store => {
      const resources: ResourceRepo = Object.create(store.resources);
      resources.search = (tenant, q) => {
        if (counting) searched.push(q.type);
        return store.resources.search(tenant, q);
      };
      resources.write = (tenant, fn) => store.resources.write(tenant, (w) => fn({
        ...w,
        search: (q) => {
          if (counting) searched.push(q.type);
          return w.search(q);
        },
      }));
      return new Proxy(store, { get: (target, key) => (key === 'resources' ? resources : Reflect.get(target, key)) });
    };
    const subscribe = async (criteria: string) => {
      const res = await api.post('Subscription', { resourceType: 'Subscription', status: 'requested', reason: 'cost', criteria, channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1:9/hook' } });
      expect(res.status).toBe(201);
      return ((await res.json()) as Json).id as string;
    };
    /** The ids of the resources each of `subs` was notified about, by subscription. */
    const notified = async (subs: string[]) => Object.fromEntries(await Promise.all(subs.map(async (id) => [id, (await t.store.subscriptions.pending('t1', id, 1000)).map((n) => n.id)] as const)));
    const obs = (id: string, code: string, extra: Json = {}) => ({ resourceType: 'Observation', id, status: 'final', code: { coding: [{ system: LOINC, code }] }, ...extra });

    beforeAll(async () => {
      t = await createTestApp({ store: listing(await fresh()), env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Patient', id: 'p1', name: [{ family: 'n3' }] });
      await api.put200({ resourceType: 'Patient', id: 'p2', name: [{ family: 'n7' }] });
    }, 60_000);
    afterAll(() => t.close());

    test('a write reads the resources its chains and _has name once for all the Subscriptions, and notifies exactly the matching ones', async () => {
      const chained: string[] = [];
      const has: string[] = [];
      for (let i = 0; i < SUBS; i++) chained.push(await subscribe(`Observation?subject:Patient.name=n${i}`));
      for (let i = 0; i < SUBS; i++) has.push(await subscribe(`Observation?_has:Observation:has-member:code=c${i}`));
      await api.put200(obs('member', 'x', { subject: { reference: 'Patient/p1' } }));
      await api.put200(obs('panel', 'c5', { hasMember: [{ reference: 'Observation/member' }] }));
      // The panel's own write named no Patient: only the member's writes below are counted.
      const before = await notified([...chained, ...has]);
      counting = true;
      await api.put200(obs('member', 'x', { subject: { reference: 'Patient/p1' }, valueString: 'again' }));
      counting = false;
      expect(searched.filter((type) => type === 'Patient')).toHaveLength(1);
      expect(searched.filter((type) => type === 'Observation')).toHaveLength(1);
      const after = await notified([...chained, ...has]);
      const added = Object.fromEntries(Object.entries(after).map(([id, ids]) => [id, ids.length - before[id]!.length]));
      expect(added).toEqual(Object.fromEntries([...chained.map((id, i) => [id, i === 3 ? 1 : 0]), ...has.map((id, i) => [id, i === 5 ? 1 : 0])]));
      searched.length = 0;
    });

    test(`past ${CANDIDATES} resources named by the first condition, each lookup is a search, and still exact`, async () => {
      const many: string[] = [];
      for (let i = 0; i < 3; i++) many.push(await subscribe(`Patient?_has:Observation:subject:code=k${i}`));
      const entry = (resource: Json) => ({ resource, request: { method: 'PUT', url: `Observation/${resource.id}` } });
      const entries = Array.from({ length: CANDIDATES + 1 }, (_, i) => entry(obs(`many${i}`, i === CANDIDATES ? 'k1' : 'other', { subject: { reference: 'Patient/p2' } })));
      expect((await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: entries })).status).toBe(200);
      const before = await notified(many);
      await api.put200({ resourceType: 'Patient', id: 'p2', name: [{ family: 'n7' }], gender: 'female' });
      const after = await notified(many);
      expect(many.map((id) => after[id]!.length - before[id]!.length)).toEqual([0, 1, 0]);
    });
  });
});
