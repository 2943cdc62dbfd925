/**
 * The GET entries of one batch or transaction answer at most 32 Mi characters of stored resources
 * together, on both databases: a read or search past that is its entry's 400 `too-costly` (a batch of a
 * few hundred `_count=1000` searches grew its response past a gigabyte), and the entries before it are
 * answered as ever. An operation entry's answer (`$everything`) is taken from the same budget.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

/** A Patient of about 12 million characters: twelve strings of a million (the most one string may hold). */
const big = (id: string): Json => ({
  resourceType: 'Patient', id,
  extension: Array.from({ length: 12 }, (_, i) => ({ url: `http://example.org/big-${i}`, valueString: String.fromCharCode(97 + i).repeat(1_000_000) })),
});

await eachStore((kind, fresh) => {
  describe(`the read budget of a Bundle on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200(big('big'));
      await api.put200({ resourceType: 'Patient', id: 'small', gender: 'male' });
    }, 60_000);
    afterAll(() => t.close());

    const post = async (type: 'batch' | 'transaction', urls: string[], writes: Json[] = []): Promise<Json[]> => {
      const res = await api.post('', { resourceType: 'Bundle', type, entry: [...writes, ...urls.map((url) => ({ request: { method: 'GET', url } }))] });
      const body = (await res.json()) as Json;
      expect({ status: res.status, type: body.type }).toEqual({ status: 200, type: `${type}-response` });
      return body.entry;
    };
    const statuses = (entries: Json[]) => entries.map((e) => e.response.status.split(' ')[0]);

    test('a batch: reads and searches past 32 Mi characters together are each a 400 too-costly, the others answered', async () => {
      const entries = await post('batch', ['Patient/big', 'Patient?_id=big', 'Patient/small', 'Patient/big', 'Patient?gender=male', 'Patient?_id=big,small', 'Patient/small/_history']);
      expect(statuses(entries)).toEqual(['200', '200', '200', '400', '400', '400', '400']);
      expect(entries[0].resource.extension).toHaveLength(12);
      expect(entries[2].resource.gender).toBe('male');
      const outcome = entries[3].response.outcome;
      expect(outcome.issue[0].code).toBe('too-costly');
      expect(outcome.issue[0].details.text).toContain("The Bundle's GET entries read more than 33554432 characters of resources together");
      // Each Bundle has a budget of its own.
      expect(statuses(await post('batch', ['Patient/small', 'Patient/big']))).toEqual(['200', '200']);
    }, 60_000);

    test('an operation entry takes its answer from the same budget: past it a 400 too-costly, and the entries after it too', async () => {
      const res = await api.post('', {
        resourceType: 'Bundle', type: 'batch',
        entry: ['Patient/small/$everything', 'Patient/big/$everything', 'Patient/big', 'Patient/big/$everything', 'Patient/small/$everything', 'Patient/small'].map((url) => ({ request: { method: 'GET', url } })),
      });
      expect(res.status).toBe(200);
      const entries = ((await res.json()) as Json).entry as Json[];
      expect(statuses(entries)).toEqual(['200', '200', '200', '400', '400', '400']);
      expect(entries[1].resource.entry[0].resource.extension).toHaveLength(12);
      for (const e of entries.slice(3)) {
        expect(e.response.outcome.issue[0].code).toBe('too-costly');
        expect(e.response.outcome.issue[0].expression).toEqual([`Bundle.entry[${entries.indexOf(e)}]`]);
      }
    }, 60_000);

    test('a transaction: its writes stand, its reads past the budget are each a 400 in their entries', async () => {
      const write = { resource: { resourceType: 'Patient', id: 'written', gender: 'female' }, request: { method: 'PUT', url: 'Patient/written' } };
      const entries = await post('transaction', ['Patient/big', 'Patient/big', 'Patient/big', 'Patient/written'], [write]);
      expect(statuses(entries)).toEqual(['201', '200', '200', '400', '400']);
      expect(((await (await api.get('Patient/written')).json()) as Json).gender).toBe('female');
    }, 60_000);
  });
});
