/**
 * The search statements whose form sets their plan (search-sql.ts StatementForm: a driver's rows read
 * first, a sort key's index walked) are prepared on PostgreSQL: parsed once per connection and run
 * without the round trip that first describes an unprepared statement's parameters. Those of a plain
 * form (every condition an index range or a probe by resource; or ids alone) run on the pool of generic plans, where
 * one plan serves every run; those with a chain, `_has` or full-text set stay on the main pool, where
 * PostgreSQL plans them as it finds best. An undriven search read in id order with each condition
 * probed is of a plain form too; one with a set (`_has`), and counts of sets intersected, are left to
 * PostgreSQL's plan of their values, unprepared. Read from `pg_prepared_statements` on each pool's one connection,
 * with the answers checked against the data's arithmetic throughout.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { compileSearch } from '../../src/fhir/search.ts';
import { connect, connectForKeys, connectGeneric, type Pg } from '../../src/store/postgres/db.ts';
import { createKeysConnection, type KeysConnection } from '../../src/store/postgres/keys-connection.ts';
import { createPostgresResources } from '../../src/store/postgres/resources.ts';
import type { Condition, ResourceRepo, SearchQuery } from '../../src/store/types.ts';
import { storeTargets } from '../helpers/stores.ts';
import { firstVersions } from '../helpers/versions.ts';

const PATIENTS = 12;
const PER_PATIENT = 30;
const range = (n: number) => Array.from({ length: n }, (_, i) => i);
/** Observation `j` of patient `p`: code `a` every third, else `b`. */
const observations = range(PATIENTS).flatMap((p) => range(PER_PATIENT).map((j) => ({
  resourceType: 'Observation', id: `pp${p}-${j}`, status: 'final',
  code: { coding: [{ system: 'urn:test', code: j % 3 === 0 ? 'a' : 'b' }] },
  subject: { reference: `Patient/pp${p}` },
})));

const query = (type: string, search: string): SearchQuery => {
  const compiled = compileSearch(type, new URLSearchParams(search), true);
  return { ...compiled.query, where: compiled.pending as Condition[] };
};

