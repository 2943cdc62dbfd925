import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test';
import { BASE, createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { craftToken, expectOutcome, fhirClient, ids, link, type FhirClient, type Json } from '../helpers/fhir.ts';

let t: TestApp;
let api: FhirClient;
const clock = testClock(Date.parse('2026-05-01T00:00:00Z'));
const base = `${BASE}/tenants/t1/fhir/R4`;
const N = 23;
/** id -> lastUpdated (ms) of the fixture's Practitioners. */
const written = new Map<string, number>();

/** Follows `next` links from `query`; `between` runs after each page. */
async function pages(query: string, between?: (page: number) => Promise<void>): Promise<{ ids: string[]; bundles: Json[] }> {
  const all: string[] = [];
  const bundles: Json[] = [];
  let url: string | undefined = query;
  while (url) {
    const bundle = await api.search(url);
    bundles.push(bundle);
    all.push(...ids(bundle));
    url = link(bundle, 'next');
    if (between) await between(bundles.length);
    if (bundles.length > 200) throw new Error('runaway paging');
  }
  return { ids: all, bundles };
}

const byTime = (a: string, b: string) => written.get(a)! - written.get(b)! || (a < b ? -1 : a > b ? 1 : 0);

beforeAll(async () => {
  t = await createTestApp({ clock });
  api = fhirClient(t, await craftToken(t, 'system/*.*', { ttl: 365 * 86400 }));
  // Created in an order unrelated to id order; several share one millisecond.
  for (let i = 0; i < N; i++) {
    const id = `pr-${String((i * 7) % N).padStart(2, '0')}`;
    if (i % 3 === 0) clock.advance(1000);
    const r = await api.put200({ resourceType: 'Practitioner', id, active: i % 2 === 0 });
    written.set(id, Date.parse(r.meta.lastUpdated));
  }
});
afterAll(() => t.close());

/** Practitioners a test added; removed after it so the fixture stays N resources. */
const added: string[] = [];
afterEach(async () => {
  for (const id of added.splice(0)) await api.del(`Practitioner/${id}`);
});

describe('keyset paging', () => {
  for (const sort of [undefined, '_lastUpdated', '-_lastUpdated']) {
    for (const count of [1, 5, 23, 50]) {
      test(`_sort=${sort ?? '(default: _id)'} _count=${count}: every match exactly once, in order`, async () => {
        const q = `Practitioner?_count=${count}` + (sort ? `&_sort=${sort}` : '');
        const { ids: got, bundles } = await pages(q);
        const expected = [...written.keys()].sort(sort === undefined ? undefined : byTime);
        if (sort === '-_lastUpdated') expected.reverse();
        expect(got).toEqual(expected);
        expect(bundles).toHaveLength(Math.ceil(N / count));
        for (const b of bundles.slice(0, -1)) expect(ids(b)).toHaveLength(count);
      });
    }
  }

  test('next links keep the query and carry a cursor; a later page links itself with its cursor, and the first page', async () => {
    const first = await api.search('Practitioner?_count=4&_sort=_lastUpdated');
    expect(new URL(link(first, 'self')!).searchParams.has('_cursor')).toBe(false);
    expect(link(first, 'first')).toBeUndefined();
    const next = new URL(link(first, 'next')!);
    expect(next.origin + next.pathname).toBe(`${base}/Practitioner`);
    expect(next.searchParams.get('_count')).toBe('4');
    expect(next.searchParams.get('_sort')).toBe('_lastUpdated');
    expect(next.searchParams.get('_cursor')).toBeTruthy();
    const second = await api.search(next.toString());
    expect(link(second, 'self')).toBe(next.toString());
    expect(ids(second).some((id) => ids(first).includes(id))).toBe(false);
    expect(ids(await api.search(link(second, 'self')!))).toEqual(ids(second));
    expect(ids(await api.search(link(second, 'first')!))).toEqual(ids(first));
    // Keyset pages know the row before them, and (by their cursor) how many matches: the page before is the first.
    expect(new URL(link(second, 'previous')!).searchParams.has('_cursor')).toBe(false);
    expect(ids(await api.search(link(second, 'previous')!))).toEqual(ids(first));
  });

  test('pages by offset (a sort on a parameter) link the previous page, the second page the first', async () => {
    const { bundles } = await pages('Practitioner?_count=4&_sort=active,_id');
    expect(bundles.length).toBe(6);
    expect(link(bundles[0]!, 'previous')).toBeUndefined();
    for (let i = 1; i < bundles.length; i++) {
      const previous = await api.search(link(bundles[i]!, 'previous')!);
      expect(ids(previous)).toEqual(ids(bundles[i - 1]!));
      expect(ids(await api.search(link(bundles[i]!, 'first')!))).toEqual(ids(bundles[0]!));
    }
    expect(new URL(link(bundles[1]!, 'previous')!).searchParams.has('_cursor')).toBe(false);
  });

  test('the last page has no next link; a search without matches has one empty page', async () => {
    const last = await api.search('Practitioner?_count=50');
    expect(link(last, 'next')).toBeUndefined();
    const none = await api.search('Practitioner?_id=nobody');
    expect(none.entry).toBeUndefined();
    expect(none.total).toBe(0);
    expect(link(none, 'next')).toBeUndefined();
  });

  test('resources created between pages: every original match exactly once (sorted by _lastUpdated)', async () => {
    let n = 0;
    const { ids: got } = await pages('Practitioner?_count=4&_sort=_lastUpdated', async () => {
      clock.advance(1);
      for (let k = 0; k < 2; k++) {
        const id = `late-lu-${n++}`;
        added.push(id);
        await api.put200({ resourceType: 'Practitioner', id });
      }
    });
    expect(new Set(got).size).toBe(got.length);
    for (const id of written.keys()) expect(got.filter((g) => g === id)).toHaveLength(1);
    // Newer resources sort after the cursor, but later pages are read as of the first page: none is on them.
    expect(got).toEqual([...written.keys()].sort(byTime));
  });

  test('resources created between pages: every original match exactly once (sorted by _id)', async () => {
    let n = 0;
    const { ids: got } = await pages('Practitioner?_count=3', async () => {
      // Ids before and after every cursor position.
      for (const prefix of ['a', 'pr-05x', 'zz']) {
        const id = `${prefix}-new-${n++}`;
        added.push(id);
        await api.put200({ resourceType: 'Practitioner', id });
      }
    });
    expect(new Set(got).size).toBe(got.length);
    for (const id of written.keys()) expect(got.filter((g) => g === id)).toHaveLength(1);
    expect(got).toEqual([...got].sort());
  });

  test('resources created between pages: every original match exactly once (sorted by -_lastUpdated)', async () => {
    const { ids: got } = await pages('Practitioner?_count=5&_sort=-_lastUpdated', async (page) => {
      const id = `late-desc-${page}`;
      added.push(id);
      clock.advance(10);
      await api.put200({ resourceType: 'Practitioner', id });
    });
    expect(got).toEqual([...written.keys()].sort(byTime).reverse());
  });

  test('a resource deleted after the first page is still on its later page (read as of the first page), not on a new search', async () => {
    const first = await api.search('Practitioner?_count=5');
    const sorted = [...written.keys()].sort();
    expect(ids(first)).toEqual(sorted.slice(0, 5));
    clock.advance(1);
    await api.del(`Practitioner/${sorted[7]}`);
    const rest = await pages(link(first, 'next')!);
    expect(rest.ids).toEqual(sorted.slice(5));
    expect((await pages('Practitioner?_count=5')).ids).toEqual(sorted.filter((id) => id !== sorted[7]));
    await api.put200({ resourceType: 'Practitioner', id: sorted[7]! });
    written.set(sorted[7]!, clock.now());
  });
});

describe('_count, _total and _summary=count', () => {
  test('_count above the maximum is capped, _count=0 gives only the total', async () => {
    const big = await api.search('Practitioner?_count=100000');
    expect(ids(big)).toHaveLength(N);
    const zero = await api.search('Practitioner?_count=0');
    expect(zero.entry).toBeUndefined();
    expect(zero.total).toBe(N);
    expect(link(zero, 'next')).toBeUndefined();
  });

  test('total is given on a single-page result; a paged one needs _total=accurate', async () => {
    const single = await api.search('Practitioner?_id=pr-01,pr-02&_count=100');
    expect(single.total).toBe(2);
    const all = await api.search('Practitioner');
    expect(all.total).toBe(N);
    const paged = await api.search('Practitioner?_count=2');
    expect(paged.total).toBeUndefined();
    const accurate = await api.search('Practitioner?_count=2&_total=accurate');
    expect(accurate.total).toBe(N);
    expect(ids(accurate)).toHaveLength(2);
    const filtered = await api.search('Practitioner?_count=2&_total=accurate&_id=pr-01,pr-02,pr-03');
    expect(filtered.total).toBe(3);
    const none = await api.search('Practitioner?_total=none');
    expect(none.total).toBeUndefined();
  });

  test('_summary=count answers the total and no entries', async () => {
    const res = await api.get('Practitioner?_summary=count');
    expect(res.status).toBe(200);
    const bundle = (await res.json()) as Json;
    expect(bundle).toMatchObject({ resourceType: 'Bundle', type: 'searchset', total: N });
    expect(bundle.entry).toBeUndefined();
    const some = await api.search('Practitioner?_summary=count&_id=pr-01,pr-02');
    expect(some.total).toBe(2);
    const lenient = await api.search('Practitioner?_summary=count&bogus=1');
    expect(lenient.total).toBe(N);
  });
});

describe('POST _search', () => {
  test('a form body gives the same result as GET; query-string parameters are combined', async () => {
    const token = await craftToken(t, 'system/*.*');
    const post = (path: string, body: string, headers: Record<string, string> = {}) =>
      t.request(`${base}/${path}`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/x-www-form-urlencoded', ...headers },
        body,
      });
    const viaGet = await api.search('Practitioner?_id=pr-01,pr-02,pr-03&_count=2');
    const res = await post('Practitioner/_search', '_id=pr-01,pr-02,pr-03&_count=2');
    expect(res.status).toBe(200);
    const viaPost = (await res.json()) as Json;
    expect(ids(viaPost)).toEqual(ids(viaGet));
    expect(link(viaPost, 'next')).toBe(link(viaGet, 'next'));
    // The next link is a GET that continues the same search.
    expect(ids(await api.search(link(viaPost, 'next')!))).toEqual(['pr-03']);

    const combined = (await (await post('Practitioner/_search?_id=pr-01,pr-02', '_id=pr-02,pr-03')).json()) as Json;
    expect(ids(combined)).toEqual(['pr-02']);

    const charset = await post('Practitioner/_search', '_id=pr-04', { 'Content-Type': 'Application/X-WWW-Form-URLencoded; charset=UTF-8' });
    expect(ids((await charset.json()) as Json)).toEqual(['pr-04']);

    await expectOutcome(await post('Practitioner/_search', '{"_id":"x"}', { 'Content-Type': 'application/json' }), 415);
    await expectOutcome(await post('Practitioner/_search', 'bogus=1', { Prefer: 'handling=strict' }), 400);
    await expectOutcome(await post('Nonsense/_search', '_id=1'), 404);
  });
});
