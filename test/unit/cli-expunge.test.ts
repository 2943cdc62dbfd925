/**
 * `cinder expunge` and `cinder audit prune` in-process on both stores, on a database a test app writes
 * through HTTP: exact counts, what stays, usage errors; and that SQLite gives the space back only to VACUUM.
 */
import { Database } from 'bun:sqlite';
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createCliEnv } from '../helpers/cli.ts';
import { expectOutcome, fhirClient, ids, type FhirClient, type Json } from '../helpers/fhir.ts';
import { storeTargets, type StoreDatabase } from '../helpers/stores.ts';
import { orphans } from '../helpers/expunge.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const auditEvent = (recorded: string) => ({
  resourceType: 'AuditEvent', type: { system: 'http://dicom.nema.org/resources/ontology/DCM', code: '110110' }, recorded,
  agent: [{ requestor: true, who: { display: 'app' } }], source: { observer: { display: 'app' } },
});

for (const target of targets) {
  describe(`cinder expunge and audit prune (${target.kind})`, () => {
    let db: StoreDatabase;
    let t: TestApp;
    let api: FhirClient;
    let cli: ReturnType<typeof createCliEnv>;
    beforeAll(async () => {
      db = await target.migrated();
      const store = db.open();
      await store.migrate();
      t = await createTestApp({ store });
      api = fhirClient(t, await t.token());
      cli = createCliEnv({ CINDER_DATABASE_URL: db.url });
      for (let i = 0; i < 3; i++) await api.put200({ resourceType: 'Patient', id: `p${i}`, name: [{ family: `Name${i}` }] });
      await api.put200({ resourceType: 'Patient', id: 'p0', name: [{ family: 'Name0' }], gender: 'male' });
      await api.put200({ resourceType: 'Observation', id: 'o1', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/p1' } });
      expect((await api.del('Patient/p2')).status).toBe(200);
      expect((await api.del('Observation/o1')).status).toBe(200);
      for (const recorded of ['2019-06-01T00:00:00Z', '2019-12-31T23:59:59.999Z', '2020-01-01T00:00:00Z', '2026-01-01T00:00:00Z']) await api.create(auditEvent(recorded));
    });
    afterAll(async () => {
      await t.close();
      cli.close();
    });

    test('usage errors exit 2 and change nothing', async () => {
      const runs = [
        ['expunge', '--deleted'],
        ['expunge', '--tenant', 't1'],
        ['expunge', '--tenant', 't1', '--id', 'p1', '--deleted'],
        ['expunge', '--tenant', 't1', '--everything', '--type', 'Patient'],
        ['expunge', '--tenant', 't1', '--type', 'AuditEvent', '--deleted'],
        ['expunge', '--tenant', 'nope', '--deleted'],
        ['expunge', '--tenant', 't1', '--type', 'Patient', '--id', 'missing', '--deleted'],
        ['audit', 'prune', '--tenant', 't1'],
        ['audit', 'prune', '--tenant', 't1', '--before', '2020-01-01'],
        ['audit', 'prune', '--tenant', 'nope', '--before', '2020-01-01T00:00:00Z'],
      ];
      for (const argv of runs) {
        const r = await cli.run(argv);
        expect({ argv, code: r.code, said: r.stderr.startsWith(`cinder ${argv[0] === 'audit' ? 'audit prune' : 'expunge'}: `) }).toEqual({ argv, code: 2, said: true });
      }
      expect((await api.search('AuditEvent')).entry).toHaveLength(4);
      expect((await api.get('Patient/p2')).status).toBe(410);
    });

    test('expunge --type --deleted, then --previous-versions, with exact counts', async () => {
      let r = await cli.run(['expunge', '--tenant', 't1', '--type', 'Observation', '--deleted', '--json']);
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ tenant: 't1', count: 2 });
      await expectOutcome(await api.get('Observation/o1'), 404);
      expect((await api.get('Patient/p2')).status).toBe(410);
      r = await cli.run(['expunge', '--tenant', 't1', '--deleted', '--previous-versions', '--json']);
      // p2 (two versions), then p0's first version.
      expect(JSON.parse(r.stdout).count).toBe(3);
      await expectOutcome(await api.get('Patient/p2'), 404);
      expect((await api.search('Patient/p0/_history')).entry.map((e: Json) => e.resource.meta.versionId)).toEqual(['2']);
      expect(ids(await api.search('Patient?_sort=_id'))).toEqual(['p0', 'p1']);
      r = await cli.run(['expunge', '--tenant', 't1', '--type', 'Patient', '--id', 'p0', '--previous-versions']);
      expect(r.stdout).toContain('count: 0');
      expect(await orphans(target.kind, db.url)).toMatchObject({ search_index: 0, search_string: 0, compartments: 0, resource_history: 0 });
    });

    test('audit prune removes the AuditEvents recorded before the instant, and only those', async () => {
      const r = await cli.run(['audit', 'prune', '--tenant', 't1', '--before', '2020-01-01T00:00:00Z', '--json']);
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ tenant: 't1', before: '2020-01-01T00:00:00Z', count: 2 });
      const left = await api.search('AuditEvent?_sort=date');
      expect(left.entry.map((e: Json) => e.resource.recorded)).toEqual(['2020-01-01T00:00:00Z', '2026-01-01T00:00:00Z']);
      expect(JSON.parse((await cli.run(['audit', 'prune', '--tenant', 't1', '--before', '2020-01-01T00:00:00Z', '--json'])).stdout).count).toBe(0);
      // Still append-only through the API.
      expect((await api.del(`AuditEvent/${left.entry[0].resource.id}`)).status).toBe(405);
    });

    test('expunge --everything takes every resource but AuditEvents; writes go on', async () => {
      const r = await cli.run(['expunge', '--tenant', 't1', '--everything', '--json']);
      expect(JSON.parse(r.stdout).count).toBe(2);
      expect(ids(await api.search('Patient'))).toEqual([]);
      expect((await api.search('AuditEvent')).entry).toHaveLength(2);
      expect((await api.create({ resourceType: 'Patient', name: [{ family: 'After' }] })).meta.versionId).toBe('1');
    });
  });
}

