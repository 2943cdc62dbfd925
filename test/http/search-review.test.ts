/**
 * Search defects found in review (issue #14), on both databases: an offset `_cursor` on a search that
 * pages by its last row's keys (`_id`, `_lastUpdated`) is a 400 naming `_cursor`, not the first page again;
 * token `:text` finds a Coding's display that has no code (search.html: Coding.display), and a token's
 * `:missing` agrees with `:text`: a text without a code is a value; `:iterate` follows a hierarchy to its
 * end (it stopped three rounds past the first, silently), and says so where it stops.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, ids, type FhirClient, type Json } from '../helpers/fhir.ts';

const cursorOf = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

await eachStore((kind, fresh) => {
  describe(`search review, on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (let i = 0; i < 8; i++) await api.put200({ resourceType: 'Practitioner', id: `rv-pr${i}`, active: true });
      const condition = (id: string, code?: Json, contained?: Json[]): Json => ({
        resourceType: 'Condition', id, subject: { reference: 'Patient/rv-p1' }, ...(code ? { code } : {}), ...(contained ? { contained } : {}),
      });
      await api.put200({ resourceType: 'Patient', id: 'rv-p1' });
      await api.put200(condition('rv-c1', { coding: [{ display: 'Tension headache' }] }));
      await api.put200(condition('rv-c2', { coding: [{ system: 'urn:rv', display: 'Migraine' }, { system: 'urn:rv', code: 'A', display: 'Aura' }] }));
      await api.put200(condition('rv-c3', { text: 'Headache, unspecified' }));
      await api.put200(condition('rv-c4', { coding: [{ system: 'urn:rv', code: 'B' }] }));
      await api.put200(condition('rv-c5'));
      // An Encounter's `class` is a Coding: its display without a code.
      await api.put200({ resourceType: 'Encounter', id: 'rv-e1', status: 'finished', class: { system: 'urn:rv', display: 'Home visit' } });
      await api.put200({ resourceType: 'Encounter', id: 'rv-e2', status: 'finished', class: { system: 'urn:rv', code: 'AMB' } });
      // A Procedure whose reason is a contained Condition coded by display alone.
      await api.put200({
        resourceType: 'Procedure', id: 'rv-pc1', status: 'completed', subject: { reference: 'Patient/rv-p1' }, reasonReference: [{ reference: '#c' }],
        contained: [{ resourceType: 'Condition', id: 'c', subject: { reference: 'Patient/rv-p1' }, code: { coding: [{ display: 'Back pain' }] } }],
      });
    });
    afterAll(() => t.close());

    test('an offset _cursor on a search in _id or _lastUpdated order is a 400 naming _cursor', async () => {
      for (const sort of ['', '&_sort=_id', '&_sort=-_id', '&_sort=_lastUpdated', '&_sort=-_lastUpdated', '&_sort=_lastUpdated,_id']) {
        for (const cursor of [{ o: 5 }, { o: 5, c: 0 }, { o: 0, c: 2 }]) {
          const res = await api.get(`Practitioner?_count=2${sort}&_cursor=${cursorOf(cursor)}`);
          const outcome = await expectOutcome(res, 400, 'invalid');
          expect(outcome.issue[0].expression).toEqual(['_cursor']);
        }
      }
    });

    test('an offset _cursor of 0 on such a search is its first page; on a sort on a parameter the offset is read', async () => {
      expect(ids(await api.search(`Practitioner?_count=3&_cursor=${cursorOf({ o: 0 })}`))).toEqual(['rv-pr0', 'rv-pr1', 'rv-pr2']);
      expect(ids(await api.search(`Practitioner?_count=3&_sort=active,_id&_cursor=${cursorOf({ o: 5 })}`))).toEqual(['rv-pr5', 'rv-pr6', 'rv-pr7']);
    });

    const found = async (query: string) => ids(await api.search(query)).sort();

    test('token :text finds a Coding\'s display that has no code, as it finds one that has', async () => {
      expect(await found('Condition?code:text=headache')).toEqual(['rv-c1', 'rv-c3']);
      expect(await found('Condition?code:text=migraine')).toEqual(['rv-c2']);
      expect(await found('Condition?code:text=aura')).toEqual(['rv-c2']);
      expect(await found('Encounter?class:text=home')).toEqual(['rv-e1']);
      // In a chain and `_has`, and inside a contained resource.
      expect(await found('Patient?_has:Condition:subject:code:text=migraine')).toEqual(['rv-p1']);
      expect(await found('Procedure?reason-reference:Condition.code:text=back pain')).toEqual(['rv-pc1']);
    });

    test('a token\'s :missing counts a text without a code as a value, as :text finds it', async () => {
      expect(await found('Condition?code:missing=true')).toEqual(['rv-c5']);
      expect(await found('Condition?code:missing=false')).toEqual(['rv-c1', 'rv-c2', 'rv-c3', 'rv-c4']);
      expect(await found('Encounter?class:missing=true')).toEqual([]);
      expect(await found('Condition?_filter=code pr false')).toEqual(['rv-c5']);
      expect(await found('Condition?_filter=code pr true')).toEqual(['rv-c1', 'rv-c2', 'rv-c3', 'rv-c4']);
      expect(await found('Procedure?reason-reference:Condition.code:missing=false')).toEqual(['rv-pc1']);
    });

    test('_filter ne on a token finds a text without a code, a value unequal to any token, as pr true counts it', async () => {
      const filter = (type: string, f: string) => found(`${type}?_filter=${encodeURIComponent(f)}`);
      // rv-c2 is coded A, and also has a display without a code: an item unequal to A.
      expect(await filter('Condition', 'code ne urn:rv|A')).toEqual(['rv-c1', 'rv-c2', 'rv-c3', 'rv-c4']);
      expect(await filter('Condition', 'code ne urn:rv|B')).toEqual(['rv-c1', 'rv-c2', 'rv-c3']);
      expect(await filter('Condition', 'code eq urn:rv|B')).toEqual(['rv-c4']);
      // Every resource with a value has one equal or one unequal: `pr true` is that union.
      expect(await filter('Condition', 'code eq urn:rv|B or code ne urn:rv|B')).toEqual(await filter('Condition', 'code pr true'));
      expect(await filter('Encounter', 'class ne urn:rv|AMB')).toEqual(['rv-e1']);
      expect(await filter('Procedure', 'reason-reference.code ne urn:rv|A')).toEqual(['rv-pc1']);
    });

    test(':iterate follows a hierarchy to its end, both ways, and warns where it stops (100 rounds past the first)', async () => {
      const org = (i: number, last: number): Json => ({ resourceType: 'Organization', id: `rv-o${i}`, name: `Level ${i}`, ...(i < last ? { partOf: { reference: `Organization/rv-o${i + 1}` } } : {}) });
      for (let i = 1; i <= 8; i++) await api.put200(org(i, 8));
      const included = async (query: string) => {
        const bundle = await api.search(query);
        const entries = (bundle.entry ?? []) as Json[];
        return {
          ids: entries.filter((e) => e.search.mode === 'include').map((e) => e.resource.id),
          warnings: entries.filter((e) => e.search.mode === 'outcome').flatMap((e) => e.resource.issue.map((i: Json) => i.diagnostics)),
        };
      };
      const down = ['rv-o2', 'rv-o3', 'rv-o4', 'rv-o5', 'rv-o6', 'rv-o7', 'rv-o8'];
      expect(await included('Organization?_id=rv-o1&_include:iterate=Organization:partof')).toEqual({ ids: down, warnings: [] });
      expect(await included('Organization?_id=rv-o8&_revinclude:iterate=Organization:partof')).toEqual({ ids: [...down].reverse().slice(1).concat('rv-o1'), warnings: [] });
      // A chain longer than the rounds: the first 101 levels past the match, and the warning.
      for (let i = 1; i <= 104; i++) await api.put200({ ...org(i, 104), id: `rv-d${i}`, ...(i < 104 ? { partOf: { reference: `Organization/rv-d${i + 1}` } } : {}) });
      const deep = await included('Organization?_id=rv-d1&_include:iterate=Organization:partof');
      expect(deep.ids).toEqual(Array.from({ length: 101 }, (_, i) => `rv-d${i + 2}`));
      expect(deep.warnings).toEqual(['_include:iterate was followed 100 rounds past the first: resources further along may be left out']);
      const up = await included('Organization?_id=rv-d104&_revinclude:iterate=Organization:partof');
      expect(up.ids).toEqual(Array.from({ length: 101 }, (_, i) => `rv-d${103 - i}`));
      expect(up.warnings).toEqual(['_revinclude:iterate was followed 100 rounds past the first: resources further along may be left out']);
      // A hierarchy that ends at the last round: all of it, and no warning (nothing is left out).
      for (let i = 1; i <= 102; i++) await api.put200({ ...org(i, 102), id: `rv-x${i}`, ...(i < 102 ? { partOf: { reference: `Organization/rv-x${i + 1}` } } : {}) });
      const whole = Array.from({ length: 101 }, (_, i) => `rv-x${i + 2}`);
      expect(await included('Organization?_id=rv-x1&_include:iterate=Organization:partof')).toEqual({ ids: whole, warnings: [] });
      expect(await included('Organization?_id=rv-x102&_revinclude:iterate=Organization:partof')).toEqual({ ids: Array.from({ length: 101 }, (_, i) => `rv-x${101 - i}`), warnings: [] });
      // Both ways at once, from the middle: each way ends within the rounds.
      expect((await included('Organization?_id=rv-x50&_include:iterate=Organization:partof&_revinclude:iterate=Organization:partof')).warnings).toEqual([]);
    });
  });
});

