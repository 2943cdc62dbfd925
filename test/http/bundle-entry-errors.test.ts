/**
 * The errors of a search's parameters inside transaction and batch entries name their entry and the
 * element that holds them (a conditional reference, `request.ifNoneExist`, `request.url`), as the
 * entries' other errors do: never a bare parameter name, on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { bundlePoster, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const bundle = (type: string, entry: Json[]) => ({ resourceType: 'Bundle', type, entry });
const observation = (subject: string) => ({ resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: subject } });
const UNKNOWN = "Search parameter 'foo' is not supported for Patient";

/** Each entry (placed second, after a read), the element its error names, and the error's text. */
const CASES: [Json, string, string][] = [
  [{ resource: observation('Patient?foo=bar'), request: { method: 'POST', url: 'Observation' } }, 'resource.subject', UNKNOWN],
  [{ resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient', ifNoneExist: 'foo=bar' } }, 'request.ifNoneExist', UNKNOWN],
  [{ resource: { resourceType: 'Patient' }, request: { method: 'PUT', url: 'Patient?foo=bar' } }, 'request.url', UNKNOWN],
  [{ request: { method: 'DELETE', url: 'Patient?foo=bar' } }, 'request.url', UNKNOWN],
  [{ request: { method: 'GET', url: 'Patient?birthdate=notadate' } }, 'request.url', "Invalid date value 'notadate' for 'birthdate'"],
  [{ request: { method: 'GET', url: 'Patient/_history?_since=bogus' } }, 'request.url', "Invalid _since 'bogus'"],
];

await eachStore((kind, fresh) => {
  describe(`errors of search parameters in Bundle entries (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const { ok, nothingWritten } = bundlePoster(() => t, () => api);

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    const read = { request: { method: 'GET', url: 'Patient' } };

    test('a transaction is a 400 naming the entry and its element', async () => {
      for (const [entry, element, text] of CASES) {
        const outcome = await nothingWritten(bundle('transaction', [read, entry]), 400);
        expect(outcome.issue.map((i: Json) => i.expression)).toEqual([[`Bundle.entry[1].${element}`]]);
        expect(outcome.issue[0].diagnostics).toStartWith(`Bundle.entry[1]: ${text}`);
      }
    });

    test("a batch answers the entry with that 400, and the others go on", async () => {
      for (const [entry, element, text] of CASES) {
        const res = await ok(bundle('batch', [read, entry]));
        expect(res.entry.map((e: Json) => e.response.status)).toEqual(['200 OK', '400 Bad Request']);
        const issue = res.entry[1].response.outcome.issue[0];
        expect([issue.expression, issue.diagnostics.slice(0, `Bundle.entry[1]: ${text}`.length)]).toEqual([[`Bundle.entry[1].${element}`], `Bundle.entry[1]: ${text}`]);
      }
    });

    test("an element an entry's write names from its type (Subscription.channel.type) is placed under the entry's resource, the type left out", async () => {
      const subscription = { resourceType: 'Subscription', status: 'requested', reason: 'x', criteria: 'Patient?name=x', channel: { type: 'email', endpoint: 'mailto:a@example.org' } };
      const entry = { resource: subscription, request: { method: 'POST', url: 'Subscription' } };
      const outcome = await nothingWritten(bundle('transaction', [read, entry]), 422);
      expect(outcome.issue.map((i: Json) => i.expression)).toEqual([['Bundle.entry[1].resource.channel.type']]);
      const res = await ok(bundle('batch', [read, entry]));
      expect(res.entry[1].response.outcome.issue.map((i: Json) => i.expression)).toEqual([['Bundle.entry[1].resource.channel.type']]);
    });
  });
});
