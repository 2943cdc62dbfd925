/**
 * Type-level `Patient/$everything` under a token whose Patient reads are narrowed by a SMART v2 scope filter
 * (`user/Patient.rs?gender=female`): the pages hold the everything of the Patients the token may list alone, as
 * `Patient/{id}/$everything` refuses the others (403). A record of a Patient out of the filter's reach is not
 * listed, and a record two patients share comes once, with the first of them the token may list, at every page
 * size: small compartments (one statement for many patients) and a large one (read type by type). Both databases,
 * through app.request().
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, fhirClient, link, type FhirClient, type Json } from '../helpers/fhir.ts';

const code = { text: 'a finding' };
const obs = (id: string, subject: string, performer?: string) => ({
  resourceType: 'Observation', id, status: 'final', code, subject: { reference: `Patient/${subject}` },
  ...(performer && { performer: [{ reference: `Patient/${performer}` }] }),
});
/** `big` has 1,001 Observations: a large compartment, read type by type. */
const BIG = Array.from({ length: 1001 }, (_, i) => `b${String(i).padStart(4, '0')}`);

await eachStore((kind, fresh) => {
  describe(`type-level $everything under a Patient scope filter (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let female: FhirClient;

    /** Every page's matches (`Type/id`), each page `_count` long. */
    const walk = async (client: FhirClient, count: number) => {
      const out: string[] = [];
      let next: string | undefined = `Patient/$everything?_count=${count}`;
      while (next) {
        const b: Json = await client.search(next);
        out.push(...(b.entry ?? []).filter((e: Json) => e.search.mode === 'match').map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`));
        next = link(b, 'next');
      }
      return out;
    };

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      female = fhirClient(t, await craftToken(t, 'user/Patient.rs?gender=female user/Observation.rs'));
      const put = (resource: Json) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
      const entries = [
        put({ resourceType: 'Patient', id: 'a-male', gender: 'male' }),
        put({ resourceType: 'Patient', id: 'big', gender: 'female' }),
        put({ resourceType: 'Patient', id: 'c-female', gender: 'female' }),
        put({ resourceType: 'Patient', id: 'd-male', gender: 'male' }),
        put({ resourceType: 'Patient', id: 'e-female', gender: 'female' }),
        put(obs('only-a', 'a-male')),
        // a-male's and c-female's: the token lists it with c-female, the first of its patients it may list.
        put(obs('shared-ac', 'c-female', 'a-male')),
        put(obs('only-c', 'c-female')),
        put(obs('only-d', 'd-male')),
        put(obs('shared-de', 'e-female', 'd-male')),
        // a-male's and big's: with big, read type by type.
        ...BIG.map((id, i) => put(i === 7 ? obs(id, 'big', 'a-male') : obs(id, 'big'))),
      ];
      for (let i = 0; i < entries.length; i += 250) {
        const res = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: entries.slice(i, i + 250) });
        if (res.status !== 200) throw new Error(await res.text());
      }
    }, 120_000);
    afterAll(() => t.close());

    test('the instance level refuses a Patient out of the filter: the type level lists none of its records', async () => {
      expect((await female.get('Patient/a-male/$everything')).status).toBe(403);
      const expected = [
        'Patient/big', ...BIG.map((id) => `Observation/${id}`),
        'Patient/c-female', 'Observation/only-c', 'Observation/shared-ac',
        'Patient/e-female', 'Observation/shared-de',
      ];
      for (const count of [1000, 3]) expect(await walk(female, count)).toEqual(expected);
      const total: Json = await female.search('Patient/$everything?_count=0');
      expect(total.total).toBe(expected.length);
    }, 120_000);

    test('guard: an unfiltered token lists every patient, each shared record with its first patient', async () => {
      const all = await walk(api, 1000);
      expect(all.slice(0, 3)).toEqual(['Patient/a-male', 'Observation/b0007', 'Observation/only-a']);
      expect(all).toContain('Observation/shared-ac');
      expect(all.indexOf('Observation/shared-de')).toBeLessThan(all.indexOf('Patient/e-female'));
      expect(all.filter((x) => x === 'Observation/shared-ac')).toHaveLength(1);
    }, 120_000);
  });
});
