/**
 * The types' sizes a store measured for its search plans (TypeSizes, kept TYPE_SIZE_MAX_AGE_MS) are forgotten when
 * the statistics change in bulk (ResourceIndexing.analyze, after an import or a reindex): the next search measures
 * them again and is planned by the new statistics at once, not five minutes later. Seen through the statements the
 * store sends: PostgreSQL's measurement (an EXPLAIN of the type's rows) and the form of a `_has`'s set, hashed from an
 * array (POSTGRES_MISJUDGED) while the statistics misjudge the type, a semi-join once they know it; SQLite's count.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { Database } from 'bun:sqlite';
import postgres from 'postgres';
import { compileSearch } from '../../src/fhir/search.ts';
import { connect, connectForKeys, connectGeneric, type Pg } from '../../src/store/postgres/db.ts';
import { createKeysConnection } from '../../src/store/postgres/keys-connection.ts';
import { createPostgresResources } from '../../src/store/postgres/resources.ts';
import { createSqliteResources } from '../../src/store/sqlite/resources.ts';
import { createTypeSizes } from '../../src/store/type-sizes.ts';
import type { Condition, ResourceRepo, SearchQuery } from '../../src/store/types.ts';
import { storeTargets } from '../helpers/stores.ts';
import { firstVersions } from '../helpers/versions.ts';

const targets = await storeTargets();
afterAll(async () => {
  for (const t of targets) await t.cleanup();
}, 60_000);

const TENANT = 't1';
const PATIENTS = 300;
const CONDITIONS = 1200;
const SCT = 'http://snomed.info/sct';

const patients = Array.from({ length: PATIENTS }, (_, i) => ({ resourceType: 'Patient', id: `p${i}`, gender: i % 2 ? 'male' : 'female' }));
const conditions = Array.from({ length: CONDITIONS }, (_, i) => ({
  resourceType: 'Condition', id: `c${i}`, subject: { reference: `Patient/p${i % PATIENTS}` },
  code: { coding: [{ system: SCT, code: `${38341003 + (i % 40)}` }] },
}));

function compiled(type: string, query: string): SearchQuery {
  const c = compileSearch(type, new URLSearchParams(query), true);
  return { ...c.query, where: c.pending as Condition[] };
}

/** The Patients with a Condition of one code (every 40th Condition: 30 of them, of 15 Patients), in id order. */
// In `_lastUpdated` order: a page in id order reads a `_has` set's ids first whatever the statistics (Dialect.hasIds),
// where this order shows the set planned by them (a hashed set when misjudged, else a semi-join).
const HAS = compiled('Patient', `_has:Condition:subject:code=${SCT}|38341003&_count=100&_sort=_lastUpdated`);
const HAS_IDS = [...new Set(Array.from({ length: CONDITIONS / 40 }, (_, n) => `p${(n * 40) % PATIENTS}`))].sort();

async function fill(repo: ResourceRepo): Promise<void> {
  // In transactions of a few hundred, as writes through the API leave a database: no statistics yet.
  await repo.write(TENANT, (w) => w.insertNew(firstVersions(patients)));
  for (let i = 0; i < CONDITIONS; i += 400) await repo.write(TENANT, (w) => w.insertNew(firstVersions(conditions.slice(i, i + 400))));
}

describe('TypeSizes.forget', () => {
  test('the next get measures again, a measurement kept before it', async () => {
    let measured = 0;
    const sizes = createTypeSizes(() => ++measured);
    expect(await sizes.get('t', 'Patient')).toBe(1);
    expect(await sizes.get('t', 'Patient')).toBe(1);
    expect(sizes.measured('t', 'Patient')).toBe(1);
    sizes.forget();
    expect(sizes.measured('t', 'Patient')).toBeUndefined();
    expect(await sizes.get('t', 'Patient')).toBe(2);
    expect(measured).toBe(2);
  });
});

const pg = targets.find((t) => t.kind === 'postgres');

/** `sql` whose `unsafe` statements (the searches', their counts' and the sizes' measurements) are recorded in `sent`. */
function recorded(sql: Pg, sent: string[]): Pg {
  return new Proxy(sql, {
    get(target, key, receiver) {
      if (key !== 'unsafe') return Reflect.get(target, key, receiver);
      return (text: string, ...rest: unknown[]) => (sent.push(text), (target.unsafe as (...a: unknown[]) => unknown)(text, ...rest));
    },
  });
}

const MEASURES = (s: string) => s.startsWith('EXPLAIN (FORMAT JSON) SELECT 1 FROM resources WHERE tenant = $1 AND type = $2');
const HASHED_SET = (s: string) => s.includes('IN (SELECT unnest(ARRAY(');

