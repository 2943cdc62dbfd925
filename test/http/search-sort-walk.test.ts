/**
 * Searches sorted on a parameter that no condition drives are read by walking the sort key's index in
 * order (search-sql.ts sortWalk), on both databases: the pages must be exactly those of the sort's
 * definition (a resource's least value ascending, its greatest descending, ties by id, resources
 * without a value last), whatever the ties at the walk's bound, the rows a resource has, the units of a
 * quantity (ordered by its value in its canonical UCUM unit), the offset, and conditions that make the walk read further or
 * give way. The expected orders are computed from the data's own arithmetic; on a generated data set,
 * every sortable parameter of every type is compared with the search that computes every resource's key.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { generatePatients } from '../../bench/lib/generator.ts';
import { paramsOf } from '../../src/fhir/definitions.ts';
import { compileSearch, encodeCursor } from '../../src/fhir/search.ts';
import { plannedSearch, POSTGRES, searchSql, SORT_WALK_MAX_ROWS, SQLITE } from '../../src/store/search-sql.ts';
import type { Condition, SortPosition } from '../../src/store/types.ts';
import type { TestApp } from '../helpers/app.ts';
import type { FhirClient, Json } from '../helpers/fhir.ts';
import { appOnFresh, statementRunner } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';
import { firstVersions } from '../helpers/versions.ts';

const CAT = 'http://terminology.hl7.org/CodeSystem/observation-category';
const UCUM = 'http://unitsofmeasure.org';
const N = 5000;
const BASE = Date.parse('2026-01-01T00:00:00Z');
const UNITS = ['kg', 'g', '[lb_av]'];

const id = (i: number) => `o${String((i * 7919) % N).padStart(4, '0')}`;
/** A minute of 1,000, so five Observations share each instant (ties at any bound). */
const start = (i: number) => BASE + ((i * 37) % 1000) * 60_000;
const dated = (i: number) => i % 50 !== 0;
const period = (i: number) => i % 10 === 0;
/** A period's end: up to six hours after its start. */
const end = (i: number) => start(i) + (i % 7) * 3_600_000;
const valued = (i: number) => i % 7 !== 0;
const value = (i: number) => (i * 13) % 500;
const components = (i: number) => [(i * 17) % 300, (i * 29) % 300];
const amended = (i: number) => i % 300 === 7;
const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');

/**
 * Observation `i`: laboratory or vital signs by turns; a date (a Period every tenth, none every 50th),
 * a quantity in one of three units (none every 7th), two blood-pressure components; `amended` every
 * 300th (17 in all, each dated), which only a negation selects, so no condition can drive it.
 */
const observation = (i: number) => ({
  resourceType: 'Observation', id: id(i), status: amended(i) ? 'amended' : 'final',
  category: [{ coding: [{ system: CAT, code: i % 2 === 0 ? 'laboratory' : 'vital-signs' }] }],
  code: { coding: [{ system: 'http://loinc.org', code: '85354-9' }] },
  ...(dated(i) && (period(i) ? { effectivePeriod: { start: iso(start(i)), end: iso(end(i)) } } : { effectiveDateTime: iso(start(i)) })),
  ...(valued(i) && { valueQuantity: { value: value(i), unit: UNITS[i % 3], system: UCUM, code: UNITS[i % 3] } }),
  component: components(i).map((v, c) => ({
    code: { coding: [{ system: 'http://loinc.org', code: c ? '8462-4' : '8480-6' }] },
    valueQuantity: { value: v, unit: 'mm[Hg]', system: UCUM, code: 'mm[Hg]' },
  })),
});
const all = Array.from({ length: N }, (_, i) => i);

/** The ids of `is` in a sort's order: by `key` (undefined last), `descending` or not, ties by id (`idsDown`: descending). */
function ordered(is: number[], key: (i: number) => number | undefined, descending: boolean, idsDown = false): string[] {
  const byId = (a: number, b: number) => (idsDown ? id(b).localeCompare(id(a)) : id(a).localeCompare(id(b)));
  return [...is].sort((a, b) => {
    const ka = key(a);
    const kb = key(b);
    if (ka === undefined || kb === undefined) return ka === kb ? byId(a, b) : ka === undefined ? 1 : -1;
    return ka === kb ? byId(a, b) : descending ? kb - ka : ka - kb;
  }).map(id);
}

