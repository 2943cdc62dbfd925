/**
 * The reindex to index model 24 (src/fhir/reindex.ts) selects exactly the resources whose rows model 24 changed, on
 * both databases: a canonical resource with its own url and version, and a resource with a versioned canonical
 * reference of a long url, however its stored text writes it (a url holding a `"`, which JSON escapes as `\"`; a `|`
 * written as the JSON escape `\u007c` by another writer), and not a resource whose extension `url` sits beside a
 * Coding's `version`. After it, a chain and `_revinclude` through those references answer as on a new database.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import type { TestApp } from '../helpers/app.ts';
import type { FhirClient, Json } from '../helpers/fhir.ts';
import { compartmentsOf, storedIndex } from '../../src/fhir/indexer.ts';
import { INDEX_MODEL, reindex } from '../../src/fhir/reindex.ts';
import { stampHead } from '../../src/fhir/resource.ts';
import { VERSIONED_URL_PARAM } from '../../src/store/types.ts';
import { appOnFresh } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

/** Past PostgreSQL's index bound (2,000 bytes), with a `"` near its end: fewer than 600 characters follow it. */
const QUOTED = `http://forms.example/Questionnaire/quoted-${'x'.repeat(2400)}"end`;
/** Past the bound too, named by a response whose stored text writes the `|` as `\u007c`. */
const ESCAPED = `http://forms.example/Questionnaire/escaped-${'y'.repeat(2400)}`;

for (const target of targets) {
  describe(`reindex to model 24 through escaped text on ${target.kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    let dbUrl: string;
    const ids = async (query: string, mode?: string) =>
      ((await api.search(query)).entry ?? []).filter((e: Json) => !mode || e.search.mode === mode).map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`).sort();

    beforeAll(async () => {
      ({ t, api, url: dbUrl } = await appOnFresh(target));
      for (const [name, url] of [['quoted', QUOTED], ['escaped', ESCAPED]]) {
        await api.put200({ resourceType: 'Questionnaire', id: `${name}-q1`, url, version: '1', status: 'active' });
        await api.put200({ resourceType: 'Questionnaire', id: `${name}-q2`, url, version: '2', status: 'active' });
      }
      await api.put200({ resourceType: 'QuestionnaireResponse', id: 'quoted-r1', status: 'completed', questionnaire: `${QUOTED}|1` });
      // An extension's url beside a Coding's version: no canonical resource, no versioned canonical.
      await api.put200({
        resourceType: 'Observation', id: 'coded', status: 'final', extension: [{ url: 'http://example.org/fhir/StructureDefinition/note', valueString: 'n' }],
        code: { coding: [{ system: 'http://loinc.org', version: '2.74', code: '718-7' }] },
      });
      // As another writer stored it: the same JSON value, its `|` as an escape.
      const resource = { resourceType: 'QuestionnaireResponse', id: 'escaped-r1', status: 'completed', questionnaire: `${ESCAPED}|1` };
      const content = `${stampHead('QuestionnaireResponse', 'escaped-r1', 1, t.clock.now())}},"status":"completed","questionnaire":${JSON.stringify(resource.questionnaire).replace('|', '\\u007c')}}`;
      expect(JSON.parse(content)).toMatchObject(resource);
      expect(content).not.toContain('|');
      await t.store.resources.write('t1', (w) => w.put({
        type: 'QuestionnaireResponse', id: 'escaped-r1', versionId: 1, lastUpdated: t.clock.now(), deleted: false, content, method: 'PUT',
        index: storedIndex(JSON.parse(content)), compartments: compartmentsOf(JSON.parse(content)),
      }));
    }, 60_000);
    afterAll(() => t.close());

    test('a database of model 23 rebuilds the versioned Questionnaires and both long versioned references, not the coded Observation', async () => {
      // As model 23 wrote them: no `url|version` row.
      const page = await t.store.resources.indexing.page(0, 500);
      expect(page).toHaveLength(7);
      await t.store.resources.write('t1', (w) => w.replaceIndex(page.map((r) => {
        const index = storedIndex(JSON.parse(r.content));
        index.tokens = index.tokens.filter((e) => e.param !== VERSIONED_URL_PARAM);
        return { type: r.type, id: r.id, index, compartments: [] };
      })));
      if (target.kind === 'postgres') {
        // Nor the marker rows beside the long versioned references (index-limits.ts versionedMarkers).
        const sql = postgres(dbUrl, { max: 1, onnotice: () => {} });
        try {
          expect((await sql`DELETE FROM search_index WHERE value LIKE ${'%|\u0001'}`).count).toBe(2);
        } finally {
          await sql.end();
        }
      }
      await t.store.resources.indexing.setState({ model: 23, after: 0 });
      // Four Questionnaires and the two responses; the Observation's rows are model 24's already.
      expect(await reindex(t.store)).toEqual({ ran: true, done: 7, rebuilt: 6 });
      expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
      for (const name of ['quoted', 'escaped']) {
        expect(await ids(`QuestionnaireResponse?questionnaire:Questionnaire._id=${name}-q1`)).toEqual([`QuestionnaireResponse/${name}-r1`]);
        expect(await ids(`QuestionnaireResponse?questionnaire:Questionnaire._id=${name}-q2`)).toEqual([]);
        expect(await ids(`Questionnaire?_id=${name}-q2&_revinclude=QuestionnaireResponse:questionnaire`, 'include')).toEqual([]);
        expect(await ids(`Questionnaire?_id=${name}-q1&_revinclude=QuestionnaireResponse:questionnaire`, 'include')).toEqual([`QuestionnaireResponse/${name}-r1`]);
        expect(await ids(`Questionnaire?_has:QuestionnaireResponse:questionnaire:_id=${name}-r1`)).toEqual([`Questionnaire/${name}-q1`]);
      }
    });
  });
}
