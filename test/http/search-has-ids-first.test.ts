/**
 * A `_has` read as a set in a page in id order (search-sql.ts fromWhere, Dialect.hasIds), on both databases: the
 * page is the set's first live resources in id order, whatever the set names besides (a deleted resource, an id
 * nothing has), in either direction, on every page; on PostgreSQL the page's statement reads the set's ids first
 * and only the page's resource rows.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { compileSearch } from '../../src/fhir/search.ts';
import { plannedSearch, POSTGRES, SQLITE } from '../../src/store/search-sql.ts';
import type { Condition } from '../../src/store/types.ts';
import type { TestApp } from '../helpers/app.ts';
import { matchesOfAllPages, type FhirClient, type Json } from '../helpers/fhir.ts';
import { appOnFresh, statementRunner } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';
import { firstVersions } from '../helpers/versions.ts';

const PATIENTS = 300;
const pid = (p: number) => `hi${String(p).padStart(3, '0')}`;
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);
/** The Patients with a Condition coded `set`: every third from hi002 on (100), as far from the first ids as from the last. */
const inSet = range(0, PATIENTS).filter((p) => p % 3 === 2);
/** One of them deleted after loading. */
const DELETED = pid(5);

/**
 * Ten Conditions per Patient (so that a set of a hundred stays a set: probesHas), ids a permutation; the first of
 * each Patient in `inSet` also coded `set`, and one more coded `set` refers to a Patient nobody wrote, whose id
 * sorts first.
 */
const conditions = [
  ...range(0, PATIENTS).flatMap((p) => range(0, 10).map((j) => ({
    resourceType: 'Condition', id: `ic${String(((p * 10 + j) * 7919) % (PATIENTS * 10)).padStart(4, '0')}`,
    subject: { reference: `Patient/${pid(p)}` },
    code: { coding: [{ system: 'urn:test', code: 'any' }, ...(j === 0 && inSet.includes(p) ? [{ system: 'urn:test', code: 'set' }] : [])] },
  }))),
  { resourceType: 'Condition', id: 'ic-ghost', subject: { reference: 'Patient/ha-ghost' }, code: { coding: [{ system: 'urn:test', code: 'set' }] } },
];
const patients = range(0, PATIENTS).map((p) => ({ resourceType: 'Patient', id: pid(p), gender: p % 2 ? 'female' : 'male' }));
/** The Patients the `_has` selects, in id order. */
const live = inSet.map(pid).filter((id) => id !== DELETED);

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`_has read as a set in id order on ${target.kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    let url: string;
    const ids = async (query: string) => ((await api.search(query)).entry ?? []).map((e: Json) => e.resource.id);

    beforeAll(async () => {
      ({ t, api, url } = await appOnFresh(target));
      await t.store.resources.write('t1', (w) => w.insertNew(firstVersions([...patients, ...conditions])));
      await t.store.resources.indexing.analyze();
      expect((await api.del(`Patient/${DELETED}`)).status).toBe(200);
    }, 60_000);
    afterAll(() => t.close());

    test('the first live resources the set names, in id order and the reverse, on every page', async () => {
      expect(await ids('Patient?_has:Condition:subject:code=set&_count=10')).toEqual(live.slice(0, 10));
      expect(await ids('Patient?_has:Condition:subject:code=set&_count=10&_sort=-_id')).toEqual([...live].reverse().slice(0, 10));
      expect(await matchesOfAllPages(api, 'Patient?_has:Condition:subject:code=set&_count=7')).toEqual(live);
      expect(await matchesOfAllPages(api, 'Patient?_has:Condition:subject:code=set&_count=7&_sort=-_id')).toEqual([...live].reverse());
      const total = await api.search('Patient?_has:Condition:subject:code=set&_count=3&_total=accurate');
      expect(total.total).toBe(live.length);
    });

    test('beside other conditions, a second `_has` and a list of ids', async () => {
      const female = live.filter((id) => Number(id.slice(2)) % 2 === 1);
      expect(await matchesOfAllPages(api, 'Patient?_has:Condition:subject:code=set&gender=female&_count=9')).toEqual(female);
      expect(await ids('Patient?_has:Condition:subject:code=set&_has:Condition:subject:code=any&_count=10')).toEqual(live.slice(0, 10));
      expect(await ids(`Patient?_has:Condition:subject:code=set&_id=${pid(0)},${pid(2)},${DELETED},${pid(8)}`)).toEqual([pid(2), pid(8)]);
      expect(await ids('Patient?_has:Condition:subject:code=nothing')).toEqual([]);
    });

    test('the page statement reads the page\'s resource rows alone (PostgreSQL), or the set as a condition (SQLite)', async () => {
      const statements: string[] = [];
      const { runner, close } = await statementRunner(target.kind, url, statements);
      const dialect = target.kind === 'sqlite' ? SQLITE : POSTGRES;
      const sizes: Record<string, number> = { Patient: PATIENTS, Condition: conditions.length };
      const pages: { sql: string; values: unknown[] }[] = [];
      try {
        const compiled = compileSearch('Patient', new URLSearchParams('_has:Condition:subject:code=set&_count=10'), true);
        const rows = await plannedSearch(dialect, 't1', { ...compiled.query, where: compiled.pending as Condition[] }, {
          count: runner.count,
          rows: (sql, values) => (sql.includes('SELECT r.type, r.id') && pages.push({ sql, values }), runner.rows(sql, values)),
        }, (type) => sizes[type]!);
        expect((rows as { id: string }[]).map((r) => r.id)).toEqual(live.slice(0, 10));
        expect(pages.length).toBe(1);
        if (target.kind === 'sqlite') {
          expect(pages[0]!.sql).toMatch(/r\.id IN \(SELECT/);
          return;
        }
        expect(pages[0]!.sql).toMatch(/JOIN resources r ON r\.id = h\.id/);
        // The statement again under EXPLAIN ANALYZE: the resource rows it looked up, over every node of the table.
        const [plan] = (await runner.rows(`EXPLAIN (ANALYZE, FORMAT JSON) ${pages[0]!.sql}`, pages[0]!.values as never)) as { 'QUERY PLAN': Json[] }[];
        let read = 0;
        const walk = (node: Json) => {
          if (node['Relation Name'] === 'resources') read += node['Actual Loops'];
          for (const child of node.Plans ?? []) walk(child);
        };
        walk(plan!['QUERY PLAN'][0].Plan);
        // The page's 10, the id nothing has and the deleted Patient, which sort among them: 12 of the set's 101.
        expect(read).toBeLessThanOrEqual(12);
      } finally {
        await close();
      }
    });
  });
}
