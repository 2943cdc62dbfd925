/**
 * A string condition of many prefixes (`given=a,b,...`), on both databases: on both it drives as a join on the list of
 * its ranges (Dialect.rangeList: a JSON list on SQLite, unnested arrays on PostgreSQL), which must find what the `or` of them found, each resource once (overlapping
 * prefixes, several names of one resource), counted once in `_total`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, searchIds, type FhirClient } from '../helpers/fhir.ts';

await eachStore((kind, fresh) => {
  describe(`a string condition of many prefixes (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const made = new Map<string, string>();

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      const people: [string, string[]][] = [
        ['ann', ['Ann']], ['anna', ['Anna', 'Marie']], ['bo', ['Bo', 'Bob']], ['carl', ['Carl']], ['dora', ['Dora']],
        ['eve', ['Eve']], ['fay', ['Fay']], ['gus', ['Gus']], ['hal', ['Hal']], ['ivy', ['Ivy']], ['zed', ['Zed']], ['ünal', ['Ünal']],
      ];
      for (const [key, given] of people) made.set(key, (await api.create({ resourceType: 'Patient', name: [{ family: 'Ranges', given }] })).id);
    });
    afterAll(() => t.close());

    const expected = (...keys: string[]) => keys.map((k) => made.get(k)!).sort();

    test('each resource whose value starts with one of the prefixes is found once, alone or beside another condition; _total counts it once', async () => {
      // Overlapping prefixes (a, an, ann), a resource of two matching names (Bo, Bob), accents folded (unal).
      const given = 'a,an,ann,bo,b,c,d,e,f,g,unal,x';
      const all = expected('ann', 'anna', 'bo', 'carl', 'dora', 'eve', 'fay', 'gus', 'ünal');
      expect(await searchIds(api, `Patient?given=${given}&_count=100`)).toEqual(all);
      expect(await searchIds(api, `Patient?given=${given}&family=Ranges&_count=100`)).toEqual(all);
      const page = (await api.search(`Patient?given=${given}&_total=accurate&_count=3`)) as { total: number; entry: unknown[] };
      expect([page.total, page.entry.length]).toEqual([all.length, 3]);
      const counted = (await api.search(`Patient?given=${given}&_summary=count`)) as { total: number };
      expect(counted.total).toBe(all.length);
      expect(await searchIds(api, 'Patient?given=m,n,o,p,q,r,s,t&_count=100')).toEqual(expected('anna'));
    });
  });
});
