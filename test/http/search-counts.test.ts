/**
 * Counts (`_summary=count`, `_total=accurate`) of several conditions read index rows alone, on both
 * databases (search-sql.ts countSql): driven, with the other conditions tested on the driver's rows,
 * the driver's distinct resources; unplanned (PostgreSQL, where no condition has few rows), the
 * INTERSECT of the conditions' rows. Index rows are those of current, live versions, so deletions and
 * updates must not count: the answers are checked against the data's own arithmetic after both.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { compileSearch } from '../../src/fhir/search.ts';
import { countSql, POSTGRES, SQLITE } from '../../src/store/search-sql.ts';
import type { Condition, SearchQuery } from '../../src/store/types.ts';
import type { TestApp } from '../helpers/app.ts';
import type { FhirClient } from '../helpers/fhir.ts';
import { appOnFresh, statementRunner } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';
import { firstVersions } from '../helpers/versions.ts';

const CAT = 'http://terminology.hl7.org/CodeSystem/observation-category';
const N = 3000;
const PATIENTS = 40;
const range = (n: number) => Array.from({ length: n }, (_, i) => i);

/** Observation `i`: vital signs when odd, laboratory when even; code `a` every third, else `b`; of patient `cp{i % 40}`. */
const observation = (i: number) => ({
  resourceType: 'Observation', id: `co${i}`, status: i % 5 === 0 ? 'amended' : 'final',
  category: [{ coding: [{ system: CAT, code: i % 2 ? 'vital-signs' : 'laboratory' }] }],
  code: { coding: [{ system: 'urn:test', code: i % 3 === 0 ? 'a' : 'b' }] },
  subject: { reference: `Patient/cp${i % PATIENTS}` },
});
/** Deleted afterwards: every 7th vital sign coded `a`. Recoded `b` afterwards: every 11th of the others. */
const deleted = (i: number) => i % 2 === 1 && i % 3 === 0 && i % 7 === 0;
const recoded = (i: number) => !deleted(i) && i % 3 === 0 && i % 11 === 0;
const codeOf = (i: number) => (i % 3 === 0 && !recoded(i) ? 'a' : 'b');
const live = range(N).filter((i) => !deleted(i));

