/**
 * Stable paging of a sort on parameters (`_sort=-birthdate`, `_sort=family,birthdate`), on both databases: the
 * pages after the first are read as of the first page's time, as those in `_id` and `_lastUpdated` order are
 * (search-paging-pinned.test.ts). A resource updated between pages so that its sort key moves ahead of the
 * cursor's place is not skipped, one moved behind it is not read twice, a deleted one is still read and one
 * created since is not: every resource that matched at the first page's time is on exactly one page, in its
 * place as of then.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, fhirClient, ids, link, type FhirClient, type Json } from '../helpers/fhir.ts';

await eachStore((kind, fresh) => {
  describe(`later pages of a sort on parameters are read as of the first page (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const clock = testClock(Date.parse('2026-05-01T08:00:00Z'));
    const below = (url: string) => url.slice(api.base.length).replace(/^\//, '');
    let set = 0;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), clock });
      api = fhirClient(t, await craftToken(t, 'system/*.*', { ttl: 365 * 86400 }));
    });
    afterAll(() => t.close());

    const patient = (id: string, family: string, birthDate?: string, extra: Json = {}): Json =>
      ({ resourceType: 'Patient', id, name: [{ family }], ...(birthDate === undefined ? {} : { birthDate }), ...extra });

    /** Writes `made` a second apart, then lets a second pass. */
    async function write(made: Json[]): Promise<void> {
      for (const p of made) {
        clock.advance(1000);
        await api.put200(p);
      }
      clock.advance(1000);
    }

    /** The ids of every page of `query` and the pages' Bundles, `between` run after the first page is read. */
    async function paged(query: string, between: () => Promise<void>): Promise<{ got: string[]; pages: Json[] }> {
      const first = await api.search(query);
      const pages = [first];
      const got = ids(first);
      clock.advance(1000);
      await between();
      clock.advance(1000);
      for (let next = link(first, 'next'); next !== undefined; next = link(pages[pages.length - 1]!, 'next')) {
        if (pages.length > 20) throw new Error('runaway paging');
        const page = await api.search(below(next));
        expect(page.resourceType).toBe('Bundle');
        pages.push(page);
        got.push(...ids(page));
      }
      return { got, pages };
    }

    const entryOf = (pages: Json[], id: string): Json | undefined =>
      pages.flatMap((p) => p.entry ?? []).find((e: Json) => e.search?.mode === 'match' && e.resource.id === id)?.resource;

    test('newest birth date first: keys moved forward and backward, a deletion, a new match and one that no longer matches', async () => {
      const family = `Born${++set}`;
      const p = (n: number) => `b${set}-${n}`;
      await write([1, 2, 3, 4, 5, 6].map((n) => patient(p(n), family, `198${n}-03-01`)));
      const { got, pages } = await paged(`Patient?family=${family}&_sort=-birthdate&_count=2`, async () => {
        // Read on the first page, moved behind the place: read again at the end, as the data is now.
        await api.put200(patient(p(5), family, '1970-01-01'));
        // Not read yet, moved ahead of the place: never read, as the data is now.
        await api.put200(patient(p(2), family, '1999-12-31'));
        await api.del(`Patient/${p(3)}`);
        await api.put200(patient(p(7), family, '1983-06-01'));
        await api.put200(patient(p(4), 'Elsewhere', '1984-03-01'));
      });
      expect(got).toEqual([6, 5, 4, 3, 2, 1].map(p));
      // Each as it was when the first page was read.
      expect(entryOf(pages, p(2))).toMatchObject({ birthDate: '1982-03-01', meta: { versionId: '1' } });
      expect(entryOf(pages, p(3))).toMatchObject({ meta: { versionId: '1' } });
      expect(entryOf(pages, p(4))!.name).toEqual([{ family }]);
    });

    test('two keys with ties and keyless matches: a family moved back and forth keeps its place', async () => {
      const family = (f: string) => `${f}${++set}`;
      const [a, b, c] = [family('Aa'), family('Bb'), family('Cc')];
      const q = `k${set}`;
      const made = [
        patient(`${q}-1`, a, '1990-01-01'), patient(`${q}-2`, a), patient(`${q}-3`, b, '1980-01-01'),
        patient(`${q}-4`, b, '1985-01-01'), patient(`${q}-5`, c, '1970-01-01'), patient(`${q}-6`, c),
      ];
      await write(made);
      const { got, pages } = await paged(`Patient?family=${a},${b},${c}&_sort=family,birthdate&_count=2`, async () => {
        // A match read moved after the place, one not read moved before it, a keyless one given a key.
        await api.put200(patient(`${q}-1`, c, '1990-01-01'));
        await api.put200(patient(`${q}-5`, a, '1970-01-01'));
        await api.put200(patient(`${q}-6`, c, '1960-01-01'));
        await api.put200(patient(`${q}-7`, b, '1982-01-01'));
      });
      // Family (lowest value, in code point order), then birth date with none last, then id.
      expect(got).toEqual([1, 2, 3, 4, 5, 6].map((n) => `${q}-${n}`));
      expect(entryOf(pages, `${q}-6`)!.birthDate).toBeUndefined();
    });

    test('a page whose next rows all changed since is read on past them, each changed match in its place as of then', async () => {
      const family = `Many${++set}`;
      const p = (n: number) => `m${set}-${n}`;
      await write([1, 2, 3, 4, 5, 6, 7, 8].map((n) => patient(p(n), family, `200${n}-01-01`)));
      const { got, pages } = await paged(`Patient?family=${family}&_sort=birthdate&_count=2`, async () => {
        for (const n of [3, 4, 5]) await api.put200(patient(p(n), family, `200${n}-01-01`, { gender: 'other' }));
        await api.put200(patient(p(6), family, '2010-01-01'));
      });
      expect(got).toEqual([1, 2, 3, 4, 5, 6, 7, 8].map(p));
      expect(entryOf(pages, p(4))!.gender).toBeUndefined();
      expect(entryOf(pages, p(6))!.birthDate).toBe('2006-01-01');
    });

    test('a later page read again by its self link is the same page', async () => {
      const family = `Self${++set}`;
      const p = (n: number) => `s${set}-${n}`;
      await write([1, 2, 3, 4, 5].map((n) => patient(p(n), family, `196${n}-01-01`)));
      const { pages } = await paged(`Patient?family=${family}&_sort=-birthdate&_count=2`, async () => {
        await api.put200(patient(p(2), family, '1999-01-01'));
        await api.del(`Patient/${p(3)}`);
      });
      const second = pages[1]!;
      expect(ids(second)).toEqual([p(3), p(2)]);
      expect(ids(await api.search(below(link(second, 'self')!)))).toEqual(ids(second));
    });
  });
});
