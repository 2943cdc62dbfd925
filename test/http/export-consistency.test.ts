import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import type { ResourceRepo, Store } from '../../src/store/types.ts';
import { createTestApp, testClock, fhirInit, type TestApp } from '../helpers/app.ts';
import { download, eachStore, kickOff, observation, patient, put, remove, runExports, type Manifest } from '../helpers/export.ts';

let t: TestApp;
let clock: ReturnType<typeof testClock>;
let token: string;

/** The store, except that `during` runs once, right after the export read its first page of Observations. */
function interfering(store: Store, during: () => Promise<void>): Store {
  let fired = false;
  const resources: ResourceRepo = Object.create(store.resources);
  resources.snapshot = async (tenant, q) => {
    const page = await store.resources.snapshot(tenant, q);
    if (!fired && q.type === 'Observation') {
      fired = true;
      await during();
    }
    return page;
  };
  return new Proxy(store, { get: (target, key) => (key === 'resources' ? resources : Reflect.get(target, key)) });
}

/** Stored JSON of every Observation as it is now (before the export's writes happen). */
async function observationsNow(filter: (r: Record<string, unknown>) => boolean = () => true): Promise<string[]> {
  const rows = await t.store.resources.search('t1', { type: 'Observation', sort: [], count: 1000 });
  return rows.map((r) => r.content).filter((c) => filter(JSON.parse(c))).sort();
}

async function exported(status: string, during: () => Promise<void>): Promise<string[]> {
  expect(await runExports(t, { store: interfering(t.store, during), pageSize: 4 })).toEqual(['completed']);
  const manifest = (await (await t.request(status, fhirInit(token))).json()) as Manifest;
  const lines: string[] = [];
  for (const o of manifest.output.filter((x) => x.type === 'Observation')) {
    lines.push(...(await (await t.request(o.url, fhirInit(token))).text()).trim().split('\n'));
  }
  expect(new Set(lines).size).toBe(lines.length);
  return lines.sort();
}

async function churn(): Promise<void> {
  clock.advance(5000);
  for (let i = 0; i < 40; i += 3) await put(t, observation(`o${String(i).padStart(2, '0')}`, i % 4 ? 'p1' : 'p2', 'C'));
  for (let i = 1; i < 40; i += 5) await remove(t, 'Observation', `o${String(i).padStart(2, '0')}`);
  for (let i = 0; i < 10; i++) await put(t, observation(`new${i}`, 'p1', 'A'));
  await put(t, { resourceType: 'Group', id: 'g1', type: 'person', actual: true, member: [{ entity: { reference: 'Patient/p2' } }] });
}

await eachStore((kind, fresh) => {
  describe(`consistency (${kind})`, () => {
    beforeEach(async () => {
      t = await createTestApp({ clock: (clock = testClock()), store: await fresh() });
      token = await t.token();
      await put(t, patient('p1'));
      await put(t, patient('p2'));
      for (let i = 0; i < 40; i++) await put(t, observation(`o${String(i).padStart(2, '0')}`, i % 2 ? 'p2' : 'p1', i % 3 ? 'A' : 'B'));
      await put(t, { resourceType: 'Group', id: 'g1', type: 'person', actual: true, member: [{ entity: { reference: 'Patient/p1' } }] });
      clock.advance(1000);
    });
    afterEach(async () => t.close());

    test('writes and deletes during a system export do not change its output', async () => {
      const status = await kickOff(t, token, '/$export?_type=Observation');
      const before = await observationsNow();
      expect(await exported(status, churn)).toEqual(before);
    });

    test('a Group export keeps the compartments and membership as of transactionTime', async () => {
      const status = await kickOff(t, token, '/Group/g1/$export?_type=Observation');
      const before = await observationsNow((r) => (r.subject as { reference: string }).reference === 'Patient/p1');
      expect(before).toHaveLength(20);
      expect(await exported(status, churn)).toEqual(before);
    });

    test('a filtered export with _since keeps its selection as of transactionTime', async () => {
      const since = new Date(t.clock.now() - 1500).toISOString();
      const status = await kickOff(t, token, `/$export?_type=Observation&_since=${since}&_typeFilter=${encodeURIComponent('Observation?code=B')}`);
      const before = await observationsNow((r) => JSON.stringify(r.code).includes('"B"'));
      expect(await exported(status, churn)).toEqual(before);
      const manifest = (await (await t.request(status, fhirInit(token))).json()) as Manifest;
      expect(manifest.deleted).toEqual([]);
      expect(await download(t, token, manifest.deleted!)).toEqual({});
    });
  });
});
