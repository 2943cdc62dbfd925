/**
 * A sort walk whose first rows cross from a few values into a value with many ties (search-sql.ts
 * crossingTies): `Observation?_sort=status` reads the few `amended` by the rows before `final`, then the
 * page's rest of the `final` ties as tiesPage reads them (in id order, or walked by the next sort key),
 * not every tie for its id and key. On both databases, every page through the next links must be the
 * sort's definition (ties by id, resources without the key last), ascending and descending, with two
 * sort keys, on a reference sorted on one target type, with a condition, and at offsets.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { compileSearch, encodeCursor } from '../../src/fhir/search.ts';
import { plannedSearch, POSTGRES, SORT_WALK_MAX_ROWS, SQLITE } from '../../src/store/search-sql.ts';
import type { Condition, SortPosition } from '../../src/store/types.ts';
import type { TestApp } from '../helpers/app.ts';
import type { FhirClient, Json } from '../helpers/fhir.ts';
import { appOnFresh, statementRunner } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';
import { firstVersions } from '../helpers/versions.ts';

const CAT = 'http://terminology.hl7.org/CodeSystem/observation-category';
const N = 1200;
const BASE = Date.parse('2026-01-01T00:00:00Z');

const id = (i: number) => `o${String((i * 7919) % N).padStart(4, '0')}`;
/** 13 `amended` (first ascending), 13 `registered` (first descending), the rest `final`. */
const status = (i: number) => (i % 97 === 5 ? 'amended' : i % 89 === 3 ? 'registered' : 'final');
/** Four Observations a minute (ties at any date), none every 50th. */
const date = (i: number) => (i % 50 === 0 ? undefined : BASE + ((i * 37) % 300) * 60_000);
/** A Group every 20th (no `patient`), `Patient/a1` every 61st, otherwise `Patient/p0` or `p1` by turns. */
const subject = (i: number) => (i % 20 === 0 ? 'Group/g0' : i % 61 === 1 ? 'Patient/a1' : `Patient/p${i % 2}`);
const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');
/** A method on the 100 or so of the earliest 25 minutes: last by `-date` but the undated. */
const early = (i: number) => (i * 37) % 300 < 25;

const observation = (i: number) => ({
  resourceType: 'Observation', id: id(i), status: status(i),
  category: [{ coding: [{ system: CAT, code: i % 2 === 0 ? 'laboratory' : 'vital-signs' }] }],
  code: { coding: [{ system: 'http://loinc.org', code: '85354-9' }] },
  subject: { reference: subject(i) },
  ...(early(i) && { method: { coding: [{ system: 'http://example.org/method', code: 'early' }] } }),
  ...(date(i) !== undefined && { effectiveDateTime: iso(date(i)!) }),
});
const all = Array.from({ length: N }, (_, i) => i);

type Key = { of: (i: number) => string | number | undefined; descending: boolean };
const byStatus = (descending: boolean): Key => ({ of: status, descending });
/** A dateTime to the second is that second's range: its end descending. */
const byDate = (descending: boolean): Key => ({ of: (i) => (date(i) === undefined ? undefined : date(i)! + (descending ? 1000 : 0)), descending });
const byMethod: Key = { of: (i) => (early(i) ? 'early' : undefined), descending: false };
const byPatient: Key = { of: (i) => (subject(i).startsWith('Patient/') ? subject(i) : undefined), descending: false };

/** The ids of `is` in the sort's order: each key with resources without it last, then by id. */
function ordered(is: number[], keys: Key[]): string[] {
  const cmp = (a: number, b: number): number => {
    for (const k of keys) {
      const [x, y] = [k.of(a), k.of(b)];
      if (x === y) continue;
      if (x === undefined || y === undefined) return x === undefined ? 1 : -1;
      return (x < y) !== k.descending ? -1 : 1;
    }
    return id(a) < id(b) ? -1 : 1;
  };
  return [...is].sort(cmp).map(id);
}

