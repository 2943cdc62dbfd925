/**
 * Search defects found in review (issue #14), on both databases: an offset `_cursor` on a search that
 * pages by its last row's keys (`_id`, `_lastUpdated`) is a 400 naming `_cursor`, not the first page again.
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
  });
});