describe('SQLite: the space of expunged rows', () => {
  test('is reused, and given back to the file system by VACUUM alone', async () => {
    const t = await createTestApp();
    const cli = createCliEnv({ CINDER_DATABASE_URL: `${t.dir}/cinder.db` });
    try {
      const api = fhirClient(t, await t.token());
      const text = 'x'.repeat(4000);
      const entries = (entry: (i: number) => Json) => ({ resourceType: 'Bundle', type: 'transaction', entry: Array.from({ length: 300 }, (_, i) => entry(i)) });
      expect((await api.post('', entries((i) => ({ resource: { resourceType: 'Basic', id: `b${i}`, code: { text: `${text}${i}` } }, request: { method: 'PUT', url: `Basic/b${i}` } })))).status).toBe(200);
      expect((await api.post('', entries((i) => ({ request: { method: 'DELETE', url: `Basic/b${i}` } })))).status).toBe(200);
      const r = await cli.run(['expunge', '--tenant', 't1', '--deleted', '--json']);
      expect(JSON.parse(r.stdout).count).toBe(600);
      const file = new Database(`${t.dir}/cinder.db`);
      const pages = () => file.query<{ page_count: number }, []>('PRAGMA page_count').get()!.page_count;
      const free = () => file.query<{ freelist_count: number }, []>('PRAGMA freelist_count').get()!.freelist_count;
      await t.store.close();
      file.exec('PRAGMA wal_checkpoint(TRUNCATE)');
      const before = pages();
      expect(free()).toBeGreaterThan(50);
      file.exec('VACUUM');
      expect(pages()).toBeLessThan(before - 50);
      expect(free()).toBe(0);
      file.close();
    } finally {
      cli.close();
      await t.close().catch(() => undefined);
    }
  });
});

describe('cinder expunge --help', () => {
  test('points to `cinder compact` for giving the space back on SQLite', async () => {
    const cli = createCliEnv();
    try {
      const help = await cli.run(['expunge', '--help']);
      expect(help.code).toBe(0);
      expect(help.stdout).toContain('until `cinder compact`');
    } finally {
      cli.close();
    }
  });
});
