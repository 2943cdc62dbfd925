/** `cinder import` against both adapters: SQLite and a fresh PostgreSQL database (test/helpers/stores.ts). */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generatePatients } from '../../bench/lib/generator.ts';
import { textIndexOf, textMatches, textWords } from '../../src/fhir/text-index.ts';
import { rawStatements, storeTargets, type StoreTarget } from '../helpers/stores.ts';
import { createCliEnv } from '../helpers/cli.ts';
import { Database } from 'bun:sqlite';
import postgres from 'postgres';
import { reindex } from '../../src/fhir/reindex.ts';

const targets = await storeTargets({ main: false });

/** Every row of the range table as text, a negative zero as `-0`, in one order. */
async function rangeRows(kind: string, url: string): Promise<string[]> {
  const show = (v: unknown) => (Object.is(v, -0) ? '-0' : String(v));
  if (kind === 'postgres') {
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const rows = await sql<{ res: string; k: number; low: string; high: string }[]>`SELECT res::text, k, low::text, high::text FROM search_range ORDER BY 1, 2, 3, 4`;
      return rows.map((r) => `${r.res} ${r.k} ${r.low} ${r.high}`);
    } finally {
      await sql.end();
    }
  }
  const db = new Database(url, { readonly: true });
  try {
    return db.query<{ res: number; k: number; low: number; high: number }, []>('SELECT res, k, low, high FROM search_range ORDER BY 1, 2, 3, 4').all()
      .map((r) => `${r.res} ${r.k} ${show(r.low)} ${show(r.high)}`);
  } finally {
    db.close();
  }
}

afterAll(async () => {
  for (const t of targets) await t.cleanup();
});

