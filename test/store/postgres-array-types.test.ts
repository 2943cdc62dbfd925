/**
 * Cinder's PostgreSQL pools declare the built-in array types (src/store/postgres/array-types.ts) instead of
 * having postgres.js fetch them from `pg_type` on every new connection (`fetch_types`). Checked here against a
 * real server: each declared pair is the server's own, a new connection's first statement is the caller's (no
 * query of the catalog before it), and arrays of every declared type go out and come back as the types'
 * values, through the store and through a pool as the store opens it.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { BUILTIN_ARRAY_TYPES } from '../../src/store/postgres/array-types.ts';
import { connect, connectForKeys, connectGeneric, type Pg } from '../../src/store/postgres/db.ts';
import { createTestApp, fhirInit } from '../helpers/app.ts';
import { startPgFaultProxy } from '../helpers/pg-fault-proxy.ts';
import { storeTargets } from '../helpers/stores.ts';
import { createPostgresStore } from '../../src/store/postgres/index.ts';

const targets = await storeTargets({ main: false });
const pg = targets.find((t) => t.kind === 'postgres');
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

describe.skipIf(!pg)('PostgreSQL array types declared, not fetched', () => {
  test('each declared [element, array] pair is the server catalog\'s', async () => {
    const db = await pg!.fresh();
    const sql = connect(db.url, { max: 2 });
    try {
      const rows = await sql<{ element: number; array: number }[]>`
        SELECT oid::int AS element, typarray::int AS array FROM pg_type WHERE oid = ANY(${BUILTIN_ARRAY_TYPES.map(([e]) => e)}::int[]) ORDER BY oid`;
      expect(rows.map((r) => [r.element, r.array])).toEqual([...BUILTIN_ARRAY_TYPES].map(([e, a]) => [e, a]).sort((x, y) => x[0]! - y[0]!));
    } finally {
      await sql.end();
    }
  });

  test('a new connection of every pool sends no statement before the caller\'s (no query of the array types)', async () => {
    const db = await pg!.fresh();
    const target = new URL(db.url);
    const proxy = await startPgFaultProxy(Number(target.port || 5432));
    // Any session that asks the catalog for the array types is closed as it asks: the caller's statement would fail.
    proxy.shed(true, 'typcategory');
    const url = `postgres://${target.username}@127.0.0.1:${proxy.port}${target.pathname}`;
    const pools: Pg[] = [connect(url, { max: 2 }), connectGeneric(url, { max: 3 }), connectForKeys(url)];
    try {
      for (const sql of pools) expect([...(await sql`SELECT ${['a', 'b']}::text[] AS a`)]).toEqual([{ a: ['a', 'b'] }]);
      expect(proxy.shedCount).toBe(0);
      expect(proxy.opened).toBe(3);
    } finally {
      await Promise.all(pools.map((p) => p.end({ timeout: 1 })));
      proxy.stop();
    }
  });

  test('arrays of every declared type are sent and read back as their elements\' values', async () => {
    const db = await pg!.fresh();
    const sql = connect(db.url, { max: 2 });
    try {
      // [cast, element OID, values, what comes back when not the values]. A JS array of booleans, Dates or
      // Buffers is declared by postgres.js as its element's type (fetched types or not): those go as sql.array.
      const cases: [cast: string, element: number, values: unknown[], back?: unknown[]][] = [
        ['text', 25, ['plain', 'with "quotes"', 'back\\slash', 'comma, brace } { and space', '', 'NULL', null, 'é ✓ 🔥']],
        ['varchar', 1043, ['a', null, 'b,c']],
        ['int4', 23, [1, -2, 2147483647, null]],
        ['int2', 21, [1, -32768]],
        ['int8', 20, [1, 2 ** 53 - 1, -5, null]],
        ['float8', 701, [1.5, -0.25, 1e300, null]],
        ['float4', 700, [1.5, -0.25]],
        ['bool', 16, [true, false, null]],
        ['numeric', 1700, ['1.50', '-3']],
        ['jsonb', 3802, [{ a: [1, 'x"y'] }, null, 'str']],
        ['json', 114, [{ a: 1 }]],
        ['timestamptz', 1184, [new Date('2026-01-02T03:04:05.678Z')]],
        ['uuid', 2950, ['0f8fad5b-d9cb-469f-a165-70867728950e']],
        ['bytea', 17, [Buffer.from([0, 1, 255])]],
      ];
      const typedByDriver = new Set(['bool', 'timestamptz', 'bytea']);
      for (const [cast, element, values, back] of cases) {
        const sent = [sql.array(values as never[], element), ...(typedByDriver.has(cast) ? [] : [values])];
        for (const value of sent) {
          const [row] = await sql.unsafe<{ a: unknown[]; n: number }[]>(`SELECT $1::${cast}[] AS a, cardinality($1::${cast}[]) AS n`, [value as never]);
          expect([cast, row!.n, row!.a]).toEqual([cast, values.length, back ?? values]);
        }
      }
      // Two dimensions, an empty array, and an array the server writes with its bounds.
      const [nested] = await sql<{ a: unknown[]; e: unknown[]; b: unknown[] }[]>`
        SELECT ${[['a', null], ['{', '"']]}::text[] AS a, ${[]}::int[] AS e, '[0:1]={5,6}'::int[] AS b`;
      expect(nested).toEqual({ a: [['a', null], ['{', '"']], e: [], b: [5, 6] });
    } finally {
      await sql.end();
    }
  });

  test('the API on PostgreSQL writes and searches through array parameters', async () => {
    const db = await pg!.fresh();
    const app = await createTestApp({ store: createPostgresStore(db.url, { max: 4 }) });
    try {
      const token = await app.token();
      const base = app.fhir();
      for (const id of ['p1', 'p2', 'p3']) {
        const put = await app.request(`${base}/Patient/${id}`, fhirInit(token, 'PUT', { resourceType: 'Patient', id, name: [{ family: `Fam "${id}"` }], birthDate: '2000-01-02' }));
        expect(put.status).toBe(201);
      }
      const found = await app.request(`${base}/Patient?_id=p1,p3&name=Fam&birthdate=ge2000-01-01`, fhirInit(token));
      const ids = ((await found.json()) as { entry: { resource: { id: string } }[] }).entry.map((e) => e.resource.id).sort();
      expect(ids).toEqual(['p1', 'p3']);
    } finally {
      await app.close();
    }
  });
});
