/**
 * Stable paging (issue #14), on both databases: a search's later pages are read as of the first page's time
 * (the time its `_cursor` carries after `~`, src/fhir/search-time.ts). Every resource that matched when the
 * first page was read is on exactly one page, in its place as of then, whatever is updated, deleted or
 * created while a client pages; nothing created after the first page is on a later one.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, fhirClient, ids, link, type FhirClient, type Json } from '../helpers/fhir.ts';

await eachStore((kind, fresh) => {
  describe(`later pages are read as of the first page (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const clock = testClock(Date.parse('2026-04-01T08:00:00Z'));
    /** A path below the FHIR base of a link. */
    const below = (url: string) => url.slice(api.base.length).replace(/^\//, '');
    let set = 0;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), clock });
      api = fhirClient(t, await craftToken(t, 'system/*.*', { ttl: 365 * 86400 }));
    });
    afterAll(() => t.close());

    /** Six Patients of family `family`, written a second apart in id order: `{prefix}1` is the oldest. */
    async function sixPatients(prefix: string, family: string): Promise<string[]> {
      const made: string[] = [];
      for (let i = 1; i <= 6; i++) {
        clock.advance(1000);
        const id = `${prefix}${i}`;
        await api.put200(patient(id, family));
        made.push(id);
      }
      clock.advance(1000);
      return made;
    }

    const patient = (id: string, family: string, extra: Json = {}): Json => ({ resourceType: 'Patient', id, name: [{ family }], ...extra });

    /** The ids of every page of `query`, `between` run after the first page is read; with the pages' Bundles. */
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
        pages.push(page);
        got.push(...ids(page));
      }
      return { got, pages };
    }

    /** The entry of `id` among the pages' matches. */
    const entryOf = (pages: Json[], id: string): Json | undefined =>
      pages.flatMap((p) => p.entry ?? []).find((e: Json) => e.search?.mode === 'match' && e.resource.id === id);

    test('a resource written twice while the clock stands still is on its later page once, as it is now', async () => {
      // Its second version is stamped a millisecond after its first, past the clock's time the write took: the first
      // page's time must hold it, or later pages take it for one written since and show it as it was before.
      clock.advance(1000);
      const made = ['still1', 'still2', 'still3', 'still4'];
      for (const id of made) await api.put200(patient(id, 'Stillclock'));
      await api.put200(patient('still4', 'Stillclock', { gender: 'female' }));
      await api.put200(patient('still4', 'Stillclock', { gender: 'other' }));
      const { got, pages } = await paged('Patient?family=Stillclock&_count=1', async () => undefined);
      expect(got).toEqual(made);
      expect((entryOf(pages, 'still4')?.resource as Json | undefined)?.gender).toBe('other');
    });

    test('newest first: a resource updated after the first page keeps its place; a deleted one is still read; a new one is not', async () => {
      const family = `Desc${++set}`;
      const made = await sixPatients('d', family);
      const { got, pages } = await paged(`Patient?family=${family}&_sort=-_lastUpdated&_count=2`, async () => {
        await api.put200(patient('d2', family, { gender: 'female' }));
        await api.del('Patient/d3');
        await api.put200(patient('d7', family));
      });
      expect(got).toEqual([...made].reverse());
      // d2 as it was when the first page was read: its first version, without the gender written since.
      expect(entryOf(pages, 'd2')!.resource.meta.versionId).toBe('1');
      expect(entryOf(pages, 'd2')!.resource.gender).toBeUndefined();
      expect(entryOf(pages, 'd3')!.resource.meta.versionId).toBe('1');
    });

    test('oldest first: a resource updated after the first page is not read a second time at the end', async () => {
      const family = `Asc${++set}`;
      const made = await sixPatients('a', family);
      const { got } = await paged(`Patient?family=${family}&_sort=_lastUpdated&_count=2`, async () => {
        // a1 was on the first page, a4 is not read yet: both would sort after the last page's place now.
        await api.put200(patient('a1', family, { gender: 'male' }));
        await api.put200(patient('a4', family, { gender: 'male' }));
        await api.put200(patient('a7', family));
      });
      expect(got).toEqual(made);
    });

    test('in id order: a match changed so that it no longer matches is still read, a new match is not', async () => {
      const family = `Ids${++set}`;
      const made = await sixPatients('i', family);
      const { got, pages } = await paged(`Patient?family=${family}&_count=2`, async () => {
        await api.put200(patient('i5', 'Other'));
        await api.put200(patient('i55', family));
        await api.put200(patient('i3', family, { gender: 'other' }));
      });
      expect(got).toEqual(made);
      expect(entryOf(pages, 'i5')!.resource.name).toEqual([{ family }]);
      // A later page's self link, read again, is the same page.
      const last = pages[pages.length - 1]!;
      expect(ids(await api.search(below(link(last, 'self')!)))).toEqual(ids(last));
    });

    test('a resource created and then deleted after the first page is on no page; one updated twice is read once', async () => {
      const family = `Twice${++set}`;
      const made = await sixPatients('w', family);
      const { got } = await paged(`Patient?family=${family}&_sort=-_lastUpdated&_count=4`, async () => {
        await api.put200(patient('w9', family));
        await api.del('Patient/w9');
        await api.put200(patient('w1', family, { gender: 'male' }));
        clock.advance(1000);
        await api.put200(patient('w1', family, { gender: 'female' }));
      });
      expect(got).toEqual([...made].reverse());
    });

    test('a compartment search newest first: a record updated since keeps its place, one written since is not read', async () => {
      const pt = `cpt${++set}`;
      await api.put200({ resourceType: 'Patient', id: pt });
      const obs = (id: string, extra: Json = {}): Json => ({ resourceType: 'Observation', id, status: 'final', code: { text: 'x' }, subject: { reference: `Patient/${pt}` }, ...extra });
      const made: string[] = [];
      for (let i = 1; i <= 5; i++) {
        clock.advance(1000);
        await api.put200(obs(`${pt}-o${i}`));
        made.push(`${pt}-o${i}`);
      }
      clock.advance(1000);
      const { got, pages } = await paged(`Patient/${pt}/Observation?_sort=-_lastUpdated&_count=2`, async () => {
        await api.put200(obs(`${pt}-o2`, { status: 'amended' }));
        await api.put200(obs(`${pt}-o9`));
      });
      expect(got).toEqual([...made].reverse());
      expect(entryOf(pages, `${pt}-o2`)!.resource.status).toBe('final');
    });

    test('past 1,000 versions of the type written since the first page, a later page is read as now, with a warning naming _cursor', async () => {
      const family = `Busy${++set}`;
      const made = await sixPatients('b', family);
      const { got, pages } = await paged(`Patient?family=${family}&_count=3`, async () => {
        for (let i = 0; i < 1001; i += 250) {
          const entry = Array.from({ length: Math.min(250, 1001 - i) }, (_, j) => {
            const resource = patient(`busy${set}-${i + j}`, 'Elsewhere');
            return { resource, request: { method: 'PUT', url: `Patient/${resource.id}` } };
          });
          const res = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry });
          expect(res.status).toBe(200);
        }
        await api.put200(patient('b7', family));
      });
      // b7, written since, is read: the page is the data as it is now.
      expect(got).toEqual([...made, 'b7']);
      const warnings = pages.slice(1).flatMap((p) => p.entry ?? []).filter((e: Json) => e.search?.mode === 'outcome').flatMap((e: Json) => e.resource.issue);
      expect(warnings.length).toBeGreaterThan(0);
      expect(warnings[0]).toMatchObject({ severity: 'warning', code: 'too-costly', expression: ['_cursor'] });
    });

    test('a cursor given before later pages were read as of the first page still pages, from its own time', async () => {
      const family = `Old${++set}`;
      const made = await sixPatients('o', family);
      const first = await api.search(`Patient?family=${family}&_count=2`);
      // The previous release's cursor: the keys alone, no `~` and time.
      const old = below(link(first, 'next')!).replace(/~[0-9a-z]+$/, '');
      const got = [...ids(first)];
      for (let next: string | undefined = old; next !== undefined; ) {
        const page = await api.search(next);
        got.push(...ids(page));
        const n = link(page, 'next');
        next = n === undefined ? undefined : below(n);
      }
      expect(got).toEqual(made);
    });
  });
});