// A dateTime to the second is the range of that second: its start ascending, its end descending.
const dateUp = (i: number) => (dated(i) ? start(i) : undefined);
const dateDown = (i: number) => (dated(i) ? (period(i) ? end(i) : start(i)) + 1000 : undefined);
/** A quantity's key: its value in grams, its canonical unit (kg, g, [lb_av]: UNITS). */
const GRAMS = [1000, 1, 453.59237];
const quantity = (i: number) => (valued(i) ? value(i) * GRAMS[i % 3]! : undefined);

const GENERATED = [...generatePatients({ patients: 8, seed: 'sort-walk' })] as Json[];
const SORTABLE = new Set(['token', 'string', 'reference', 'uri', 'quantity', 'date', 'number']);

const targets = await storeTargets({ main: false });

/** A fresh, migrated database of `target` holding `resources` in `tenant` (written as first versions); its URL. */
async function freshWith(target: (typeof targets)[number], tenant: string, resources: Json[]): Promise<string> {
  const db = await target.migrated();
  const store = db.open();
  await store.migrate();
  await store.resources.write(tenant, (w) => w.insertNew(firstVersions(resources)));
  await store.close();
  return db.url;
}
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`a sort walk on ${target.kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    let url: string;
    const page = async (query: string, offset = 0) => {
      const b = await api.search(`${query}${offset ? `&_cursor=${encodeCursor({ offset })}` : ''}`);
      return (b.entry ?? []).map((e: Json) => e.resource.id as string);
    };

    beforeAll(async () => {
      ({ t, api, url } = await appOnFresh(target));
      await t.store.resources.write('t1', (w) => w.insertNew(firstVersions(all.map(observation))));
      await t.store.resources.indexing.analyze();
    }, 60_000);
    afterAll(() => t.close());

    test('a date, ascending and descending: pages at any offset, ties at the bound by id, undated last', async () => {
      const up = ordered(all, dateUp, false);
      const down = ordered(all, dateDown, true);
      for (const [count, offset] of [[1, 0], [7, 0], [50, 0], [7, 13], [50, 950], [100, 4850], [30, 4890]] as const) {
        expect(await page(`Observation?_sort=date&_count=${count}`, offset)).toEqual(up.slice(offset, offset + count));
        expect(await page(`Observation?_sort=-date&_count=${count}`, offset)).toEqual(down.slice(offset, offset + count));
      }
      // A second key orders the ties at the bound (five Observations an instant).
      expect(await page('Observation?_sort=date,-_id&_count=12')).toEqual(ordered(all, dateUp, false, true).slice(0, 12));
      expect(await page('Observation?_sort=-date,-_id&_count=12', 7)).toEqual(ordered(all, dateDown, true, true).slice(7, 19));
    });

    test('a quantity in three units: by its value in its canonical unit, the least and greatest first', async () => {
      for (const count of [5, 40]) {
        expect(await page(`Observation?_sort=value-quantity&_count=${count}`)).toEqual(ordered(all, quantity, false).slice(0, count));
        expect(await page(`Observation?_sort=-value-quantity&_count=${count}`)).toEqual(ordered(all, quantity, true).slice(0, count));
      }
      expect(await page('Observation?_sort=-value-quantity&_count=20', 4280)).toEqual(ordered(all, quantity, true).slice(4280, 4300));
    });

    test('open periods: a missing end sorts first descending (an end at infinity), a missing start first ascending', async () => {
      // 300 Encounters a day apart; every 40th has no end, and every 60th no start.
      const day = 86_400_000;
      const encounter = (i: number) => ({
        resourceType: 'Encounter', id: `e${String((i * 7919) % 300).padStart(3, '0')}`, status: 'finished',
        class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
        period: { ...(i % 60 !== 0 && { start: iso(BASE + i * day) }), ...(i % 40 !== 0 && { end: iso(BASE + i * day + 3_600_000) }) },
      });
      const encounters = Array.from({ length: 300 }, (_, i) => i);
      await t.store.resources.write('t1', (w) => w.insertNew(firstVersions(encounters.map(encounter))));
      // A missing start is open towards the past, a missing end towards the future; a period with
      // neither (every 120th) has no value, and sorts last either way.
      const dated = (i: number) => i % 120 !== 0;
      const low = (i: number) => (!dated(i) ? undefined : i % 60 !== 0 ? BASE + i * day : -Infinity);
      const high = (i: number) => (!dated(i) ? undefined : i % 40 !== 0 ? BASE + i * day + 3_600_000 + 1000 : Infinity);
      const byKey = (key: (i: number) => number | undefined, descending: boolean) =>
        [...encounters].sort((a, b) => {
          const [ka, kb] = [key(a), key(b)];
          if (ka === kb || (ka === undefined) !== (kb === undefined)) return ka === kb ? encounter(a).id.localeCompare(encounter(b).id) : ka === undefined ? 1 : -1;
          return descending ? (ka! < kb! ? 1 : -1) : ka! < kb! ? -1 : 1;
        }).map((i) => encounter(i).id);
      for (const [count, offset] of [[3, 0], [10, 0], [10, 5], [25, 270]] as const) {
        expect(await page(`Encounter?_sort=-date&_count=${count}`, offset)).toEqual(byKey(high, true).slice(offset, offset + count));
        expect(await page(`Encounter?_sort=date&_count=${count}`, offset)).toEqual(byKey(low, false).slice(offset, offset + count));
      }
    });

    test('two rows a resource: its least ascending, its greatest descending', async () => {
      const least = (i: number) => Math.min(...components(i));
      const greatest = (i: number) => Math.max(...components(i));
      expect(await page('Observation?_sort=component-value-quantity&_count=25')).toEqual(ordered(all, least, false).slice(0, 25));
      expect(await page('Observation?_sort=-component-value-quantity&_count=25')).toEqual(ordered(all, greatest, true).slice(0, 25));
      expect(await page('Observation?_sort=-component-value-quantity&_count=25', 300)).toEqual(ordered(all, greatest, true).slice(300, 325));
    });

    test('with conditions that cannot drive: common ones, and rare ones that make the walk read further or give way', async () => {
      const lab = all.filter((i) => i % 2 === 0);
      expect(await page('Observation?category=laboratory&_sort=-date&_count=20')).toEqual(ordered(lab, dateDown, true).slice(0, 20));
      const rare = all.filter(amended);
      expect(rare.length).toBe(17);
      for (const count of [3, 10, 17, 20]) {
        expect(await page(`Observation?status:not=final&_sort=-date&_count=${count}`)).toEqual(ordered(rare, dateDown, true).slice(0, count));
      }
      expect(await page('Observation?status:not=final&_sort=date&_count=5', 12)).toEqual(ordered(rare, dateUp, false).slice(12, 17));
      // Nothing meets both: an empty page.
      expect(await page('Observation?status:not=final&category=vital-signs&code:not=85354-9&_sort=-date')).toEqual([]);
    });

    test('a first value with many ties: the first page found in id order, the ties not read for their ids', async () => {
      const statements: string[] = [];
      const { runner, close } = await statementRunner(target.kind, url, statements);
      const search = async (query: string) => {
        statements.length = 0;
        const compiled = compileSearch('Observation', new URLSearchParams(query), true);
        const q = { ...compiled.query, where: compiled.pending as Condition[] };
        const rows = await plannedSearch(target.kind === 'sqlite' ? SQLITE : POSTGRES, 't1', q, runner, () => N);
        return { ids: (rows as { id: string }[]).map((r) => r.id), searches: statements.filter((x) => x.includes('SELECT r.type, r.id')) };
      };
      const lab = all.filter((i) => i % 2 === 0);
      const vital = all.filter((i) => i % 2 === 1);
      try {
        // 2,500 laboratory Observations tie at the first category: the first of them by id, in one search
        // reading the type in id order (not the walk's page of every tie, `SELECT DISTINCT d.res`).
        for (const [query, expected] of [
          ['_sort=category&_count=5', ordered(lab, () => 0, false).slice(0, 5)],
          ['_sort=-category&_count=5', ordered(vital, () => 0, false).slice(0, 5)],
          ['_sort=category&_count=40', ordered(lab, () => 0, false).slice(0, 40)],
        ] as const) {
          const found = await search(query);
          expect(found.ids).toEqual(expected);
          expect(found.searches.length).toBe(1);
          expect(found.searches[0]).not.toContain('SELECT DISTINCT d.res');
        }
        // A condition probed on each resource read in id order (every Observation has the code).
        const coded = await search('code=85354-9&_sort=category&_count=5');
        expect(coded.ids).toEqual(ordered(lab, () => 0, false).slice(0, 5));
        expect(coded.searches.at(-1)).not.toContain('SELECT DISTINCT d.res');
        // Few ties (the 17 amended at the first status, fewer than the walk's first rows), a page the ties
        // would not repay (500 of 5,000 among 2,500 ties), or a condition that none of the ties meets (the 17
        // amended are all vital signs) within the window read in id order: the walk as before.
        for (const [query, expected] of [
          ['_sort=status&_count=3', ordered(all.filter(amended), () => 0, false).slice(0, 3)],
          ['_sort=category&_count=500', ordered(lab, () => 0, false).slice(0, 500)],
          ['status:not=final&_sort=category&_count=5', ordered(all.filter(amended), () => 0, false).slice(0, 5)],
        ] as const) {
          const found = await search(query);
          expect(found.ids).toEqual(expected);
          expect(found.searches.at(-1)).toContain('SELECT DISTINCT d.res');
        }
      } finally {
        await close();
      }
      // Through the API, page after page by the next links: the first page's place leads on as before.
      const pages: string[] = [];
      let next: string | undefined = 'Observation?_sort=category&_count=7';
      for (let n = 0; n < 3 && next; n++) {
        const b = await api.search(next);
        pages.push(...(b.entry ?? []).map((e: Json) => e.resource.id as string));
        next = (b.link as Json[] | undefined)?.find((l) => l.relation === 'next')?.url.replace(/^.*\/R4\//, '');
      }
      expect(pages).toEqual(ordered(lab, () => 0, false).slice(0, 21));
    });

    test('a later page among many ties: the ties after the place read in id order, or walked by the next sort key', async () => {
      const statements: string[] = [];
      const { runner, close } = await statementRunner(target.kind, url, statements);
      const search = async (query: string, afterKeys: SortPosition) => {
        statements.length = 0;
        const compiled = compileSearch('Observation', new URLSearchParams(query), true);
        const q = { ...compiled.query, where: compiled.pending as Condition[], afterKeys };
        const rows = await plannedSearch(target.kind === 'sqlite' ? SQLITE : POSTGRES, 't1', q, runner, () => N);
        return {
          ids: (rows as { id: string }[]).map((r) => r.id),
          searches: statements.filter((x) => x.includes('SELECT r.type, r.id')),
          bounds: statements.filter((x) => x.includes('FROM search_keys kk')),
        };
      };
      const lab = ordered(all.filter((i) => i % 2 === 0), () => 0, false);
      const vital = ordered(all.filter((i) => i % 2 === 1), () => 0, false);
      const labDown = [...lab].reverse();
      try {
        // After the 100th of the 2,500 laboratory Observations: the next ones by id, in one search reading
        // the type in id order from the place's id. Before, each later page read all 2,500 ties for their ids.
        for (const [query, place, expected] of [
          ['_sort=category&_count=40', { keys: ['laboratory'], id: lab[99]! }, lab.slice(100, 140)],
          ['_sort=-category&_count=40', { keys: ['vital-signs'], id: vital[99]! }, vital.slice(100, 140)],
          ['code=85354-9&_sort=category&_count=40', { keys: ['laboratory'], id: lab[1999]! }, lab.slice(2000, 2040)],
          // Ties by id descending (`_id` the next key): read in that order from the place.
          ['_sort=category,-_id&_count=30', { keys: ['laboratory', labDown[49]!], id: labDown[49]! }, labDown.slice(50, 80)],
        ] as [string, SortPosition, string[]][]) {
          const found = await search(query, place);
          expect(found.ids).toEqual(expected);
          expect(found.searches.length).toBe(1);
          expect(found.searches[0]).not.toContain('SELECT DISTINCT d.res');
        }
        // Near the end of the ties: the last nine by id, then the first of the next value, whose walk starts
        // after the ties' value (its bound compares `>`, not `>=`: the ties are not read again).
        const last = await search('_sort=category&_count=20', { keys: ['laboratory'], id: lab[2490]! });
        expect(last.ids).toEqual([...lab.slice(2491), ...vital.slice(0, 11)]);
        expect(last.searches[0]).not.toContain('SELECT DISTINCT d.res');
        expect(last.bounds.length).toBe(2);
        expect(last.bounds[1]).toMatch(/s\.value > /);
        const lastDown = await search('_sort=category,-_id&_count=20', { keys: ['laboratory', labDown[2494]!], id: labDown[2494]! });
        expect(lastDown.ids).toEqual([...labDown.slice(2495), ...[...vital].reverse().slice(0, 15)]);
        // A next sort key: the ties at the place's category walked by the date's index (its bound on `high`,
        // descending), each probed for its category; before, every tie read and its date computed.
        const iOf = new Map(all.map((i) => [id(i), i]));
        const byDate = ordered(all.filter((i) => i % 2 === 0), dateDown, true);
        const at = iOf.get(byDate[99]!)!;
        const dated = await search('_sort=category,-date&_count=10', { keys: ['laboratory', dateDown(at)!], id: id(at) });
        expect(dated.ids).toEqual(byDate.slice(100, 110));
        expect(dated.bounds.some((x) => x.includes('s.high'))).toBe(true);
      } finally {
        await close();
      }
      // Through the API, every page by the next links.
      for (const [query, expected] of [
        ['Observation?_sort=category&_count=400', [...lab, ...vital]],
        ['Observation?_sort=-category,date&_count=700', [...ordered(all.filter((i) => i % 2 === 1), dateUp, false), ...ordered(all.filter((i) => i % 2 === 0), dateUp, false)]],
      ] as [string, string[]][]) {
        const pages: string[] = [];
        let next: string | undefined = query;
        for (let n = 0; n < 20 && next; n++) {
          const b = await api.search(next);
          pages.push(...(b.entry ?? []).map((e: Json) => e.resource.id as string));
          next = (b.link as Json[] | undefined)?.find((l) => l.relation === 'next')?.url.replace(/^.*\/R4\//, '');
        }
        expect(pages).toEqual(expected);
      }
    });

    test('a page past the last key: the resources without it searched as the parameter missing, not every key computed', async () => {
      const statements: string[] = [];
      const { runner, close } = await statementRunner(target.kind, url, statements);
      const search = async (query: string, afterKeys: SortPosition) => {
        statements.length = 0;
        const compiled = compileSearch('Observation', new URLSearchParams(query), true);
        const q = { ...compiled.query, where: compiled.pending as Condition[], afterKeys };
        const rows = await plannedSearch(target.kind === 'sqlite' ? SQLITE : POSTGRES, 't1', q, runner, () => N);
        return { ids: (rows as { id: string }[]).map((r) => r.id), searches: statements.filter((x) => x.includes('SELECT r.type, r.id')) };
      };
      const iOf = new Map(all.map((i) => [id(i), i]));
      const up = ordered(all, dateUp, false);
      const upIdsDown = ordered(all, dateUp, false, true);
      // 4,900 dated (every 50th is not): the page after the 4,850th reads the last 50 dated, then the first 50 undated by id.
      const last = iOf.get(up[4849]!)!;
      try {
        for (const [query, place, expected] of [
          ['_sort=date&_count=100', { keys: [dateUp(last)!], id: id(last) }, up.slice(4850, 4950)],
          // A place among the undated: the rest of them after its id.
          ['_sort=date&_count=30', { keys: [null], id: up[4919]! }, up.slice(4920, 4950)],
          ['_sort=date,-_id&_count=30', { keys: [null, upIdsDown[4909]!], id: upIdsDown[4909]! }, upIdsDown.slice(4910, 4940)],
          // With a condition: the undated laboratory Observations (i % 50 = 0 is even).
          ['category=laboratory&_sort=date&_count=40', { keys: [null], id: up[4900]! }, up.slice(4901).filter((x) => iOf.get(x)! % 2 === 0).slice(0, 40)],
        ] as [string, SortPosition, string[]][]) {
          const found = await search(query, place);
          expect(found.ids).toEqual(expected);
          // Before, the plan without the walk: the date of every Observation computed (`MIN(` of its rows) and sorted by it.
          for (const x of found.searches) expect(x).not.toContain('ORDER BY (SELECT MIN(');
        }
      } finally {
        await close();
      }
    });

    test('the statements: a walk of the index when the page fills, the plan without it when it cannot', async () => {
      const statements: string[] = [];
      const { runner, close } = await statementRunner(target.kind, url, statements);
      const search = async (query: string, offset = 0) => {
        statements.length = 0;
        const compiled = compileSearch('Observation', new URLSearchParams(query), true);
        const q = { ...compiled.query, where: compiled.pending as Condition[], ...(offset && { offset }) };
        const rows = await plannedSearch(target.kind === 'sqlite' ? SQLITE : POSTGRES, 't1', q, runner, () => N);
        const searches = statements.filter((s) => s.includes('SELECT r.type, r.id'));
        return { ids: (rows as { id: string }[]).map((r) => r.id), bounds: statements.filter((s) => s.includes('FROM search_keys kk')).length, searches };
      };
      try {
        // A page of ten: one bound, one search, driven by the walk's rows.
        const first = await search('_sort=-date&_count=10');
        expect(first.ids).toEqual(ordered(all, dateDown, true).slice(0, 10));
        expect(first.bounds).toBe(1);
        expect(first.searches.length).toBe(1);
        expect(first.searches[0]).toContain('SELECT DISTINCT d.res');
        // Rare matches: the walk reads further, bound after bound.
        const rare = await search('status:not=final&_sort=-date&_count=10');
        expect(rare.ids).toEqual(ordered(all.filter(amended), dateDown, true).slice(0, 10));
        expect(rare.bounds).toBeGreaterThan(1);
        expect(rare.searches.length).toBe(rare.bounds);
        // A page reaching the undated: the walk reads every dated row, falls short, and the rest of the
        // page is of the undated, searched as the date missing (after an offset too: withoutKey), not by
        // computing every resource's date.
        const tail = await search('_sort=date&_count=100', 4850);
        expect(tail.ids).toEqual(ordered(all, dateUp, false).slice(4850, 4950));
        expect(tail.searches.length).toBeGreaterThan(tail.bounds);
        for (const x of tail.searches) expect(x).not.toContain('ORDER BY (SELECT MIN(');
        // A page further in than the walk may read rows for: no walk at all.
        const deep = await search('_sort=date&_count=10', SORT_WALK_MAX_ROWS / 2);
        expect(deep.bounds).toBe(0);
        expect(deep.ids).toEqual([]);
      } finally {
        await close();
      }
    });
  });
}

for (const target of targets) {
  describe(`every sortable parameter on generated data, on ${target.kind}`, () => {
    let url: string;
    beforeAll(async () => {
      url = await freshWith(target, 't2', GENERATED);
    }, 60_000);

    test('the planned search (a walk where it can) gives the pages of the search that computes every key', async () => {
      const { runner, close } = await statementRunner(target.kind, url);
      const dialect = target.kind === 'sqlite' ? SQLITE : POSTGRES;
      const disagreements: string[] = [];
      let compared = 0;
      try {
        for (const type of [...new Set(GENERATED.map((r) => r.resourceType as string))]) {
          const size = GENERATED.filter((r) => r.resourceType === type).length;
          for (const def of paramsOf(type).filter((d) => SORTABLE.has(d.type) && !d.unionOf)) {
            for (const query of [`_sort=${def.code}`, `_sort=-${def.code}`, `_sort=-${def.code}&_count=3`, `_sort=${def.code},-_id&_count=5`]) {
              const compiled = compileSearch(type, new URLSearchParams(query), true);
              for (const offset of [0, 4]) {
                const q = { ...compiled.query, where: compiled.pending as Condition[], ...(offset && { offset }) };
                const planned = ((await plannedSearch(dialect, 't2', q, runner, () => size)) as { id: string }[]).map((r) => r.id);
                const every = searchSql(dialect, 't2', q);
                const all = ((await runner.rows(every.sql, every.values)) as { id: string }[]).map((r) => r.id);
                compared++;
                if (JSON.stringify(planned) !== JSON.stringify(all)) disagreements.push(`${type}?${query} offset ${offset}: ${planned.join(',')} against ${all.join(',')}`);
              }
            }
          }
        }
      } finally {
        await close();
      }
      expect(disagreements).toEqual([]);
      expect(compared).toBeGreaterThan(500);
    }, 120_000);
  });
}

for (const target of targets) {
  describe(`a date condition driving a sort on its own parameter, on ${target.kind}`, () => {
    const day = 86_400_000;
    const JAN = Date.parse('2026-01-01T00:00:00Z');
    // Two reactions each: one in January, the other in March for every third (a later greatest value
    // than the row the condition matches), or in December before.
    const immunization = (i: number) => ({
      resourceType: 'Immunization', id: `im${String(i).padStart(2, '0')}`, status: 'completed',
      vaccineCode: { coding: [{ system: 'http://hl7.org/fhir/sid/cvx', code: '140' }] },
      patient: { reference: 'Patient/p1' }, occurrenceDateTime: iso(JAN + i * day),
      reaction: [{ date: iso(JAN + ((i * 7) % 30) * day) }, { date: iso(i % 3 === 0 ? JAN + (60 + i) * day : JAN - (1 + i) * day) }],
    });
    const immunizations = Array.from({ length: 30 }, (_, i) => immunization(i));
    let url: string;
    beforeAll(async () => {
      url = await freshWith(target, 't3', [...GENERATED, ...immunizations]);
    }, 60_000);

    const run = async (type: string, query: string, offset: number) => {
      const statements: string[] = [];
      const { runner, close } = await statementRunner(target.kind, url, statements);
      const dialect = target.kind === 'sqlite' ? SQLITE : POSTGRES;
      try {
        const compiled = compileSearch(type, new URLSearchParams(query), true);
        const q = { ...compiled.query, where: compiled.pending as Condition[], ...(offset && { offset }) };
        const driven = searchSql(dialect, 't3', q, { driver: 0 });
        const every = searchSql(dialect, 't3', q);
        const ids = async (s: { sql: string; values: unknown[] }) => ((await runner.rows(s.sql, s.values as never)) as { id: string }[]).map((r) => r.id);
        return { driven: await ids(driven), every: await ids(every), carried: driven.sql.includes(' AS key') };
      } finally {
        await close();
      }
    };

    test('every date parameter: the page its own condition drives is the page of every resource\'s key', async () => {
      const disagreements: string[] = [];
      const carried = new Set<string>();
      let compared = 0;
      for (const type of [...new Set(GENERATED.map((r) => r.resourceType as string))]) {
        for (const def of paramsOf(type).filter((d) => d.type === 'date' && !d.unionOf)) {
          for (const query of [`${def.code}=ge1900-01-01&_sort=-${def.code}&_count=4`, `${def.code}=lt2100-01-01&_sort=${def.code}&_count=4`, `${def.code}=ge1900&_sort=-${def.code},-_id`]) {
            for (const offset of [0, 3]) {
              const r = await run(type, query, offset);
              compared++;
              if (r.carried) carried.add(`${type}.${def.code}`);
              if (JSON.stringify(r.driven) !== JSON.stringify(r.every)) disagreements.push(`${type}?${query} offset ${offset}: ${r.driven.join(',')} against ${r.every.join(',')}`);
            }
          }
        }
      }
      expect(disagreements).toEqual([]);
      expect(compared).toBeGreaterThan(100);
      // The driver's rows are the key where a resource has one value: Encounter.period, Observation.effective[x].
      for (const p of ['Encounter.date', 'Observation.date', 'Patient.birthdate', 'Condition.onset-date']) expect(carried).toContain(p);
      expect(carried).not.toContain('MedicationRequest.date');
    }, 120_000);

    test('a parameter of several values: sorted by the resource\'s greatest, not by the row that matched', async () => {
      // Every Immunization has a January reaction; descending, those with a March one come first.
      const greatest = (i: number) => Math.max(JAN + ((i * 7) % 30) * day, i % 3 === 0 ? JAN + (60 + i) * day : JAN - (1 + i) * day);
      const expected = [...immunizations.keys()].sort((a, b) => greatest(b) - greatest(a) || a - b).map((i) => immunization(i).id);
      for (const offset of [0, 8]) {
        const r = await run('Immunization', 'reaction-date=2026-01&_sort=-reaction-date&_count=12', offset);
        expect(r.carried).toBe(false);
        expect(r.driven).toEqual(expected.slice(offset, offset + 12));
        expect(r.every).toEqual(expected.slice(offset, offset + 12));
      }
      // Its occurrence is one value: carried, and ordered by it.
      const byOccurrence = await run('Immunization', 'date=2026-01&_sort=-date&_count=5', 0);
      expect(byOccurrence.carried).toBe(true);
      expect(byOccurrence.driven).toEqual(['im29', 'im28', 'im27', 'im26', 'im25']);
    });
  });
}
