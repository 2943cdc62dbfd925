/**
 * The problems of a batch or transaction Bundle itself (bundle-shell.ts), with true diagnostics: an
 * entry holding a resource but no request is not "empty" (ele-1) nor "without a resource" (bdl-5);
 * it breaks bdl-3 (entry.request is mandatory in a batch or transaction). The invariants R4 states over
 * all entries (bdl-2, bdl-3, bdl-4, bdl-7) name the entry at fault: a batch refuses that entry alone
 * (FHIR R4 http 3.1.0.11.1, "each entry is processed as if it were a separate interaction") and goes
 * on with the others; a transaction writes nothing and says which entry. A problem of the Bundle
 * itself (bdl-1: a total) still fails a batch whole. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { bundlePoster, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const bundle = (type: string, entry: Json[], extra: Json = {}) => ({ resourceType: 'Bundle', type, ...extra, entry });
const post = (resource: Json, fullUrl?: string) => ({ ...(fullUrl ? { fullUrl } : {}), resource, request: { method: 'POST', url: resource.resourceType } });
const patient = (family: string) => ({ resourceType: 'Patient', name: [{ family }] });

/** The issues of an OperationOutcome as `expression: text`. */
const issues = (outcome: Json) => (outcome.issue as Json[]).map((i) => `${i.expression?.join(',')}: ${i.details?.text}`);

await eachStore((kind, fresh) => {
  describe(`batch and transaction Bundles: the entry at fault, truly diagnosed (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const poster = bundlePoster(() => t, () => api);
    const familyCount = async (family: string) => (await api.search(`Patient?family:exact=${family}&_summary=count`)).total as number;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    test('a batch entry with a resource but no request fails alone (400 at its request); the others are processed', async () => {
      const out = await poster.ok(bundle('batch', [{ resource: { resourceType: 'Patient', gender: 'male', name: [{ family: 'NoRequest' }] } }, post(patient('Sent'))]));
      expect(out.entry).toHaveLength(2);
      expect(out.entry[0].response.status).toBe('400 Bad Request');
      expect(issues(out.entry[0].response.outcome)).toEqual([
        'Bundle.entry[0].request: Bundle.entry[0]: request is required: each entry of a batch or transaction says what to do, with request.method and request.url (bdl-3)',
      ]);
      expect(out.entry[1].response.status).toBe('201 Created');
      expect(await familyCount('Sent')).toBe(1);
      expect(await familyCount('NoRequest')).toBe(0);
    });

    test('a batch entry whose request has no url, or no method, fails alone, naming the element', async () => {
      const out = await poster.ok(bundle('batch', [
        { resource: patient('NoUrl'), request: { method: 'POST' } },
        { resource: patient('NoMethod'), request: { url: 'Patient' } },
        post(patient('SentToo')),
      ]));
      expect(out.entry.map((e: Json) => e.response.status)).toEqual(['400 Bad Request', '400 Bad Request', '201 Created']);
      expect(issues(out.entry[0].response.outcome)).toEqual(['Bundle.entry[0].request.url: Bundle.entry[0]: request.url is required']);
      expect(issues(out.entry[1].response.outcome)).toEqual(['Bundle.entry[1].request.method: Bundle.entry[1]: request.method is required']);
      expect(await familyCount('SentToo')).toBe(1);
    });

    test('a transaction with an entry without request writes nothing and names that entry, with no false diagnostics', async () => {
      const outcome = await poster.nothingWritten(bundle('transaction', [{ resource: { resourceType: 'Patient', gender: 'male' } }, post(patient('Never'))]), 400);
      expect(issues(outcome)).toEqual([
        'Bundle.entry[0].request: Bundle.entry[0]: request is required: each entry of a batch or transaction says what to do, with request.method and request.url (bdl-3)',
      ]);
      expect(JSON.stringify(outcome)).not.toMatch(/ele-1|bdl-5/);
    });

    test('Bundle/$validate finds bdl-3 only, as R4 states it (on the Bundle)', async () => {
      const res = await api.post('Bundle/$validate', bundle('batch', [{ resource: { resourceType: 'Patient', gender: 'male' } }, post(patient('Valid'))]));
      expect(res.status).toBe(200);
      const outcome = (await res.json()) as Json;
      expect(outcome.issue.map((i: Json) => i.details.text)).toEqual(['entry.request mandatory for batch/transaction/history, otherwise prohibited (bdl-3)']);
    });

    test('a fullUrl used twice (bdl-7): a batch refuses the second entry alone, a transaction names it', async () => {
      const u = 'urn:uuid:5e1f0c3a-0000-4000-8000-000000000001';
      const out = await poster.ok(bundle('batch', [post(patient('FirstOfTwo'), u), post(patient('SecondOfTwo'), u)]));
      expect(out.entry[0].response.status).toBe('201 Created');
      expect(out.entry[1].response.status).toBe('422 Unprocessable Entity');
      expect(out.entry[1].response.outcome.issue.map((i: Json) => i.expression)).toEqual([['Bundle.entry[1].fullUrl']]);
      expect(out.entry[1].response.outcome.issue[0].details.text).toContain('(bdl-7)');
      expect([await familyCount('FirstOfTwo'), await familyCount('SecondOfTwo')]).toEqual([1, 0]);
      const outcome = await poster.nothingWritten(bundle('transaction', [post(patient('TxFirst'), u), post(patient('TxSecond'), u)]), 422);
      expect(outcome.issue.map((i: Json) => i.expression)).toEqual([['Bundle.entry[1].fullUrl']]);
    });

    test('an entry with a response (bdl-4) or a search (bdl-2) fails alone in a batch, at that element', async () => {
      const out = await poster.ok(bundle('batch', [
        { ...post(patient('WithResponse')), response: { status: '201' } },
        { ...post(patient('WithSearch')), search: { mode: 'match' } },
        post(patient('Plain')),
      ]));
      expect(out.entry.map((e: Json) => e.response.status)).toEqual(['422 Unprocessable Entity', '422 Unprocessable Entity', '201 Created']);
      expect(out.entry[0].response.outcome.issue.map((i: Json) => [i.expression[0], i.details.text.slice(-7)])).toEqual([['Bundle.entry[0].response', '(bdl-4)']]);
      expect(out.entry[1].response.outcome.issue.map((i: Json) => [i.expression[0], i.details.text.slice(-7)])).toEqual([['Bundle.entry[1].search', '(bdl-2)']]);
      expect([await familyCount('WithResponse'), await familyCount('WithSearch'), await familyCount('Plain')]).toEqual([0, 0, 1]);
    });

    test("a problem of the batch Bundle itself (bdl-1) still fails it whole", async () => {
      const outcome = await poster.nothingWritten(bundle('batch', [post(patient('Totalled'))], { total: 1 }), 422);
      expect(outcome.issue.map((i: Json) => [i.expression[0], i.details.text.slice(-7)])).toEqual([['Bundle', '(bdl-1)']]);
    });
  });
});
