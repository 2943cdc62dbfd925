/**
 * Stable paging across types (`?_type=...`, `Patient/{id}/*`), on both databases: later pages are read as of the
 * first page's time, as a type's are (search-paging-pinned.test.ts). Every resource of the types searched that
 * matched when the first page was read is on exactly one page, in its place and version as of then, whatever is
 * updated, deleted or created while a client pages.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, fhirClient, ids, link, type FhirClient, type Json } from '../helpers/fhir.ts';

await eachStore((kind, fresh) => {
  describe(`later pages across types are read as of the first page (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const clock = testClock(Date.parse('2026-06-01T08:00:00Z'));
    const below = (url: string) => url.slice(api.base.length).replace(/^\//, '');
    let set = 0;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), clock });
      api = fhirClient(t, await craftToken(t, 'system/*.*', { ttl: 365 * 86400 }));
    });
    afterAll(() => t.close());

    const patient = (id: string, extra: Json = {}): Json => ({ resourceType: 'Patient', id, ...extra });
    const observation = (id: string, subject: string, extra: Json = {}): Json =>
      ({ resourceType: 'Observation', id, status: 'final', code: { text: 'x' }, subject: { reference: `Patient/${subject}` }, ...extra });

    /** Writes `made` a second apart (each stamped in turn), then lets a second pass; their ids. */
    async function write(made: Json[]): Promise<string[]> {
      for (const r of made) {
        clock.advance(1000);
        await api.put200(r);
      }
      clock.advance(1000);
      return made.map((r) => `${r.resourceType}/${r.id}`);
    }

    /** The `type/id` of every page's matches of `query`, `between` run after the first page is read; with the pages. */
    async function paged(query: string, between: () => Promise<void>): Promise<{ got: string[]; pages: Json[] }> {
      const keys = (b: Json) => (b.entry ?? []).filter((e: Json) => e.search?.mode === 'match').map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`);
      const first = await api.search(query);
      const pages = [first];
      const got = keys(first);
      clock.advance(1000);
      await between();
      clock.advance(1000);
      for (let next = link(first, 'next'); next !== undefined; next = link(pages[pages.length - 1]!, 'next')) {
        if (pages.length > 20) throw new Error('runaway paging');
        const page = await api.search(below(next));
        expect(page.resourceType).toBe('Bundle');
        pages.push(page);
        got.push(...keys(page));
      }
      return { got, pages };
    }

    const entryOf = (pages: Json[], key: string): Json | undefined =>
      pages.flatMap((p) => p.entry ?? []).find((e: Json) => e.search?.mode === 'match' && `${e.resource.resourceType}/${e.resource.id}` === key)?.resource;

    test('type by type in id order: a deletion ahead is still read, a resource created ahead is not', async () => {
      const tag = `x${++set}`;
      const made = await write([patient(`${tag}-p1`), patient(`${tag}-p2`), patient(`${tag}-p3`), observation(`${tag}-o1`, `${tag}-p1`), observation(`${tag}-o2`, `${tag}-p1`)]);
      const ids = made.map((k) => k.split('/')[1]!).join(',');
      const { got, pages } = await paged(`?_type=Patient,Observation&_id=${ids},${tag}-p4,${tag}-o3&_count=2`, async () => {
        await api.put200(patient(`${tag}-p4`));
        await api.put200(observation(`${tag}-o3`, `${tag}-p1`));
        await api.del(`Observation/${tag}-o1`);
        await api.put200(patient(`${tag}-p3`, { gender: 'other' }));
      });
      expect(got).toEqual(made);
      expect(entryOf(pages, `Patient/${tag}-p3`)!.gender).toBeUndefined();
      expect(entryOf(pages, `Observation/${tag}-o1`)!.meta.versionId).toBe('1');
    });

    test('newest first: a resource updated since keeps its place, as it was; one created since is not read', async () => {
      const tag = `n${++set}`;
      const made = await write([patient(`${tag}-p1`), observation(`${tag}-o1`, `${tag}-p1`), patient(`${tag}-p2`), observation(`${tag}-o2`, `${tag}-p1`), patient(`${tag}-p3`)]);
      const ids = made.map((k) => k.split('/')[1]!).join(',');
      const { got, pages } = await paged(`?_type=Patient,Observation&_id=${ids},${tag}-p4&_sort=-_lastUpdated&_count=2`, async () => {
        // Not read yet: moved ahead of the cursor, never read as the data is now.
        await api.put200(observation(`${tag}-o1`, `${tag}-p1`, { status: 'amended' }));
        await api.put200(patient(`${tag}-p4`));
      });
      expect(got).toEqual([...made].reverse());
      expect(entryOf(pages, `Observation/${tag}-o1`)!.status).toBe('final');
    });

    test('oldest first in a compartment: a resource read and updated since is not read again at the end', async () => {
      const pt = `c${++set}`;
      await api.put200(patient(pt));
      const made = await write([1, 2, 3, 4, 5].map((n) => observation(`${pt}-o${n}`, pt)));
      const { got } = await paged(`Patient/${pt}/*?_type=Observation&_sort=_lastUpdated&_count=2`, async () => {
        await api.put200(observation(`${pt}-o1`, pt, { status: 'amended' }));
        await api.put200(observation(`${pt}-o6`, pt));
      });
      expect(got).toEqual(made);
    });
  });
});
