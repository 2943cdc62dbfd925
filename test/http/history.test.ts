import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { BASE, createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { craftToken, expectOutcome, fhirClient, link, type FhirClient, type Json } from '../helpers/fhir.ts';

let t: TestApp;
let api: FhirClient;
const clock = testClock(Date.parse('2026-02-01T00:00:00Z'));
const base = `${BASE}/tenants/t1/fhir/R4`;

/** `Type/id/vid` of every entry, following `next` links from `path`; also checks pages are disjoint. */
async function walk(path: string): Promise<{ keys: string[]; pages: number }> {
  const keys: string[] = [];
  let url: string | undefined = path;
  let pages = 0;
  while (url) {
    const res = await api.get(url);
    expect(res.status).toBe(200);
    const bundle = (await res.json()) as Json;
    expect(bundle.type).toBe('history');
    for (const e of bundle.entry ?? []) keys.push(`${e.fullUrl.slice(base.length + 1)}/${e.response.etag.replace(/\D/g, '')}`);
    url = link(bundle, 'next');
    if (++pages > 100) throw new Error('too many pages');
  }
  return { keys, pages };
}

const at = (iso: string) => Date.parse(iso);

/** Every version written by the fixture, newest first within a resource. */
const written: { key: string; lastUpdated: number }[] = [];

beforeAll(async () => {
  t = await createTestApp({ clock });
  // The fixture moves the clock by days: a long-lived token signed with the app's keys.
  api = fhirClient(t, await craftToken(t, 'system/*.*', { ttl: 365 * 86400 }));
  // Several resources of two types, several versions each, some written in the same millisecond.
  for (let i = 0; i < 4; i++) {
    const p = await api.put200({ resourceType: 'Patient', id: `hp${i}`, active: true });
    written.push({ key: `Patient/hp${i}/1`, lastUpdated: Date.parse(p.meta.lastUpdated) });
    const o = await api.put200({ resourceType: 'Observation', id: `ho${i}`, status: 'preliminary', code: { text: 'x' } });
    written.push({ key: `Observation/ho${i}/1`, lastUpdated: Date.parse(o.meta.lastUpdated) });
  }
  clock.set(at('2026-02-02T00:00:00Z'));
  for (let i = 0; i < 4; i += 2) {
    const p = await api.put200({ resourceType: 'Patient', id: `hp${i}`, active: false });
    written.push({ key: `Patient/hp${i}/2`, lastUpdated: Date.parse(p.meta.lastUpdated) });
  }
  clock.set(at('2026-02-03T12:00:00Z'));
  await api.del('Patient/hp0');
  written.push({ key: 'Patient/hp0/3', lastUpdated: clock.now() });
  const o = await api.put200({ resourceType: 'Observation', id: 'ho1', status: 'final', code: { text: 'x' } });
  written.push({ key: 'Observation/ho1/2', lastUpdated: Date.parse(o.meta.lastUpdated) });
  clock.set(at('2026-02-04T00:00:00Z'));
});
afterAll(() => t.close());

describe('instance history', () => {
  test('lists every version newest first with request/response, the deletion without a resource', async () => {
    const res = await api.get('Patient/hp0/_history');
    expect(res.status).toBe(200);
    const bundle = (await res.json()) as Json;
    expect(bundle.resourceType).toBe('Bundle');
    expect(bundle.type).toBe('history');
    expect(link(bundle, 'self')).toBe(`${base}/Patient/hp0/_history`);
    expect(bundle.entry.map((e: Json) => e.response.etag)).toEqual(['W/"3"', 'W/"2"', 'W/"1"']);
    const [del, v2, v1] = bundle.entry;
    expect(del).toEqual({
      fullUrl: `${base}/Patient/hp0`,
      request: { method: 'DELETE', url: 'Patient/hp0' },
      response: { status: '204', etag: 'W/"3"', lastModified: '2026-02-03T12:00:00.000Z' },
    });
    expect(v2.request).toEqual({ method: 'PUT', url: 'Patient/hp0' });
    expect(v2.resource).toMatchObject({ id: 'hp0', active: false, meta: { versionId: '2' } });
    expect(v1.resource).toMatchObject({ id: 'hp0', active: true, meta: { versionId: '1' } });
  });

  test('an unknown resource is 404, an unknown type 404, a bad id 400', async () => {
    await expectOutcome(await api.get('Patient/nobody/_history'), 404, 'not-found');
    await expectOutcome(await api.get('Nonsense/x/_history'), 404);
    await expectOutcome(await api.get('Patient/bad_id/_history'), 400);
  });
});

describe('type and system history', () => {
  test('type history holds only that type', async () => {
    const { keys } = await walk('Patient/_history');
    const expected = written.filter((w) => w.key.startsWith('Patient/'));
    expect(keys.sort()).toEqual(expected.map((w) => w.key).sort());
  });

  test('system history holds every version of every type, newest first', async () => {
    const res = await api.get('_history');
    expect(res.status).toBe(200);
    const bundle = (await res.json()) as Json;
    const times = bundle.entry.map((e: Json) => Date.parse(e.response.lastModified));
    expect(times).toEqual([...times].sort((a, b) => b - a));
    expect(bundle.entry).toHaveLength(written.length);
  });
});

describe('_count and next links', () => {
  for (const [name, path, filter] of [
    ['system', '_history', () => true],
    ['type', 'Observation/_history', (k: string) => k.startsWith('Observation/')],
    ['instance', 'Patient/hp2/_history', (k: string) => k.startsWith('Patient/hp2/')],
  ] as const) {
    for (const count of [1, 2, 3, 5]) {
      test(`${name} history with _count=${count} pages through every version exactly once`, async () => {
        const expected = written.map((w) => w.key).filter(filter);
        const { keys, pages } = await walk(`${path}?_count=${count}`);
        expect(keys).toHaveLength(expected.length);
        expect(new Set(keys).size).toBe(keys.length);
        expect([...keys].sort()).toEqual([...expected].sort());
        expect(pages).toBe(Math.max(1, Math.ceil(expected.length / count)));
      });
    }
  }

  test('versions written while paging do not disturb the pages already promised', async () => {
    const first = (await (await api.get('Observation/_history?_count=2')).json()) as Json;
    const seen = first.entry.map((e: Json) => e.fullUrl + e.response.etag);
    clock.advance(60_000);
    await api.put200({ resourceType: 'Observation', id: 'ho3', status: 'final', code: { text: 'x' } });
    await api.put200({ resourceType: 'Observation', id: 'late', status: 'final', code: { text: 'x' } });
    let url = link(first, 'next');
    while (url) {
      const page = (await (await api.get(url)).json()) as Json;
      seen.push(...page.entry.map((e: Json) => e.fullUrl + e.response.etag));
      url = link(page, 'next');
    }
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toHaveLength(written.filter((w) => w.key.startsWith('Observation/')).length);
  });

  test('_count=0 answers an empty page; bad _count and _cursor are 400', async () => {
    const zero = (await (await api.get('Patient/_history?_count=0')).json()) as Json;
    expect(zero.entry).toBeUndefined();
    await expectOutcome(await api.get('_history?_count=-1'), 400);
    await expectOutcome(await api.get('_history?_count=abc'), 400);
    await expectOutcome(await api.get('_history?_cursor=%%%'), 400);
    await expectOutcome(await api.get('_history?_cursor=' + btoa('[1,2]')), 400);
  });
});

describe('_since and _at', () => {
  test('_since keeps versions written at or after the instant', async () => {
    const since = '2026-02-02T00:00:00Z';
    const { keys } = await walk(`Patient/_history?_since=${since}`);
    const expected = written.filter((w) => w.key.startsWith('Patient/') && w.lastUpdated >= at(since)).map((w) => w.key);
    expect(keys.sort()).toEqual(expected.sort());
    expect(keys).toContain('Patient/hp0/3');
    expect(keys).not.toContain('Patient/hp1/1');
  });

  test('_since with day precision starts at the beginning of that day', async () => {
    const { keys } = await walk('Patient/_history?_since=2026-02-03');
    expect(keys).toEqual(['Patient/hp0/3']);
  });

  test('_at keeps the versions that were current at some point in the period', async () => {
    // On 2026-02-02T06:00Z: hp0 v2, hp1 v1, hp2 v2, hp3 v1 were current; v1 of hp0/hp2 were already replaced.
    const { keys } = await walk('Patient/_history?_at=2026-02-02T06:00:00Z');
    expect(keys.sort()).toEqual(['Patient/hp0/2', 'Patient/hp1/1', 'Patient/hp2/2', 'Patient/hp3/1']);
  });

  test('_at with day precision covers the whole day', async () => {
    // During 2026-02-03 hp0 v2 was current until its deletion (v3) at noon; v1 was replaced on 2026-02-02.
    const { keys } = await walk('Patient/hp0/_history?_at=2026-02-03');
    expect(keys.sort()).toEqual(['Patient/hp0/2', 'Patient/hp0/3']);
    const { keys: before } = await walk('Patient/hp0/_history?_at=2026-01-31');
    expect(before).toEqual([]);
  });

  test('_at pages correctly when versions are filtered out', async () => {
    const { keys } = await walk('_history?_at=2026-02-02T06:00:00Z&_count=1');
    const all = await walk('_history?_at=2026-02-02T06:00:00Z');
    expect(keys).toEqual(all.keys);
    expect(keys.sort()).toEqual(
      ['Observation/ho0/1', 'Observation/ho1/1', 'Observation/ho2/1', 'Observation/ho3/1', 'Patient/hp0/2', 'Patient/hp1/1', 'Patient/hp2/2', 'Patient/hp3/1'].sort(),
    );
  });

  test('invalid _since and _at are 400', async () => {
    await expectOutcome(await api.get('_history?_since=yesterday'), 400);
    await expectOutcome(await api.get('_history?_at=2026-13-01'), 400);
  });

  test('a page after the first links itself with its _cursor, and the first page, as search pages do', async () => {
    const keys = (b: Json) => b.entry.map((e: Json) => e.fullUrl + e.response.etag);
    for (const path of ['Patient/hp0/_history?_count=1', 'Patient/_history?_count=2', '_history?_count=3&_since=2026-02-01']) {
      const first = (await (await api.get(path)).json()) as Json;
      expect(link(first, 'first')).toBeUndefined();
      expect(new URL(link(first, 'self')!).searchParams.has('_cursor')).toBe(false);
      const next = link(first, 'next')!;
      const second = (await (await api.get(next)).json()) as Json;
      expect(link(second, 'self')).toBe(next);
      expect(link(second, 'first')).toBe(link(first, 'self'));
      // The self link reproduces the page.
      expect(keys((await (await api.get(link(second, 'self')!)).json()) as Json)).toEqual(keys(second));
      expect(keys((await (await api.get(link(second, 'first')!)).json()) as Json)).toEqual(keys(first));
    }
    // A transaction's history entry links its pages alike.
    const first = (await (await api.get('Patient/_history?_count=2')).json()) as Json;
    const url = link(first, 'next')!.slice(base.length + 1);
    const out = (await (await api.post('', { resourceType: 'Bundle', type: 'batch', entry: [{ request: { method: 'GET', url } }] })).json()) as Json;
    const page = out.entry[0].resource;
    expect(link(page, 'self')).toBe(`${base}/${url}`);
    expect(link(page, 'first')).toBe(link(first, 'self'));
  });

  test('the self link keeps the history parameters', async () => {
    const bundle = (await (await api.get('Patient/_history?_since=2026-02-02&_count=2')).json()) as Json;
    const self = new URL(link(bundle, 'self')!);
    expect(self.searchParams.get('_since')).toBe('2026-02-02');
    expect(self.searchParams.get('_count')).toBe('2');
    const next = new URL(link(bundle, 'next')!);
    expect(next.searchParams.get('_since')).toBe('2026-02-02');
    expect(next.searchParams.get('_cursor')).toBeTruthy();
  });

  test('a parameter history does not take (_list, _sort, a search parameter) is ignored, and a 400 naming it under handling=strict', async () => {
    for (const path of ['Patient/hp1/_history?_list=l1', 'Patient/_history?_sort=_lastUpdated', '_history?name=x&_count=1']) {
      const lenient = await api.get(path);
      expect({ path, status: lenient.status }).toEqual({ path, status: 200 });
      const name = new URL(`${base}/${path}`).searchParams.keys().next().value!;
      expect(link((await lenient.json()) as Json, 'self')).not.toContain(`${name}=`);
      const outcome = await expectOutcome(await api.get(path, { Prefer: 'handling=strict' }), 400, 'not-supported');
      expect({ path, expression: outcome.issue[0].expression, text: outcome.issue[0].diagnostics }).toEqual({ path, expression: [name], text: `'${name}' is not a parameter of history` });
    }
    // What history takes passes under handling=strict, its next page included.
    const first = await api.get('Patient/_history?_count=1&_since=2026-02-01&_elements=active&_format=json&_pretty=true', { Prefer: 'handling=strict' });
    expect(first.status).toBe(200);
    expect((await api.get(link((await first.json()) as Json, 'next')!, { Prefer: 'handling=strict' })).status).toBe(200);
  });
});
