/**
 * Values longer than the database indexes: PostgreSQL's B-tree entries hold at most 2,704 bytes, so a
 * token, reference or uri value of more than 2,000 bytes that does not compress would fail its write.
 * Such a write is a 422 `too-long` naming the parameter, before anything is written (a transaction
 * entirely, a batch that entry alone); SQLite has no bound and stores and finds it. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, expectOutcome, type Json } from '../helpers/fhir.ts';

/** `n` pseudo-random lower-case letters: text that does not compress. */
function letters(n: number, seed = 11): string {
  let s = seed;
  return Array.from({ length: n }, () => String.fromCharCode(97 + ((s = (s * 1103515245 + 12345) & 0x7fffffff) % 26))).join('');
}

await eachStore((kind, fresh) => {
  describe(`index limits (${kind})`, () => {
    let t: TestApp;
    let token: string;
    let fhir: string;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      fhir = t.fhir();
    });
    afterAll(() => t.close());

    const post = (body: unknown, path = '') => t.request(`${fhir}${path}`, fhirInit(token, 'POST', body));
    const found = async (query: string) => (((await (await t.request(`${fhir}/${query}`, fhirInit(token))).json()) as Json).entry ?? []).length;

    test('a value of 2,000 bytes is stored and found on both databases', async () => {
      const value = letters(2000);
      expect((await post({ resourceType: 'Patient', identifier: [{ system: 'http://example.org/mrn', value }] }, '/Patient')).status).toBe(201);
      expect(await found(`Patient?identifier=http://example.org/mrn|${value}`)).toBe(1);
    });

    test('a longer one: PostgreSQL refuses the write with 422 too-long naming the parameter; SQLite stores and finds it', async () => {
      const cases: [string, Json, string][] = [
        ['Patient.identifier', { resourceType: 'Patient', identifier: [{ system: 'http://example.org/mrn', value: letters(2001, 1) }] }, `Patient?identifier=http://example.org/mrn|${letters(2001, 1)}`],
        ['Patient.identifier', { resourceType: 'Patient', identifier: [{ system: `http://example.org/${letters(2100, 2)}`, value: 'v' }] }, `Patient?identifier=http://example.org/${letters(2100, 2)}|v`],
        ['Observation.code', { resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'http://example.org/cs', code: letters(3000, 3) }] } }, `Observation?code=http://example.org/cs|${letters(3000, 3)}`],
        ['Observation.subject', { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: `http://example.org/fhir/Patient/${letters(2100, 4)}` } }, `Observation?subject=http://example.org/fhir/Patient/${letters(2100, 4)}`],
        ['ValueSet.url', { resourceType: 'ValueSet', status: 'active', url: `http://example.org/${letters(2100, 5)}` }, `ValueSet?url=http://example.org/${letters(2100, 5)}`],
        ['Patient._tag', { resourceType: 'Patient', meta: { tag: [{ system: 'http://example.org/tags', code: letters(2100, 6) }] } }, `Patient?_tag=http://example.org/tags|${letters(2100, 6)}`],
      ];
      for (const [param, resource, query] of cases) {
        const before = await countVersions(t);
        const res = await post(resource, `/${resource.resourceType}`);
        if (kind === 'postgres') {
          const issue = (await expectOutcome(res, 422, 'too-long')).issue[0] as Json;
          expect(issue.diagnostics).toMatch(new RegExp(`^A value of the search parameter ${param.replace('.', '\\.')} is \\d+ bytes long; the database indexes at most 2000$`));
          expect(await countVersions(t)).toBe(before);
        } else {
          expect(res.status).toBe(201);
          expect(await found(query)).toBe(1);
        }
      }
    });

    test('in a transaction nothing is written; in a batch that entry alone fails', async () => {
      const long = { resourceType: 'Patient', identifier: [{ system: 'http://example.org/mrn', value: letters(2500, 7) }] };
      const short = { resourceType: 'Patient', identifier: [{ system: 'http://example.org/mrn', value: 'batch-short' }] };
      const entries = [{ resource: short, request: { method: 'POST', url: 'Patient' } }, { resource: long, request: { method: 'POST', url: 'Patient' } }];
      const before = await countVersions(t);
      const transaction = await post({ resourceType: 'Bundle', type: 'transaction', entry: entries });
      if (kind === 'postgres') {
        await expectOutcome(transaction, 422, 'too-long');
        expect(await countVersions(t)).toBe(before);
      } else expect(transaction.status).toBe(200);
      const batch = await post({ resourceType: 'Bundle', type: 'batch', entry: entries });
      const statuses = (((await batch.json()) as Json).entry as Json[]).map((e) => e.response.status);
      expect(statuses).toEqual(['201 Created', kind === 'postgres' ? '422' : '201 Created']);
    });
  });
});
