/**
 * `Patient/{id}/$everything` on both databases: a record that alone names more than a page includes (1,000) is a
 * page of its own with ONE `too-costly` warning naming it, how many it names and how many the page includes (and
 * the Binaries of its attachments left out). It got two (search's "Only the first 1000 included resources are
 * returned" beside the one naming it), three where its attachments' Binaries passed the bound too.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, link, type FhirClient, type Json } from '../helpers/fhir.ts';

const name = (e: Json) => `${e.resource.resourceType}/${e.resource.id}`;
const pad = (n: number) => String(n).padStart(4, '0');

/** Every page from `first`: its entries (not the outcome) and its issues as `severity code: diagnostics`. */
async function pagesOf(api: FhirClient, first: string) {
  const pages: { entries: string[]; issues: string[] }[] = [];
  for (let next: string | undefined = first; next; ) {
    if (pages.length === 20) throw new Error(`${first}: more than 20 pages`);
    const b = await api.search(next);
    pages.push({
      entries: (b.entry ?? []).filter((e: Json) => e.search.mode !== 'outcome').map(name),
      issues: (b.entry ?? []).filter((e: Json) => e.search.mode === 'outcome').flatMap((e: Json) => e.resource.issue.map((i: Json) => `${i.severity} ${i.code}: ${i.diagnostics}`)),
    });
    next = link(b, 'next');
  }
  return pages;
}

await eachStore((kind, fresh) => {
  describe(`$everything: one warning for a record past a page's includes, on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const PRACTITIONERS = Array.from({ length: 1_001 }, (_, i) => `pr${pad(i)}`);
    const BINARIES = Array.from({ length: 1_001 }, (_, i) => `bn${pad(i)}`);

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      const put = (resource: Json) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
      expect((await api.post('', {
        resourceType: 'Bundle', type: 'transaction', entry: [
          ...PRACTITIONERS.map((id) => put({ resourceType: 'Practitioner', id })),
          ...BINARIES.map((id) => put({ resourceType: 'Binary', id, contentType: 'text/plain', data: 'QQ==' })),
          // pl: its Observation names the 1,001 Practitioners.
          put({ resourceType: 'Patient', id: 'pl' }),
          put({ resourceType: 'Observation', id: 'ol', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/pl' }, performer: PRACTITIONERS.map((id) => ({ reference: `Practitioner/${id}` })) }),
          // Records before and after it, naming one Practitioner each: the pages around the lone one.
          ...['ok', 'om'].map((id, i) => put({ resourceType: 'Observation', id, status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/pl' }, performer: [{ reference: `Practitioner/${PRACTITIONERS[i]}` }] })),
          // pm: its DocumentReference names the 1,001 Practitioners as authors, and the 1,001 Binaries by url.
          put({ resourceType: 'Patient', id: 'pm' }),
          put({
            resourceType: 'DocumentReference', id: 'dm', status: 'current', subject: { reference: 'Patient/pm' },
            author: PRACTITIONERS.map((id) => ({ reference: `Practitioner/${id}` })),
            content: BINARIES.map((id) => ({ attachment: { contentType: 'text/plain', url: `Binary/${id}` } })),
          }),
        ],
      })).status).toBe(200);
      // ol written again a minute later: `_since` between the writes returns it without the Practitioners it names.
      t.clock.advance(60_000);
      expect((await api.put('Observation/ol', { resourceType: 'Observation', id: 'ol', status: 'amended', code: { text: 'x' }, subject: { reference: 'Patient/pl' }, performer: PRACTITIONERS.map((id) => ({ reference: `Practitioner/${id}` })) })).status).toBe(200);
    });
    afterAll(() => t.close());

    test('a record naming 1,001 resources: its page carries one warning, naming it', async () => {
      for (const query of ['Patient/pl/$everything', 'Patient/pl/$everything?_count=1', 'Patient/pl/$everything?_type=Observation,Practitioner']) {
        const pages = await pagesOf(api, query);
        const page = pages.find((p) => p.entries.includes('Observation/ol'))!;
        expect({ query, entries: page.entries.length, issues: page.issues }).toEqual({
          query, entries: 1_001, issues: [
            'warning too-costly: Observation/ol refers to 1001 resources, more than a page includes (1000): 1000 are included and the others left out; read them by the references Observation/ol holds',
          ],
        });
        // The other pages warn of nothing.
        expect(pages.filter((p) => p !== page).flatMap((p) => p.issues)).toEqual([]);
      }
    }, 60_000);

    test('guard: the pages around the lone record return each record once, with what it names', async () => {
      for (const query of ['Patient/pl/$everything', 'Patient/pl/$everything?_count=1', 'Patient/pl/$everything?_count=2', 'Patient/pl/$everything?_count=1&_type=Observation,Practitioner']) {
        const pages = await pagesOf(api, query);
        const records = pages.flatMap((p) => p.entries).filter((e) => e.startsWith('Observation/') || e.startsWith('Patient/'));
        const expected = ['Observation/ok', 'Observation/ol', 'Observation/om', ...(query.includes('_type') ? [] : ['Patient/pl'])];
        expect({ query, records: records.sort() }).toEqual({ query, records: expected.sort() });
        const ok = pages.find((p) => p.entries.includes('Observation/ok'))!;
        const om = pages.find((p) => p.entries.includes('Observation/om'))!;
        expect({ query, ok: ok.entries.includes('Practitioner/pr0000'), om: om.entries.includes('Practitioner/pr0001') }).toEqual({ query, ok: true, om: true });
      }
    }, 60_000);

    test('_since: the warning counts the includes the page returns (those updated since), not those read', async () => {
      const since = new Date(t.clock.now() - 30_000).toISOString();
      for (const query of [`Patient/pl/$everything?_since=${since}`, `Patient/pl/$everything?_count=1&_since=${since}`]) {
        const b = await api.search(query);
        const entries = (b.entry ?? []) as Json[];
        expect({
          query,
          matches: entries.filter((e) => e.search.mode === 'match').map(name),
          included: entries.filter((e) => e.search.mode === 'include').length,
          issues: entries.filter((e) => e.search.mode === 'outcome').flatMap((e) => e.resource.issue.map((i: Json) => i.diagnostics)),
        }).toEqual({
          query, matches: ['Observation/ol'], included: 0, issues: [
            'Observation/ol refers to 1001 resources, more than a page includes (1000): 1000 were read, 0 of them updated since _since are included, and the others left out; read them by the references Observation/ol holds',
          ],
        });
      }
    }, 60_000);

    test("a record past the bound by its references and its attachments' Binaries: one warning, naming the Binaries left out", async () => {
      for (const query of ['Patient/pm/$everything', 'Patient/pm/$everything?_count=1']) {
        const pages = await pagesOf(api, query);
        const page = pages.find((p) => p.entries.includes('DocumentReference/dm'))!;
        // 1,000 Practitioners and 1,000 Binaries: each kind's bound.
        expect({ query, entries: page.entries.length, issues: page.issues }).toEqual({
          query, entries: 2_001, issues: [
            "warning too-costly: DocumentReference/dm refers to 2002 resources, more than a page includes (1000): 2000 are included and the others left out (of its attachments' Binaries 1 left out: Binary/bn1000, to be read by their url); read them by the references DocumentReference/dm holds",
          ],
        });
      }
    }, 60_000);
  });
});