describe.if(pg !== undefined)('PostgreSQL: a `_has` search planned by the statistics analyze() gathered', () => {
  const sent: string[] = [];
  let repo: ResourceRepo;
  let admin: postgres.Sql;
  const pools: Pg[] = [];
  const closing: (() => Promise<void>)[] = [];
  afterAll(async () => {
    await Promise.all([...pools.map((p) => p.end({ timeout: 5 })), ...closing.map((c) => c())]);
    await admin?.end();
  });

  async function open(before?: (repo: ResourceRepo) => Promise<unknown>): Promise<void> {
    const db = await pg!.migrated();
    admin = postgres(db.url, { max: 1, onnotice: () => undefined });
    // Nothing analyses the tables but the store's analyze().
    for (const table of ['resources', 'search_keys', 'search_index', 'search_string', 'search_range', 'search_composite', 'compartments']) {
      await admin.unsafe(`ALTER TABLE ${table} SET (autovacuum_enabled = off)`);
    }
    const sql = connect(db.url, { max: 2 });
    const generic = connectGeneric(db.url, { max: 2 });
    const keys = createKeysConnection(() => connectForKeys(db.url));
    pools.push(sql, generic);
    closing.push(() => keys.close());
    repo = createPostgresResources(recorded(sql, sent), keys, recorded(generic, sent));
    await before?.(repo);
    await fill(repo);
  }

  async function search(): Promise<{ ids: string[]; statements: string[] }> {
    sent.length = 0;
    const ids = (await repo.search(TENANT, HAS)).map((v) => v.id).sort();
    return { ids, statements: [...sent] };
  }

  test.each([
    ['analyze() after a bulk change', () => repo.indexing.analyze()],
    ["analyze({ onlyStale }) (the statistics watch's)", () => repo.indexing.analyze({ onlyStale: true })],
  ])('%s: the next search measures the types again and plans by the new statistics', async (_, analyze) => {
    await open();
    const before = await search();
    expect(before.ids).toEqual(HAS_IDS);
    // Unanalysed, the statistics take each type for a row or so: both measured, counted, and misjudged.
    expect(before.statements.filter(MEASURES).length).toBe(2);
    expect(before.statements.some(HASHED_SET)).toBe(true);
    // Kept: a search right after measures nothing.
    expect((await search()).statements.filter(MEASURES).length).toBe(0);

    expect((await analyze()).length).toBeGreaterThan(0);
    const after = await search();
    expect(after.ids).toEqual(before.ids);
    // Measured again at once, by statistics that know the types: the set a semi-join, as a new process plans it.
    expect(after.statements.filter(MEASURES).length).toBe(2);
    expect(after.statements.some(HASHED_SET)).toBe(false);
  }, 60_000);

  test("the statistics watch's check after another process (or autovacuum) analysed the tables: the next search measures again", async () => {
    // The watch's first check, at the server's start: nothing to analyse yet.
    await open((r) => r.indexing.analyze({ onlyStale: true }));
    const before = await search();
    expect(before.ids).toEqual(HAS_IDS);
    expect(before.statements.some(HASHED_SET)).toBe(true);
    // Another process's ANALYZE; this one's check finds nothing stale, but statistics newer than it saw.
    await admin.unsafe('ANALYZE resources, resource_history, search_keys, search_index, search_string, search_range, search_composite, search_text, compartments');
    expect(await repo.indexing.analyze({ onlyStale: true })).toEqual([]);
    const after = await search();
    expect(after.ids).toEqual(HAS_IDS);
    expect(after.statements.filter(MEASURES).length).toBe(2);
    expect(after.statements.some(HASHED_SET)).toBe(false);
  }, 60_000);
});

describe('SQLite: the sizes counted before a bulk change', () => {
  test('analyze() makes the next search that needs them count them again', async () => {
    const sqlite = targets.find((t) => t.kind === 'sqlite')!;
    const db = await sqlite.migrated();
    const writer = new Database(db.url);
    const reader = new Database(db.url, { readonly: true });
    let counts = 0;
    // The reader's type count (createSqliteResources' sizeOf), counted where it runs.
    const countingReader = new Proxy(reader, {
      get(target, key) {
        const value = Reflect.get(target, key, target) as unknown;
        if (key !== 'query') return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        return (text: string) => {
          const statement = target.query(text);
          if (!text.startsWith('SELECT COUNT(*) AS n FROM resources WHERE tenant = ? AND type = ?')) return statement;
          return new Proxy(statement, {
            get(s, k) {
              const v = Reflect.get(s, k, s) as unknown;
              if (k === 'get') return (...a: unknown[]) => (counts++, (v as (...b: unknown[]) => unknown).apply(s, a));
              return typeof v === 'function' ? (v as (...b: unknown[]) => unknown).bind(s) : v;
            },
          });
        };
      },
    });
    writer.exec('PRAGMA journal_mode = WAL');
    const repo = createSqliteResources(writer, countingReader);
    await fill(repo);
    // A search whose plan reads the types' sizes (whether the `_has` is probed in the first rows, probesHas).
    const query = compiled('Patient', `_has:Condition:subject:code=${SCT}|38341003&_count=5`);
    const ids = (await repo.search(TENANT, query)).map((v) => v.id);
    const first = counts;
    expect(first).toBeGreaterThan(0);
    await repo.search(TENANT, query);
    expect(counts).toBe(first);
    await repo.indexing.analyze();
    expect((await repo.search(TENANT, query)).map((v) => v.id)).toEqual(ids);
    expect(counts).toBe(2 * first);
    writer.close();
    reader.close();
  }, 60_000);
});
