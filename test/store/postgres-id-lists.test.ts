/**
 * Resources selected by a list of ids on PostgreSQL (`_id`, `_include`'s targets, reads of many, with
 * other conditions or without: idsDrive) read each id's resource by the (tenant, type, id) key, however
 * the planner estimates the type: with the ids a condition of `resources r`, a generic plan (the pool of
 * generic plans runs these statements) or one made without statistics walked every resource of the type
 * in id order and tested each against the list, 120 ms for 1,000 ids among 5,000 Binaries and 1.3 s
 * among 50,000. The rows the statements examine are counted from EXPLAIN ANALYZE of the statements the
 * store sends, planned as the store plans them.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { countSql, plannedSearch, POSTGRES, type SqlValue, type StatementForm } from '../../src/store/search-sql.ts';
import { createPostgresSnapshot } from '../../src/store/postgres/snapshot.ts';
import type { Pg } from '../../src/store/postgres/db.ts';
import type { Condition, SearchQuery, SnapshotQuery, Store } from '../../src/store/types.ts';
import { firstVersions } from '../helpers/versions.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets();
const pg = targets.find((t) => t.kind === 'postgres');
afterAll(async () => {
  for (const t of targets) await t.cleanup();
}, 60_000);

/** Binaries and Patients in the tenant, none of them analysed: a database just filled, as an import leaves it. */
const BINARIES = 3000;
const PATIENTS = 3000;
const TENANT = 't1';
const binaryId = (i: number) => `b-${String(i).padStart(5, '0')}`;
const patientId = (i: number) => `p-${String(i).padStart(5, '0')}`;
const WRITTEN = Date.parse('2026-01-01T00:00:00Z');

interface PlanNode {
  'Relation Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Join Filter'?: number;
  Plans?: PlanNode[];
}

