/**
 * `_offset` (HAPI FHIR and Medplum take it with `_count`): the page after the first N matches in the
 * search's order, on type, compartment and cross-type searches and in Bundle GET entries; `self`,
 * `first` and `previous` links carrying `_offset`, `next` the cursor that continues; `_total`
 * unaffected; past the end an empty page; bounded (MAX_OFFSET), a 400 naming it otherwise; not a
 * filter (`_typeFilter`, conditional interactions). On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, craftToken, expectOutcome, fhirClient, ids, link, matchesOfAllPages, type FhirClient, type Json } from '../helpers/fhir.ts';
import { MAX_OFFSET } from '../../src/fhir/search-offset.ts';

const FAMILIES = ['Delta', 'Alpha', 'Golf', 'Charlie', 'Foxtrot', 'Bravo', 'Echo'];

await eachStore((kind, fresh) => {
  describe(`_offset on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const [i, family] of FAMILIES.entries()) {
        await api.put200({ resourceType: 'Patient', id: `p${i + 1}`, identifier: [{ system: 'urn:pages', value: String(i + 1) }], name: [{ family }] });
      }
      for (const n of [1, 2, 3]) await api.put200({ resourceType: 'Observation', id: `o${n}`, status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/p1' } });
      await api.put200({ resourceType: 'Practitioner', id: 'dr1' });
    });
    afterAll(() => t.close());

    /** The path and query of a link (below the FHIR base), its parameters sorted, for comparison. */
    const query = (url: string | undefined) => {
      if (url === undefined) return undefined;
      const u = new URL(url);
      const params = [...u.searchParams].filter(([k]) => k !== '_cursor').sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      return `${u.pathname.slice(new URL(api.base).pathname.length)}?${new URLSearchParams(params)}${u.searchParams.has('_cursor') ? ' +cursor' : ''}`;
    };

    test('skips N matches in each order; the links carry _offset, and next is the cursor that pages on', async () => {
      for (const sort of ['', '&_sort=family', '&_sort=-_lastUpdated', '&_sort=-_id']) {
        const all = ids(await api.search(`Patient?_count=100${sort}`));
        expect(all).toHaveLength(7);
        for (const offset of [0, 1, 2, 5, 6]) {
          const page = await api.search(`Patient?_count=2&_offset=${offset}${sort}`);
          expect({ sort, offset, ids: ids(page) }).toEqual({ sort, offset, ids: all.slice(offset, offset + 2) });
          // The next links continue from there to the last match.
          const rest = link(page, 'next') === undefined ? [] : await matchesOfAllPages(api, link(page, 'next')!);
          expect({ sort, offset, rest }).toEqual({ sort, offset, rest: all.slice(offset + 2) });
        }
      }
      const page = await api.search('Patient?_count=2&_offset=3&_sort=family');
      expect(page.link.map((l: Json) => l.relation)).toEqual(['self', 'first', 'previous', 'next']);
      expect(query(link(page, 'self'))).toBe('/Patient?_count=2&_offset=3&_sort=family');
      expect(query(link(page, 'first'))).toBe('/Patient?_count=2&_sort=family');
      expect(query(link(page, 'previous'))).toBe('/Patient?_count=2&_offset=1&_sort=family');
      expect(query(link(page, 'next'))).toBe('/Patient?_count=2&_sort=family +cursor');
      // The previous link of a page less than a page in is the first page.
      expect(query(link(await api.search('Patient?_count=2&_offset=2'), 'previous'))).toBe('/Patient?_count=2');
      expect(query(link(await api.search('Patient?_count=2&_offset=0'), 'previous'))).toBeUndefined();
    });

    test('_total is unaffected; at or past the last match the page is empty', async () => {
      const counted = await api.search('Patient?_count=2&_offset=3&_total=accurate');
      expect([counted.total, ids(counted)]).toEqual([7, ['p4', 'p5']]);
      expect((await api.search('Patient?_count=2&_offset=3')).total).toBeUndefined();
      for (const offset of [7, 8, 100, MAX_OFFSET]) {
        const past = await api.search(`Patient?_count=2&_offset=${offset}`);
        expect({ offset, entry: past.entry, next: link(past, 'next') }).toEqual({ offset, entry: undefined, next: undefined });
        expect(query(link(past, 'self'))).toBe(`/Patient?_count=2&_offset=${offset}`);
        expect((await api.search(`Patient?_count=2&_offset=${offset}&_total=accurate`)).total).toBe(7);
      }
      // A page after the first states a total only when asked, in every order.
      expect((await api.search('Patient?_count=50&_offset=9')).total).toBeUndefined();
      expect((await api.search('Patient?_count=50&_offset=9&_sort=family')).total).toBeUndefined();
      expect((await api.search('?_type=Patient&_count=50&_offset=9')).total).toBeUndefined();
      expect((await api.search('Patient?_summary=count&_offset=3')).total).toBe(7);
      expect((await api.search('Patient?_count=0&_offset=3')).total).toBe(7);
    });

    test('with _include, on a compartment, across types and in a compartment across types', async () => {
      const included = await api.search('Observation?_count=1&_offset=1&_include=Observation:subject');
      expect(included.entry.map((e: Json) => `${e.search.mode} ${e.resource.resourceType}/${e.resource.id}`)).toEqual(['match Observation/o2', 'include Patient/p1']);
      expect(ids(await api.search('Patient/p1/Observation?_count=1&_offset=2'))).toEqual(['o3']);
      const across = ids(await api.search('?_type=Patient,Practitioner&_count=100'));
      expect(across).toHaveLength(8);
      for (const offset of [0, 3, 6, 7]) {
        const page = await api.search(`?_type=Patient,Practitioner&_count=3&_offset=${offset}`);
        expect(ids(page)).toEqual(across.slice(offset, offset + 3));
        const rest = link(page, 'next') === undefined ? [] : await matchesOfAllPages(api, link(page, 'next')!);
        expect(rest).toEqual(across.slice(offset + 3));
        if (offset > 0) expect(query(link(page, 'self'))).toBe(`?_count=3&_offset=${offset}&_type=Patient%2CPractitioner`);
      }
      // The core CodeSystems merged with the stored ones, in id order and in a parameter's.
      for (const sort of ['', '&_sort=url']) {
        const core = ids(await api.search(`CodeSystem?_count=12${sort}`));
        expect(ids(await api.search(`CodeSystem?_count=4&_offset=7${sort}`))).toEqual(core.slice(7, 11));
      }
      const everything = ids(await api.search('Patient/p1/*?_count=100'));
      expect(ids(await api.search('Patient/p1/*?_count=2&_offset=1'))).toEqual(everything.slice(1, 3));
    });

    test('a value that is no non-negative integer, or beyond the most, is a 400 naming _offset', async () => {
      for (const value of ['-1', '1.5', 'abc', '1e3', String(MAX_OFFSET + 1), '99999999999']) {
        const outcome = await expectOutcome(await api.get(`Patient?_offset=${value}`), 400);
        expect({ value, expression: outcome.issue[0].expression }).toEqual({ value, expression: ['_offset'] });
        const across = await expectOutcome(await api.get(`?_type=Patient&_offset=${value}`), 400);
        expect(across.issue[0].expression).toEqual(['_offset']);
      }
      const deep = await expectOutcome(await api.get(`Patient?_offset=${MAX_OFFSET + 1}`), 400);
      expect(deep.issue[0].diagnostics ?? deep.issue[0].details.text).toContain('next links');
      expect((await expectOutcome(await api.get('Patient?_offset:x=1'), 400)).issue[0].expression).toEqual(['_offset:x']);
      const cursor = new URL(link(await api.search('Patient?_count=2'), 'next')!).searchParams.get('_cursor')!;
      expect((await expectOutcome(await api.get(`Patient?_count=2&_offset=1&_cursor=${cursor}`), 400)).issue[0].expression).toEqual(['_offset']);
      // Given twice: the first is used with a warning, or a 400 under strict handling; empty, it is ignored.
      const twice = await api.search('Patient?_count=2&_offset=1&_offset=4');
      expect(ids(twice)).toEqual(['p2', 'p3']);
      expect(twice.entry.at(-1).resource.issue[0].expression).toEqual(['_offset']);
      await expectOutcome(await api.get('Patient?_offset=1&_offset=4', { Prefer: 'handling=strict' }), 400);
      expect(ids(await api.search('Patient?_count=2&_offset='))).toEqual(['p1', 'p2']);
    });

    test('a Bundle GET entry takes _offset as the REST search does; a transaction checks it before writing', async () => {
      const res = await api.post('', { resourceType: 'Bundle', type: 'batch', entry: [
        { request: { method: 'GET', url: 'Patient?_count=2&_offset=2&_sort=family' } },
        { request: { method: 'GET', url: '?_type=Patient,Practitioner&_count=2&_offset=7' } },
        { request: { method: 'GET', url: 'Patient?_offset=-3' } },
      ] });
      const out = (await res.json()) as Json;
      expect(out.entry.map((e: Json) => e.response.status)).toEqual(['200 OK', '200 OK', '400 Bad Request']);
      const direct = await api.search('Patient?_count=2&_offset=2&_sort=family');
      expect(ids(out.entry[0].resource)).toEqual(ids(direct));
      expect(out.entry[0].resource.link).toEqual(direct.link);
      expect(ids(out.entry[1].resource)).toEqual(['dr1']);
      const before = await countVersions(t);
      const refused = await expectOutcome(await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: [
        { request: { method: 'PUT', url: 'Patient/p99' }, resource: { resourceType: 'Patient', id: 'p99' } },
        { request: { method: 'GET', url: `Patient?_offset=${MAX_OFFSET + 1}` } },
      ] }), 400);
      expect(refused.issue[0].expression).toEqual(['Bundle.entry[1].request.url']);
      expect(await countVersions(t)).toBe(before);
    });

    test('it is no filter: a _typeFilter refuses it as _count, and a condition matches whatever it skips', async () => {
      const kickoff = await api.get(`$export?_type=Patient&_typeFilter=${encodeURIComponent('Patient?_offset=2')}`);
      const filter = await expectOutcome(kickoff, 400);
      expect(filter.issue[0].diagnostics ?? filter.issue[0].details.text).toContain('_offset is not allowed in a filter');
      const updated = await api.put('Patient?identifier=urn:pages|3&_offset=1', { resourceType: 'Patient', identifier: [{ system: 'urn:pages', value: '3' }], name: [{ family: 'Golf' }], active: true });
      expect(updated.status).toBe(200);
      expect(((await updated.json()) as Json).id).toBe('p3');
    });
  });

  describe(`_offset under a token reading Binaries through their securityContext on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Patient', id: 'pa', gender: 'female' });
      await api.put200({ resourceType: 'Patient', id: 'pb', gender: 'male' });
      // b0, b2, b4, b6 are under pa (in reach of a token reading female Patients), b1, b3, b5 under pb.
      for (let i = 0; i < 7; i++) await api.put200({ resourceType: 'Binary', id: `b${i}`, contentType: 'text/plain', data: 'aGk=', securityContext: { reference: i % 2 ? 'Patient/pb' : 'Patient/pa' } });
    });
    afterAll(() => t.close());

    test('skips N of the Binaries the token reads, not of those it may not (same pages told where they were)', async () => {
      const female = fhirClient(t, await craftToken(t, 'system/Binary.rs system/Patient.rs?gender=female'));
      const seen = ids(await female.search('Binary?_count=100'));
      expect(seen).toEqual(['b0', 'b2', 'b4', 'b6']);
      // A page leaves out what is out of reach, so it may hold fewer than _count; it starts where it should.
      for (let offset = 0; offset <= 4; offset++) {
        const page = ids(await female.search(`Binary?_count=2&_offset=${offset}`));
        expect({ offset, first: page[0] }).toEqual({ offset, first: seen[offset] });
        expect(seen.slice(offset, offset + 2)).toEqual(expect.arrayContaining(page));
      }
      // A token that reads none of them reads every Binary to skip none: bounded, a 400 beyond.
      const none = fhirClient(t, await craftToken(t, 'system/Binary.rs'));
      expect(ids(await none.search('Binary?_offset=3'))).toEqual([]);
    });
  });

  describe(`_offset beyond one page of skipping (MAX_COUNT) on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      const entry = Array.from({ length: 1205 }, (_, i) => {
        const id = `q${String(i).padStart(4, '0')}`;
        return { request: { method: 'PUT', url: `Patient/${id}` }, resource: { resourceType: 'Patient', id, birthDate: `19${String(i % 100).padStart(2, '0')}-01-01` } };
      });
      const res = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry });
      expect(res.status).toBe(200);
    }, 60_000);
    afterAll(() => t.close());

    test('in id order and in a parameter order', async () => {
      for (const sort of ['', '&_sort=birthdate']) {
        const all = [...ids(await api.search(`Patient?_count=1000${sort}`)), ...ids(await api.search(`Patient?_count=1000&_offset=1000${sort}`))];
        expect(new Set(all).size).toBe(1205);
        for (const offset of [999, 1000, 1001, 1200]) {
          expect({ sort, offset, ids: ids(await api.search(`Patient?_count=3&_offset=${offset}${sort}`)) }).toEqual({ sort, offset, ids: all.slice(offset, offset + 3) });
        }
      }
      expect(ids(await api.search('Patient?_count=3&_offset=1000'))).toEqual(['q1000', 'q1001', 'q1002']);
    }, 60_000);
  });
});
