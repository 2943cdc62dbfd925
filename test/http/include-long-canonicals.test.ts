/**
 * Canonical references longer than PostgreSQL's index bound (src/store/index-limits.ts boundedValue: past 2,000
 * bytes a value is indexed as its first 1,900 and a digest), with and without `|version`, on both databases: a
 * `_revinclude`, a chain and a `_has` answer as they do for a short url. A versioned canonical `url|v` is indexed
 * with its `url` alone too, and a `url` row beside a `url|...` one is that reference's (search-sql.ts canonicalRow),
 * which the bounded forms of `url` and `url|v` (different digests) did not show: a response naming `url|1` was
 * revincluded with version 2. A chain or `_has` compares a versioned reference with the target's `url|version` row
 * (index model 24), which the reindex at start gives a database of model 23.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import type { TestApp } from '../helpers/app.ts';
import type { FhirClient, Json } from '../helpers/fhir.ts';
import { storedIndex } from '../../src/fhir/indexer.ts';
import { INDEX_MODEL, reindex } from '../../src/fhir/reindex.ts';
import { VERSIONED_URL_PARAM } from '../../src/store/types.ts';
import { appOnFresh } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

/** A url of `bytes` bytes (ASCII). */
const urlOf = (name: string, bytes: number) => {
  const head = `http://forms.example/Questionnaire/${name}-`;
  return head + 'x'.repeat(bytes - head.length);
};
/** Short; within the bound but not with `|1`; past it alone. */
const URLS = { short: urlOf('short', 60), edge: urlOf('edge', 1999), long: urlOf('long', 2600) };

