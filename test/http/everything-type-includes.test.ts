/**
 * `$everything`'s includes under `_type`, on both databases: only the types `_type` names are followed (a page's
 * rows' other references are not read), so those of `_type` are not crowded out of a page's MAX_INCLUDES by
 * resources that would be thrown away; and a page whose includes were cut says so.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, fhirClient, link, type FhirClient, type Json } from '../helpers/fhir.ts';
import { FILL_CHARS } from '../../src/fhir/everything-fill.ts';

const name = (e: Json) => `${e.resource.resourceType}/${e.resource.id}`;
const of = (b: Json, mode: string) => (b.entry ?? []).filter((e: Json) => e.search.mode === mode).map(name);
const pad = (n: number, width: number) => String(n).padStart(width, '0');

async function walk(api: FhirClient, first: string, most = 50) {
  const pages: Json[] = [];
  for (let next: string | undefined = first; next; next = link(pages[pages.length - 1]!, 'next')) {
    if (pages.length === most) throw new Error(`${first}: more than ${most} pages`);
    pages.push(await api.search(next));
  }
  return { included: [...new Set(pages.flatMap((b) => of(b, 'include')))].sort(), pages };
}

await eachStore((kind, fresh) => {
  describe(`$everything includes of _type's types alone, on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    /** 300 Observations of q, each naming five Practitioners of its own (1,500 in all); o0290 names `org` after its own. */
    const OBS = Array.from({ length: 300 }, (_, i) => `o${pad(i, 4)}`);

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      const put = (resource: Json) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
      const entries = [
        put({ resourceType: 'Patient', id: 'q' }),
        put({ resourceType: 'Organization', id: 'org', name: 'Named late' }),
        ...OBS.flatMap((_, i) => [0, 1, 2, 3, 4].map((k) => put({ resourceType: 'Practitioner', id: `pr${pad(i * 5 + k, 4)}` }))),
        ...OBS.map((id, i) => put({
          resourceType: 'Observation', id, status: 'final', code: { text: id }, subject: { reference: 'Patient/q' },
          performer: [...[0, 1, 2, 3, 4].map((k) => ({ reference: `Practitioner/pr${pad(i * 5 + k, 4)}` })), ...(id === 'o0290' ? [{ reference: 'Organization/org' }] : [])],
        })),
      ];
      for (let i = 0; i < entries.length; i += 1000) {
        const res = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: entries.slice(i, i + 1000) });
        expect(res.status).toBe(200);
      }
    });
    afterAll(() => t.close());

    test('an Organization named beside more than 1,000 Practitioners is included under _type=Organization', async () => {
      // At _count=1 a page reads 1, 4, 16, 64 and then 256 rows: the last names 1,080 Practitioners, `org` after 1,000 of them.
      expect((await walk(api, 'Patient/q/$everything?_type=Organization&_count=1')).included).toEqual(['Organization/org']);
      // One page of 300 Observations: 1,500 Practitioners named, `org` after 1,450 of them.
      expect((await walk(api, 'Patient/q/$everything?_type=Observation,Organization&_count=300')).included).toEqual(['Organization/org']);
    });

    test('a page that reads on through records of a megabyte stops at FILL_CHARS of them, its next reading on', async () => {
      // d's 40 DocumentReferences hold 1 Mi characters of inline data each; the last names `org-docs`.
      const MI = 1 << 20;
      const put = (resource: Json) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
      const docs = Array.from({ length: 40 }, (_, i) => put({
        resourceType: 'DocumentReference', id: `d${pad(i, 2)}`, status: 'current', subject: { reference: 'Patient/d' },
        content: [{ attachment: { contentType: 'application/pdf', data: 'A'.repeat(MI) } }], ...(i === 39 && { author: [{ reference: 'Organization/org-docs' }] }),
      }));
      const entries = [put({ resourceType: 'Patient', id: 'd' }), put({ resourceType: 'Organization', id: 'org-docs', name: 'Docs' }), ...docs];
      for (let i = 0; i < entries.length; i += 10) expect((await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: entries.slice(i, i + 10) })).status).toBe(200);
      // _count=1: reads of 1, 4, 16 rows (21 Mi), then as many as the characters left take (11): 32 records, 32 Mi.
      const first = await api.search('Patient/d/$everything?_type=Organization&_count=1');
      expect(link(first, 'next')).toBeDefined();
      const note = first.entry.find((e: Json) => e.search.mode === 'outcome').resource.issue[0];
      const read = Number(/read (\d+) records/.exec(note.diagnostics)![1]);
      expect(read).toBeLessThanOrEqual(Math.ceil(FILL_CHARS / MI) + 1);
      expect(read).toBeGreaterThan(1);
      // The next page reads on after them and finds the Organization.
      expect((await walk(api, 'Patient/d/$everything?_type=Organization&_count=1')).included).toEqual(['Organization/org-docs']);
    });

    test('a patient token: what the records read for _type\'s outside types name of another patient is not included', async () => {
      // a's Encounter (read only for its references under _type=Observation,Organization) names b's Observation and an Organization.
      await api.put200({ resourceType: 'Patient', id: 'a' });
      await api.put200({ resourceType: 'Patient', id: 'b' });
      await api.put200({ resourceType: 'Organization', id: 'org-a', name: 'A' });
      await api.put200({ resourceType: 'Observation', id: 'ob-b', status: 'final', code: { text: 'b' }, subject: { reference: 'Patient/b' } });
      await api.put200({ resourceType: 'Encounter', id: 'en-a', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/a' },
        reasonReference: [{ reference: 'Observation/ob-b' }], serviceProvider: { reference: 'Organization/org-a' } });
      const patient = fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'a' }));
      for (const count of [1, 50]) {
        expect(await walk(patient, `Patient/a/$everything?_type=Observation,Organization&_count=${count}`)).toMatchObject({ included: ['Organization/org-a'] });
        expect(await walk(patient, `Patient/$everything?_type=Observation,Organization&_count=${count}`)).toMatchObject({ included: ['Organization/org-a'] });
        expect(await walk(patient, `Encounter/en-a/$everything?_type=Observation,Organization&_count=${count}`)).toMatchObject({ included: ['Organization/org-a'] });
      }
      // A user token includes it, as _include would.
      expect((await walk(api, 'Encounter/en-a/$everything?_type=Observation,Organization')).included).toEqual(['Observation/ob-b', 'Organization/org-a']);
    });

    test('a page whose rows name more resources than it includes ends before the record that would pass them', async () => {
      // 300 Observations name 1,500 Practitioners and the Organization: the page ends after the 200th Observation
      // (1,000 named), whole and without a warning; the rest come with their records on the next page.
      const page = await api.search('Patient/q/$everything?_count=300');
      expect(of(page, 'include').length).toBe(1000);
      expect(of(page, 'match')).toEqual(['Patient/q', ...OBS.slice(0, 200).map((id) => `Observation/${id}`)]);
      expect(of(page, 'outcome')).toEqual([]);
      expect(link(page, 'next')).toBeDefined();
      expect((await walk(api, 'Patient/q/$everything?_count=300')).included.length).toBe(1501);
    });
  });
});
