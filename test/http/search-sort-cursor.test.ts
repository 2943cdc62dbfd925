/**
 * Paging a sort on parameters (`_sort=family`, `-date`, several keys, keys some resources lack) goes on
 * from the last match's keys, on both databases: a resource written or deleted between pages shifts no
 * other match (by offset, a match added before the place repeated one, and a deletion skipped one), and
 * the later pages are read as of the first page's time, so every match of then is read exactly once, in
 * its order then. The pages agree with one page of them
 * all; a `previous` link still leads back; a cursor that is no place in the search's order is a 400.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, ids, link, type FhirClient, type Json } from '../helpers/fhir.ts';

const LOINC = 'http://loinc.org';
const UCUM = 'http://unitsofmeasure.org';

const FAMILIES = ['Nadal', 'adams', 'Zorn', 'Ávila', 'Bloch', 'nadal', 'Øster', 'Chen', 'Adams', 'Diaz'];
const patient = (i: number): Json => ({
  resourceType: 'Patient', id: `sp${String(i).padStart(2, '0')}`,
  // Every fourth has no name; families repeat (ties broken by id), some have no birth date.
  ...(i % 4 === 3 ? {} : { name: [{ family: FAMILIES[i % FAMILIES.length] }] }),
  ...(i % 5 === 2 ? {} : { birthDate: `19${60 + (i % 7)}-0${1 + (i % 3)}-1${i % 10}` }),
});
const observation = (i: number): Json => ({
  resourceType: 'Observation', id: `so${String(i).padStart(2, '0')}`, status: 'final',
  code: { coding: [{ system: LOINC, code: `c${i % 4}` }] }, subject: { reference: 'Patient/sp00' },
  // Periods open at one end or the other (keys of ±infinity), instants, and none.
  ...(i % 6 === 0 ? { effectivePeriod: { start: `2020-0${1 + (i % 5)}-01` } }
    : i % 6 === 1 ? { effectivePeriod: { end: `2021-0${1 + (i % 5)}-01` } }
      : i % 6 === 5 ? {} : { effectiveDateTime: `2020-0${1 + (i % 9)}-0${1 + (i % 3)}T10:00:00Z` }),
  ...(i % 3 === 0 ? {} : { valueQuantity: { value: (i % 5) * 1.5, unit: 'mg', system: UCUM, code: i % 2 ? 'mg' : 'g' } }),
});

const QUERIES = [
  'Patient?_sort=family',
  'Patient?_sort=-family',
  'Patient?_sort=family,-birthdate',
  'Patient?_sort=-birthdate,family',
  'Patient?_sort=_lastUpdated,family',
  'Patient?name:missing=false&_sort=birthdate',
  'Observation?_sort=date',
  'Observation?_sort=-date',
  'Observation?subject=Patient/sp00&_sort=-date',
  'Observation?date=ge2020-02&_sort=-date',
  'Observation?code=c1&_sort=date,-value-quantity',
  'Observation?_sort=value-quantity,-_id',
  'Observation?_sort=-code,date',
  // `_id` first: a place whose later key is none (a Patient without a family) compares no more keys.
  'Patient?_sort=-_id,family',
  'Patient?_sort=_id,-birthdate',
];

await eachStore((kind, fresh) => {
  describe(`paging a sort on parameters by its keys, on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    let serial = 0;

    /** Every page's ids, following `next` links from `query` with `count` a page; `between` runs after each page. */
    async function pages(query: string, count: number, between?: (page: Json) => Promise<void>): Promise<{ ids: string[]; bundles: Json[] }> {
      const all: string[] = [];
      const bundles: Json[] = [];
      let url: string | undefined = `${query}&_count=${count}`;
      while (url) {
        const bundle = await api.search(url);
        bundles.push(bundle);
        all.push(...ids(bundle));
        url = link(bundle, 'next');
        if (between && url) await between(bundle);
        if (bundles.length > 100) throw new Error('runaway paging');
      }
      return { ids: all, bundles };
    }
    const everything = async (query: string) => ids(await api.search(`${query}&_count=1000`));

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (let i = 0; i < 24; i++) await api.put200(patient(i));
      // Keys past the Basic Multilingual Plane: the database orders by code point (U+1F600 after U+FF5A),
      // where UTF-16 puts a surrogate pair first. sp90's key is its least family, U+FF5A; sp91's follows it.
      await api.put200({ resourceType: 'Patient', id: 'sp90', name: [{ family: '\u{1F600}' }, { family: '\uFF5A' }] });
      await api.put200({ resourceType: 'Patient', id: 'sp91', name: [{ family: '\uFF5A\uFF5A' }] });
      for (let i = 0; i < 30; i++) await api.put200(observation(i));
    });
    afterAll(() => t.close());

    test('the pages hold the matches of one page, in its order, whatever the page size', async () => {
      for (const query of QUERIES) {
        const all = await everything(query);
        expect(all.length).toBeGreaterThan(5);
        for (const count of [1, 2, 3, 7]) expect({ query, count, ids: (await pages(query, count)).ids }).toEqual({ query, count, ids: all });
      }
    });

    test('resources written and deleted between pages: every match of the first page\'s time is read once, in its order then', async () => {
      for (const query of QUERIES) {
        const type = query.split('?')[0]!;
        const make = type === 'Patient' ? patient : observation;
        const before = await everything(query);
        const deleted = new Set<string>();
        const created: string[] = [];
        /** The ids of the pages read so far. */
        const read: string[] = [];
        let page = 0;
        const { ids: seen } = await pages(query, 3, async (bundle) => {
          page++;
          const onPage = ids(bundle);
          read.push(...onPage);
          // After the first page, copies of its first match (sorting before the place) and of a match not
          // yet read are created; after the third, two matches already read and one not yet read are deleted.
          const later = before.find((id) => !read.includes(id) && !deleted.has(id));
          if (page === 1) {
            for (const id of [onPage[0]!, later]) {
              if (id === undefined) continue;
              const { meta: _meta, ...source } = (await (await api.get(`${type}/${id}`)).json()) as Json;
              const copy = `${source.id}-x${serial++}`;
              await api.put200({ ...source, id: copy });
              created.push(copy);
            }
          }
          if (page === 3) {
            for (const id of [read[0]!, read[read.length - 1]!, later]) {
              if (id === undefined || deleted.has(id)) continue;
              await api.del(`${type}/${id}`);
              deleted.add(id);
            }
          }
        });
        // The later pages are read as of the first (src/fhir/search-pin.ts): every match of then once, in its order
        // then, the deleted ones too (as they were), and none created since.
        expect({ query, seen }).toEqual({ query, seen: before });
        // Put the fixture back for the next query.
        for (const id of created) await api.del(`${type}/${id}`);
        for (const id of deleted) await api.put200(make(Number(id.slice(2))));
      }
    });

    test('a later page links the previous page and the first', async () => {
      const { bundles } = await pages('Patient?_sort=family,-birthdate', 4);
      expect(bundles.length).toBeGreaterThan(3);
      expect(link(bundles[0]!, 'previous')).toBeUndefined();
      for (let i = 1; i < bundles.length; i++) {
        expect(ids(await api.search(link(bundles[i]!, 'previous')!))).toEqual(ids(bundles[i - 1]!));
        expect(ids(await api.search(link(bundles[i]!, 'first')!))).toEqual(ids(bundles[0]!));
      }
    });

    test('a cursor that is no place in the search\'s order is a 400 naming _cursor', async () => {
      const first = await api.search('Patient?_sort=family&_count=2');
      const cursor = new URL(link(first, 'next')!).searchParams.get('_cursor')!;
      const encode = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
      for (const bad of [
        `Patient?_sort=birthdate&_cursor=${cursor}`,
        `Patient?_sort=family,birthdate&_cursor=${cursor}`,
        `Patient?_sort=_id&_cursor=${cursor}`,
        `Patient?_sort=birthdate&_cursor=${encode({ k: ['x'], i: 'sp01', o: 2 })}`,
        `Patient?_sort=family&_cursor=${encode({ k: [3], i: 'sp01', o: 2 })}`,
        `Patient?_sort=family&_cursor=${encode({ k: ['a'], i: 'no/id', o: 2 })}`,
        `Patient?_sort=family&_cursor=${encode({ k: ['a'], i: 'sp01', o: -1 })}`,
        `Patient?_sort=_lastUpdated,family&_cursor=${encode({ k: ['x', 'a'], i: 'sp01', o: 2 })}`,
      ]) {
        const outcome = await expectOutcome(await api.get(bad), 400);
        expect({ bad, expression: outcome.issue[0].expression }).toEqual({ bad, expression: ['_cursor'] });
      }
    });
  });
});
