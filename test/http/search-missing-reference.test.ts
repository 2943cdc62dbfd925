/**
 * `:missing` on a reference parameter (search.html: `:missing=true` is "no value for the parameter"): a
 * reference by identifier alone is a value of a parameter whose paths name no type, as `:identifier`
 * finds it; of one restricted to a type (`patient`: `subject.where(resolve() is Patient)`) it is not,
 * whatever its `Reference.type` (it resolves to nothing, and the rows keep no type). Both databases, in
 * SQL and in the in-memory matcher.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectBothWays, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const MRN = 'http://ex.org/mrn';
const encounter = (id: string, extra: Json = {}): Json => ({
  resourceType: 'Encounter', id, status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' }, ...extra,
});

const DATA: Json[] = [
  encounter('byid', { subject: { identifier: { system: MRN, value: '42' } } }),
  encounter('typed', { subject: { type: 'Patient', identifier: { system: MRN, value: '43' } } }),
  encounter('literal', { subject: { reference: 'Patient/p1' } }),
  encounter('group', { subject: { reference: 'Group/g1' } }),
  encounter('none'),
];

const CASES: [string, string[]][] = [
  ['subject:missing=true', ['none']],
  ['subject:missing=false', ['byid', 'group', 'literal', 'typed']],
  [`subject:identifier=${encodeURIComponent(`${MRN}|42`)}`, ['byid']],
  ['patient:missing=true', ['byid', 'group', 'none', 'typed']],
  ['patient:missing=false', ['literal']],
  [`_filter=${encodeURIComponent('subject pr true')}`, ['byid', 'group', 'literal', 'typed']],
];

await eachStore((kind, fresh) => {
  describe(`:missing on a reference on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Patient', id: 'p1' });
      await api.put200({ resourceType: 'Group', id: 'g1', type: 'person', actual: true });
      for (const r of DATA) await api.put200(r);
    });
    afterAll(() => t.close());

    test('a reference by identifier alone is a value where the parameter names no type, in SQL and in memory', async () => {
      for (const [query, expected] of CASES) {
        await expectBothWays(t, api, 'Encounter', query, DATA.map((r) => r.id as string), expected);
      }
      expect(((await api.search('Encounter?subject:missing=true&_summary=count')) as Json).total).toBe(1);
    });
  });
});
