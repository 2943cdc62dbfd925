/**
 * A transaction's conditional references (`Patient?identifier=...` in its resources) of one type and shape are searched
 * together (bundle-conditional.ts resolveConditionalReferences, through bundle-condition-answers.ts), on both databases:
 * each reference gets the answer its own search gives (its one match; none: 412; several: 412; a type without an
 * endpoint: 400), beside the resources the transaction writes or replaces, and the planning reads the store in a few
 * statements, not one per distinct condition.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { bundlePoster, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const person = (mrn: string, extra: Json = {}): Json => ({ resourceType: 'Patient', identifier: [{ system: 'urn:mrn', value: mrn }], ...extra });
const named = (family: string, given: string): Json => ({ resourceType: 'Patient', name: [{ family, given: [given] }] });
const observation = (subject: string, performer?: string): Json => ({
  resourceType: 'Observation', status: 'final', code: { text: 'weight' }, subject: { reference: subject }, ...(performer ? { performer: [{ reference: performer }] } : {}),
});
const post = (resource: Json, fullUrl?: string) => ({ ...(fullUrl ? { fullUrl } : {}), resource, request: { method: 'POST', url: resource.resourceType } });
const tx = (entry: Json[], type = 'transaction') => ({ resourceType: 'Bundle', type, entry });

await eachStore((kind, fresh) => {
  describe(`a transaction's conditional references searched together (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let searches = 0;
    const { ok, nothingWritten } = bundlePoster(() => t, () => api);
    const idOf = async (query: string) => {
      const found = ((await api.search(query)).entry ?? []).map((e: Json) => e.resource.id as string);
      expect([query, found.length]).toEqual([query, 1]);
      return found[0] as string;
    };

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
      const seeded: Json[] = [];
      for (let i = 0; i < 40; i++) seeded.push(post(person(`r${i}`)), post(named(`Fam${i % 7}`, `Giv${i}x`)));
      // The same given name under another family, which the merged statement reads and no reference matches.
      for (let i = 0; i < 40; i++) seeded.push(post({ ...named(`Fam${(i + 1) % 7}`, `Giv${i}x`), active: false }));
      seeded.push(post(person('twin')), post(person('twin')));
      seeded.push(post({ resourceType: 'Practitioner', identifier: [{ system: 'urn:npi', value: 'doc1' }] }));
      await ok(tx(seeded, 'batch'));
    });
    afterAll(() => t.close());

    test('references by identifier each find their own match, in a few statements', async () => {
      const n = 40;
      const entries = Array.from({ length: n }, (_, i) => post(observation(`Patient?identifier=urn:mrn|r${i}`, 'Practitioner?identifier=urn:npi|doc1')));
      const expected = await Promise.all(Array.from({ length: n }, (_, i) => idOf(`Patient?identifier=urn:mrn|r${i}`)));
      const doctor = await idOf('Practitioner?identifier=urn:npi|doc1');
      searches = 0;
      const res = await ok(tx(entries));
      const planned = searches;
      expect(res.entry.map((e: Json) => e.resource.subject.reference)).toEqual(expected.map((id) => `Patient/${id}`));
      expect(res.entry.every((e: Json) => e.resource.performer[0].reference === `Practitioner/${doctor}`)).toBe(true);
      // One statement per distinct condition was 41 at the planning alone (and a few more at the commit's checks).
      expect(planned).toBeLessThan(n / 2);
    });

    test('references by family and given each find their own match beside the same given name under another family', async () => {
      const n = 30;
      const query = (i: number) => `Patient?family=Fam${i % 7}&given=Giv${i}x`;
      const expected = await Promise.all(Array.from({ length: n }, (_, i) => idOf(query(i))));
      const res = await ok(tx(Array.from({ length: n }, (_, i) => post(observation(query(i))))));
      expect(res.entry.map((e: Json) => e.resource.subject.reference)).toEqual(expected.map((id) => `Patient/${id}`));
    });

    test('among references searched together, one of several matches is 412, one of none is 412, one of a type without an endpoint is 400; nothing is written', async () => {
      const many = (bad: string) => [...Array.from({ length: 10 }, (_, i) => post(observation(`Patient?identifier=urn:mrn|r${i}`))), post(observation(bad))];
      const twin = await nothingWritten(tx(many('Patient?identifier=urn:mrn|twin')), 412);
      expect(twin.issue[0].expression).toEqual(['Bundle.entry[10].resource.subject']);
      expect(twin.issue[0].diagnostics).toContain('matches more than one resource');
      const none = await nothingWritten(tx(many('Patient?identifier=urn:mrn|nobody')), 412);
      expect(none.issue[0].expression).toEqual(['Bundle.entry[10].resource.subject']);
      expect(none.issue[0].diagnostics).toContain('matches nothing');
      const bad = await nothingWritten(tx(many('Parameters?identifier=urn:mrn|r1')), 400);
      expect(bad.issue[0].expression).toEqual(['Bundle.entry[10].resource.subject']);
    });

    test("the transaction's own writes count: a match it creates is one more (412), a match it replaces by another identifier none (412), a match it creates alone is the one", async () => {
      const r3 = await idOf('Patient?identifier=urn:mrn|r3');
      const refs = (target: string) => Array.from({ length: 10 }, (_, i) => post(observation(i === 9 ? target : `Patient?identifier=urn:mrn|r${10 + i}`)));
      const created = await nothingWritten(tx([...refs('Patient?identifier=urn:mrn|r2'), post(person('r2'))]), 412);
      expect(created.issue[0].expression).toEqual(['Bundle.entry[9].resource.subject']);
      const replaced = await nothingWritten(tx([...refs('Patient?identifier=urn:mrn|r3'), { resource: { ...person('r3-new'), id: r3 }, request: { method: 'PUT', url: `Patient/${r3}` } }]), 412);
      expect(replaced.issue[0].expression).toEqual(['Bundle.entry[9].resource.subject']);
      const res = await ok(tx([...refs('Patient?identifier=urn:mrn|fresh'), post(person('fresh'), 'urn:uuid:8f9e6c1e-4c36-4a8e-9d38-0f3c1a2b7d10')]));
      expect(res.entry[9].resource.subject.reference).toBe(`Patient/${res.entry[10].resource.id}`);
    });
  });
});
