/**
 * `Patient/$everything?_count=0` on both databases: as a search's `_count=0`, a searchset Bundle of no entries
 * whose `total` is how many matches the pages hold (instance and type level, with `_type` and `_since`), its self
 * link keeping `_count=0` and no next link; a negative `_count` is still a 400 naming it. The count reads the matches
 * alone, not the pages: records that each name more than a page includes (a page each) are counted, where reading
 * twenty pages made a record of 22 resources a 400.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, link, type FhirClient, type Json } from '../helpers/fhir.ts';

/** How many matches every page from `first` holds, and the includes. */
async function walk(api: FhirClient, first: string) {
  let matches = 0;
  let included = 0;
  for (let next: string | undefined = first, pages = 0; next; pages++) {
    if (pages === 100) throw new Error('more than 100 pages');
    const b = await api.search(next);
    for (const e of (b.entry ?? []) as Json[]) e.search.mode === 'match' ? matches++ : included++;
    next = link(b, 'next');
  }
  return { matches, included };
}

await eachStore((kind, fresh) => {
  describe(`Patient/$everything?_count=0 (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Practitioner', id: 'dr' });
      for (const p of ['p1', 'p2', 'p3']) await api.put200({ resourceType: 'Patient', id: p, generalPractitioner: [{ reference: 'Practitioner/dr' }] });
      for (let i = 0; i < 7; i++) {
        await api.put200({ resourceType: 'Observation', id: `o${i}`, status: 'final', code: { text: `o${i}` }, subject: { reference: `Patient/p${(i % 2) + 1}` } });
      }
      await api.put200({ resourceType: 'Condition', id: 'c1', subject: { reference: 'Patient/p1' } });
    });
    afterAll(() => t.close());

    test('no entries, the total of the matches its pages hold', async () => {
      for (const query of ['Patient/p1/$everything', 'Patient/$everything', 'Patient/p1/$everything?_type=Observation', 'Patient/$everything?_type=Condition,Patient']) {
        const all = await walk(api, `${query}${query.includes('?') ? '&' : '?'}_count=2`);
        expect(all.matches).toBeGreaterThan(0);
        const counted = await api.search(`${query}${query.includes('?') ? '&' : '?'}_count=0`);
        expect(counted.type).toBe('searchset');
        expect(counted.total).toBe(all.matches);
        expect(counted.entry).toBeUndefined();
        expect(link(counted, 'next')).toBeUndefined();
        expect(decodeURIComponent(link(counted, 'self')!)).toContain('_count=0');
      }
      expect((await api.search('Patient/p1/$everything?_count=0')).total).toBe(6);
      expect((await api.search('Patient/$everything?_count=0')).total).toBe(11);
      // By POST with a Parameters body too.
      const posted = await api.post('Patient/p1/$everything', { resourceType: 'Parameters', parameter: [{ name: '_count', valueInteger: 0 }] });
      expect(posted.status).toBe(200);
      expect((await posted.json()).total).toBe(6);
    });

    test('records that are a page each are counted, not refused for their pages', async () => {
      // 21 Observations each naming the same 1,001 Practitioners, more than a page includes: a page each.
      const entry = Array.from({ length: 1001 }, (_, j) => ({ resource: { resourceType: 'Practitioner', id: `n${j}` }, request: { method: 'PUT', url: `Practitioner/n${j}` } }));
      expect((await api.post('', { resourceType: 'Bundle', type: 'transaction', entry })).status).toBe(200);
      const performer = entry.map((e) => ({ reference: `Practitioner/${e.resource.id}` }));
      for (let i = 0; i < 21; i++) {
        await api.put200({ resourceType: 'Observation', id: `wide${i}`, status: 'final', code: { text: 'wide' }, subject: { reference: 'Patient/p3' }, performer });
      }
      const all = await walk(api, 'Patient/p3/$everything?_count=1000');
      expect(all.matches).toBe(22);
      const counted = await api.search('Patient/p3/$everything?_count=0');
      expect(counted.total).toBe(22);
      // A cursor given beside `_count=0` is read from the start, as before.
      expect((await api.search('Patient/p3/$everything?_count=0&_cursor=garbage')).total).toBe(22);
      expect((await api.search('Patient/p3/$everything?_count=0&_type=Observation')).total).toBe(21);
    }, 120_000);

    test('a patient it may not find, or a bad _count, answers as a page would', async () => {
      await expectOutcome(await api.get('Patient/nope/$everything?_count=0'), 404);
      expect((await expectOutcome(await api.get('Patient/p1/$everything?_count=-1'), 400)).issue[0].expression).toEqual(['_count']);
      expect((await expectOutcome(await api.get('Patient/p1/$everything?_count=0&_since=yesterday'), 400)).issue[0].expression).toEqual(['_since']);
    });
  });
});
