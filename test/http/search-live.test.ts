/**
 * Undriven searches test `deleted` only where no condition reads the resource's own rows (search-sql.ts
 * fromWhere, readsOwnRows), on both databases: index and compartment rows are those of current, live
 * versions, so a resource one of them selects is live, and SQLite walks the type's (tenant, type, id)
 * index without reading the resource rows of resources no condition selects. `_id`, `_lastUpdated`,
 * `_has`, negations and `:missing=true` select deleted resources too, and keep the test. The answers
 * are checked against the data's own arithmetic after deletions and updates, through the API and
 * through each undriven statement (sets, probes, the first rows in order) run as it is.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { compileSearch } from '../../src/fhir/search.ts';
import { POSTGRES, searchSql, SQLITE } from '../../src/store/search-sql.ts';
import type { Condition, SearchQuery } from '../../src/store/types.ts';
import type { TestApp } from '../helpers/app.ts';
import { matchesOfAllPages, type FhirClient } from '../helpers/fhir.ts';
import { appOnFresh, statementRunner } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';
import { firstVersions } from '../helpers/versions.ts';

const N = 300;
const PATIENTS = 10;
const range = (n: number) => Array.from({ length: n }, (_, i) => i);
const oid = (i: number) => `lo${String(i).padStart(3, '0')}`;

/** Observation `i`: code `a` every third, else `b`; final when even; a value when i % 4 === 0; of patient `lp{i % 10}`. */
const observation = (i: number) => ({
  resourceType: 'Observation', id: oid(i), status: i % 2 ? 'amended' : 'final',
  code: { coding: [{ system: 'urn:test', code: i % 3 === 0 ? 'a' : 'b' }] },
  subject: { reference: `Patient/lp${i % PATIENTS}` },
  ...(i % 4 === 0 && { valueQuantity: { value: i, unit: 'mg', system: 'http://unitsofmeasure.org', code: 'mg' } }),
});
/** Deleted afterwards: every fifth; recoded `b` afterwards: every seventh of the others coded `a`. Patient lp3 deleted too. */
const deleted = (i: number) => i % 5 === 0;
const recoded = (i: number) => !deleted(i) && i % 3 === 0 && i % 7 === 0;
const codeOf = (i: number) => (i % 3 === 0 && !recoded(i) ? 'a' : 'b');
const live = range(N).filter((i) => !deleted(i));
const ids = (f: (i: number) => boolean) => live.filter(f).map(oid);

