/**
 * Searches whose size, not their data, made them costly, on both databases: each is held to a bound
 * (a 400 `too-costly` naming the parameter) or answered as any other search, never a 500 from the
 * database refusing the statement Cinder wrote.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, ids, type FhirClient, type Json } from '../helpers/fhir.ts';
import type { ResourceRepo, Store } from '../../src/store/types.ts';

const FORM = { 'Content-Type': 'application/x-www-form-urlencoded' };

await eachStore((kind, fresh) => {
  describe(`search size bounds on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Patient', id: 'p1', name: [{ family: 'Chalmers', given: ['Peter'] }], gender: 'male' });
      await api.put200({ resourceType: 'Patient', id: 'p2', name: [{ family: 'Windsor' }], gender: 'female' });
      await api.put200({ resourceType: 'Observation', id: 'o1', status: 'final', code: { text: 'heart rate' }, subject: { reference: 'Patient/p1' } });
      await api.put200({ resourceType: 'Observation', id: 'o2', status: 'final', code: { text: 'body weight' }, subject: { reference: 'Patient/p2' } });
    });
    afterAll(() => t.close());

    const form = (path: string, body: string) => api.call('POST', `${path}/_search`, body, FORM);

    test('_sort takes at most 16 keys: more is a 400 too-costly naming _sort (thousands were a 500 from the database)', async () => {
      const sorted = await api.search(`Patient?_sort=${Array.from({ length: 16 }, (_, i) => (i % 2 ? '-family' : 'gender')).join(',')}`);
      expect(ids(sorted)).toEqual(['p2', 'p1']);
      const outcome = await expectOutcome(await api.get(`Patient?_sort=${Array(17).fill('family').join(',')}`), 400, 'too-costly');
      expect(outcome.issue[0].expression).toEqual(['_sort']);
      expect(outcome.issue[0].details.text).toBe('_sort has 17 keys; at most 16 are supported');
      await expectOutcome(await form('Observation', `_sort=${Array(2000).fill('code').join(',')}`), 400, 'too-costly');
    });

    test('a search takes at most 64 _include and _revinclude parameters, on one type and across types', async () => {
      const included = await api.search(`Observation?${Array(32).fill('_include=Observation:subject').join('&')}&${Array(32).fill('_revinclude=Provenance:target').join('&')}`);
      expect(included.entry.filter((e: Json) => e.search.mode === 'include').map((e: Json) => e.resource.id).sort()).toEqual(['p1', 'p2']);
      const many = `${Array(60).fill('_include=Observation:subject').join('&')}&${Array(5).fill('_revinclude:iterate=Observation:subject').join('&')}`;
      for (const res of [await api.get(`Observation?${many}`), await form('Observation', many), await api.get(`?_type=Observation&${many}`)]) {
        const outcome = await expectOutcome(res, 400, 'too-costly');
        expect(outcome.issue[0].details.text).toBe('The search has 65 _include and _revinclude parameters; at most 64 are supported');
        expect(outcome.issue[0].expression).toEqual(['_include']);
      }
    });

    test('a search holds at most 100 tests: hundreds of parameters or _filter tests are a 400 too-costly (SQLite refused the statement: a 500)', async () => {
      const nots = (n: number) => Array.from({ length: n }, (_, i) => `code:not=x${i}`).join('&');
      for (const query of [nots(100), `${nots(97)}&subject.gender=male,female&_total=accurate`]) {
        const res = await form('Observation', query);
        const body = (await res.json()) as Json;
        expect({ status: res.status, body: body.issue }).toEqual({ status: 200, body: undefined });
        expect(ids(body).sort()).toEqual(['o1', 'o2']);
      }
      // Alternatives of two tests each (ORed tests of one parameter are one test of several values).
      const ors = (n: number) => `_filter=${encodeURIComponent([...Array.from({ length: n }, (_, i) => `(code eq ${i} and status eq final)`), '_id eq o2 or subject.gender eq male'].join(' or '))}`;
      expect(ids((await (await form('Observation', ors(48))).json()) as Json).sort()).toEqual(['o1', 'o2']);
      for (const query of [nots(101), nots(990), `${nots(99)}&subject.gender=male`, ors(50), ors(220)]) {
        const outcome = await expectOutcome(await form('Observation', query), 400, 'too-costly');
        expect(outcome.issue[0].details.text).toMatch(/^The search has \d+ tests \(parameters, _filter tests, chained steps\); at most 100 are supported$/);
      }
    });

    test("a _filter ORing hundreds of one parameter's values is one test, answered (SQLite refused its statement: a 500)", async () => {
      const values = (n: number) => `_filter=${encodeURIComponent([...Array.from({ length: n }, (_, i) => `gender eq g${i}`), 'gender eq MALE'].join(' or '))}`;
      for (const query of [values(450), `${values(450)}&_total=accurate`, `${values(450)}&name=chalmers`]) {
        const res = await form('Patient', query);
        const body = (await res.json()) as Json;
        expect({ status: res.status, issue: body.issue }).toEqual({ status: 200, issue: undefined });
        expect(ids(body)).toEqual(['p1']);
      }
    });

    test('_text and _content: each word of an expression read once (the same matches), at most 16 words in a search', async () => {
      // Written together (64 or more at once), SQLite's words go to its FTS5 index at once, not by the recent rows.
      const texts = ['heart rate', 'body weight', 'heart weight', 'body temperature'];
      const entry = (i: number) => ({
        fullUrl: `urn:uuid:00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
        resource: { resourceType: 'Observation', status: 'final', code: { text: `${texts[i % 4]} n${i}` }, identifier: [{ system: 'urn:cost', value: `n${i}` }] },
        request: { method: 'POST', url: 'Observation' },
      });
      const written = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: Array.from({ length: 80 }, (_, i) => entry(i)) });
      expect(written.status).toBe(200);
      const found = async (query: string) => ((await api.search(`Observation?${query}&_count=1000&_elements=code`)).entry ?? []).map((e: Json) => e.resource.code.text.split(' n')[0]);
      const kinds = (list: string[]) => [...new Set(list)].sort();
      expect(kinds(await found(`_content=${encodeURIComponent('(heart OR body) (rate OR weight) n1*')}`))).toEqual(['body weight', 'heart rate', 'heart weight']);
      expect((await found(`_content=${encodeURIComponent('(heart OR body) (rate OR weight) n1*')}`)).length).toBe(8);
      expect(kinds(await found(`_content=${encodeURIComponent('heart rate OR body temp*')}`))).toEqual(['body temperature', 'heart rate']);
      expect(kinds(await found(`_content=${encodeURIComponent('(heart rate)')},${encodeURIComponent('body (temp* OR xyz)')}&_content=n7*`))).toEqual(['body temperature', 'heart rate']);
      const pairs = '(a* OR b*) (c* OR d*) (e* OR f*) (g* OR h*) (i* OR j*)';
      for (const query of [
        `_content=${encodeURIComponent(pairs)}&_content=${encodeURIComponent('k* l* m* n* o* p* q*')}`,
        `_content=${Array.from({ length: 17 }, (_, i) => `w${i}*`).join(',')}`,
        `_text=${Array.from({ length: 9 }, (_, i) => `w${i}`).join('+')}&_content=${Array.from({ length: 8 }, (_, i) => `v${i}`).join('+')}`,
        Array.from({ length: 30 }, () => `_content=${encodeURIComponent(pairs)}`).join('&'),
      ]) {
        const outcome = await expectOutcome(await form('Observation', query), 400, 'too-costly');
        expect(outcome.issue[0].details.text).toMatch(/^The search's _text and _content values hold \d+ words together; at most 16 are supported$/);
      }
      expect(kinds(await found(`_content=${encodeURIComponent(pairs)}&_content=${encodeURIComponent('k* l* m* n* o* p*')}`))).toEqual([]);
    });
  });

  describe(`included resources past the page's bound on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    /** The types of the store searches run while `counting`. */
    const searched: string[] = [];
    let counting = false;
    /** The store, its searches listed in `searched`. */
    const listing = (store: Store): Store => {
      const resources: ResourceRepo = Object.create(store.resources);
      resources.search = (tenant, q) => {
        if (counting) searched.push(q.type);
        return store.resources.search(tenant, q);
      };
      return new Proxy(store, { get: (target, key) => (key === 'resources' ? resources : Reflect.get(target, key)) });
    };
    beforeAll(async () => {
      t = await createTestApp({ store: listing(await fresh()) });
      api = fhirClient(t, await t.token());
      const entry = (resource: Json) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
      const entries = [entry({ resourceType: 'Patient', id: 'p' })];
      for (let i = 0; i < 1001; i++) entries.push(entry({ resourceType: 'Observation', id: `o${i}`, status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/p' } }));
      entries.push(entry({ resourceType: 'Condition', id: 'c', subject: { reference: 'Patient/p' } }), entry({ resourceType: 'Encounter', id: 'e', status: 'finished', class: { code: 'AMB' }, subject: { reference: 'Patient/p' } }));
      const res = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: entries });
      expect(res.status).toBe(200);
    }, 60_000);
    afterAll(() => t.close());

    test('once a page holds 1,000 included resources and more were found, no other is read', async () => {
      counting = true;
      const bundle = await api.search('Patient?_id=p&_revinclude=Observation:subject&_revinclude=Condition:subject&_revinclude:iterate=Encounter:subject&_include:iterate=Observation:subject');
      counting = false;
      expect(bundle.entry.filter((e: Json) => e.search.mode === 'include')).toHaveLength(1000);
      expect(bundle.entry.at(-1).resource.issue[0].details.text).toBe('Only the first 1000 included resources are returned');
      // The Patient, then its Observations (1,001 of them, past the bound): Condition and Encounter are not read.
      expect(searched).toEqual(['Patient', 'Observation']);
    });
  });
});
