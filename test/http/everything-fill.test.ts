/**
 * `$everything` pages that read types outside `_type` (a `_type` naming a type outside the compartment:
 * Organization, Medication...), on both databases: a page reads on until it has a page's worth to return
 * (its matches and the resources of `_type` its rows refer to, `_count` of them) within its row budget
 * (src/fhir/everything-fill.ts FILL_ROWS), and only then gives its `next`. It read `_count` rows a page, so
 * an Organization that a late record names came after tens of empty pages, and the type level paged through
 * every patient's records in mostly empty pages. Walking the pages at any `_count` gives the answer of one
 * large page: every match once, in order, and every included resource.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, link, type FhirClient, type Json } from '../helpers/fhir.ts';
import { FILL_ROWS } from '../../src/fhir/everything-fill.ts';

const name = (e: Json) => `${e.resource.resourceType}/${e.resource.id}`;
const of = (b: Json, mode: string) => (b.entry ?? []).filter((e: Json) => e.search.mode === mode).map(name);

/** Every page from `first` (at most `most` of them): the matches in order, the included of each page, the Bundles. */
async function walk(api: FhirClient, first: string, most = 20) {
  const pages: Json[] = [];
  for (let next: string | undefined = first; next; next = link(pages[pages.length - 1]!, 'next')) {
    if (pages.length === most) throw new Error(`${first}: more than ${most} pages`);
    pages.push(await api.search(next));
  }
  const matches = pages.flatMap((b) => of(b, 'match'));
  const included = [...new Set(pages.flatMap((b) => of(b, 'include')))].sort();
  return { matches, included, pages };
}

/** Observation `id` of `patient`, naming what `more` adds. */
const observation = (id: string, patient: string, more: Json = {}) =>
  ({ resourceType: 'Observation', id, status: 'final', code: { text: id }, subject: { reference: `Patient/${patient}` }, ...more });
const pad = (n: number, width: number) => String(n).padStart(width, '0');