const query = (type: string, search: string): SearchQuery => {
  const compiled = compileSearch(type, new URLSearchParams(search), true);
  return { ...compiled.query, where: compiled.pending as Condition[], count: 1000 };
};

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`undriven searches and deleted resources on ${target.kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    let url: string;
    const dialect = target.kind === 'sqlite' ? SQLITE : POSTGRES;
    /** The test of the outer resource row `r` (not of the rows a chain or `_has` reads, `r2`, `hr`...). */
    const liveTest = target.kind === 'sqlite' ? /\br\.deleted = 0/ : /NOT r\.deleted\b/;

    beforeAll(async () => {
      ({ t, api, url } = await appOnFresh(target));
      await t.store.resources.write('t1', (w) => w.insertNew(firstVersions([
        ...range(PATIENTS).map((p) => ({ resourceType: 'Patient', id: `lp${p}`, gender: p % 2 ? 'female' : 'male' })), ...range(N).map(observation),
      ])));
      for (const i of range(N).filter(deleted)) expect((await api.del(`Observation/${oid(i)}`)).status).toBe(200);
      for (const i of range(N).filter(recoded)) {
        const o = observation(i);
        expect((await api.put(`Observation/${o.id}`, { ...o, code: { coding: [{ system: 'urn:test', code: 'b' }] } })).status).toBe(200);
      }
      expect((await api.del('Patient/lp3')).status).toBe(200);
      await t.store.resources.indexing.analyze();
    }, 60_000);
    afterAll(() => t.close());

    const cases: [string, string, string[]][] = [
      // Conditions on the resource's own rows: no deletion among them.
      ['Observation', 'code=a', ids((i) => codeOf(i) === 'a')],
      ['Observation', 'code=a&status=final', ids((i) => codeOf(i) === 'a' && i % 2 === 0)],
      ['Observation', 'combo-code=a', ids((i) => codeOf(i) === 'a')],
      ['Observation', 'value-quantity=gt100&code:not=a', ids((i) => i % 4 === 0 && i > 100 && codeOf(i) !== 'a')],
      ['Observation', 'value-quantity:missing=false&status=amended', []],
      ['Observation', 'subject:Patient.gender=female&code=a', ids((i) => codeOf(i) === 'a' && i % 2 === 1 && i % PATIENTS !== 3)],
      // Conditions that a deleted resource meets too: `_id`, negations, `:missing=true`, `_lastUpdated`.
      ['Observation', `_id=${oid(0)},${oid(3)},${oid(5)},${oid(6)}`, [oid(3), oid(6)]],
      ['Observation', 'code:not=b', ids((i) => codeOf(i) !== 'b')],
      ['Observation', 'value-quantity:missing=true&code:not=b', ids((i) => i % 4 !== 0 && codeOf(i) !== 'b')],
      ['Observation', '_lastUpdated=gt2000-01-01', live.map(oid)],
      // `_has` reads the referring resources' rows: lp3, deleted, is still referred to.
      ['Patient', '_has:Observation:subject:code=a', range(PATIENTS).filter((p) => p !== 3 && live.some((i) => i % PATIENTS === p && codeOf(i) === 'a')).map((p) => `lp${p}`)],
      ['Patient', '_has:Observation:subject:code=a&gender=female', ['lp1', 'lp5', 'lp7', 'lp9'].filter((p) => live.some((i) => `lp${i % PATIENTS}` === p && codeOf(i) === 'a'))],
    ];

    test('through the API: live, current versions only', async () => {
      for (const [type, search, expected] of cases) {
        expect(expected.length + search.length).toBeGreaterThan(0);
        expect([search, await matchesOfAllPages(api, `${type}?${search}&_count=7`)]).toEqual([search, [...expected].sort()]);
      }
    });

    test('each undriven statement, run as it is: sets, probes, the first rows in order', async () => {
      const { runner, close } = await statementRunner(target.kind, url);
      try {
        for (const [type, search, expected] of cases) {
          const q = query(type, search);
          for (const [form, { sql, values }] of [
            ['sets', searchSql(dialect, 't1', q)], ['probes', searchSql(dialect, 't1', q, {})], ['first rows', searchSql(dialect, 't1', q, {}, 1000)],
          ] as const) {
            const rows = (await runner.rows(sql, values)) as { id: string }[];
            expect([search, form, rows.map((r) => r.id).sort()]).toEqual([search, form, [...expected].sort()]);
          }
        }
      } finally {
        await close();
      }
    });

    test('the statements test deleted only where no condition reads the resource\'s own rows', () => {
      const sql = (type: string, search: string) => searchSql(dialect, 't1', query(type, search), {}, 50).sql;
      for (const search of ['code=a', 'code=a&status=final', 'combo-code=a', 'value-quantity=gt100&code:not=a', 'subject:Patient.gender=female&code=a']) {
        expect([search, liveTest.test(sql('Observation', search))]).toEqual([search, false]);
      }
      for (const search of [`_id=${oid(3)}`, 'code:not=b', 'value-quantity:missing=true', '_lastUpdated=gt2000-01-01']) {
        expect([search, liveTest.test(sql('Observation', search))]).toEqual([search, true]);
      }
      expect(sql('Patient', '_has:Observation:subject:code=a')).toMatch(liveTest);
      expect(sql('Patient', '_has:Observation:subject:code=a&gender=female')).not.toMatch(liveTest);
    });
  });
}