const query = (type: string, search: string): SearchQuery => {
  const compiled = compileSearch(type, new URLSearchParams(search), true);
  return { ...compiled.query, where: compiled.pending as Condition[] };
};

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`counts of several conditions on ${target.kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    let url: string;
    const total = async (search: string) => (await api.search(search)).total as number;

    beforeAll(async () => {
      ({ t, api, url } = await appOnFresh(target));
      await t.store.resources.write('t1', (w) => w.insertNew(firstVersions([
        ...range(PATIENTS).map((p) => ({ resourceType: 'Patient', id: `cp${p}` })), ...range(N).map(observation),
      ])));
      for (const i of range(N).filter(deleted)) expect((await api.del(`Observation/co${i}`)).status).toBe(200);
      for (const i of range(N).filter(recoded)) {
        const o = observation(i);
        expect((await api.put(`Observation/${o.id}`, { ...o, code: { coding: [{ system: 'urn:test', code: 'b' }] } })).status).toBe(200);
      }
      await t.store.resources.indexing.analyze();
    }, 120_000);
    afterAll(() => t.close());

    test('two large conditions, a patient and a condition, the compartment: the live, current versions only', async () => {
      const vitalA = live.filter((i) => i % 2 === 1 && codeOf(i) === 'a').length;
      expect(vitalA).toBeGreaterThan(100);
      expect(await total('Observation?category=vital-signs&code=urn:test|a&_summary=count')).toBe(vitalA);
      expect(await total('Observation?category=vital-signs&code=a&_total=accurate&_count=1')).toBe(vitalA);
      const labB = live.filter((i) => i % 2 === 0 && codeOf(i) === 'b' && i % 5 !== 0).length;
      expect(await total('Observation?category=laboratory&code=b&status=final&_summary=count')).toBe(labB);
      // Patient cp3's (odd: vital signs only).
      const mine = live.filter((i) => i % PATIENTS === 3 && codeOf(i) === 'a').length;
      expect(await total('Observation?patient=cp3&code=a&_summary=count')).toBe(mine);
      expect(await total('Observation?patient=cp3&category=vital-signs&code=a&_summary=count')).toBe(mine);
      expect(await total('Patient/cp3/Observation?code=a&_summary=count')).toBe(mine);
      expect(await total('Patient/cp3/Observation?category=vital-signs&code=a&_summary=count')).toBe(mine);
      // Negations, an `or` of two parameters (combo-code: code or component-code), and the compartment.
      const vitalNotA = live.filter((i) => i % 2 === 1 && codeOf(i) !== 'a').length;
      expect(await total('Observation?category=vital-signs&code:not=a&_summary=count')).toBe(vitalNotA);
      expect(await total('Observation?category=vital-signs&code:not=a&status:not=amended&_summary=count')).toBe(live.filter((i) => i % 2 === 1 && codeOf(i) !== 'a' && i % 5 !== 0).length);
      expect(await total('Observation?category=vital-signs&value-quantity:missing=true&code=a&_summary=count')).toBe(vitalA);
      expect(await total('Observation?category=vital-signs&value-quantity:missing=false&_summary=count')).toBe(0);
      expect(await total('Observation?category=vital-signs&combo-code=a&_summary=count')).toBe(vitalA);
      expect(await total('Observation?category=vital-signs&combo-code=a,b&_summary=count')).toBe(live.filter((i) => i % 2 === 1).length);
      expect(await total('Patient/cp3/Observation?code:not=a&_summary=count')).toBe(live.filter((i) => i % PATIENTS === 3 && codeOf(i) !== 'a').length);
      // `_id`, tested on the resource row (co21 is deleted, co33 recoded), and a negation beside a code.
      expect(await total('Observation?category=vital-signs&code=a&_id=co3,co9,co21,co33&_summary=count')).toBe(['co3', 'co9'].length);
      expect(await total('Observation?category=vital-signs&status:not=amended&code=a&_summary=count')).toBe(live.filter((i) => i % 2 === 1 && codeOf(i) === 'a' && i % 5 !== 0).length);
    });

    test('every count\'s unplanned and driven statements, run as they are, give the same numbers', async () => {
      const dialect = target.kind === 'sqlite' ? SQLITE : POSTGRES;
      const { runner, close } = await statementRunner(target.kind, url);
      const vital = (f: (i: number) => boolean) => live.filter((i) => i % 2 === 1 && f(i)).length;
      try {
        for (const [search, expected] of [
          ['category=vital-signs&code=a', vital((i) => codeOf(i) === 'a')],
          ['category=vital-signs&code:not=a', vital((i) => codeOf(i) !== 'a')],
          ['category=vital-signs&code:not=a&status:not=amended', vital((i) => codeOf(i) !== 'a' && i % 5 !== 0)],
          ['category=vital-signs&value-quantity:missing=true&combo-code=a', vital((i) => codeOf(i) === 'a')],
          ['combo-code=a,b&category=vital-signs&status=final', vital((i) => i % 5 !== 0)],
          ['category=vital-signs&patient=cp3&code:not=b', live.filter((i) => i % PATIENTS === 3 && codeOf(i) === 'a').length],
        ] as const) {
          const q = query('Observation', search);
          const unplanned = countSql(dialect, 't1', q);
          expect(unplanned.sql).toMatch(/ INTERSECT | EXCEPT /);
          expect([search, await runner.count(unplanned.sql, unplanned.values)]).toEqual([search, expected]);
          const driven = countSql(dialect, 't1', q, { driver: 0 });
          expect([search, await runner.count(driven.sql, driven.values)]).toEqual([search, expected]);
        }
      } finally {
        await close();
      }
    });

    test('the statements: no resource row read where the conditions\' rows answer', () => {
      const dialect = target.kind === 'sqlite' ? SQLITE : POSTGRES;
      const two = query('Observation', 'category=vital-signs&code=a');
      // Unplanned (PostgreSQL's counts where no condition has few rows): the sets intersected.
      const unplanned = countSql(dialect, 't1', two).sql;
      expect(unplanned).toContain(' INTERSECT ');
      expect(unplanned).not.toContain('FROM resources r');
      // Driven by one, the other probed on its rows.
      const driven = countSql(dialect, 't1', two, { driver: 1 }).sql;
      expect(driven).toMatch(/^SELECT COUNT\(\*\) AS n FROM (\(|unnest\(ARRAY\()SELECT DISTINCT d\.res/);
      expect(driven).not.toContain('resources r');
      // A negation is probed on the driver's rows too; unplanned, its rows are taken away.
      const negated = query('Observation', 'category=vital-signs&status:not=final');
      expect(countSql(dialect, 't1', negated, { driver: 0 }).sql).not.toContain('resources r');
      expect(countSql(dialect, 't1', negated).sql).toContain(' EXCEPT ');
      expect(countSql(dialect, 't1', negated).sql).not.toContain('resources r');
      // A driver of the resources' rows (a last resort, whose rows are the type's resources, deleted
      // ones too; `_lastUpdated`), or a condition on the resource row: the resources are read.
      for (const search of ['value-quantity:missing=true&code=a', 'status:not=final&code=a', '_lastUpdated=gt2020-01-01&code=a']) {
        expect(countSql(dialect, 't1', query('Observation', search), { driver: 0 }).sql).toContain('resources r');
      }
      for (const search of ['category=vital-signs&code=a&_id=co3', '_lastUpdated=gt2020-01-01&code=a', 'status:not=final&value-quantity:missing=true']) {
        const q = query('Observation', search);
        expect(countSql(dialect, 't1', q).sql).not.toMatch(/ INTERSECT | EXCEPT SELECT res/);
        expect(countSql(dialect, 't1', q, { driver: 1 }).sql).toContain('resources r');
      }
    });
  });
}
