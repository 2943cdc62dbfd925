/**
 * A transaction's conditions of one shape are searched together (bundle-condition-answers.ts), on both databases: each
 * entry gets the answer its own search gives (none, its match, several: 412), whatever others the shared statement
 * reads (an identifier of another gender), and the planning reads the store in a few statements, not one per entry.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { bundlePoster, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const person = (id: string, gender: string, extra: Json = {}) => ({ resourceType: 'Patient', identifier: [{ system: 'urn:x', value: id }], gender, ...extra });
const gender = (i: number) => (i % 3 === 0 ? 'male' : 'female');
const other = (g: string) => (g === 'male' ? 'female' : 'male');
const create = (resource: Json, ifNoneExist: string) => ({ resource, request: { method: 'POST', url: 'Patient', ifNoneExist } });
const tx = (entry: Json[], type = 'transaction') => ({ resourceType: 'Bundle', type, entry });

await eachStore((kind, fresh) => {
  describe(`a transaction's conditions searched together (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let searches = 0;
    const { ok, nothingWritten } = bundlePoster(() => t, () => api);
    const ids = async (query: string) => ((await api.search(`Patient?${query}`)).entry ?? []).map((e: Json) => e.resource.id as string).sort();

    beforeAll(async () => {
      const store = await fresh();
      // Counts the store's searches (a test double around the adapter's own).
      const search = store.resources.search.bind(store.resources);
      store.resources.search = (tenant, query) => {
        searches++;
        return search(tenant, query);
      };
      t = await createTestApp({ store });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    test('each conditional create finds its own match, or creates, in a few statements; sent again, each finds the same', async () => {
      const n = 60;
      const seeded: Json[] = [];
      // Half the entries' Patients stored; and every identifier under the other gender (in the shared statement, matched by no entry).
      for (let i = 0; i < n; i++) {
        if (i % 2 === 0) seeded.push({ resource: person(`p${i}`, gender(i)), request: { method: 'POST', url: 'Patient' } });
        seeded.push({ resource: person(`p${i}`, other(gender(i)), { active: false }), request: { method: 'POST', url: 'Patient' } });
      }
      await ok(tx(seeded, 'batch'));
      const cond = (i: number) => `identifier=urn:x|p${i}&gender=${gender(i)}`;
      const entries = Array.from({ length: n }, (_, i) => create(person(`p${i}`, gender(i)), cond(i)));
      const stored = await Promise.all(Array.from({ length: n }, (_, i) => (i % 2 === 0 ? ids(cond(i)) : Promise.resolve([]))));
      searches = 0;
      const res = await ok(tx(entries));
      const planned = searches;
      expect(res.entry.map((e: Json) => e.response.status)).toEqual(entries.map((_, i) => (i % 2 === 0 ? '200 OK' : '201 Created')));
      for (let i = 0; i < n; i += 2) expect([i, res.entry[i].resource.id]).toEqual([i, stored[i]![0]]);
      for (let i = 1; i < n; i += 2) expect([i, await ids(cond(i))]).toEqual([i, [res.entry[i].resource.id]]);
      // One statement per entry was 60 at the planning alone (and as many at the commit's checks of them, but a few).
      expect(planned).toBeLessThan(n / 2);
      // Sent again, each entry finds what the first time created or found.
      const again = await ok(tx(entries));
      expect(again.entry.map((e: Json) => e.resource.id)).toEqual(res.entry.map((e: Json) => e.resource.id));
      expect(again.entry.every((e: Json) => e.response.status === '200 OK')).toBe(true);
    });

    test('conditional creates by family and given (merged) each find their own match beside the same given name under other families, in a few statements', async () => {
      const n = 40;
      const named = (f: number, i: number) => ({ resourceType: 'Patient', name: [{ family: `Fam${f % 7}`, given: [`Giv${i}x`] }] });
      const seeded: Json[] = [];
      for (let i = 0; i < n; i++) {
        if (i % 2 === 0) seeded.push({ resource: named(i, i), request: { method: 'POST', url: 'Patient' } });
        seeded.push({ resource: { ...named(i + 1, i), active: false }, request: { method: 'POST', url: 'Patient' } });
      }
      await ok(tx(seeded, 'batch'));
      const cond = (i: number) => `family=Fam${i % 7}&given=Giv${i}x`;
      const stored = await Promise.all(Array.from({ length: n }, (_, i) => (i % 2 === 0 ? ids(cond(i)) : Promise.resolve([]))));
      searches = 0;
      const res = await ok(tx(Array.from({ length: n }, (_, i) => ({ resource: named(i, i), request: { method: 'POST', url: 'Patient', ifNoneExist: cond(i) } }))));
      // Their string prefixes merged on PostgreSQL too (unnested ranges): one statement per entry was 40 at the planning.
      expect(searches).toBeLessThan(n / 2);
      expect(res.entry.map((e: Json) => e.response.status)).toEqual(Array.from({ length: n }, (_, i) => (i % 2 === 0 ? '200 OK' : '201 Created')));
      for (let i = 0; i < n; i += 2) expect([i, res.entry[i].resource.id]).toEqual([i, stored[i]![0]]);
      for (let i = 1; i < n; i += 2) expect([i, await ids(cond(i))]).toEqual([i, [res.entry[i].resource.id]]);
    });

    test('a prefix finds names going on past it in U+E000..U+FFFF (halfwidth katakana), as a search alone does: grouped, and created earlier in the Bundle', async () => {
      // UTF-16 sorts U+FF76 after the surrogates of the prefix's bound (prefix + U+10FFFF); the stores compare code points.
      const named = (f: string, i: number) => ({ resourceType: 'Patient', name: [{ family: f, given: [`Ann${i}ｶ`] }] });
      const n = 10;
      await ok(tx(Array.from({ length: n }, (_, i) => ({ resource: named('Kat', i), request: { method: 'POST', url: 'Patient' } })), 'batch'));
      const stored = await Promise.all(Array.from({ length: n }, (_, i) => ids(`family=Kat&given=Ann${i}`)));
      expect(stored.every((s) => s.length === 1)).toBe(true);
      const res = await ok(tx(Array.from({ length: n }, (_, i) => ({ resource: named('Kat', i), request: { method: 'POST', url: 'Patient', ifNoneExist: `family=Kat&given=Ann${i}` } }))));
      expect(res.entry.map((e: Json) => [e.response.status, e.resource.id])).toEqual(stored.map((s) => ['200 OK', s[0]]));
      // Written earlier in the same Bundle: the conditional create follows the entry that creates its match.
      const written = Array.from({ length: n }, (_, i) => ({ fullUrl: `urn:uuid:00000000-0000-4000-8000-00000000000${i}`, resource: named('Lat', i), request: { method: 'POST', url: 'Patient' } }));
      const after = await ok(tx([...written, { resource: named('Lat', 3), request: { method: 'POST', url: 'Patient', ifNoneExist: 'family=Lat&given=Ann3' } }]));
      expect(after.entry[n].resource.id).toBe(after.entry[3].resource.id);
      expect(await ids('family=Lat&given=Ann3')).toEqual([after.entry[3].resource.id]);
    });

    test('grouped, a condition with two matches is still a 412 naming its entry, and one whose match another entry deletes creates', async () => {
      await ok(tx([
        ...[1, 2].map(() => ({ resource: person('twice', 'male'), request: { method: 'POST', url: 'Patient' } })),
        { resource: person('gone', 'male'), request: { method: 'POST', url: 'Patient' } },
      ], 'batch'));
      const others = Array.from({ length: 30 }, (_, i) => create(person(`o${i}`, 'male'), `identifier=urn:x|o${i}`));
      const outcome = await nothingWritten(tx([...others, create(person('twice', 'male'), 'identifier=urn:x|twice')]), 412);
      expect(outcome.issue[0].expression).toEqual([`Bundle.entry[${others.length}].request.ifNoneExist`]);
      const [gone] = await ids('identifier=urn:x|gone');
      const res = await ok(tx([...others, { request: { method: 'DELETE', url: `Patient/${gone}` } }, create(person('gone', 'male'), 'identifier=urn:x|gone')]));
      expect(res.entry[others.length + 1].response.status).toBe('201 Created');
      expect(await ids('identifier=urn:x|gone')).toEqual([res.entry[others.length + 1].resource.id]);
      // Conditions by name (prefix ranges, searched alone) beside them are answered as before.
      const named = await ok(tx([...others, create({ ...person('named', 'male'), name: [{ family: 'Alpha' }] }, 'family=Alpha'), create({ ...person('named2', 'male'), name: [{ family: 'Beta' }] }, 'family=Beta')]));
      expect(named.entry.slice(-2).map((e: Json) => e.response.status)).toEqual(['201 Created', '201 Created']);
    });
  });
});