await eachStore((kind, fresh) => {
  describe(`$everything pages that read types outside _type, on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    /** `zz-big` (last by id) has more Observations than a page reads; `org-late` is named by one near their end. */
    const BIG = Array.from({ length: FILL_ROWS + 100 }, (_, i) => `b${pad(i, 4)}`);
    const LATE = BIG[FILL_ROWS + 50]!;
    /** 40 patients of five Observations each; p37's MedicationRequest names `med`, p12's third Observation `org-mid`. */
    const SMALL = Array.from({ length: 40 }, (_, i) => `p${pad(i, 2)}`);

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      const put = (resource: Json) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
      const entries = [
        put({ resourceType: 'Organization', id: 'org-late', name: 'Late' }),
        put({ resourceType: 'Organization', id: 'org-mid', name: 'Mid' }),
        put({ resourceType: 'Medication', id: 'med', code: { text: 'aspirin' } }),
        put({ resourceType: 'Practitioner', id: 'dr' }),
        ...SMALL.flatMap((p) => [
          put({ resourceType: 'Patient', id: p }),
          ...[0, 1, 2, 3, 4].map((k) => put(observation(`o-${p}-${k}`, p, p === 'p12' && k === 2 ? { performer: [{ reference: 'Organization/org-mid' }] } : {}))),
        ]),
        put({ resourceType: 'MedicationRequest', id: 'mr', status: 'active', intent: 'order', subject: { reference: 'Patient/p37' }, medicationReference: { reference: 'Medication/med' } }),
        put({ resourceType: 'Patient', id: 'zz-big' }),
        ...BIG.map((id) => put(observation(id, 'zz-big', id === LATE ? { performer: [{ reference: 'Organization/org-late' }] } : {}))),
        // An encounter of 60 Observations, the 55th naming org-late, the first `dr`.
        put({ resourceType: 'Encounter', id: 'enc', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/p05' } }),
        ...Array.from({ length: 60 }, (_, i) => put(observation(`e${pad(i, 2)}`, 'p05', {
          encounter: { reference: 'Encounter/enc' },
          ...(i === 0 && { performer: [{ reference: 'Practitioner/dr' }] }),
          ...(i === 55 && { performer: [{ reference: 'Organization/org-late' }] }),
        }))),
      ];
      for (let i = 0; i < entries.length; i += 500) {
        const res = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: entries.slice(i, i + 500) });
        expect(res.status).toBe(200);
      }
    });
    afterAll(() => t.close());

    test('an Organization a late record names comes on the first page, not after tens of empty ones', async () => {
      // p12's compartment: its Patient, then the Observations of it and of the encounter (the 60 of p05 are not its).
      const first = await api.search('Patient/p12/$everything?_type=Organization&_count=2');
      expect({ include: of(first, 'include'), match: of(first, 'match'), next: link(first, 'next') }).toEqual({ include: ['Organization/org-mid'], match: [], next: undefined });
      // Past 2,000 rows: the first page reads its budget and says so; the second reads on and finds it.
      const big = await walk(api, 'Patient/zz-big/$everything?_type=Organization&_count=10');
      expect(big.pages.length).toBe(2);
      expect(of(big.pages[0]!, 'include')).toEqual([]);
      const note = big.pages[0]!.entry.find((e: Json) => e.search.mode === 'outcome').resource.issue[0];
      expect(note).toMatchObject({ severity: 'information', code: 'informational', expression: ['_type'] });
      expect(note.diagnostics).toContain(`read ${FILL_ROWS} records`);
      expect(of(big.pages[1]!, 'include')).toEqual(['Organization/org-late']);
      expect(of(big.pages[1]!, 'outcome')).toEqual([]);
    });

    test('a _type outside the compartment that the token may not read reads no records: one empty page', async () => {
      // Before, the pages read every record (zz-big's 2,100 past one page's budget) to return nothing.
      const narrow = fhirClient(t, await t.token('system/Patient.rs system/Observation.rs'));
      for (const path of ['Patient/zz-big/$everything', 'Patient/$everything']) {
        const page = await narrow.search(`${path}?_type=Organization&_count=10`);
        expect({ path, entry: page.entry, next: link(page, 'next') }).toEqual({ path, entry: undefined, next: undefined });
      }
      // One it may read beside it is followed as before.
      expect((await walk(narrow, 'Patient/p12/$everything?_type=Organization,Observation&_count=10')).included).toEqual([]);
    });

    test('the type level across many patients: the one Medication on the first page, in two pages', async () => {
      const r = await walk(api, 'Patient/$everything?_type=Medication&_count=5');
      expect(of(r.pages[0]!, 'include')).toEqual(['Medication/med']);
      // 40 small patients and zz-big: more rows than one page reads, fewer than two; the second finds nothing more
      // (a page that read its budget cannot know that nothing of _type follows: it gives its next).
      expect(r.pages.length).toBe(2);
      expect(r.pages[1]!.entry).toBeUndefined();
      expect(r).toMatchObject({ matches: [], included: ['Medication/med'] });
      expect((await walk(api, 'Patient/$everything?_type=Organization,Medication&_count=1')).included).toEqual(['Medication/med', 'Organization/org-late', 'Organization/org-mid']);
    });

    test('paging never loses or repeats a resource: every _count adds up to the answer of one large page', async () => {
      for (const [query, patient] of [['_type=Observation,Organization', 'p12'], ['_type=Patient,MedicationRequest,Medication,Organization', undefined], ['_type=Organization', 'zz-big']] as const) {
        const path = patient ? `Patient/${patient}/$everything` : 'Patient/$everything';
        const whole = await walk(api, `${path}?${query}&_count=1000`, 5);
        expect(whole.included.length).toBeGreaterThan(0);
        for (const count of [1, 3, 7, 50]) {
          const r = await walk(api, `${path}?${query}&_count=${count}`, 200);
          expect({ count, matches: r.matches, included: r.included }).toEqual({ count, matches: whole.matches, included: whole.included });
          expect(new Set(r.matches).size).toBe(r.matches.length);
          for (const b of r.pages) {
            // At most `_count` matches, and no resource twice in a Bundle (bdl-7).
            expect(of(b, 'match').length).toBeLessThanOrEqual(count);
            const names = (b.entry ?? []).filter((e: Json) => e.search.mode !== 'outcome').map(name);
            expect(new Set(names).size).toBe(names.length);
          }
        }
      }
      expect((await walk(api, 'Patient/p12/$everything?_type=Observation,Organization&_count=1000')).matches).toEqual([0, 1, 2, 3, 4].map((k) => `Observation/o-p12-${k}`));
    });

    test('a resource included by a page\'s first reads and matched by a later one is on it once, as a match', async () => {
      // p20's five Encounters name its Observation o-p20-4 as their reason. `_count=4` reads the Patient and three
      // Encounters first (which include it), then on to four Observations: o-p20-4 is the next page's match.
      const encounter = (id: string) => ({
        resourceType: 'Encounter', id, status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/p20' }, reasonReference: [{ reference: 'Observation/o-p20-4' }],
      });
      for (const id of ['r1', 'r2', 'r3', 'r4', 'r5']) await api.put200(encounter(id));
      const first = await api.search('Patient/p20/$everything?_type=Observation,Organization&_count=4');
      expect(of(first, 'match')).toEqual(['Observation/o-p20-0', 'Observation/o-p20-1', 'Observation/o-p20-2', 'Observation/o-p20-3']);
      expect(of(first, 'include')).toEqual(['Observation/o-p20-4']);
      // `_count=5` reads on to it: a match, and no longer an include.
      const r = await walk(api, 'Patient/p20/$everything?_type=Observation,Organization&_count=5');
      expect(r.pages.length).toBe(1);
      expect(of(r.pages[0]!, 'match')).toEqual([0, 1, 2, 3, 4].map((k) => `Observation/o-p20-${k}`));
      expect(of(r.pages[0]!, 'include')).toEqual([]);
    });

    test('Encounter/{id}/$everything alike: the Organization its 55th Observation names on the first page', async () => {
      const first = await api.search('Encounter/enc/$everything?_type=Organization&_count=5');
      expect({ include: of(first, 'include'), next: link(first, 'next') }).toEqual({ include: ['Organization/org-late'], next: undefined });
      for (const count of [1, 2, 10]) {
        expect(await walk(api, `Encounter/enc/$everything?_type=Practitioner,Organization&_count=${count}`)).toMatchObject({ matches: [], included: ['Organization/org-late', 'Practitioner/dr'] });
      }
      // The Encounter its Observations name is included again on the page after its own (as a search's _include is
      // on each page), but it is that page's match: no measure of how much the second page holds, which reads on.
      const some = await walk(api, 'Encounter/enc/$everything?_type=Encounter,Organization&_count=1');
      expect({ matches: some.matches, included: some.included, pages: some.pages.length }).toEqual({ matches: ['Encounter/enc'], included: ['Encounter/enc', 'Organization/org-late'], pages: 2 });
    });

    test('the Binaries of its reads together stay within a page\'s bound of 1,000: the page ends before the record that would pass it', async () => {
      // b0000 (in the page's first read of 1,000 rows) and b1500 (in its second) each name 600 Binaries by attachment.
      const binary = (id: string) => ({ resourceType: 'Binary', id, contentType: 'text/plain', data: 'aGVsbG8=' });
      const named = (prefix: string) => Array.from({ length: 600 }, (_, i) => `${prefix}${pad(i, 3)}`);
      const put = (resource: Json) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
      const entries = [...named('bin-a'), ...named('bin-b')].map((id) => put(binary(id)));
      for (const [id, prefix] of [['b0000', 'bin-a'], ['b1500', 'bin-b']] as const) {
        entries.push(put(observation(id, 'zz-big', { extension: named(prefix).map((b) => ({ url: 'http://example.org/attached', valueAttachment: { contentType: 'text/plain', url: `Binary/${b}` } })) })));
      }
      const res = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: entries });
      expect(res.status).toBe(200);
      const first = await api.search('Patient/zz-big/$everything?_type=Binary&_count=1000');
      // b0000's 600, whole and without a warning; b1500's would pass 1,000: its page is the next.
      expect(of(first, 'include')).toEqual(named('bin-a').map((b) => `Binary/${b}`));
      expect(of(first, 'outcome')).toEqual([]);
      const all = await walk(api, 'Patient/zz-big/$everything?_type=Binary&_count=1000');
      expect(all.included).toEqual([...named('bin-a'), ...named('bin-b')].map((b) => `Binary/${b}`));
      expect(all.pages.flatMap((b) => of(b, 'outcome'))).toEqual([]);
    });

    test('a page that has included 1,000 resources of any type reads no further: the next page reads on', async () => {
      // q's Lists l00 to l83 (one read of 4 rows, then 16, then 64 at _count=1): l00, l10 and l50 name 600 Observations
      // of another patient each, of a type returned as matches, so no measure of a page's worth.
      const put = (resource: Json) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
      const named = (k: number) => Array.from({ length: 600 }, (_, i) => `x${pad(k * 600 + i, 4)}`);
      const entries = [put({ resourceType: 'Patient', id: 'other' }), put({ resourceType: 'Patient', id: 'q' }), ...[0, 1, 2].flatMap((k) => named(k).map((id) => put(observation(id, 'other'))))];
      for (let i = 0; i < 84; i++) {
        const items = i === 0 ? named(0) : i === 10 ? named(1) : i === 50 ? named(2) : [];
        entries.push(put({ resourceType: 'List', id: `l${pad(i, 2)}`, status: 'current', mode: 'working', subject: { reference: 'Patient/q' }, ...(items.length && { entry: items.map((x) => ({ item: { reference: `Observation/${x}` } })) }) }));
      }
      for (let i = 0; i < entries.length; i += 1000) expect((await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: entries.slice(i, i + 1000) })).status).toBe(200);
      const first = await api.search('Patient/q/$everything?_type=Observation,Organization&_count=1');
      // l00's and l10's, not l50's: 1,200, the page ending at the read that passed 1,000.
      expect(of(first, 'include').length).toBe(1200);
      expect(link(first, 'next')).toBeDefined();
      expect((await walk(api, 'Patient/q/$everything?_type=Observation,Organization&_count=1')).included.length).toBe(1800);
    });
  });
});
