/**
 * Searches by a list of ids, on both databases: `_id` with 1,000 values (one named twice) paged and
 * counted, two `_id` lists ANDed, and `_include` of 999 targets. On PostgreSQL the ids are one array
 * value and each is read by the resources' key (src/store/search-sql.ts, Dialect.byIds); the answers are
 * the same as SQLite's.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, fhirClient, matchesOfAllPages, type FhirClient, type Json } from '../helpers/fhir.ts';
import { createBatchWriter, DEFAULT_BATCH_LIMITS } from '../../src/fhir/import/batches.ts';

const BINARIES = 1500;
const binaryId = (i: number) => `b-${String(i).padStart(5, '0')}`;

await eachStore((kind, fresh) => {
  describe(`searches by 1,000 ids (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const clock = testClock();
    // 999 Binaries, listed from the last down (a search takes 1,000 values at most: one of them again is the last).
    const listed = Array.from({ length: 999 }, (_, i) => binaryId(BINARIES - 1 - i));
    const wanted = [...listed].sort();

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), clock });
      const writer = createBatchWriter({ store: t.store, clock }, 't1', DEFAULT_BATCH_LIMITS, () => undefined);
      for (let i = 0; i < BINARIES; i++) await writer.addPrepared([writer.prepare({ resourceType: 'Binary', id: binaryId(i), contentType: 'text/plain', data: 'aGk=' })]);
      const items = listed.map((id) => ({ item: { reference: `Binary/${id}` } }));
      await writer.addPrepared([writer.prepare({ resourceType: 'List', id: 'l1', status: 'current', mode: 'working', entry: items })]);
      await writer.drain();
      api = fhirClient(t, await craftToken(t, 'system/*.*', { ttl: 86_400 }));
    }, 120_000);
    afterAll(() => t.close());

    test('`_id` of 1,000 values, one named twice: every page in id order, each resource once, and the count', async () => {
      const query = `Binary?_id=${[...listed, listed[3]].join(',')}`;
      expect(await matchesOfAllPages(api, `${query}&_count=300`)).toEqual(wanted);
      const counted = (await (await api.get(`${query}&_summary=count`)).json()) as Json;
      expect(counted.total).toBe(999);
    });

    test('two `_id` lists ANDed select the ids both name', async () => {
      // 1,499 down to 900, and the even ones from 1,000 up to 1,798: the even ones from 1,000 to 1,498.
      const first = listed.slice(0, 600);
      const other = Array.from({ length: 400 }, (_, i) => binaryId(1000 + i * 2));
      const both = Array.from({ length: 250 }, (_, i) => binaryId(1000 + i * 2));
      expect(await matchesOfAllPages(api, `Binary?_id=${first.join(',')}&_id=${other.join(',')}&_count=100`)).toEqual(both);
    });

    test('`_include` of 999 Binaries reads them all', async () => {
      const b = (await (await api.get('List?_id=l1&_include=List:item')).json()) as Json;
      const included = b.entry.filter((e: Json) => e.search.mode === 'include').map((e: Json) => e.resource.id);
      expect(included.sort()).toEqual(wanted);
    });
  });
});
