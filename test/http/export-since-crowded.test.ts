import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp, testClock } from '../helpers/app.ts';
import { download, finish, kickOff, observation, patient, put, refs, remove } from '../helpers/export.ts';
import { type StoreDatabase, storeTargets } from '../helpers/stores.ts';
import type { SnapshotQuery, Store } from '../../src/store/types.ts';

let t: TestApp;
let token: string;

/** Subject and code of new Observation `i`: odd ones are x's (no member), every third is coded c2. */
const fresh = (i: number) => observation(`new${i}`, i % 2 ? 'x' : 'm1', i % 3 ? '1234-5' : 'c2');

/** Writes Observations `prefix0` .. `prefix{n-1}` through transaction Bundles of 1,000. */
async function many(prefix: string, n: number) {
  for (let start = 0; start < n; start += 1000) {
    const entry = Array.from({ length: Math.min(1000, n - start) }, (_, k) => {
      const resource = { ...fresh(start + k), id: `${prefix}${start + k}` };
      return { resource, request: { method: 'PUT', url: `Observation/${resource.id}` } };
    });
    const res = await t.request(t.fhir(), fhirInit(token, 'POST', { resourceType: 'Bundle', type: 'transaction', entry }));
    expect(res.status).toBe(200);
  }
}

const NEW = 9990;

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((target) => target.cleanup())), 60_000);

for (const target of targets) {
  describe(`${target.kind}: an export with _since across 10,000 changed rows of a type`, () => {
    /** What every level's export starts from: written once (most of the file's time), a copy for each test. */
    let seeded: StoreDatabase;
    /** The seeding app's clock when it ended, and `_since`. */
    let seededAt: number;
    let since: string;
    beforeAll(async () => {
      seeded = await target.migrated();
      t = await createTestApp({ store: seeded.open() });
      try {
        token = await t.token();
        for (const id of ['m1', 'm2', 'x']) await put(t, patient(id));
        await put(t, { resourceType: 'Group', id: 'g', type: 'person', actual: true, member: [{ entity: { reference: 'Patient/m1' } }, { entity: { reference: 'Patient/m2' } }] });
        for (const id of ['old-a', 'old-b', 'old-del', 'old-upd', 'old-late', 'old-upd-late', 'old-recreated', 'old-out']) await put(t, observation(id, 'm1'));
        await put(t, observation('old-in', 'x'));
        t.clock.advance(60_000);
        since = new Date(t.clock.now()).toISOString();
        t.clock.advance(1000);
        await remove(t, 'Observation', 'old-del');
        await put(t, observation('old-upd', 'm1', 'c2'));
        await put(t, observation('old-upd-late', 'm1', 'c2'));
        await remove(t, 'Observation', 'old-recreated');
        await put(t, observation('old-recreated', 'm1', 'c2'));
        await put(t, observation('old-in', 'm2'));
        await put(t, observation('old-out', 'x'));
        // With the six above, 9,996 changed since: under the window's bound.
        await many('new', NEW);
        seededAt = t.clock.now();
      } finally {
        await t.close();
      }
    }, 120_000);
    beforeEach(async () => {
      // Another app on a copy of the seeded database, its clock where the seeding app's stopped.
      t = await createTestApp({ store: (await target.copy(seeded)).open(), clock: testClock(seededAt) });
      token = await t.token();
    });
    afterEach(async () => t.close());

    const levels: [string, string, (id: string) => boolean, string[]][] = [
      ['/$export?_type=Observation', 'system', () => true, ['Observation/old-del']],
      [`/Patient/$export?_type=Observation&_typeFilter=${encodeURIComponent('Observation?code=c2')}`, 'patient, _typeFilter', (id) => !id.startsWith('new') || Number(id.slice(3)) % 3 === 0, []],
      ['/Group/g/$export?_type=Observation', 'group', (id) => !id.startsWith('new') || Number(id.slice(3)) % 2 === 0, ['Observation/old-del']],
    ];
    for (const [path, level, keeps, deletions] of levels) {
      test(`${level}: exactly the resources changed since as of transactionTime, found by the last-updated index or by reading the type`, async () => {
        // Written before the test (beforeAll): the writes before and since `since`.
        t.clock.advance(1000);
        const status = await kickOff(t, token, `${path}&_since=${since}`);
        t.clock.advance(1000);
        // Before the first page, two changed since move between patients (no more changed since); after it, more than
        // 10,000 changed since: the later pages read the type in key order. Each is judged as of transactionTime.
        let pages = 0;
        const store: Store = { ...t.store, resources: { ...t.store.resources, snapshot: async (tenant: string, q: SnapshotQuery) => {
          const first = q.type === 'Observation' && q.ids === undefined && pages === 0;
          if (first) {
            await put(t, observation('old-upd', 'x'));
            await put(t, observation('old-in', 'x'));
          }
          const page = await t.store.resources.snapshot(tenant, q);
          if (q.type === 'Observation' && q.ids === undefined && ++pages === 1) {
            await put(t, observation('old-late', 'm1', 'c2'));
            await put(t, observation('old-upd-late', 'm1', '1234-5'));
            await remove(t, 'Observation', 'old-b');
            await many('late', 3);
          }
          return page;
        } } };
        const m = await finish(t, token, status, { store, pageSize: 3000 });
        expect(pages).toBeGreaterThan(1);
        const files = await download(t, token, m.output);
        const changed = [...Array.from({ length: NEW }, (_, i) => `new${i}`), 'old-upd', 'old-upd-late', 'old-recreated', 'old-in', 'old-out'];
        const asOf = new Map([...Array.from({ length: NEW }, (_, i) => [`new${i}`, fresh(i)] as const), ['old-upd', observation('', 'm1', 'c2')], ['old-upd-late', observation('', 'm1', 'c2')],
          ['old-recreated', observation('', 'm1', 'c2')], ['old-in', observation('', 'm2')], ['old-out', observation('', 'x')]]);
        const expected = changed.filter((id) => keeps(id) && (level !== 'group' || ['m1', 'm2'].includes(asOf.get(id)!.subject.reference.slice(8)))
          && (!level.includes('_typeFilter') || asOf.get(id)!.code.coding[0]!.code === 'c2')).map((id) => `Observation/${id}`).sort();
        const exported = refs(files);
        expect(exported.length).toBe(expected.length);
        expect(exported).toEqual(expected);
        const byId = new Map((files.Observation ?? []).map((r) => [r.id, r as ReturnType<typeof observation>]));
        if (byId.has('old-upd-late')) expect(byId.get('old-upd-late')!.code.coding[0]!.code).toBe('c2');
        if (byId.has('old-upd')) expect(byId.get('old-upd')!.subject.reference).toBe('Patient/m1');
        const deleted = await download(t, token, m.deleted ?? []);
        const urls = (deleted.Bundle ?? []).flatMap((b) => (b.entry as { request: { url: string } }[]).map((e) => e.request.url));
        expect(urls).toEqual(deletions);
      }, 120_000);
    }
  });
}
