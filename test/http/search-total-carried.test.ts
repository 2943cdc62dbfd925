/**
 * A search's `_total` is counted once and carried in its next links while the tenant's data is unchanged
 * (src/fhir/search-total.ts): a later page counts again only after a write (any type of the tenant: a chain's
 * targets count too), a deletion, an expunge, or for another caller or search. The totals are checked against
 * the data after each change, and the counts the store ran are counted.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { TestApp } from '../helpers/app.ts';
import { fhirClient, link, type FhirClient, type Json } from '../helpers/fhir.ts';
import { appOnFresh } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const observation = (i: number, patient: string, status = 'final') => ({
  resourceType: 'Observation', id: `tc${i}`, status, code: { coding: [{ system: 'urn:test', code: 'c' }] }, subject: { reference: `Patient/${patient}` },
});
/** An Observation to create (POST: no id), with an identifier for its If-None-Exist. */
const created = (patient: string, identifier: string) => {
  const { id: _id, ...o } = observation(0, patient);
  return { ...o, identifier: [{ system: 'urn:test', value: identifier }] };
};

for (const target of targets) {
  describe(`_total carried across pages on ${target.kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    /** The counts the store ran (ResourceRepo.count). */
    let counts = 0;

    beforeAll(async () => {
      ({ t, api } = await appOnFresh(target));
      for (const p of ['f1', 'f2', 'm1']) await api.put200({ resourceType: 'Patient', id: p, gender: p.startsWith('f') ? 'female' : 'male' });
      for (let i = 0; i < 12; i++) await api.put200(observation(i, i % 3 === 0 ? 'm1' : i % 2 ? 'f1' : 'f2', i < 9 ? 'final' : 'amended'));
      const repo = t.store.resources;
      const count = repo.count.bind(repo);
      repo.count = (tenant, query) => (counts++, count(tenant, query));
    }, 60_000);
    afterAll(() => t.close());

    /** The page at `url` (a search, or a next link), with the counts it ran. */
    async function page(url: string, client = api): Promise<{ bundle: Json; ran: number }> {
      const before = counts;
      const res = await client.get(url);
      expect(res.status).toBe(200);
      return { bundle: (await res.json()) as Json, ran: counts - before };
    }

    test('later pages give the first page\'s count without counting again, and count again after a write', async () => {
      const first = await page('Observation?status=final&_total=accurate&_count=2&_sort=_id');
      expect(first.bundle.total).toBe(9);
      expect(first.ran).toBe(1);
      const second = await page(link(first.bundle, 'next')!);
      expect(second.bundle.total).toBe(9);
      expect(second.ran).toBe(0);
      // A write between pages: counted again, and that count carried on.
      await api.put200(observation(20, 'f1'));
      const third = await page(link(second.bundle, 'next')!);
      expect(third.bundle.total).toBe(10);
      expect(third.ran).toBe(1);
      const fourth = await page(link(third.bundle, 'next')!);
      expect(fourth.bundle.total).toBe(10);
      expect(fourth.ran).toBe(0);
      // A deletion, and an update that leaves the search (status amended).
      expect((await api.del('Observation/tc20')).status).toBe(200);
      const fifth = await page(link(third.bundle, 'next')!);
      expect(fifth.bundle.total).toBe(9);
      expect(fifth.ran).toBe(1);
      await api.put200(observation(0, 'm1', 'amended'));
      const sixth = await page(link(fifth.bundle, 'next')!);
      expect(sixth.bundle.total).toBe(8);
      expect(sixth.ran).toBe(1);
    });

    test('a chain\'s total moves with a write to its targets, another type', async () => {
      const first = await page('Observation?subject:Patient.gender=female&_total=accurate&_count=2&_sort=_id');
      const female = first.bundle.total as number;
      expect(female).toBeGreaterThan(2);
      expect((await page(link(first.bundle, 'next')!)).ran).toBe(0);
      // f2 becomes male: its Observations leave the chain's set though none of them was written.
      const f2 = (await page('Observation?subject=Patient/f2&_summary=count')).bundle.total as number;
      expect(f2).toBeGreaterThan(0);
      await api.put200({ resourceType: 'Patient', id: 'f2', gender: 'male' });
      const second = await page(link(first.bundle, 'next')!);
      expect(second.bundle.total).toBe(female - f2);
      expect(second.ran).toBe(1);
      await api.put200({ resourceType: 'Patient', id: 'f2', gender: 'female' });
    });

    test('an expunge between pages is counted again', async () => {
      await api.put200(observation(30, 'f1'));
      expect((await api.del('Observation/tc30')).status).toBe(200);
      await api.put200(observation(31, 'f1'));
      const first = await page('Observation?code=urn:test|c&_total=accurate&_count=4');
      const all = first.bundle.total as number;
      expect((await page(link(first.bundle, 'next')!)).ran).toBe(0);
      // A current version removed (`cinder expunge`'s batch: no version written).
      const gone = await t.store.expunge.batch({ tenant: 't1', type: 'Observation', mode: 'all', ids: ['tc31'], after: 0, limit: 100 });
      expect(gone.removed).toBe(1);
      const second = await page(link(first.bundle, 'next')!);
      expect(second.bundle.total).toBe(all - 1);
      expect(second.ran).toBe(1);
    });

    test('another token\'s scopes, another search or an altered total count again', async () => {
      const first = await page('Observation?code=urn:test|c&_total=accurate&_count=4');
      const all = first.bundle.total as number;
      const next = link(first.bundle, 'next')!;
      // The same client with a token that reads final Observations alone: its own total, not the carried one.
      const finals = (await page('Observation?code=urn:test|c&status=final&_summary=count')).bundle.total as number;
      expect(finals).toBeLessThan(all);
      const narrow = fhirClient(t, await t.token('system/Observation.rs?status=final'));
      const theirs = await page(next, narrow);
      expect(theirs.bundle.total).toBe(finals);
      expect(theirs.ran).toBe(1);
      // The cursor (with its total) under another search's parameters.
      const other = new URL(next);
      other.searchParams.set('code', 'urn:test|none');
      const moved = await page(other.toString());
      expect(moved.bundle.total).toBe(0);
      expect(moved.ran).toBe(1);
      // An altered total is not refused: counted again.
      const altered = new URL(next);
      const cursor = altered.searchParams.get('_cursor')!;
      altered.searchParams.set('_cursor', cursor.replace(/\*[^~]*/, '*x.AAAA'));
      const again = await page(altered.toString());
      expect(again.bundle.total).toBe(all);
      expect(again.ran).toBe(1);
    });

    test('a search across types carries its total in its next and self links until a write', async () => {
      const q = '?_type=Observation,Patient&_total=accurate&_count=2';
      const first = await page(q);
      const all = first.bundle.total as number;
      expect(all).toBe(((await page('Observation?_summary=count')).bundle.total as number) + ((await page('Patient?_summary=count')).bundle.total as number));
      expect(first.ran).toBeGreaterThan(0);
      const second = await page(link(first.bundle, 'next')!);
      expect(second.bundle.total).toBe(all);
      expect(second.ran).toBe(0);
      // The later page's own link, and the page after it.
      const self = await page(link(second.bundle, 'self')!);
      expect(self.bundle.total).toBe(all);
      expect(self.ran).toBe(0);
      expect((await page(link(second.bundle, 'next')!)).ran).toBe(0);
      // A transaction that adds a Patient: counted again, and that count carried on.
      const tx = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: { resourceType: 'Patient', id: 'x1', gender: 'other' }, request: { method: 'PUT', url: 'Patient/x1' } }] });
      expect(tx.status).toBe(200);
      const third = await page(link(second.bundle, 'next')!);
      expect(third.bundle.total).toBe(all + 1);
      expect(third.ran).toBeGreaterThan(0);
      expect((await page(link(third.bundle, 'next')!)).ran).toBe(0);
      // Another search's parameters under the same cursor: its own count.
      const other = new URL(link(third.bundle, 'next')!);
      other.searchParams.set('_type', 'Patient,Observation');
      const moved = await page(other.toString());
      expect(moved.bundle.total).toBe(all + 1);
      expect(moved.ran).toBeGreaterThan(0);
      expect((await api.del('Patient/x1')).status).toBe(200);
    });

    test('a sorted search\'s self and previous links carry the total', async () => {
      const first = await page('Observation?code=urn:test|c&_total=accurate&_count=2&_sort=subject');
      const all = first.bundle.total as number;
      const second = await page(link(first.bundle, 'next')!);
      const third = await page(link(second.bundle, 'next')!);
      expect([second.ran, third.ran]).toEqual([0, 0]);
      const previous = link(third.bundle, 'previous')!;
      expect(previous).toContain('_cursor=');
      const back = await page(previous);
      expect(back.bundle.total).toBe(all);
      expect(back.ran).toBe(0);
      const self = await page(link(third.bundle, 'self')!);
      expect(self.bundle.total).toBe(all);
      expect(self.ran).toBe(0);
      // A conditional create between pages: the previous page counts again.
      const made = await api.post('Observation', created('f1', 'n40'), { 'If-None-Exist': 'identifier=urn:test|n40' });
      expect(made.status).toBe(201);
      const after = await page(previous);
      expect(after.bundle.total).toBe(all + 1);
      expect(after.ran).toBe(1);
    });

    test('every kind of write between pages makes the next page count again', async () => {
      const q = 'Observation?code=urn:test|c&_total=accurate&_count=3&_sort=_id';
      const fresh = async () => (await page('Observation?code=urn:test|c&_summary=count')).bundle.total as number;
      const writes: [string, () => Promise<Response> | Response][] = [
        ['transaction', () => api.post('', { resourceType: 'Bundle', type: 'transaction', entry: [
          { resource: observation(50, 'm1'), request: { method: 'PUT', url: 'Observation/tc50' } },
          { resource: created('f2', 'n51'), request: { method: 'POST', url: 'Observation', ifNoneExist: 'identifier=urn:test|n51' } },
        ] })],
        ['batch', () => api.post('', { resourceType: 'Bundle', type: 'batch', entry: [{ request: { method: 'DELETE', url: 'Observation/tc50' } }] })],
        ['conditional update', () => api.put('Observation?_id=tc52', observation(52, 'f1'))],
        ['conditional delete', () => api.del('Observation?_id=tc52')],
        ['patch', () => api.call('PATCH', 'Observation/tc1', [{ op: 'replace', path: '/status', value: 'cancelled' }], { 'Content-Type': 'application/json-patch+json' })],
      ];
      for (const [what, write] of writes) {
        const first = await page(q);
        expect((await page(link(first.bundle, 'next')!)).ran).toBe(0);
        const res = await write();
        expect({ what, status: res.status, body: res.status < 300 ? '' : await res.text() }).toEqual({ what, status: res.status < 300 ? res.status : 200, body: '' });
        const next = await page(link(first.bundle, 'next')!);
        expect({ what, ran: next.ran, total: next.bundle.total }).toEqual({ what, ran: 1, total: await fresh() });
      }
    });

    test('a cursor from another client or another tenant counts its own', async () => {
      const first = await page('Observation?code=urn:test|c&_total=accurate&_count=2&_sort=_id');
      const next = link(first.bundle, 'next')!;
      // Another client of the tenant, with the same scopes: the same total, counted by its own search.
      const otherClient = fhirClient(t, await t.tokenFor('t1', ['system/*.*']));
      const theirs = await page(next, otherClient);
      expect(theirs.bundle.total).toBe(first.bundle.total);
      expect(theirs.ran).toBe(1);
      // The same cursor under another tenant's base, which holds one such Observation.
      const t2 = fhirClient(t, await t.tokenFor('t2', ['system/*.*']), 't2');
      expect((await t2.put('Observation/tc0', observation(0, 'p'))).status).toBe(201);
      const there = await page(next.replace('/tenants/t1/', '/tenants/t2/'), t2);
      expect(there.bundle.total).toBe(1);
      expect(there.ran).toBe(1);
    });

    test('a transaction\'s search entry takes a next link carrying a total', async () => {
      const first = await page('Observation?code=urn:test|c&_total=accurate&_count=4');
      const next = link(first.bundle, 'next')!;
      const url = next.slice(next.indexOf('/Observation?') + 1);
      const res = await api.post('', { resourceType: 'Bundle', type: 'batch', entry: [{ request: { method: 'GET', url } }] });
      expect(res.status).toBe(200);
      const entry = ((await res.json()) as Json).entry[0];
      expect(entry.response.status).toBe('200 OK');
      expect(entry.resource.total).toBe(first.bundle.total);
    });
  });
}
