/**
 * A search's later pages carry the first page's time (src/fhir/search-time.ts pagedAt), on both databases:
 * every page's `meta.lastUpdated` is the safe time taken before the first page's read, carried in the
 * `_cursor` of the links the pages give (`next`, a later page's `self` and `previous`). A version written
 * while a client pages, sorting before a page's place, is on none of its pages; a poll
 * `_lastUpdated=gt` the last page's time must still find it.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, ids, link, type FhirClient, type Json } from '../helpers/fhir.ts';

await eachStore((kind, fresh) => {
  describe(`search pages after the first carry the first page's time (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const clock = testClock(Date.parse('2026-03-01T10:00:00Z'));
    /** A path below the FHIR base of a link. */
    const below = (url: string) => url.slice(api.base.length).replace(/^\//, '');
    let n = 0;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), clock });
      api = fhirClient(t, await craftToken(t, 'system/*.*', { ttl: 365 * 86400 }));
      await api.put200({ resourceType: 'Patient', id: 'pt' });
      for (const id of ['a1', 'a2', 'a3', 'a4', 'a5']) {
        await api.put200({ resourceType: 'Patient', id, name: [{ family: `F${id}` }], link: [{ other: { reference: 'Patient/pt' }, type: 'seealso' }] });
        await api.put200({ resourceType: 'Observation', id: `o-${id}`, status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/pt' } });
      }
      clock.advance(60_000);
    });
    afterAll(() => t.close());

    /**
     * Pages `query` two at a time; after the first page a minute passes and `touch` is written again (it sorts
     * before the second page's place). Every page says the first page's time, and a poll from the last page's
     * time finds the write.
     */
    async function pagesAfterAWrite(query: string, touch: Json, poll: string) {
      const first = await api.search(query);
      const time = first.meta.lastUpdated;
      expect(time).toBe(new Date(clock.now()).toISOString());
      clock.advance(60_000);
      await api.put200({ ...touch, text: { status: 'generated', div: `<div xmlns="http://www.w3.org/1999/xhtml">${++n}</div>` } });
      clock.advance(60_000);
      let page = first;
      let pages = 1;
      for (let next = link(page, 'next'); next !== undefined; next = link(page, 'next')) {
        page = await api.search(below(next));
        expect({ query, pages, time: page.meta.lastUpdated }).toEqual({ query, pages, time });
        // A later page links the first page (without a cursor), across types too.
        expect({ query, first: new URL(link(page, 'first')!).searchParams.has('_cursor') }).toEqual({ query, first: false });
        // Its self link, read again later, is the same page at the same time.
        clock.advance(1000);
        const again = await api.search(below(link(page, 'self')!));
        expect({ query, time: again.meta.lastUpdated, ids: ids(again) }).toEqual({ query, time, ids: ids(page) });
        pages++;
      }
      expect({ query, pages }).toEqual({ query, pages: query.includes('$everything') ? pages : 3 });
      const polled = await api.search(`${poll}${poll.includes('?') ? '&' : '?'}_lastUpdated=gt${encodeURIComponent(page.meta.lastUpdated)}`);
      expect({ query, polled: ids(polled) }).toEqual({ query, polled: [touch.id] });
    }

    test('type searches by id, by a sort on a parameter (sealed cursors) and by _lastUpdated', async () => {
      const a1 = { resourceType: 'Patient', id: 'a1', name: [{ family: 'Fa1' }], link: [{ other: { reference: 'Patient/pt' }, type: 'seealso' }] };
      await pagesAfterAWrite('Patient?link=Patient/pt&_count=2', a1, 'Patient');
      await pagesAfterAWrite('Patient?link=Patient/pt&_count=2&_sort=family', a1, 'Patient');
      await pagesAfterAWrite('Patient?link=Patient/pt&_count=2&_sort=-family', { ...a1, id: 'a5', name: [{ family: 'Fa5' }] }, 'Patient');
      await pagesAfterAWrite('Patient?link=Patient/pt&_count=2&_sort=_lastUpdated', a1, 'Patient');
    });

    test('searches across types, compartment searches and a page asked by _offset', async () => {
      const o1 = { resourceType: 'Observation', id: 'o-a1', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/pt' } };
      await pagesAfterAWrite('?_type=Observation&subject=Patient/pt&_count=2', o1, 'Observation');
      await pagesAfterAWrite('Patient/pt/Observation?_count=2', o1, 'Observation');
      // A page asked by `_offset` reads at its own time; the pages it links to carry that time.
      const offset = await api.search('Observation?_count=2&_offset=2');
      expect(offset.meta.lastUpdated).toBe(new Date(clock.now()).toISOString());
      clock.advance(60_000);
      expect((await api.search(below(link(offset, 'next')!))).meta.lastUpdated).toBe(offset.meta.lastUpdated);
    });

    test('$everything and a batch GET entry page the same way', async () => {
      const first = await api.search('Patient/pt/$everything?_count=2');
      clock.advance(60_000);
      const second = await api.search(below(link(first, 'next')!));
      expect(second.meta.lastUpdated).toBe(first.meta.lastUpdated);
      const search = await api.search('Observation?_count=2');
      clock.advance(60_000);
      const res = await api.post('', { resourceType: 'Bundle', type: 'batch', entry: [{ request: { method: 'GET', url: below(link(search, 'next')!) } }] });
      const entry = ((await res.json()) as Json).entry[0];
      expect(entry.response.status).toBe('200 OK');
      expect(entry.resource.meta.lastUpdated).toBe(search.meta.lastUpdated);
      expect(below(link(entry.resource, 'next')!)).toBe(below(link(await api.search(below(link(search, 'next')!)), 'next')!));
      // A transaction checks the cursor before it writes, its time too.
      const next = new URL(link(search, 'next')!).searchParams.get('_cursor')!;
      const bad = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'GET', url: `Observation?_count=2&_cursor=${next}X` } }] });
      expect(bad.status).toBe(400);
    });

    test('a cursor whose time is not one the server writes is a 400 naming _cursor; a later time is the page\'s own', async () => {
      const first = await api.search('Patient?_count=2');
      const cursor = new URL(link(first, 'next')!).searchParams.get('_cursor')!;
      const own = cursor.slice(0, cursor.lastIndexOf('~'));
      expect(own.length).toBeGreaterThan(0);
      for (const bad of [`${own}~`, `${own}~ZZ`, `${own}~-1`, `${own}~zzzzzzzzzzzz`, `~${cursor.slice(cursor.lastIndexOf('~') + 1)}`]) {
        const outcome = await expectOutcome(await api.get(`Patient?_count=2&_cursor=${encodeURIComponent(bad)}`), 400, 'invalid');
        expect({ bad, expression: outcome.issue[0].expression }).toEqual({ bad, expression: ['_cursor'] });
      }
      clock.advance(60_000);
      const later = await api.search(`Patient?_count=2&_cursor=${own}~${(clock.now() + 86_400_000).toString(36)}`);
      expect(later.meta.lastUpdated).toBe(new Date(clock.now()).toISOString());
      // A cursor without a time (one given before times were carried) reads at its own time.
      expect((await api.search(`Patient?_count=2&_cursor=${own}`)).meta.lastUpdated).toBe(new Date(clock.now()).toISOString());
    });
  });
});
