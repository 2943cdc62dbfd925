/**
 * Ids listed beside other conditions, on both databases: each search with an `_id` list (repeated ids, deleted
 * ones, all of a type) answers as the same search without it, filtered to the ids in memory: sorts on dates,
 * strings and `_lastUpdated` (both ways), `next` pages, `_offset`, `_count=0`, `_total=accurate`, `_summary=count`,
 * `_id:not`, `:missing`, `_text`, `_content`, `_has`, `_filter`, chains, compartments, includes, a patient's token and
 * a scope filter, and ids no key holds (quotes, backslashes, commas, braces, `NULL`, NUL). On PostgreSQL the ids
 * drive (src/store/search-sql.ts Dialect.byIds); on SQLite they are an IN list.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, fhirClient, matchesOfAllPages, type FhirClient, type Json } from '../helpers/fhir.ts';

const N = 40;
const pid = (i: number) => `p-${String(i).padStart(3, '0')}`;
const oid = (i: number) => `o-${String(i).padStart(3, '0')}`;
const families = ['Smith', 'Jones', 'Brown', 'Ávila', 'smith'];

await eachStore((kind, fresh) => {
  describe(`_id lists beside other conditions (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const clock = testClock();
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), clock });
      api = fhirClient(t, await craftToken(t, 'system/*.*', { ttl: 86_400 }));
      for (let i = 0; i < N; i++) {
        const p: Json = { resourceType: 'Patient', id: pid(i), gender: i % 2 ? 'male' : 'female', text: { status: 'generated', div: `<div xmlns="http://www.w3.org/1999/xhtml">word${i % 3}</div>` } };
        if (i % 4 !== 0) p.birthDate = `19${String(50 + ((i * 7) % 40)).padStart(2, '0')}-01-01`;
        if (i % 5 !== 0) p.name = [{ family: families[i % families.length], given: [`G${(i * 3) % 11}`] }];
        await api.put200(p);
        clock.advance?.(1000);
      }
      for (let i = 0; i < N; i++) {
        await api.put200({ resourceType: 'Observation', id: oid(i), status: 'final', code: { coding: [{ system: 'http://loinc.org', code: i % 3 ? '1234-5' : '999-9' }] }, subject: { reference: `Patient/${pid(i % 10)}` }, effectiveDateTime: `2020-01-${String(1 + (i % 28)).padStart(2, '0')}` });
      }
      // some updated later (lastUpdated order differs from id order), some deleted
      for (const i of [3, 17, 25]) { clock.advance?.(1000); await api.put200({ resourceType: 'Patient', id: pid(i), gender: 'other', birthDate: '2001-02-03', name: [{ family: 'Zed' }] }); }
      for (const i of [6, 21]) expect((await api.del(`Patient/${pid(i)}`)).status).toBeLessThan(300);
    }, 120_000);
    afterAll(() => t.close());

    const lists = [
      [3, 1, 6, 17, 21, 25, 30, 39, 8, 8, 12, 14, 0, 5].map(pid),
      Array.from({ length: N }, (_, i) => pid(i)).reverse(),
    ];
    const queries = [
      'Patient?_sort=birthdate', 'Patient?_sort=-birthdate,family', 'Patient?_sort=-_lastUpdated', 'Patient?_sort=_lastUpdated',
      'Patient?_sort=family,-given', 'Patient?birthdate=ge1970&_sort=birthdate', 'Patient?name=smith', 'Patient?gender=male&_sort=-_id',
      'Patient?birthdate:missing=true', 'Patient?name:missing=true&_sort=-birthdate', 'Patient?_text=word1', 'Patient?_content=word2',
      'Patient?_has:Observation:subject:code=999-9', 'Patient?_filter=gender eq male or birthdate gt 1980', 'Patient?gender:not=male&_sort=birthdate',
      'Patient?_id:not=p-001,p-003', 'Patient?_lastUpdated=ge2000-01-01', 'Patient?family:exact=Smith,Zed&_sort=family',
    ];
    for (const [li, list] of lists.entries()) {
      for (const q of queries) {
        for (const count of [3, 100]) {
          test(`${q} with list ${li} (_count=${count})`, async () => {
            const all = await matchesOfAllPages(api, `${q}&_count=${count}`);
            const set = new Set(list);
            const expected = all.filter((id) => set.has(id));
            const got = await matchesOfAllPages(api, `${q}&_id=${list.join(',')}&_count=${count}`);
            expect(got).toEqual(expected);
            const counted = await api.search(`${q}&_id=${list.join(',')}&_summary=count`);
            expect(counted.total).toBe(expected.length);
            const acc = await api.search(`${q}&_id=${list.join(',')}&_total=accurate&_count=2`);
            expect(acc.total).toBe(expected.length);
          });
        }
      }
      test(`offset paging, list ${li}`, async () => {
        const all = (await api.search(`Patient?_sort=birthdate&_count=100`)).entry.map((e: Json) => e.resource.id);
        const set = new Set(list);
        const expected = all.filter((id: string) => set.has(id));
        const page = (await api.search(`Patient?_sort=birthdate&_id=${list.join(',')}&_count=3&_offset=2`)).entry?.map((e: Json) => e.resource.id) ?? [];
        expect(page).toEqual(expected.slice(2, 5));
      });
      test(`compartment, list ${li}`, async () => {
        const all = await matchesOfAllPages(api, `Patient/p-001/Observation?_sort=date&_count=2`);
        const ol = Array.from({ length: N }, (_, i) => oid(i)).filter((_, i) => i % 2 === 0);
        const set = new Set(ol);
        const got = await matchesOfAllPages(api, `Patient/p-001/Observation?_sort=date&_count=2&_id=${ol.join(',')}`);
        expect(got).toEqual(all.filter((id) => set.has(id)));
      });
      test(`chain, list ${li}`, async () => {
        const all = await matchesOfAllPages(api, `Observation?subject.name=smith&_sort=-date&_count=4`);
        const ol = Array.from({ length: N }, (_, i) => oid(i)).filter((_, i) => i % 3 !== 1);
        const set = new Set(ol);
        const got = await matchesOfAllPages(api, `Observation?subject.name=smith&_sort=-date&_count=4&_id=${ol.join(',')}`);
        expect(got).toEqual(all.filter((id) => set.has(id)));
      });
    }
    test('_count=0, offsets with a keyset sort, _revinclude, _has and :missing together', async () => {
      const list = [3, 1, 6, 17, 21, 25, 30, 39, 8, 12, 14, 0, 5].map(pid).join(',');
      for (const q of ['Patient?_sort=-_lastUpdated', 'Patient?_sort=birthdate', 'Patient?birthdate=ge1960']) {
        const z = await api.search(`${q}&_id=${list}&_count=0&_total=accurate`);
        const all = await matchesOfAllPages(api, `${q}&_id=${list}&_count=100`);
        expect([z.total, z.entry?.length ?? 0]).toEqual([all.length, 0]);
        const off = await api.search(`${q}&_id=${list}&_count=3&_offset=3`);
        const want = (await api.search(`${q}&_count=100`)).entry.map((e: Json) => e.resource.id).filter((id: string) => list.split(',').includes(id)).slice(3, 6);
        expect(off.entry?.map((e: Json) => e.resource.id) ?? []).toEqual(want);
      }
      const rev = await api.search(`Patient?_id=p-001,p-002,p-006&_revinclude=Observation:subject&_sort=_id`);
      expect(rev.entry.filter((e: Json) => e.search.mode === 'match').map((e: Json) => e.resource.id)).toEqual(['p-001', 'p-002']);
      expect(rev.entry.filter((e: Json) => e.search.mode === 'include').length).toBe(8);
    });
    test('_include on top', async () => {
      const b = await api.search(`Observation?_id=o-001,o-002,o-011&_include=Observation:subject&_sort=-date`);
      expect(b.entry.map((e: Json) => `${e.search.mode}:${e.resource.id}`).sort()).toEqual(['include:p-001', 'include:p-002', 'match:o-001', 'match:o-002', 'match:o-011'].sort());
    });
    test('_filter _id', async () => {
      const got = await matchesOfAllPages(api, `Patient?_filter=${encodeURIComponent('_id eq p-001 or _id eq p-002')}&_id=p-002,p-003`);
      expect(got).toEqual(['p-002']);
    });
    test('odd ids', async () => {
      for (const id of ['a"b', 'a\\b', 'a,b', '{x}', 'NULL', 'a b', "a'b"]) {
        const res = await api.get(`Patient?_id=${encodeURIComponent(id)},p-001`);
        const body = await res.json() as Json;
        expect([200, 400]).toContain(res.status);
        if (res.status === 200) expect((body.entry ?? []).map((e: Json) => e.resource.id)).toEqual(['p-001']);
      }
      const r = await api.get(`Patient?_id=${encodeURIComponent('a\u0000b')}`);
      expect(r.status).toBeLessThan(500);
    });
  });
});

await eachStore((kind, fresh) => {
  describe(`_id lists under a patient's token (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let pat: FhirClient;
    let filtered: FhirClient;
    const clock = testClock();
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), clock });
      api = fhirClient(t, await craftToken(t, 'system/*.*', { ttl: 86_400 }));
      for (let i = 0; i < 10; i++) await api.put200({ resourceType: 'Patient', id: pid(i) });
      for (let i = 0; i < 30; i++) await api.put200({ resourceType: 'Observation', id: oid(i), status: 'final', code: { coding: [{ system: 'http://loinc.org', code: i % 2 ? '1234-5' : '999-9' }] }, subject: { reference: `Patient/${pid(i % 10)}` } });
      pat = fhirClient(t, await craftToken(t, 'patient/*.read', { patient: pid(1), ttl: 86_400 }));
      filtered = fhirClient(t, await craftToken(t, 'system/Observation.rs?code=http://loinc.org|999-9 system/Patient.rs', { ttl: 86_400 }));
    }, 120_000);
    afterAll(() => t.close());
    test('patient token', async () => {
      const all = Array.from({ length: 30 }, (_, i) => oid(i));
      expect(await matchesOfAllPages(pat, `Observation?_id=${all.join(',')}&_count=2`)).toEqual(['o-001', 'o-011', 'o-021']);
      expect((await pat.search(`Observation?_id=${all.join(',')}&_summary=count`)).total).toBe(3);
    });
    test('scope filter', async () => {
      const all = Array.from({ length: 30 }, (_, i) => oid(i));
      const got = await matchesOfAllPages(filtered, `Observation?_id=${all.join(',')}&_count=4`);
      expect(got).toEqual(all.filter((_, i) => i % 2 === 0));
    });
  });
});
