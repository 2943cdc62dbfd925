/**
 * A chain in a search sorted on a parameter that no condition drives (search-sql.ts sortWalk): the walk's
 * statements, each a bounded window of the sort key's rows (and of its ties), probe each row's reference rows
 * against the chain's targets (SqlBuilder.chainProbed) instead of building the set of every resource referring
 * to a target again in each of them. The pages are checked against the data's own order on both databases, through
 * the REST API, after a write to the targets too; the statements a walk runs are recorded, and none of them
 * builds the referring set.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { compileSearch } from '../../src/fhir/search.ts';
import { plannedSearch, POSTGRES, SQLITE } from '../../src/store/search-sql.ts';
import type { Condition } from '../../src/store/types.ts';
import type { TestApp } from '../helpers/app.ts';
import { link, type FhirClient, type Json } from '../helpers/fhir.ts';
import { appOnFresh, statementRunner } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';
import { firstVersions } from '../helpers/versions.ts';

const N = 5000;
const PATIENTS = 200;
const BASE = Date.parse('2026-01-01T00:00:00Z');
const id = (i: number) => `w${String(i).padStart(4, '0')}`;
const patientOf = (i: number) => (i * 7) % PATIENTS;
/** Five Observations share each minute (ties at any bound). */
const at = (i: number) => BASE + ((i * 37) % 1000) * 60_000;
const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');
const observation = (i: number) => ({
  resourceType: 'Observation', id: id(i), status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '85354-9' }] },
  effectiveDateTime: iso(at(i)), subject: { reference: `Patient/p${patientOf(i)}` },
});
const all = Array.from({ length: N }, (_, i) => i);

/** The ids of `is` by date (descending or not), ties by id. */
const byDate = (is: number[], descending: boolean) => [...is].sort((a, b) => (at(a) === at(b) ? id(a).localeCompare(id(b)) : descending ? at(b) - at(a) : at(a) - at(b))).map(id);

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`a chain in a sort walk on ${target.kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    let url: string;
    const female = new Set(Array.from({ length: PATIENTS }, (_, p) => p).filter((p) => p % 2 === 0));
    const matching = () => all.filter((i) => female.has(patientOf(i)));

    beforeAll(async () => {
      ({ t, api, url } = await appOnFresh(target));
      await t.store.resources.write('t1', (w) => w.insertNew(firstVersions([
        ...Array.from({ length: PATIENTS }, (_, p) => ({ resourceType: 'Patient', id: `p${p}`, gender: female.has(p) ? 'female' : 'male' })),
        ...all.map(observation),
      ])));
      await t.store.resources.indexing.analyze();
    }, 120_000);
    afterAll(() => t.close());

    /** Every match of `query` over its first `pages` pages, following the next links. */
    async function pages(query: string, n: number): Promise<string[]> {
      const seen: string[] = [];
      let next: string | undefined = query;
      for (let p = 0; p < n && next; p++) {
        const b: Json = await api.search(next);
        seen.push(...(b.entry ?? []).map((e: Json) => e.resource.id as string));
        next = link(b, 'next');
      }
      return seen;
    }

    test('the pages are the sort\'s, ascending and descending, and follow a write to the targets', async () => {
      expect(matching().length).toBeGreaterThan(2000);
      expect(await pages('Observation?subject:Patient.gender=female&_sort=date&_count=20', 3)).toEqual(byDate(matching(), false).slice(0, 60));
      expect(await pages('Observation?subject:Patient.gender=female&_sort=-date&_count=20', 3)).toEqual(byDate(matching(), true).slice(0, 60));
      expect(await pages('Observation?subject:Patient.gender=male&_sort=-date&_count=7', 2)).toEqual(byDate(all.filter((i) => !female.has(patientOf(i))), true).slice(0, 14));
      // The first page's first patient becomes male: its Observations leave the chain, though none of them was written.
      const first = patientOf(Number(byDate(matching(), false)[0]!.slice(1)));
      await api.put200({ resourceType: 'Patient', id: `p${first}`, gender: 'male' });
      female.delete(first);
      try {
        expect(await pages('Observation?subject:Patient.gender=female&_sort=date&_count=20', 2)).toEqual(byDate(matching(), false).slice(0, 40));
      } finally {
        await api.put200({ resourceType: 'Patient', id: `p${first}`, gender: 'female' });
        female.add(first);
      }
    });

    test('no statement of the walk builds the set of the resources referring to the chain\'s targets', async () => {
      const statements: string[] = [];
      const { runner, close } = await statementRunner(target.kind, url, statements);
      try {
        for (const sort of ['date', '-date']) {
          statements.length = 0;
          const compiled = compileSearch('Observation', new URLSearchParams(`subject:Patient.gender=female&_sort=${sort}&_count=20`), true);
          const q = { ...compiled.query, where: compiled.pending as Condition[] };
          const rows = await plannedSearch(target.kind === 'sqlite' ? SQLITE : POSTGRES, 't1', q, runner, () => N + PATIENTS);
          expect((rows as { id: string }[]).map((r) => r.id)).toEqual(byDate(matching(), sort === '-date').slice(0, 20));
          const walk = statements.filter((x) => x.includes('SELECT r.type, r.id'));
          expect(walk.length).toBeGreaterThan(0);
          // The referring set: the row's key among the reference rows' `res` selected as a set (`r.pk IN (SELECT sN.res FROM
          // search_index sN WHERE`, hashed on PostgreSQL as `unnest(ARRAY(...))`); probed, each row's reference rows are
          // found by their `res` (`WHERE sN.res = r.pk`), and only the targets are a set.
          for (const x of walk) expect(x).not.toMatch(/\b(?:r\.pk|d\.res) IN \(SELECT (?:unnest\(ARRAY\()?(s\d+)\.res FROM search_index \1 WHERE/);
        }
      } finally {
        await close();
      }
    });
  });
}
