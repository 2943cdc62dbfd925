/**
 * Searches whose conditions each match more than DRIVER_MAX_ROWS resources (search-sql.ts
 * plannedSearch and wideDriver), on both databases: the first resources read in order, then the rest
 * of the page after them, read in order or driven by a condition, give every match once and in order;
 * a set (a chain) is counted and sampled. The answers are checked against the data's own arithmetic,
 * and the statements the planner ran against what it should have chosen.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { compileSearch } from '../../src/fhir/search.ts';
import { countSql, DRIVER_MAX_ROWS, plannedSearch, POSTGRES, searchSql, SQLITE } from '../../src/store/search-sql.ts';
import type { TestApp } from '../helpers/app.ts';
import { matchesOfAllPages, type FhirClient, type Json } from '../helpers/fhir.ts';
import { appOnFresh, statementRunner } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';
import { firstVersions } from '../helpers/versions.ts';
import type { Condition } from '../../src/store/types.ts';

const CAT = 'http://terminology.hl7.org/CodeSystem/observation-category';
const N = 5000;
const BASE = Date.parse('2026-01-01T00:00:00Z');

/**
 * Observation `i`: ids a permutation of o0000..o4999 (so that id order is not insertion order), even
 * ones laboratory with code `even`, odd ones vital signs with code `odd`, and every 250th (even) also
 * coded `odd`: 20 laboratory Observations coded `odd`, spread over the ids. Subjects: 30 patients,
 * the first 20 named Common.
 */
