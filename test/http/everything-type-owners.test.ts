/**
 * Type-level `Patient/$everything` over a large compartment (read type by type by the search engine) tells a
 * record that an earlier live Patient's compartment also holds (its match there, so no page repeats it) by the
 * compartment index where the rows read hold a MiB of text or more, not by parsing their stored texts. On both
 * databases, through app.request(): the parses of the large texts while the pages are read are counted (a work
 * count, not a timing), and the pages' matches are asserted as before.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, link, type FhirClient, type Json } from '../helpers/fhir.ts';

const pad = (n: number) => String(n).padStart(4, '0');
/** A stored text at least this long is one of the large records (two notes of 768 K characters). */
const LARGE = 1 << 20;
const NOTE = 'n'.repeat(768 * 1024);
/** `zz` has 1,050 Observations (a large compartment); every tenth names Patient `aa` as its performer too; three are large. */
const ROWS = 1050;
const BIG = new Set([100, 505, 901]);
const observation = (i: number) => ({
  resourceType: 'Observation', id: `o${pad(i)}`, status: 'final', code: { text: 'weight' },
  subject: { reference: 'Patient/zz' }, ...(i % 10 === 0 && { performer: [{ reference: 'Patient/aa' }] }),
  ...(BIG.has(i) && { note: [{ text: NOTE }, { text: NOTE }] }),
});

await eachStore((kind, fresh) => {
  describe(`type-level $everything: a record's earlier patients from the compartment index (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const parse = JSON.parse;
    let parsed = 0;
    afterEach(() => {
      JSON.parse = parse;
    });
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      const put = (resource: Json) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
      const entries = [put({ resourceType: 'Patient', id: 'aa' }), put({ resourceType: 'Patient', id: 'zz' }), ...Array.from({ length: ROWS }, (_, i) => put(observation(i)))];
      for (let i = 0; i < entries.length; i += 500) expect((await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: entries.slice(i, i + 500) })).status).toBe(200);
    });
    afterAll(() => t.close());

    test('each record comes once, with its first patient, and no large text is parsed to find its patients', async () => {
      const matches: string[] = [];
      let pages = 0;
      let beyond = 0;
      for (let next: string | undefined = 'Patient/$everything?_type=Observation&_count=100&_elements=id'; next; pages++) {
        parsed = 0;
        JSON.parse = ((text: string, reviver?: (this: unknown, key: string, value: unknown) => unknown) => {
          if (typeof text === 'string' && text.length >= LARGE) parsed++;
          return parse(text, reviver);
        }) as typeof JSON.parse;
        const page = await api.search(next);
        JSON.parse = parse;
        const large = (page.entry ?? []).filter((e: Json) => e.search.mode === 'match' && BIG.has(Number(e.resource.id.slice(1)))).length;
        beyond += Math.max(0, parsed - large);
        matches.push(...(page.entry ?? []).filter((e: Json) => e.search.mode === 'match').map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`));
        next = link(page, 'next');
        expect(pages).toBeLessThan(30);
      }
      const all = Array.from({ length: ROWS }, (_, i) => `Observation/o${pad(i)}`);
      // aa's tenth records first (its compartment), then zz's others: each once.
      expect(matches).toEqual([...all.filter((_, i) => i % 10 === 0), ...all.filter((_, i) => i % 10 !== 0)]);
      // Beyond the page's own (its entries shaped by _elements), no large record's text is parsed.
      expect(beyond).toBe(0);
    });
  });
});