/** The rows of `resources` a plan read: those it returned and those its filters removed, over every loop. */
function resourceRowsRead(node: PlanNode): number {
  const own = node['Relation Name'] === 'resources'
    ? (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops']
    : (node['Rows Removed by Join Filter'] ?? 0) * node['Actual Loops'];
  return own + (node.Plans ?? []).reduce((n, p) => n + resourceRowsRead(p), 0);
}

const literal = (v: SqlValue) => (typeof v === 'number' ? String(v) : `'${v.replaceAll("'", "''")}'`);

describe.if(pg !== undefined)('id lists on PostgreSQL', () => {
  let store: Store;
  let conn: postgres.Sql;
  beforeAll(async () => {
    const db = await pg!.fresh();
    store = db.open();
    await store.migrate();
    const binaries = Array.from({ length: BINARIES }, (_, i) => ({ resourceType: 'Binary', id: binaryId(i), contentType: 'text/plain', data: 'aGk=' }));
    await store.resources.write(TENANT, (w) => w.insertNew(firstVersions(binaries, WRITTEN)));
    const patients = Array.from({ length: PATIENTS }, (_, i) => ({ resourceType: 'Patient', id: patientId(i), gender: i % 3 ? 'male' : 'female' }));
    await store.resources.write(TENANT, (w) => w.insertNew(firstVersions(patients, WRITTEN)));
    // As the store's pool of generic plans runs the statements of a plain form (db.ts connectGeneric).
    conn = postgres(db.url, { max: 1, onnotice: () => undefined, connection: { plan_cache_mode: 'force_generic_plan', jit: 'off' } });
  }, 60_000);
  afterAll(() => conn.end());

  /** The rows of `resources` that the statement read, prepared and run as the store's pool runs it. */
  async function rowsRead(sql: string, values: SqlValue[]): Promise<number> {
    await conn.unsafe(`PREPARE ids AS ${sql}`);
    try {
      const [row] = await conn.unsafe<{ 'QUERY PLAN': [{ Plan: PlanNode }] }[]>(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE ids(${values.map(literal).join(', ')})`);
      return resourceRowsRead(row!['QUERY PLAN'][0].Plan);
    } finally {
      await conn.unsafe('DEALLOCATE ids');
    }
  }

  /** The statements plannedSearch sends for `q` for its rows, each with its form (its planner's counts are run). */
  async function statements(q: SearchQuery): Promise<{ sql: string; values: SqlValue[]; form?: StatementForm }[]> {
    const sent: { sql: string; values: SqlValue[]; form?: StatementForm }[] = [];
    await plannedSearch(POSTGRES, TENANT, q, {
      count: async (sql, values) => Number((await conn.unsafe<{ n: number }[]>(sql, values))[0]!.n),
      rows: (sql, values, form) => (sent.push({ sql, values, ...(form && { form }) }), []),
    }, () => BINARIES);
    return sent;
  }

  test('a search of 1,000 ids reads the 1,000 resources by their key, not the type', async () => {
    // Every third Binary, in an order of their own, one named twice, and two ids that no Binary has.
    const ids = Array.from({ length: 1000 }, (_, i) => binaryId((i * 3 + 1500) % BINARIES));
    const listed = [...ids, ids[7]!, 'absent', 'b-"{x},\\y'];
    const q: SearchQuery = { type: 'Binary', where: [{ kind: 'id', ids: listed }], sort: [], count: 1001 };
    const sent = await statements(q);
    expect(sent.map((s) => s.form)).toEqual(['plain']);
    // The 1,000 found and the two absent probed, each once: before, the type's 3,000 Binaries, each tested against the list.
    expect(await rowsRead(sent[0]!.sql, sent[0]!.values)).toBeLessThanOrEqual(listed.length);
    const found = await store.resources.search(TENANT, q);
    expect(found.map((v) => v.id)).toEqual([...ids].sort());
    // A page of them, and the next one after its last id.
    const page = await store.resources.search(TENANT, { ...q, count: 10 });
    expect(page.map((v) => v.id)).toEqual([...ids].sort().slice(0, 10));
    const next = await store.resources.search(TENANT, { ...q, count: 10, after: { id: page.at(-1)!.id, lastUpdated: 0 } });
    expect(next.map((v) => v.id)).toEqual([...ids].sort().slice(10, 20));
  });

  test('a count of 1,000 ids, and ids listed by two conditions, read their resources by key', async () => {
    const ids = Array.from({ length: 1000 }, (_, i) => binaryId(i * 2));
    const q: SearchQuery = { type: 'Binary', where: [{ kind: 'id', ids }, { kind: 'id', ids: ids.slice(500).concat(binaryId(1)) }], sort: [], count: 1001 };
    const counted = countSql(POSTGRES, TENANT, q);
    expect(await rowsRead(counted.sql, counted.values)).toBeLessThanOrEqual(1000);
    expect(await store.resources.count(TENANT, q)).toBe(500);
    const [page] = await statements(q);
    expect(await rowsRead(page!.sql, page!.values)).toBeLessThanOrEqual(1000);
    expect((await store.resources.search(TENANT, q)).map((v) => v.id)).toEqual(ids.slice(500));
  });

  test('ids beside other conditions are read by their key too, the others tested on each', async () => {
    // Every sixth Patient (a third of them female): 500 ids, 167 of them female, all written before `before`.
    const ids = Array.from({ length: 500 }, (_, i) => patientId(i * 6 + 3));
    const female = ids.filter((id) => Number(id.slice(2)) % 3 === 0);
    const before: Condition = { kind: 'lastUpdated', tests: [{ op: 'lt', low: WRITTEN + 1, high: WRITTEN + 1 }] };
    const cases: [SearchQuery, string[]][] = [
      // A Group export's chunk of member Patients that existed at a time (src/export/group.ts).
      [{ type: 'Patient', where: [{ kind: 'id', ids }, before], sort: [], count: 500 }, ids],
      // A scope's guard beside `$everything`'s ids (src/fhir/everything-rows.ts), or `_id` with another parameter.
      [{ type: 'Patient', where: [{ kind: 'id', ids }, { kind: 'token', param: 'gender', values: [{ value: 'female' }] }], sort: [], count: 500 }, female],
    ];
    for (const [q, expected] of cases) {
      const read: number[] = [];
      for (const s of await statements(q)) read.push(await rowsRead(s.sql, s.values));
      const counted = countSql(POSTGRES, TENANT, q);
      read.push(await rowsRead(counted.sql, counted.values));
      // Before: 3,000 (the type walked in id order), or the 1,000 female Patients read as a driver.
      expect({ q: q.where![1], read: read.map((n) => n <= ids.length) }).toEqual({ q: q.where![1], read: read.map(() => true) });
      expect((await store.resources.search(TENANT, q)).map((v) => v.id)).toEqual(expected);
      expect(await store.resources.count(TENANT, q)).toBe(expected.length);
    }
  });

  /** The page statement the snapshot sends for `q` (ids named: no window is looked up first). */
  async function snapshotStatement(q: SnapshotQuery): Promise<{ sql: string; values: SqlValue[] }> {
    const sent: { sql: string; values: SqlValue[] }[] = [];
    const recording = { unsafe: (sql: string, values: SqlValue[]) => (sent.push({ sql, values }), { raw: async () => [] }) };
    await createPostgresSnapshot(recording as unknown as Pg)(TENANT, q);
    expect(sent.length).toBe(1);
    return sent[0]!;
  }

  test("an export page of named ids (a page of Provenance's targets) reads their resources by key, not the type", async () => {
    // Every third Patient, out of order and one named twice, as a page of 1,000 Provenance names its targets.
    const ids = Array.from({ length: 1000 }, (_, i) => patientId((i * 3 + 1500) % PATIENTS));
    const at = WRITTEN + 1000;
    const cases: SnapshotQuery[] = [
      { type: 'Patient', at, limit: 2000, ids: [...ids, ids[3]!, 'absent'] },
      { type: 'Patient', at, limit: 2000, ids, compartment: { kind: 'any' } },
      { type: 'Patient', at, limit: 2000, ids, since: WRITTEN - 1 },
    ];
    for (const q of cases) {
      // Before: the `(tenant || '/' || type)` scan index, or the table, walked: all 3,000 Patients tested against the list.
      const { sql, values } = await snapshotStatement(q);
      expect(await rowsRead(sql, values)).toBeLessThanOrEqual(ids.length + 1);
      const page = await store.resources.snapshot(TENANT, q);
      const found = new TextDecoder().decode(page.lines).split('\n').filter(Boolean).map((l) => (JSON.parse(l) as { id: string }).id);
      expect(found.sort()).toEqual([...ids].sort());
      expect(page.next).toBeNull();
    }
    // Pages of them in key order, the next after the last key.
    const first = await store.resources.snapshot(TENANT, { type: 'Patient', at, limit: 600, ids });
    expect(first.count).toBe(600);
    const rest = await store.resources.snapshot(TENANT, { type: 'Patient', at, limit: 600, ids, after: first.next! });
    expect(rest.count).toBe(400);
    expect(rest.next).toBeNull();
  });
});