for (const target of targets) {
  describe(`cinder import into ${target.kind}`, () => {
    let cli: ReturnType<typeof createCliEnv>;
    let db: Awaited<ReturnType<StoreTarget['fresh']>>;

    beforeAll(async () => {
      db = await target.migrated();
      cli = createCliEnv({ CINDER_DATABASE_URL: db.url });
      expect((await cli.run(['tenant', 'create', 't1'])).code).toBe(0);
    });

    afterAll(() => cli.close());

    test('generated patient records: every resource lands, searchable by compartment and identifier', async () => {
      const resources = [...generatePatients({ patients: 30, seed: 7 })];
      const path = join(cli.dir, 'generated.ndjson');
      writeFileSync(path, resources.map((r) => JSON.stringify(r)).join('\n') + '\n');
      const r = await cli.run(['import', '--tenant', 't1', '--batch-size', '500', '--json', path]);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ imported: resources.length, failed: 0 });

      const store = db.open();
      const patient = resources.find((x) => x.resourceType === 'Patient')!;
      const observations = resources.filter((x) => x.resourceType === 'Observation' && (x as { subject?: { reference?: string } }).subject?.reference === `Patient/${patient.id}`);
      expect(await store.resources.count('t1', { type: 'Observation', compartment: patient.id!, sort: [], count: 0 })).toBe(observations.length);
      for (const type of ['Patient', 'Encounter', 'Condition']) {
        expect(await store.resources.count('t1', { type, sort: [], count: 0 })).toBe(resources.filter((x) => x.resourceType === type).length);
      }
      // Full-text rows came through the import's packing and its COPY or multi-row inserts.
      const family = (patient as unknown as { name: { family: string }[] }).name[0]!.family;
      const terms = textWords(family).map((word) => ({ word, prefix: false }));
      const named = resources.filter((x) => x.resourceType === 'Patient' && textMatches(textIndexOf(x as Record<string, unknown>)!.content, terms));
      expect(named.length).toBeGreaterThan(0);
      expect(await store.resources.count('t1', { type: 'Patient', where: [{ kind: 'text', field: 'content', values: [terms] }], sort: [], count: 0 })).toBe(named.length);
      const stored = await store.resources.read('t1', 'Patient', patient.id!);
      const { meta: _meta, ...content } = JSON.parse(stored!.content);
      const { meta: _given, ...given } = patient as Record<string, unknown>;
      expect(content).toEqual(given);
      // The import gathered the planner statistics of what it wrote (PostgreSQL; SQLite keeps none). Not told by the
      // statistics watch's staleness: the writes' counts reach PostgreSQL's statistics up to seconds after they commit,
      // after the import's ANALYZE, and the watch analyses them again once they pass a tenth of a table.
      if (target.kind === 'postgres') {
        const [rows] = await rawStatements('postgres', db.url, [[
          "SELECT DISTINCT tablename AS t FROM pg_stats WHERE schemaname = current_schema() AND tablename IN ('resources', 'search_index', 'compartments') ORDER BY 1", [],
        ]]);
        expect(rows!.map((r) => r.t)).toEqual(['compartments', 'resources', 'search_index']);
      } else expect(await store.resources.indexing.analyze({ onlyStale: true })).toEqual([]);
    });

    test('the same resource in one batch and in consecutive batches: one version per line, in line order', async () => {
      const lines = [
        { resourceType: 'Patient', id: 'dup', gender: 'male' },
        { resourceType: 'Patient', id: 'dup', gender: 'female' },
        { resourceType: 'Patient', id: 'other' },
        { resourceType: 'Patient', id: 'dup', gender: 'other' },
        { resourceType: 'Patient', id: 'third' },
        { resourceType: 'Patient', id: 'dup', gender: 'unknown' },
      ];
      const path = join(cli.dir, 'dups.ndjson');
      writeFileSync(path, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
      const r = await cli.run(['import', '--tenant', 't1', '--batch-size', '2', path]);
      expect([r.code, r.stderr]).toEqual([0, '']);
      const store = db.open();
      const history = await store.resources.history('t1', { type: 'Patient', id: 'dup', count: 10 });
      expect(history.map((v) => [v.versionId, JSON.parse(v.content).gender])).toEqual([
        [4, 'unknown'], [3, 'other'], [2, 'female'], [1, 'male'],
      ]);
    });

    test('a CodeSystem or ValueSet of a core id lands as version 2, after the core one (a version id names one content), in a batch or alone', async () => {
      const lines = [
        { resourceType: 'CodeSystem', id: 'address-type', url: 'http://hl7.org/fhir/address-type', status: 'active', content: 'complete', concept: [{ code: 'postal' }] },
        { resourceType: 'ValueSet', id: 'address-type', status: 'draft' },
        { resourceType: 'ValueSet', id: 'not-a-core-id', status: 'draft' },
        { resourceType: 'ValueSet', id: 'address-type', status: 'active' },
      ];
      const path = join(cli.dir, 'core-ids.ndjson');
      writeFileSync(path, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
      const r = await cli.run(['import', '--tenant', 't1', '--batch-size', '3', path]);
      expect([r.code, r.stderr]).toEqual([0, '']);
      const store = db.open();
      const versions = async (type: string, id: string) => (await store.resources.history('t1', { type, id, count: 10 })).map((v) => v.versionId);
      expect(await versions('CodeSystem', 'address-type')).toEqual([2]);
      expect(await versions('ValueSet', 'address-type')).toEqual([3, 2]);
      expect(await versions('ValueSet', 'not-a-core-id')).toEqual([1]);
    });

    test('history names PUT for what NDJSON lines write (created or updated by id), and a transaction entry\'s own method', async () => {
      const path = join(cli.dir, 'methods.ndjson');
      // Two lines in one batch (COPY or a multi-row insert, then an update), one without an id.
      writeFileSync(path, [{ resourceType: 'Patient', id: 'hm1' }, { resourceType: 'Patient', id: 'hm1', active: true }, { resourceType: 'Patient', gender: 'other' }]
        .map((l) => JSON.stringify(l)).join('\n') + '\n');
      const bundle = join(cli.dir, 'methods-tx.json');
      writeFileSync(bundle, JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry: [
        { fullUrl: 'urn:uuid:5b1d8e0a-64c4-4c1e-9f43-0f3e0d5b7a11', resource: { resourceType: 'Patient', gender: 'female' }, request: { method: 'POST', url: 'Patient' } },
        { request: { method: 'DELETE', url: 'Patient/hm1' } },
      ] }));
      const r = await cli.run(['import', '--tenant', 't1', path, bundle]);
      expect([r.code, r.stderr]).toEqual([0, '']);
      const store = db.open();
      const methods = async (id: string) => (await store.resources.history('t1', { type: 'Patient', id, count: 10 })).map((v) => `${v.versionId} ${v.method}`);
      expect(await methods('hm1')).toEqual(['3 DELETE', '2 PUT', '1 PUT']);
      const ids = (await store.resources.search('t1', { type: 'Patient', where: [{ kind: 'token', param: 'gender', values: [{ value: 'other' }, { value: 'female' }] }], sort: [], count: 10 })).map((v) => [JSON.parse(v.content).gender, v.id]);
      expect(await methods(ids.find(([g]) => g === 'other')![1])).toEqual(['1 PUT']);
      expect(await methods(ids.find(([g]) => g === 'female')![1])).toEqual(['1 POST']);
    });

    test('running an import again writes no version of what it did not change, and reports those as unchanged', async () => {
      const patient = (id: string, extra: Record<string, unknown> = {}) => ({ resourceType: 'Patient', id, active: true, name: [{ family: `F-${id}`, given: ['A', 'B'] }], ...extra });
      const write = (name: string, lines: unknown[]) => {
        const path = join(cli.dir, name);
        writeFileSync(path, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
        return path;
      };
      const run = async (...files: string[]) => {
        const r = await cli.run(['import', '--tenant', 't1', '--json', ...files]);
        expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
        const { imported, unchanged, failed } = JSON.parse(r.stdout);
        return { imported, unchanged, failed };
      };
      const store = db.open();
      /** The stored text (version, lastUpdated and all) and the version numbers of each resource. */
      const state = async (refs: string[]) => Promise.all(refs.map(async (ref) => {
        const [type, id] = ref.split('/') as [string, string];
        return { ref, content: (await store.resources.read('t1', type, id))!.content, versions: (await store.resources.history('t1', { type, id, count: 10 })).map((v) => v.versionId) };
      }));
      const transaction = (type: string, ids: string[]) => ({
        resourceType: 'Bundle', type, entry: ids.map((id) => ({ resource: patient(id), request: { method: 'PUT', url: `Patient/${id}` } })),
      });
      // Lines a and c twice in one file: the second of each, in the same transaction as the first, changes nothing.
      const lines = write('again.ndjson', [patient('ua'), patient('ub'), patient('uc'), patient('ua'), patient('uc')]);
      const bundles = [join(cli.dir, 'tx-again.json'), join(cli.dir, 'batch-again.json')];
      writeFileSync(bundles[0]!, JSON.stringify(transaction('transaction', ['ut1', 'ut2'])));
      writeFileSync(bundles[1]!, JSON.stringify(transaction('batch', ['ubatch'])));
      const refs = ['Patient/ua', 'Patient/ub', 'Patient/uc', 'Patient/ut1', 'Patient/ut2', 'Patient/ubatch'];

      expect(await run(lines, ...bundles)).toEqual({ imported: 8, unchanged: 2, failed: 0 });
      const first = await state(refs);
      expect(first.map((s) => s.versions)).toEqual(refs.map(() => [1]));
      await Bun.sleep(5);
      expect(await run(lines, ...bundles)).toEqual({ imported: 8, unchanged: 8, failed: 0 });
      expect(await state(refs)).toEqual(first);

      // Keys in another order are no change; a changed line and a line whose meta.tag alone changed are.
      const reordered = { name: [{ given: ['A', 'B'], family: 'F-ua' }], active: true, id: 'ua', resourceType: 'Patient' };
      const changed = write('changed.ndjson', [reordered, patient('ub', { active: false }), patient('uc', { meta: { tag: [{ system: 'urn:t', code: 'x' }] } }), patient('ud')]);
      expect(await run(changed)).toEqual({ imported: 4, unchanged: 1, failed: 0 });
      const after = await state(['Patient/ua', 'Patient/ub', 'Patient/uc', 'Patient/ud']);
      expect(after.map((s) => [s.ref, s.versions])).toEqual([['Patient/ua', [1]], ['Patient/ub', [2, 1]], ['Patient/uc', [2, 1]], ['Patient/ud', [1]]]);
      expect(after[0]!.content).toBe(first[0]!.content);
      // The text summary names them.
      const text = await cli.run(['import', '--tenant', 't1', changed]);
      expect(text.stdout).toMatch(/^Imported 4 resources into tenant 't1' in [\d.]+ s \([\d,]+ resources\/s\); 4 unchanged, 0 failed\.\n$/);
    });

    test('values longer than PostgreSQL indexes as they are land on both, found by their whole value', async () => {
      // Random letters, which do not compress: PostgreSQL indexes their bounded form (index-limits.ts).
      let seed = 7;
      const long = Array.from({ length: 2500 }, () => String.fromCharCode(97 + ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) % 26))).join('');
      const lines = [
        { resourceType: 'Patient', id: 'short-1' },
        { resourceType: 'Patient', id: 'long-1', identifier: [{ system: 'http://example.org/mrn', value: long }] },
        // A line whose urn: reference the run resolves is prepared on the importing thread, not the worker's.
        { resourceType: 'Observation', id: 'long-2', status: 'final', code: { text: 'x' }, subject: { reference: 'urn:uuid:0c3c9e3e-6e5b-4d0a-8f2a-1c2d3e4f5a6b' }, identifier: [{ value: long }] },
        { resourceType: 'Patient', id: 'long-3', identifier: [{ system: 'http://example.org/mrn', value: `${long}3` }] },
      ];
      const path = join(cli.dir, 'long.ndjson');
      writeFileSync(path, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
      const bundle = join(cli.dir, 'first.json');
      writeFileSync(bundle, JSON.stringify({ resourceType: 'Bundle', type: 'batch', entry: [{ fullUrl: 'urn:uuid:0c3c9e3e-6e5b-4d0a-8f2a-1c2d3e4f5a6b', resource: { resourceType: 'Patient', id: 'short-3' }, request: { method: 'PUT', url: 'Patient/short-3' } }] }));
      const r = await cli.run(['import', '--tenant', 't1', bundle, path]);
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
      const store = db.open();
      const found = async (type: string, system: string | undefined, value: string) => (await store.resources.search('t1', {
        type, where: [{ kind: 'token', param: 'identifier', values: [{ ...(system !== undefined && { system }), value }] }], sort: [], count: 10,
      })).map((v) => v.id);
      expect(await found('Patient', 'http://example.org/mrn', long)).toEqual(['long-1']);
      expect(await found('Patient', 'http://example.org/mrn', `${long}3`)).toEqual(['long-3']);
      expect(await found('Observation', undefined, long)).toEqual(['long-2']);
      expect(JSON.parse((await store.resources.read('t1', 'Observation', 'long-2'))!.content).subject).toEqual({ reference: 'Patient/short-3' });
    });

    test('a negative zero lands as 0, as the other writers store it: a forced reindex changes no range row', async () => {
      const lines = [
        { resourceType: 'Location', id: 'zero-1', position: { latitude: -0.0, longitude: -0.0 } },
        { resourceType: 'Observation', id: 'zero-2', status: 'final', code: { text: 'x' }, valueQuantity: { value: -0.0, unit: 'mg' },
          component: [{ code: { coding: [{ system: 'http://loinc.org', code: '8480-6' }] }, valueQuantity: { value: -0.0, unit: 'mm[Hg]', system: 'http://unitsofmeasure.org', code: 'mm[Hg]' } }] },
      ];
      // JSON.stringify writes -0 as 0: the lines say -0.0 as a client would.
      const path = join(cli.dir, 'zero.ndjson');
      writeFileSync(path, lines.map((l) => JSON.stringify(l).replaceAll('":0', '":-0.0')).join('\n') + '\n');
      const r = await cli.run(['import', '--tenant', 't1', path]);
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
      const before = await rangeRows(target.kind, db.url);
      expect(before.length).toBeGreaterThan(0);
      expect(before.filter((row) => row.includes('-0'))).toEqual([]);
      await reindex(db.open(), { force: true });
      expect(await rangeRows(target.kind, db.url)).toEqual(before);
    });

    test('absolute references: under the tenant\'s FHIR base the tenant\'s resources, other servers\' as written (NDJSON and Bundles)', async () => {
      const base = 'http://cinder.example/tenants/t1/fhir/R4';
      const other = 'http://other.org/fhir/Patient/ab1';
      const obs = (id: string, subject: string) => ({ resourceType: 'Observation', id, status: 'final', code: { text: 'x' }, subject: { reference: subject } });
      const path = join(cli.dir, 'absolute.ndjson');
      writeFileSync(path, [{ resourceType: 'Patient', id: 'ab1' }, obs('ab-own', `${base}/Patient/ab1`), obs('ab-other', other)].map((l) => JSON.stringify(l)).join('\n') + '\n');
      const bundle = join(cli.dir, 'absolute.json');
      writeFileSync(bundle, JSON.stringify({ resourceType: 'Bundle', type: 'batch', entry: [
        { resource: obs('ab-own-b', `${base}/Patient/ab1`), request: { method: 'PUT', url: 'Observation/ab-own-b' } },
        { resource: obs('ab-other-b', other), request: { method: 'PUT', url: 'Observation/ab-other-b' } },
      ] }));
      (cli.env as Record<string, string>).CINDER_BASE_URL = 'http://cinder.example';
      const r = await cli.run(['import', '--tenant', 't1', path, bundle]).finally(() => delete (cli.env as Record<string, string>).CINDER_BASE_URL);
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
      const store = db.open();
      const ids = async (where: Parameters<typeof store.resources.search>[1]['where'], compartment?: string) =>
        (await store.resources.search('t1', { type: 'Observation', where, sort: [], count: 10, ...(compartment && { compartment }) })).map((v) => v.id).sort();
      expect(await ids([{ kind: 'token', param: 'subject', values: [{ system: 'Patient', value: 'ab1' }], reference: true }])).toEqual(['ab-own', 'ab-own-b']);
      expect(await ids([{ kind: 'token', param: 'subject', values: [{ system: '', value: other }], reference: true }])).toEqual(['ab-other', 'ab-other-b']);
      expect(await ids(undefined, 'ab1')).toEqual(['ab-own', 'ab-own-b']);
    });
  });
}
