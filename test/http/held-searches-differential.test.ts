/**
 * A transaction's conditional searches of one shape are searched again at its commit as one superset (valuesMerged),
 * its resources matched in memory (matchConditions) against each search, where they were searched by the store as
 * an `or` of each search's conditions (src/fhir/bundle-held-searches.ts). Differential, on both stores: for random
 * groups of searches over random stored Patients, the resources the superset finds that the in-memory match keeps
 * are those the store's search of each condition finds, and the superset finds every one of them.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import type { Json } from '../helpers/fhir.ts';
import { prng } from '../helpers/prng.ts';
import { valuesMerged } from '../../src/fhir/bundle-held-searches.ts';
import { lookups } from '../../src/fhir/core-search.ts';
import { indexEntries } from '../../src/fhir/indexer.ts';
import { compileSearch, resolveConditions } from '../../src/fhir/search.ts';
import { matchConditions } from '../../src/fhir/search-match.ts';

/** Letters of names: ASCII, accented and folded ones, halfwidth katakana (U+FF61-FF9F, above the surrogates), an astral one. */
const LETTERS = ['a', 'b', 'n', 'ä', 'ß', 'ss', 'ｱ', 'ｲ', 'ﾀ', 'ﾞ', 'ア', '\u{1F600}', '\uFB01', '%', '_', '\u{10FFFF}'];
const SYSTEMS = ['urn:s1', 'urn:s2'];

const pick = <T>(rand: () => number, xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
const word = (rand: () => number, min: number): string => Array.from({ length: min + Math.floor(rand() * 3) }, () => pick(rand, LETTERS)).join('');

/** A random valid Patient with id `id`: names, gender, identifiers, active, birthDate, each sometimes absent. */
function patient(rand: () => number, id: string): Json {
  const p: Json = { resourceType: 'Patient', id };
  if (rand() < 0.9) p.name = [{ family: word(rand, 1), given: [word(rand, 1)] }];
  if (rand() < 0.8) p.gender = pick(rand, ['male', 'female', 'other']);
  if (rand() < 0.8) p.identifier = [{ system: pick(rand, SYSTEMS), value: pick(rand, ['1', '2', '3']) }];
  if (rand() < 0.5) p.active = rand() < 0.5;
  if (rand() < 0.6) p.text = { status: 'generated', div: `<div xmlns="http://www.w3.org/1999/xhtml">${word(rand, 1)} ${pick(rand, ['alpha', 'Alphas', 'beta', 'bétà'])}</div>` };
  if (rand() < 0.7) p.birthDate = `19${pick(rand, ['70', '80'])}-0${pick(rand, ['1', '2'])}-15`;
  return p;
}

/** One place of a search's shape: a parameter and its values (`,`), of one modifier in every search of the group. */
type Place = (rand: () => number) => [string, string];
const PLACES: Record<string, Place> = {
  family: (rand) => ['family', prefixOf(rand)],
  'family:exact': (rand) => ['family:exact', word(rand, 1)],
  'given:contains': (rand) => ['given:contains', prefixOf(rand)],
  gender: (rand) => ['gender', rand() < 0.3 ? 'male,other' : pick(rand, ['male', 'female', 'other'])],
  identifier: (rand) => ['identifier', rand() < 0.5 ? `${pick(rand, SYSTEMS)}|${pick(rand, ['1', '2'])}` : pick(rand, ['1', '2,3'])],
};
/** Conditions every search of a group shares (not merged: the same in each). */
const SHARED = ['active:missing=true', 'active:missing=false', 'birthdate=ge1980', 'birthdate=1970-01', 'gender:not=male', 'gender:text=ale',
  '_lastUpdated=ge2000-01-01', 'identifier=urn:s1|', 'name=a', 'given:exact=a', 'family:missing=false', '_text=alpha', '_content=beta', '_text=alpha,beta', ''];
const prefixOf = (rand: () => number) => Array.from({ length: 1 + Math.floor(rand() * 2) }, () => pick(rand, LETTERS)).join('') + (rand() < 0.2 ? `,${pick(rand, LETTERS)}` : '');

await eachStore((kind, fresh) => {
  describe(`conditional searches searched again together as a superset, matched in memory (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const ctx = () => lookups({ store: t.store } as never, 't1');

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      const rand = prng(7);
      for (let i = 0; i < 80; i++) {
        const res = await t.request(`${t.fhir()}/Patient/p${i}`, fhirInit(token, 'PUT', patient(rand, `p${i}`)));
        expect(res.status).toBe(201);
      }
    });
    afterAll(() => t.close());

    /** The ids the server's search `query` finds. */
    const found = async (query: string): Promise<string[]> => {
      const res = await t.request(`${t.fhir()}/Patient?${query}&_count=500&_elements=id`, fhirInit(token));
      expect(res.status).toBe(200);
      return ((((await res.json()) as Json).entry ?? []) as Json[]).map((e) => e.resource.id as string);
    };

    test('every group: the superset holds each search\'s matches, and matched in memory finds exactly them', async () => {
      const rand = prng(11);
      const names = Object.keys(PLACES);
      let merged = 0;
      const wrong: string[] = [];
      for (let g = 0; g < 120; g++) {
        const shape = [pick(rand, names), ...(rand() < 0.7 ? [pick(rand, names)] : [])];
        const shared = pick(rand, SHARED);
        const searches = Array.from({ length: 2 + Math.floor(rand() * 3) }, () =>
          [...shape.map((p) => PLACES[p]!(rand)), ...(shared ? [shared.split('=') as [string, string]] : [])]);
        const params = searches.map((s) => new URLSearchParams(s));
        const wheres = await Promise.all(params.map(async (p) => {
          const { query, pending } = compileSearch('Patient', p, true);
          return [...(query.where ?? []), ...(await resolveConditions({ store: t.store } as never, 't1', pending))];
        }));
        const superset = valuesMerged(wheres);
        if (superset === undefined) continue;
        merged++;
        const old = new Set((await Promise.all(params.map((p) => found(p.toString())))).flat());
        const rows = await t.store.resources.search('t1', { type: 'Patient', where: superset, sort: [], count: 1000 });
        const inMemory = new Set<string>();
        for (const v of rows) {
          const resource = JSON.parse(v.content) as Json;
          const index = indexEntries(resource);
          for (const where of wheres) if (await matchConditions(resource, v.lastUpdated, where, ctx(), index)) inMemory.add(v.id);
        }
        const missed = [...old].filter((id) => !rows.some((v) => v.id === id));
        if (missed.length > 0 || [...old].sort().join() !== [...inMemory].sort().join()) {
          wrong.push(`${params.map(String).join(' | ')}: store ${[...old].sort()} in memory ${[...inMemory].sort()} not in superset ${missed}`);
        }
      }
      expect(merged).toBeGreaterThan(40);
      expect(wrong).toEqual([]);
    });
  });
});
