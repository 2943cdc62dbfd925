/**
 * Paging defects found in the second review of issue #14, on both databases: a search paged by its last
 * row's keys (no `_sort`, `_sort` on `_id` or `_lastUpdated`) links each page after the first to the page
 * before it (`previous`, by `_offset` from the matches before the page, which its cursor carries), as a
 * sort on parameters does; a cursor of the earlier form (no count) still pages on, without `previous`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, ids, link, type FhirClient, type Json } from '../helpers/fhir.ts';

await eachStore((kind, fresh) => {
  describe(`search review of paging links, on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Patient', id: 'pg-p' });
      for (let i = 0; i < 7; i++) {
        await api.put200({ resourceType: 'Observation', id: `pg-o${i}`, status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/pg-p' } });
        t.clock.advance(1000);
      }
    });
    afterAll(() => t.close());

    /** The pages of `query` by their `next` links. */
    async function walk(query: string): Promise<{ forth: string[][]; bundles: Json[] }> {
      const bundles: Json[] = [];
      for (let next: string | undefined = query; next; next = link(bundles[bundles.length - 1]!, 'next')) bundles.push(await api.search(next));
      return { forth: bundles.map(ids), bundles };
    }

    /** The pages from `from` back to the first, by `previous` links, in order. */
    async function walkBack(from: string): Promise<string[][]> {
      const pages: string[][] = [];
      for (let previous: string | undefined = from; previous;) {
        const b = await api.search(previous);
        pages.unshift(ids(b));
        previous = link(b, 'previous');
      }
      return pages;
    }

    for (const [order, query] of [
      ['no _sort', 'Observation?_count=2'],
      ['_sort=_id', 'Observation?_count=2&_sort=_id'],
      ['_sort=-_lastUpdated', 'Observation?_count=2&_sort=-_lastUpdated'],
      ['_total=accurate', 'Observation?_count=3&_total=accurate&_sort=-_id'],
      ['a compartment', 'Patient/pg-p/Observation?_count=2&_sort=_lastUpdated'],
    ] as const) {
      test(`each page after the first links the page before it (${order})`, async () => {
        const { forth, bundles } = await walk(query);
        expect(forth.length).toBeGreaterThan(2);
        expect(forth.flat().length).toBe(7);
        // The first page has none; the second's is the first page itself, without a cursor or offset.
        expect(link(bundles[0]!, 'previous')).toBeUndefined();
        const second = link(bundles[1]!, 'previous')!;
        expect(second).toBeDefined();
        expect(second).not.toContain('_cursor');
        expect(second).not.toContain('_offset');
        // From the last page back to the first, each `previous` is the page before.
        expect(await walkBack(link(bundles[bundles.length - 1]!, 'previous')!)).toEqual(forth.slice(0, -1));
      });
    }

    test('a cursor of the earlier form (the last row\'s keys alone) pages on, without previous', async () => {
      const first = await api.search('Observation?_count=2&_sort=_id');
      const next = new URL(link(first, 'next')!);
      const [cursor, rest] = next.searchParams.get('_cursor')!.split('~');
      const keys = JSON.parse(Buffer.from(cursor!, 'base64url').toString()) as unknown[];
      expect(keys.length).toBe(3);
      next.searchParams.set('_cursor', `${Buffer.from(JSON.stringify(keys.slice(0, 2))).toString('base64url')}~${rest}`);
      const second = await api.search(next.toString());
      expect(ids(second)).toEqual(['pg-o2', 'pg-o3']);
      expect(link(second, 'previous')).toBeUndefined();
      expect(ids(await api.search(link(second, 'next')!))).toEqual(['pg-o4', 'pg-o5']);
    });
  });
});