for (const target of targets) {
  describe(`long canonicals on ${target.kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    let dbUrl: string;
    const ids = async (query: string, mode?: string) =>
      ((await api.search(query)).entry ?? []).filter((e: Json) => !mode || e.search.mode === mode).map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`).sort();

    beforeAll(async () => {
      ({ t, api, url: dbUrl } = await appOnFresh(target));
      for (const [name, url] of Object.entries(URLS)) {
        for (const r of [
          { resourceType: 'Questionnaire', id: `${name}-q1`, url, version: '1', status: 'active' },
          { resourceType: 'Questionnaire', id: `${name}-q2`, url, version: '2', status: 'active' },
          { resourceType: 'QuestionnaireResponse', id: `${name}-r1`, status: 'completed', questionnaire: `${url}|1` },
          { resourceType: 'QuestionnaireResponse', id: `${name}-r2`, status: 'completed', questionnaire: `${url}|2` },
          { resourceType: 'QuestionnaireResponse', id: `${name}-ra`, status: 'completed', questionnaire: url },
        ]) await api.put200(r);
      }
    }, 60_000);
    afterAll(() => t.close());

    for (const name of Object.keys(URLS)) {
      test(`${name}: a version is revincluded by what names it or the url alone, never another version`, async () => {
        const rev = (q: string) => ids(`Questionnaire?_id=${name}-${q}&_revinclude=QuestionnaireResponse:questionnaire`, 'include');
        expect(await rev('q1')).toEqual([`QuestionnaireResponse/${name}-r1`, `QuestionnaireResponse/${name}-ra`]);
        expect(await rev('q2')).toEqual([`QuestionnaireResponse/${name}-r2`, `QuestionnaireResponse/${name}-ra`]);
      });

      test(`${name}: a chain and _has read the same references`, async () => {
        expect(await ids(`QuestionnaireResponse?questionnaire:Questionnaire._id=${name}-q1`)).toEqual([`QuestionnaireResponse/${name}-r1`, `QuestionnaireResponse/${name}-ra`]);
        expect(await ids(`QuestionnaireResponse?questionnaire:Questionnaire._id=${name}-q2`)).toEqual([`QuestionnaireResponse/${name}-r2`, `QuestionnaireResponse/${name}-ra`]);
        expect(await ids(`Questionnaire?_has:QuestionnaireResponse:questionnaire:_id=${name}-r1`)).toEqual([`Questionnaire/${name}-q1`]);
        expect(await ids(`Questionnaire?_has:QuestionnaireResponse:questionnaire:_id=${name}-ra`)).toEqual([`Questionnaire/${name}-q1`, `Questionnaire/${name}-q2`]);
      });

      test(`${name}: _filter's ne with the url takes none of its versions for an unequal value`, async () => {
        const ne = (url: string) => ids(`QuestionnaireResponse?_id=${name}-r1,${name}-r2,${name}-ra&_filter=${encodeURIComponent(`questionnaire ne "${url}"`)}`);
        expect(await ne(URLS[name as keyof typeof URLS])).toEqual([]);
        const other = name === 'short' ? URLS.edge : URLS.short;
        expect(await ne(other)).toEqual([`QuestionnaireResponse/${name}-r1`, `QuestionnaireResponse/${name}-r2`, `QuestionnaireResponse/${name}-ra`]);
      });

      test(`${name}: an _include reaches the version named, or every version of the url`, async () => {
        const inc = (r: string) => ids(`QuestionnaireResponse?_id=${name}-${r}&_include=QuestionnaireResponse:questionnaire`, 'include');
        expect(await inc('r1')).toEqual([`Questionnaire/${name}-q1`]);
        expect(await inc('ra')).toEqual([`Questionnaire/${name}-q1`, `Questionnaire/${name}-q2`]);
      });
    }

    test('a database of model 23 is reindexed: the canonical resources with a version and the long versioned canonicals', async () => {
      // As model 23 wrote them: no `url|version` row.
      const page = await t.store.resources.indexing.page(0, 500);
      await t.store.resources.write('t1', (w) => w.replaceIndex(page.map((r) => {
        const index = storedIndex(JSON.parse(r.content));
        index.tokens = index.tokens.filter((e) => e.param !== VERSIONED_URL_PARAM);
        return { type: r.type, id: r.id, index, compartments: [] };
      })));
      if (target.kind === 'postgres') {
        // Nor the marker rows beside the long versioned references (index-limits.ts versionedMarkers).
        const sql = postgres(dbUrl, { max: 1, onnotice: () => {} });
        try {
          expect((await sql`DELETE FROM search_index WHERE value LIKE ${'%|\u0001'}`).count).toBe(4);
        } finally {
          await sql.end();
        }
      }
      await t.store.resources.indexing.setState({ model: 23, after: 0 });
      expect(await ids('QuestionnaireResponse?questionnaire:Questionnaire._id=short-q1')).toEqual(['QuestionnaireResponse/short-ra']);
      // Six Questionnaires, and the responses naming `url|v` of a url of 600 characters or more (edge and long).
      expect(await reindex(t.store)).toEqual({ ran: true, done: 15, rebuilt: 10 });
      expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
      for (const [name, url] of Object.entries(URLS)) {
        expect(await ids(`QuestionnaireResponse?questionnaire:Questionnaire._id=${name}-q1`)).toEqual([`QuestionnaireResponse/${name}-r1`, `QuestionnaireResponse/${name}-ra`]);
        expect(await ids(`Questionnaire?_id=${name}-q2&_revinclude=QuestionnaireResponse:questionnaire`, 'include')).toEqual([`QuestionnaireResponse/${name}-r2`, `QuestionnaireResponse/${name}-ra`]);
        expect(await ids(`Questionnaire?_has:QuestionnaireResponse:questionnaire:_id=${name}-r1`)).toEqual([`Questionnaire/${name}-q1`]);
        expect(await ids(`QuestionnaireResponse?_id=${name}-r1,${name}-r2&_filter=${encodeURIComponent(`questionnaire ne "${url}"`)}`)).toEqual([]);
      }
    });
  });

  describe(`a condition matched in memory through long canonicals on ${target.kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      ({ t, api } = await appOnFresh(target));
    }, 60_000);
    afterAll(() => t.close());

    // A conditional create's own `_has` condition, judged on the resource written (conditional.ts
    // requireFoundByCondition): a response naming `url|1` names version 1, one naming `url` every version.
    for (const [name, url] of Object.entries(URLS)) {
      test(`${name}: a conditional create's _has through a canonical finds the resource it creates`, async () => {
        await api.put200({ resourceType: 'QuestionnaireResponse', id: `${name}-r1`, status: 'completed', questionnaire: `${url}|1` });
        await api.put200({ resourceType: 'QuestionnaireResponse', id: `${name}-ra`, status: 'completed', questionnaire: url });
        const create = (version: string, response: string) =>
          api.post('Questionnaire', { resourceType: 'Questionnaire', url, version, status: 'active' }, { 'if-none-exist': `_has:QuestionnaireResponse:questionnaire:_id=${name}-${response}&version=${version}` });
        expect((await create('1', 'r1')).status).toBe(201);
        expect((await create('2', 'ra')).status).toBe(201);
        // Version 3 is not what the response naming `url|1` names: its own condition would not find it.
        expect((await create('3', 'r1')).status).toBe(400);
      });
    }
  });
}