const observation = (i: number) => ({
  resourceType: 'Observation', id: `o${String((i * 7919) % N).padStart(4, '0')}`, status: 'final',
  category: [{ coding: [{ system: CAT, code: i % 2 === 0 ? 'laboratory' : 'vital-signs' }] }],
  code: { coding: [{ system: 'urn:test', code: i % 2 === 0 ? 'even' : 'odd' }, ...(i % 250 === 0 ? [{ system: 'urn:test', code: 'odd' }] : [])] },
  subject: { reference: `Patient/pl${i % 30}` },
});
const lastUpdated = (i: number) => BASE + ((i * 31) % N) * 1000;
const all = Array.from({ length: N }, (_, i) => i);
const ids = (is: number[]) => is.map((i) => observation(i).id).sort();
const byLastUpdated = (is: number[]) => [...is].sort((a, b) => lastUpdated(b) - lastUpdated(a)).map((i) => observation(i).id);

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`the planner's wide drivers on ${target.kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    let url: string;
    const paged = (query: string) => matchesOfAllPages(api, query);

    beforeAll(async () => {
      ({ t, api, url } = await appOnFresh(target));
      for (let k = 0; k < 30; k++) await api.put200({ resourceType: 'Patient', id: `pl${k}`, name: [{ family: k < 20 ? 'Common' : `Rare${k}` }] });
      await t.store.resources.write('t1', (w) => w.insertNew(all.flatMap((i) => firstVersions([observation(i)], lastUpdated(i)))));
      await t.store.resources.indexing.analyze();
    }, 60_000);
    afterAll(() => t.close());

    test('two large conditions with few matches together: every match once, in id and in _lastUpdated order', async () => {
      const few = all.filter((i) => i % 250 === 0);
      expect(few.length).toBe(20);
      for (const count of [1, 3, 7, 50]) {
        expect(await paged(`Observation?category=laboratory&code=odd&_count=${count}`)).toEqual(ids(few));
        expect(await paged(`Observation?code=odd&category=laboratory&_sort=-_lastUpdated&_count=${count}`)).toEqual(byLastUpdated(few));
      }
      expect((await api.search('Observation?category=laboratory&code=odd&_total=accurate&_count=2')).total).toBe(20);
      expect((await api.search('Observation?category=laboratory&code=odd&_summary=count')).total).toBe(20);
      // Sorted on a parameter (every match is read, paged by offset): the same 20, ties by id.
      for (const count of [3, 50]) expect(await paged(`Observation?category=laboratory&code=odd&_sort=-code&_count=${count}`)).toEqual(ids(few));
    });

    test('two large conditions no resource meets together: an empty page and a total of 0', async () => {
      const b = await api.search('Observation?category=vital-signs&code=even&_total=accurate');
      expect(b.total).toBe(0);
      expect(b.entry ?? []).toEqual([]);
    });

    test('common matches: the first page comes from the first resources read in order', async () => {
      const even = all.filter((i) => i % 2 === 0);
      const page = await api.search('Observation?category=laboratory&status=final&_count=5');
      expect(page.entry.map((e: Json) => e.resource.id)).toEqual(ids(even).slice(0, 5));
      expect(await paged('Observation?category=laboratory&code=even&_count=1000')).toEqual(ids(even));
    });

    test('a chain of many references with a rarer code: counted, sampled, and every match once', async () => {
      const common = (i: number) => i % 30 < 20;
      expect(await paged('Observation?subject:Patient.family=Common&category=laboratory&code=odd&_count=4')).toEqual(ids(all.filter((i) => i % 250 === 0 && common(i))));
      const odd = ids(all.filter((i) => (i % 2 === 1 || i % 250 === 0) && common(i)));
      const first = await api.search('Observation?subject:Patient.family=Common&code=odd&_count=50');
      expect(first.entry.map((e: Json) => e.resource.id)).toEqual(odd.slice(0, 50));
    });

    test('a driver\'s rows intersected with another condition\'s set (SearchPlan.intersect): the same page and count as probed', async () => {
      const { runner, close } = await statementRunner(target.kind, url);
      const dialect = target.kind === 'sqlite' ? SQLITE : POSTGRES;
      try {
        const common = (i: number) => i % 30 < 20;
        const cases: [string, number[]][] = [
          ['subject:Patient.family=Common&code=odd', all.filter((i) => (i % 2 === 1 || i % 250 === 0) && common(i))],
          ['subject:Patient.family=Common&code=even&_sort=-_lastUpdated', all.filter((i) => i % 2 === 0 && common(i))],
          ['category=laboratory&code=odd', all.filter((i) => i % 250 === 0)],
        ];
        for (const [query, matches] of cases) {
          const compiled = compileSearch('Observation', new URLSearchParams(`${query}&_count=40`), true);
          const q = { ...compiled.query, where: compiled.pending as Condition[] };
          const expected = query.includes('_sort=-_lastUpdated') ? byLastUpdated(matches).slice(0, 40) : ids(matches).slice(0, 40);
          for (const plan of [{ driver: 0 }, { driver: 0, intersect: 1 }, { driver: 1, intersect: 0 }]) {
            const page = searchSql(dialect, 't1', q, plan);
            expect(page.sql.includes(' INTERSECT ')).toBe(plan.intersect !== undefined);
            expect(((await runner.rows(page.sql, page.values)) as { id: string }[]).map((r) => r.id)).toEqual(expected);
            const count = countSql(dialect, 't1', q, plan);
            expect(await runner.count(count.sql, count.values)).toBe(matches.length);
          }
        }
      } finally {
        await close();
      }
    });

    test('a date range whose two conditions each match thousands: on PostgreSQL one drives and the other\'s rows are intersected as a set', async () => {
      // 5,000 Procedures an hour apart, in id order; `ge` and `lt` each match 2,600, both together 200,
      // none of them among the first 500 in id order (which plannedSearch reads first).
      const P = 5000;
      const at = (i: number) => new Date(BASE + i * 3_600_000).toISOString().replace('.000Z', 'Z');
      const procedure = (i: number) => ({ resourceType: 'Procedure', id: `pr${String(i).padStart(4, '0')}`, status: 'completed', subject: { reference: `Patient/pl${i % 30}` }, performedDateTime: at(i) });
      await t.store.resources.write('t1', (w) => w.insertNew(firstVersions(Array.from({ length: P }, (_, i) => procedure(i)))));
      await t.store.resources.indexing.analyze();
      const matches = Array.from({ length: 200 }, (_, k) => procedure(2400 + k).id);
      const query = `date=ge${at(2400)}&date=lt${at(2600)}`;
      const statements: string[] = [];
      const { runner, close } = await statementRunner(target.kind, url, statements);
      const dialect = target.kind === 'sqlite' ? SQLITE : POSTGRES;
      try {
        const compiled = compileSearch('Procedure', new URLSearchParams(`${query}&_count=50`), true);
        const rows = await plannedSearch(dialect, 't1', { ...compiled.query, where: compiled.pending as Condition[] }, runner, () => P);
        expect((rows as { id: string }[]).map((r) => r.id)).toEqual(matches.slice(0, 50));
        const searches = statements.filter((s) => s.includes('SELECT r.type, r.id'));
        expect(searches[0]).toStartWith('WITH bound AS MATERIALIZED');
        // SQLite has no cost of intersected rows (PlanCosts.intersectRow): its driver probes each row.
        expect(searches.at(-1)!.includes(' INTERSECT ')).toBe(target.kind === 'postgres');
      } finally {
        await close();
      }
      expect(await paged(`Procedure?${query}&_count=50`)).toEqual(matches);
      expect((await api.search(`Procedure?${query}&_summary=count`)).total).toBe(200);
    });

    test('_has probed in order: where the first rows predict the rest of the page, the next rows are read the same way, not the set', async () => {
      // A final DiagnosticReport for every fourteenth Observation: about 36 of the first 500 in id order.
      const reported = all.filter((i) => i % 14 === 5);
      await t.store.resources.write('t1', (w) => w.insertNew(firstVersions(reported.map((i) => ({
        resourceType: 'DiagnosticReport', id: `dr${i}`, status: 'final', code: { text: 'x' }, result: [{ reference: `Observation/${observation(i).id}` }],
      })))));
      const statements: string[] = [];
      const { runner, close } = await statementRunner(target.kind, url, statements);
      const dialect = target.kind === 'sqlite' ? SQLITE : POSTGRES;
      try {
        const search = async (count: number, size = N) => {
          statements.length = 0;
          const compiled = compileSearch('Observation', new URLSearchParams(`_has:DiagnosticReport:result:status=final&_count=${count}`), true);
          const rows = await plannedSearch(dialect, 't1', { ...compiled.query, where: compiled.pending as Condition[] }, runner, () => size);
          return { ids: (rows as { id: string }[]).map((r) => r.id), searches: statements.filter((s) => s.includes('SELECT r.type, r.id')) };
        };
        const first500 = ids(all).slice(0, 500);
        const early = ids(reported).filter((id) => first500.includes(id)).length;
        expect(early).toBeGreaterThan(25);
        expect(early).toBeLessThan(50);
        // 50: the rest (fewer than those found) comes from the next rows, read in order too.
        const page = await search(50);
        expect(page.ids).toEqual(ids(reported).slice(0, 50));
        expect(page.searches.length).toBe(2);
        expect(page.searches.every((s) => s.startsWith('WITH bound AS MATERIALIZED'))).toBe(true);
        // 100 (with the types estimated at 3,000 resources, so that the 358 reports still cost more as
        // a set than probed): more than those found remain, so the rest reads the set after the first rows.
        const more = await search(100, 3000);
        expect(more.ids).toEqual(ids(reported).slice(0, 100));
        expect(more.searches.length).toBe(2);
        expect(more.searches[0]).toStartWith('WITH bound AS MATERIALIZED');
        expect(more.searches[1]).not.toContain('bound');
      } finally {
        await close();
      }
    });

    test(':missing=true with few matches: the resources without the element found at once, deleted ones left out', async () => {
      // 3,000 Conditions, every one coded but seven; two of those seven are then deleted.
      const M = 3000;
      const uncoded = new Set([17, 512, 1333, 2048, 2999, 700, 1500]);
      const condition = (i: number) => ({
        resourceType: 'Condition', id: `c${String((i * 7919) % M).padStart(4, '0')}`, subject: { reference: `Patient/pl${i % 30}` },
        onsetDateTime: new Date(BASE + i * 3_600_000).toISOString(),
        ...(!uncoded.has(i) && { code: { coding: [{ system: 'urn:test', code: `k${i % 7}` }] } }),
      });
      await t.store.resources.write('t1', (w) => w.insertNew(firstVersions(Array.from({ length: M }, (_, i) => condition(i)))));
      for (const i of [700, 1500]) expect((await api.del(`Condition/${condition(i).id}`)).status).toBe(200);
      const live = [17, 512, 1333, 2048, 2999];
      const expected = live.map((i) => condition(i).id).sort();
      for (const count of [2, 10]) expect(await paged(`Condition?code:missing=true&_count=${count}`)).toEqual(expected);
      expect((await api.search('Condition?code:missing=true&_summary=count')).total).toBe(5);
      expect((await api.search('Condition?code:missing=true&_total=accurate&_count=1')).total).toBe(5);
      // Sorted on a parameter, and with another condition.
      expect(await paged('Condition?code:missing=true&_sort=-onset-date&_count=2')).toEqual([...live].reverse().map((i) => condition(i).id));
      expect(await paged('Condition?code:missing=true&subject=Patient/pl17')).toEqual([condition(17).id]);
      // And `:missing=false` counts the others.
      expect((await api.search('Condition?code:missing=false&_summary=count')).total).toBe(M - 7);
    });

    test('one condition alone, common in its type though of fewer than DRIVER_MAX_ROWS rows: every page and the total as driven', async () => {
      const ten = Array.from({ length: 10 }, (_, k) => `Patient/pl${k}`).join(',');
      const matches = ids(all.filter((i) => i % 30 < 10));
      expect(matches.length).toBe(1670);
      expect(await paged(`Observation?subject=${ten}&_count=300`)).toEqual(matches);
      expect(await paged(`Observation?subject=${ten}&_count=7&_sort=_id`)).toEqual(matches);
      const sorted = all.filter((i) => i % 30 < 10).sort((a, b) => lastUpdated(b) - lastUpdated(a) || (observation(a).id < observation(b).id ? -1 : 1));
      expect(await paged(`Observation?subject=${ten}&_count=250&_sort=-_lastUpdated`)).toEqual(sorted.map((i) => observation(i).id));
      const page = await api.search(`Observation?subject=${ten}&_total=accurate&_count=10`);
      expect(page.total).toBe(1670);
      expect((page.entry ?? []).map((e: Json) => e.resource.id)).toEqual(matches.slice(0, 10));
    });

    test('the plans: read in order while matches are common, driven by the smaller condition when rare', async () => {
      const statements: string[] = [];
      const { runner, close } = await statementRunner(target.kind, url, statements);
      const dialect = target.kind === 'sqlite' ? SQLITE : POSTGRES;
      const search = async (query: string, size = N) => {
        statements.length = 0;
        const compiled = compileSearch('Observation', new URLSearchParams(query), true);
        const q = { ...compiled.query, where: compiled.pending as Condition[] };
        const rows = await plannedSearch(dialect, 't1', q, runner, () => size);
        return { ids: (rows as { id: string }[]).map((r) => r.id), searches: statements.filter((s) => s.includes('SELECT r.type, r.id')) };
      };
      try {
        // Rare together: the first 500 in order hold few; the rest is driven by one of the two.
        const rare = await search('category=laboratory&code=odd&_count=50');
        expect(rare.ids).toEqual(ids(all.filter((i) => i % 250 === 0)));
        expect(rare.searches.length).toBe(2);
        expect(rare.searches[0]).not.toContain('SELECT DISTINCT d.res');
        expect(rare.searches[1]).toContain('SELECT DISTINCT d.res');
        // Common: one search, the first resources read in order.
        const common = await search('category=laboratory&status=final&_count=10');
        expect(common.ids.length).toBe(10);
        expect(common.searches.length).toBe(1);
        // A condition of 1,336 rows (eight patients' Observations) among 5,000 resources with a page of
        // ten: were it the only one, reading in order would fill the page within the first 500, so it
        // is not counted past DRIVER_TAKE_AT and the first rows are read first.
        const subjects = Array.from({ length: 8 }, (_, k) => `Patient/pl${k}`).join(',');
        const counts: string[] = [];
        const counting = runner.count;
        runner.count = (sql, values) => (counts.push(sql), counting(sql, values));
        const eight = await search(`subject=${subjects}&category=laboratory&_count=10`);
        runner.count = counting;
        expect(eight.ids).toEqual(ids(all.filter((i) => i % 30 < 8 && i % 2 === 0)).slice(0, 10));
        expect(eight.searches.length).toBe(1);
        expect(eight.searches[0]).not.toContain('SELECT DISTINCT d.res');
        expect(counts.some((c) => c.includes(`LIMIT ${DRIVER_MAX_ROWS + 1}`))).toBe(false);
        // Among 686,776 resources it drives.
        const large = await search(`subject=${subjects}&category=laboratory&_count=10`, 686_776);
        expect(large.ids).toEqual(eight.ids);
        expect(large.searches.at(-1)).toContain('SELECT DISTINCT d.res');
        // `:missing=true`: no candidate; the first rows read in order hold none of its few matches, so
        // the resources without the element's rows drive; where the first rows hold the page, they are it.
        const missing = await search('code:missing=true&_count=10');
        expect(missing.ids).toEqual([]);
        expect(missing.searches.length).toBe(2);
        expect(missing.searches[1]).toContain(' EXCEPT SELECT s.res FROM search_index s');
        const unvalued = await search('value-quantity:missing=true&_count=10');
        expect(unvalued.ids.length).toBe(10);
        expect(unvalued.searches.length).toBe(1);
        // In a type of a few hundred resources (as estimated), no driver of more than DRIVER_MAX_ROWS
        // rows costs less than reading them all in order.
        const small = await search('category=laboratory&code=odd&_count=50', 500);
        expect(small.ids).toEqual(rare.ids);
        expect(small.searches.every((s) => !s.includes('SELECT DISTINCT d.res'))).toBe(true);
        // One condition alone, of 1,670 rows (ten patients' Observations) among 5,000: the page of ten
        // comes after about 30 resources read in order, not from all 1,670 rows read and sorted; one
        // patient's 167 rows, with a page of 50 (about 1,500 resources in order), still drive.
        const ten = Array.from({ length: 10 }, (_, k) => `Patient/pl${k}`).join(',');
        const lone = await search(`subject=${ten}&_count=10`);
        expect(lone.ids).toEqual(ids(all.filter((i) => i % 30 < 10)).slice(0, 10));
        expect(lone.searches.length).toBe(1);
        expect(lone.searches[0]).not.toContain('SELECT DISTINCT d.res');
        const one = await search('subject=Patient/pl3&_count=50');
        expect(one.ids).toEqual(ids(all.filter((i) => i % 30 === 3)).slice(0, 50));
        expect(one.searches.at(-1)).toContain('SELECT DISTINCT d.res');
      } finally {
        await close();
      }
    });
  });
}