const SEARCHES: [string, string[]][] = [
  ['_sort=status&_count=15', ordered(all, [byStatus(false)])],
  ['_sort=-status&_count=40', ordered(all, [byStatus(true)])],
  ['_sort=-status,_id&_count=40', ordered(all, [byStatus(true)])],
  ['_sort=status,-date&_count=40', ordered(all, [byStatus(false), byDate(true)])],
  ['_sort=patient&_count=20', ordered(all, [byPatient])],
  ['category=laboratory&_sort=status&_count=25', ordered(all.filter((i) => i % 2 === 0), [byStatus(false)])],
  ['_sort=-date&_count=30', ordered(all, [byDate(true)])],
  ['_sort=method,-date&_count=1', ordered(all, [byMethod, byDate(true)])],
];
/** The matches the page walk reads at most: a page of one, the first 30 pages. */
const walked = (query: string, expected: string[]) => (query.endsWith('_count=1') ? expected.slice(0, 30) : expected);

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`a sort walk crossing into many ties, on ${target.kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    let url: string;

    beforeAll(async () => {
      ({ t, api, url } = await appOnFresh(target));
      await t.store.resources.write('t1', (w) => w.insertNew(firstVersions(all.map(observation))));
      await t.store.resources.indexing.analyze();
    }, 60_000);
    afterAll(() => t.close());

    test('every page by the next links is the sort\'s order', async () => {
      for (const [query, every] of SEARCHES) {
        const expected = walked(query, every);
        const pages: string[] = [];
        let next: string | undefined = `Observation?${query}`;
        // Every page, or (`_count=1`) the first 30.
        while (next && pages.length < expected.length) {
          const b = await api.search(next);
          pages.push(...(b.entry ?? []).map((e: Json) => e.resource.id as string));
          next = (b.link as Json[] | undefined)?.find((l) => l.relation === 'next')?.url.replace(/^.*\/R4\//, '');
        }
        expect([query, pages]).toEqual([query, expected]);
      }
    }, 60_000);

    test('pages at offsets across the boundaries of the ties', async () => {
      for (const [query, expected] of SEARCHES) {
        for (const offset of [5, 13, 30, N - 65, N - 30, N - 10]) {
          const b = await api.search(`Observation?${query}&_cursor=${encodeCursor({ offset })}`);
          const count = Number(new URLSearchParams(query).get('_count'));
          expect([query, offset, (b.entry ?? []).map((e: Json) => e.resource.id as string)]).toEqual([query, offset, expected.slice(offset, offset + count)]);
        }
      }
    }, 60_000);

    /** A planned search on a connection of the test's own: its ids, its searches and its walk's bounds. */
    const planned = async (query: string, at: { afterKeys?: SortPosition; offset?: number } = {}) => {
      const statements: string[] = [];
      const { runner, close } = await statementRunner(target.kind, url, statements);
      try {
        const compiled = compileSearch('Observation', new URLSearchParams(query), true);
        const q = { ...compiled.query, where: compiled.pending as Condition[], ...at };
        const rows = await plannedSearch(target.kind === 'sqlite' ? SQLITE : POSTGRES, 't1', q, runner, () => N);
        return {
          ids: (rows as { id: string }[]).map((r) => r.id),
          searches: statements.filter((x) => x.includes('SELECT r.type, r.id')),
          bounds: statements.filter((x) => x.includes('FROM search_keys kk')),
        };
      } finally {
        await close();
      }
    };
    const up = ordered(all, [byStatus(false)]);
    const iOf = new Map(all.map((i) => [id(i), i]));
    const finals = up.filter((x) => status(iOf.get(x)!) === 'final');

    test('crossing into the ties: the values before them read by the rows before them, the ties not read for their ids', async () => {
      const down = ordered(all, [byStatus(true)]);
      for (const [query, afterKeys, expected, before] of [
        ['_sort=status&_count=40', undefined, up.slice(0, 40), /\.value < /],
        ['_sort=-status&_count=40', undefined, down.slice(0, 40), /\.value > /],
        // A later page whose place is among the few: the rest of them, then the ties after them.
        ['_sort=status&_count=40', { keys: ['amended'], id: up[4]! }, up.slice(5, 45), /\.value < /],
        ['_sort=patient&_count=20', undefined, ordered(all, [byPatient]).slice(0, 20), /\.value < /],
      ] as [string, SortPosition | undefined, string[], RegExp][]) {
        const found = await planned(query, afterKeys ? { afterKeys } : {});
        expect(found.ids).toEqual(expected);
        expect(found.searches.length).toBe(2);
        expect(found.searches[0]).toMatch(before);
        // Before, one search of every row up to the ties' value: each tie read for its id and its key computed.
        expect(found.searches[1]).not.toContain('SELECT DISTINCT d.res');
      }
      // A next sort key: the `final` ties after the 13 `amended` walked by the date's index (its bound on `high`).
      const amended = all.filter((i) => status(i) === 'amended').length;
      const dated = await planned('_sort=status,-date&_count=40');
      expect(dated.ids).toEqual(ordered(all, [byStatus(false), byDate(true)]).slice(0, 40));
      expect(dated.ids.slice(0, amended).sort()).toEqual(up.slice(0, amended));
      expect(dated.bounds.some((x) => x.includes('s.high'))).toBe(true);
    });

    test('a place at the last tie: its window holds none, its end read alone, and the page goes on after the ties', async () => {
      const last = up.indexOf(finals.at(-1)!);
      const found = await planned('_sort=status&_count=10', { afterKeys: { keys: ['final'], id: finals.at(-1)! } });
      expect(found.ids).toEqual(up.slice(last + 1, last + 11));
      // The window, then the walk after `final` (its bound compares `>`): the 13 `registered`, read by the walk.
      // Before, the window's lack of a tie fell back to reading every tie, a walk of `final` from the place.
      expect(found.searches.length).toBe(2);
      expect(found.searches[0]).not.toContain('SELECT DISTINCT d.res');
      expect(found.bounds.length).toBe(2);
      expect(found.bounds[1]).toMatch(/s\.value > /);
    });

    test('a condition that few ties meet: windows eight times as large go on from the first\'s end', async () => {
      // 24 undated of 1,200.
      const undated = finals.filter((x) => date(iOf.get(x)!) === undefined);
      const found = await planned('date:missing=true&_sort=status&_count=5', { afterKeys: { keys: ['final'], id: undated[2]! } });
      expect(found.ids).toEqual(undated.slice(3, 8));
      expect(found.searches.length).toBeGreaterThan(1);
      for (const x of found.searches) expect(x).not.toContain('SELECT DISTINCT d.res');
    });

    test('ties walked by a next key on which they come last: the walk reads at most four times the ties counted', async () => {
      // The 100 or so `early` ties by `-date`, the 1,100 others' dates before theirs: the walk of the dates
      // reads at most 4 × 70 rows (tiesPage's count for a page of one among 1,200), then the ties are read as
      // before. Before, it read on as any walk does (1,152 rows here, up to 25,000).
      const methods = ordered(all, [byMethod, byDate(true)]);
      const found = await planned('_sort=method,-date&_count=1');
      expect(found.ids).toEqual([methods[0]!]);
      const offsets = found.bounds.filter((x) => x.includes('s.high')).flatMap((x) => [...x.matchAll(/OFFSET (\d+)/g)].map((m) => Number(m[1])));
      expect(offsets.length).toBeGreaterThan(0);
      expect(Math.max(...offsets)).toBeLessThan(4 * Math.ceil(Math.sqrt(4 * N)));
    });

    test('after an offset past the last key, and on a reference sorted on one target type: the rest searched as the key missing', async () => {
      const dated = ordered(all, [byDate(true)]);
      const patients = ordered(all, [byPatient]);
      const keyed = all.filter((i) => date(i) !== undefined).length;
      const referring = all.filter((i) => byPatient.of(i) !== undefined).length;
      for (const [query, offset, expected] of [
        // The page's first keyed resources, then the first without the key.
        ['_sort=-date&_count=30', keyed - 6, dated.slice(keyed - 6, keyed + 24)],
        // Past every keyed resource: the resources without the key from the offset's place among them.
        ['_sort=-date&_count=10', keyed + 4, dated.slice(keyed + 4, keyed + 14)],
        // The resources without the key in the order of the next one (an offset in the statement, not rows read past).
        ['_sort=-date,-status&_count=10', keyed + 15, ordered(all, [byDate(true), byStatus(true)]).slice(keyed + 15, keyed + 25)],
        ['_sort=patient&_count=20', referring - 10, patients.slice(referring - 10, referring + 10)],
        ['_sort=patient&_count=20', referring + 5, patients.slice(referring + 5, referring + 25)],
        ['_sort=patient&_count=20', 0, patients.slice(0, 20)],
      ] as [string, number, string[]][]) {
        const found = await planned(query, { offset });
        expect([query, offset, found.ids]).toEqual([query, offset, expected]);
        // Before, the plan without the walk: the key of every Observation computed (`MIN(`/`MAX(` of its rows) and sorted by it.
        for (const x of found.searches) expect(x).not.toMatch(/ORDER BY \(SELECT M(IN|AX)\(/);
      }
    });
  });
}

test('a walk at its most rows with no match for a page of one gives way, not reads the same rows again without end', async () => {
  // A runner standing for a key of more rows than a walk reads (its bound never null) of which no resource
  // meets the condition: the walk grows to SORT_WALK_MAX_ROWS, then gives way to the plan without it.
  // Before, at that limit a page of one asked for the same rows again and again (`wanted` = the rows read).
  const statements: string[] = [];
  const runner = {
    count: (sql: string) => (statements.push(sql), 0),
    rows: (sql: string) => {
      statements.push(sql);
      if (statements.length > 200) throw new Error('the walk reads the same rows again and again');
      return (sql.includes('FROM search_keys kk') ? [{ k: 1, f: 'amended', v: 'final' }] : []) as never[];
    },
  };
  const compiled = compileSearch('Observation', new URLSearchParams('status:not=final&_sort=-date&_count=1'), true);
  const q = { ...compiled.query, where: compiled.pending as Condition[] };
  expect(await plannedSearch(SQLITE, 't1', q, runner, () => 1_000_000)).toEqual([]);
  const bounds = statements.filter((x) => x.includes('FROM search_keys kk'));
  expect(bounds.length).toBeLessThan(10);
  expect(bounds.at(-1)).toContain(`OFFSET ${SORT_WALK_MAX_ROWS - 1}`);
});
