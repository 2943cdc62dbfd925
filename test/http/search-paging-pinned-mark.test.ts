/**
 * Stable paging's cost (src/fhir/search-pin.ts pinMark), on both databases: a search's `_cursor` carries the
 * tenant's write mark read before the first page's query beside the first page's time. A later page whose mark
 * still holds reads as the store answers it, without the history walk of the versions written since; once
 * anything is written, later pages are read as of the first page's time as before.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, fhirClient, ids, link, type FhirClient, type Json } from '../helpers/fhir.ts';
import type { Store } from '../../src/store/interface/store.ts';

type Calls = { history: number; versionsSince: number; vreadMany: number; writeMark: number };

/** Counts the store's calls of the methods pinned paging reads with. */
function counting(store: Store): Calls {
  const calls: Calls = { history: 0, versionsSince: 0, vreadMany: 0, writeMark: 0 };
  const repo = store.resources as unknown as Record<keyof Calls, (...a: unknown[]) => Promise<unknown>>;
  for (const name of Object.keys(calls) as (keyof Calls)[]) {
    const inner = repo[name].bind(repo);
    repo[name] = (...a: unknown[]) => {
      calls[name]++;
      return inner(...a);
    };
  }
  return calls;
}

await eachStore((kind, fresh) => {
  describe(`later pages with nothing written since the first read as now (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let calls: Calls;
    const clock = testClock(Date.parse('2026-04-01T08:00:00Z'));
    const below = (url: string) => url.slice(api.base.length).replace(/^\//, '');
    let set = 0;

    beforeAll(async () => {
      const store = await fresh();
      calls = counting(store);
      t = await createTestApp({ store, clock });
      api = fhirClient(t, await craftToken(t, 'system/*.*', { ttl: 365 * 86400 }));
    });
    afterAll(() => t.close());

    const patient = (id: string, family: string, extra: Json = {}): Json => ({ resourceType: 'Patient', id, name: [{ family }], ...extra });

    async function sixPatients(prefix: string, family: string): Promise<string[]> {
      const made: string[] = [];
      for (let i = 1; i <= 6; i++) {
        clock.advance(1000);
        await api.put200(patient(`${prefix}${i}`, family));
        made.push(`${prefix}${i}`);
      }
      clock.advance(1000);
      return made;
    }

    /** Every page of `query` from its first; `between(n)` runs before page n + 1 (n from 1) is read; the calls each later page made. */
    async function paged(query: string, between: (n: number) => Promise<void> = async () => {}): Promise<{ got: string[]; pages: Json[]; made: Calls[] }> {
      const pages = [await api.search(query)];
      const made: Calls[] = [];
      for (let next = link(pages[0]!, 'next'); next !== undefined; next = link(pages[pages.length - 1]!, 'next')) {
        if (pages.length > 20) throw new Error('runaway paging');
        clock.advance(1000);
        await between(pages.length);
        const before = { ...calls };
        pages.push(await api.search(below(next)));
        made.push(Object.fromEntries(Object.keys(calls).map((k) => [k, calls[k as keyof Calls] - before[k as keyof Calls]])) as Calls);
      }
      return { got: pages.flatMap(ids), pages, made };
    }

    /** A later page with nothing written since: on SQLite, the mark alone; on PostgreSQL (a round trip) without _total, the changes since. */
    const still = kind === 'sqlite' ? { history: 0, versionsSince: 0, vreadMany: 0, writeMark: 1 } : { history: 0, versionsSince: 1, vreadMany: 0, writeMark: 0 };

    test('in id order, newest first and sorted on a parameter: no history read on a later page when nothing was written since the first', async () => {
      const family = `Still${++set}`;
      const made = await sixPatients('s', family);
      const queries = [
        [`Patient?family=${family}&_count=2`, made],
        [`Patient?family=${family}&_sort=-_lastUpdated&_count=2`, [...made].reverse()],
        // A sort on parameters (ties by id).
        [`Patient?family=${family}&_sort=family&_count=2`, made],
      ] as const;
      for (const [query, order] of queries) {
        const { got, made: later } = await paged(query);
        expect(got).toEqual(order);
        expect(later).toHaveLength(2);
        for (const c of later) expect(c).toEqual(still);
      }
    });

    test('a write after the second page: the third is still read as of the first page, reading the texts only of versions within it', async () => {
      const family = `Moved${++set}`;
      const made = await sixPatients('m', family);
      const { got, pages, made: later } = await paged(`Patient?family=${family}&_sort=-_lastUpdated&_count=2`, async (n) => {
        if (n !== 2) return;
        // m2 is on the third page: updated now, it would sort first, onto no page.
        await api.put200(patient('m2', family, { gender: 'female' }));
        await api.put200(patient('m7', family));
      });
      expect(got).toEqual([...made].reverse());
      const m2 = pages.flatMap((p) => p.entry ?? []).find((e: Json) => e.resource.id === 'm2');
      expect(m2.resource.meta.versionId).toBe('1');
      // The third page reads which versions were written since (no texts) and m2's first version, the one within it.
      expect(later[0]).toEqual(still);
      expect(later[1]).toEqual({ ...still, versionsSince: 1, vreadMany: 1 });
    });

    test('a cursor without the mark (given before marks were carried) still pages as of the first page', async () => {
      const family = `Old${++set}`;
      const made = await sixPatients('o', family);
      const first = await api.search(`Patient?family=${family}&_sort=_lastUpdated&_count=3&_total=accurate`);
      const next = new URL(link(first, 'next')!);
      const cursor = next.searchParams.get('_cursor')!;
      expect(cursor).toMatch(/~[0-9a-z]+\.[0-9]+$/);
      next.searchParams.set('_cursor', cursor.replace(/\.[0-9]+$/, ''));
      clock.advance(1000);
      // o1, on the first page, would now sort after the cursor and be read again.
      await api.put200(patient('o1', family, { gender: 'male' }));
      expect([...ids(first), ...ids(await api.search(below(next.toString())))]).toEqual(made);
    });

    test('with _total, one write mark read a page serves both the carried total and the pin (on either store)', async () => {
      const family = `Total${++set}`;
      const made = await sixPatients('t', family);
      const { got, pages, made: later } = await paged(`Patient?family=${family}&_count=2&_total=accurate`);
      expect(got).toEqual(made);
      for (const p of pages) expect(p.total).toBe(6);
      for (const c of later) expect(c).toEqual({ history: 0, versionsSince: 0, vreadMany: 0, writeMark: 1 });
    });
  });
});