const targets = (await storeTargets({ main: false })).filter((t) => t.kind === 'postgres');
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe('PostgreSQL prepares the search statements whose form sets their plan', () => {
    let sql: Pg;
    let keys: KeysConnection;
    let genericSql: Pg;
    let repo: ResourceRepo;
    /** The search statements prepared on a pool's one connection, with the plans PostgreSQL made of each. */
    const prepared = (on: Pg = sql) => on<{ statement: string; generic_plans: number; custom_plans: number }[]>`
      SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE 'SELECT r.type, r.id%'`;

    beforeAll(async () => {
      const db = await target.migrated();
      const store = db.open();
      await store.migrate();
      await store.resources.write('t1', (w) => w.insertNew(firstVersions([...range(PATIENTS).map((p) => ({ resourceType: 'Patient', id: `pp${p}` })), ...observations])));
      await store.resources.indexing.analyze();
      sql = connect(db.url, { max: 1 });
      keys = createKeysConnection(() => connectForKeys(db.url));
      genericSql = connectGeneric(db.url, { max: 1 });
      repo = createPostgresResources(sql, keys, genericSql);
    }, 60_000);
    afterAll(async () => {
      await sql.end();
      await keys.close();
      await genericSql.end();
    });

    test('a driven search of a plain form is prepared once on the pool of generic plans, which one generic plan serves, and answers right throughout', async () => {
      for (let round = 0; round < 2; round++) {
        for (const p of range(PATIENTS)) {
          const found = await repo.search('t1', query('Observation', `patient=pp${p}&code=a`));
          expect(found.map((r) => r.id).sort()).toEqual(range(PER_PATIENT).filter((j) => j % 3 === 0).map((j) => `pp${p}-${j}`).sort());
        }
      }
      const driven = (await prepared(genericSql)).filter((s) => s.statement.includes('unnest(ARRAY('));
      expect(driven).toHaveLength(1);
      // Each search ran it, with the one generic plan: none planned for its values.
      expect(driven[0]!.generic_plans).toBe(PATIENTS * 2);
      expect(driven[0]!.custom_plans).toBe(0);
      expect((await prepared(sql)).filter((s) => s.statement.includes('unnest(ARRAY('))).toHaveLength(0);
    });

    test('a driven search with a chain is prepared on the main pool, where PostgreSQL plans it as it finds best', async () => {
      for (const p of range(PATIENTS)) {
        const found = await repo.search('t1', query('Observation', `patient=pp${p}&subject:Patient._id=pp${p}&code=b`));
        expect(found.map((r) => r.id).sort()).toEqual(range(PER_PATIENT).filter((j) => j % 3 !== 0).map((j) => `pp${p}-${j}`).sort());
      }
      const chained = (await prepared(sql)).filter((s) => s.statement.includes('unnest(ARRAY('));
      expect(chained).toHaveLength(1);
      expect(chained[0]!.custom_plans + chained[0]!.generic_plans).toBe(PATIENTS);
      expect((await prepared(genericSql)).filter((s) => s.statement.includes('unnest(ARRAY('))).toHaveLength(1);
    });

    test('a search by ids alone (`_id`, the targets of `_include`) is prepared once on the pool of generic plans, whatever the number of ids', async () => {
      for (const p of range(PATIENTS)) {
        // Lists of 3, 4, 5, ... ids: one array value each, so one statement serves them all.
        const missing = range(p + 1).map((i) => `nothing${i}`).join(',');
        const found = await repo.search('t1', query('Observation', `_id=pp${p}-1,pp${p}-2,${missing}`));
        expect(found.map((r) => r.id)).toEqual([`pp${p}-1`, `pp${p}-2`]);
      }
      // Each id read by the key from the array (search-sql.ts Dialect.byIds).
      const byIds = (await prepared(genericSql)).filter((s) => s.statement.includes('::text[]) AS ') && s.statement.includes('CROSS JOIN LATERAL (SELECT r.*'));
      expect(byIds).toHaveLength(1);
      expect(byIds[0]!.generic_plans).toBe(PATIENTS);
    });

    /** Every statement prepared on a pool's one connection, with its generic plans. */
    const statements = (on: Pg) => on<{ statement: string; generic_plans: number }[]>`SELECT statement, generic_plans FROM pg_prepared_statements`;
    /** The statements `run` prepared on each pool (those it found prepared already are not told apart). */
    async function preparedBy(run: () => Promise<void>): Promise<{ main: string[]; generic: { statement: string; generic_plans: number }[] }> {
      const [main, generic] = [new Set((await statements(sql)).map((s) => s.statement)), new Set((await statements(genericSql)).map((s) => s.statement))];
      await run();
      return {
        main: (await statements(sql)).map((s) => s.statement).filter((s) => !main.has(s)),
        generic: (await statements(genericSql)).filter((s) => !generic.has(s.statement)),
      };
    }

    test('an undriven search read in id order, each condition probed, is prepared on the pool of generic plans', async () => {
      // `:not` drives no search: the first rows in id order are read, each probed, and hold every match.
      const made = await preparedBy(async () => {
        for (let i = 0; i < 3; i++) {
          const found = await repo.search('t1', { ...query('Observation', 'code:not=b'), count: 1000 });
          expect(found).toHaveLength(PATIENTS * (PER_PATIENT / 3));
        }
      });
      expect(made.main).toEqual([]);
      const inOrder = made.generic.filter((s) => s.statement.includes('SELECT r.type, r.id'));
      expect(inOrder).toHaveLength(1);
      expect(inOrder[0]!.statement).toStartWith('WITH bound AS MATERIALIZED');
      expect(inOrder[0]!.generic_plans).toBe(3);
    });

    test('an undriven search with a _has set is left to PostgreSQL\'s plan of its values: not prepared', async () => {
      const made = await preparedBy(async () => {
        for (let i = 0; i < 3; i++) {
          const found = await repo.search('t1', { ...query('Patient', '_has:Observation:subject:code=a'), count: 1000 });
          expect(found).toHaveLength(PATIENTS);
        }
      });
      // (The count that weighs probing the `_has` against its set is prepared, on the main pool.)
      const searches = [made.main.filter((s) => s.includes('SELECT r.type, r.id')), made.generic.filter((s) => s.statement.includes('SELECT r.type, r.id'))];
      expect(searches).toEqual([[], []]);
    });

    test('a count on one plain condition\'s index rows is prepared on the pool of generic plans; one of sets is not', async () => {
      const one = await preparedBy(async () => {
        for (let i = 0; i < 3; i++) expect(await repo.count('t1', query('Observation', 'code=a'))).toBe(PATIENTS * (PER_PATIENT / 3));
      });
      expect(one.main).toEqual([]);
      expect(one.generic.map((s) => [s.statement.startsWith('SELECT CASE WHEN'), s.generic_plans])).toEqual([[true, 3]]);
      // No condition drives: the count tests the type's resources against the conditions' sets.
      const sets = await preparedBy(async () => {
        for (let i = 0; i < 3; i++) expect(await repo.count('t1', query('Observation', 'code:not=b&status:not=cancelled'))).toBe(PATIENTS * (PER_PATIENT / 3));
      });
      expect([sets.main, sets.generic]).toEqual([[], []]);
    });
  });
}
