/**
 * `Patient/$match` of a Patient of many values (src/fhir/match-score.ts FACTS_PER_FIELD): each candidate
 * is compared with the first 50 values of each field, a warning saying what was left out, so that 40,000
 * names and identifiers against 100 candidates are no 3 s of scoring (no minute against thousands); on
 * both databases. What the request costs is measured by bench/hostile-input.ts (docs/PERFORMANCE.md).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const CANDIDATES = 100;

await eachStore((kind, fresh) => {
  describe(`Patient/$match cost (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      const entry = Array.from({ length: CANDIDATES }, (_, n) => ({
        resource: { resourceType: 'Patient', name: [{ family: 'Lee', given: ['Ann'] }], birthDate: '1970-01-01', identifier: Array.from({ length: 20 }, (_, i) => ({ system: `urn:s${i}`, value: `w${n}-${i}` })) },
        request: { method: 'POST', url: 'Patient' },
      }));
      expect((await api.post('', { resourceType: 'Bundle', type: 'batch', entry })).status).toBe(200);
    });
    afterAll(() => t.close());

    test('40,000 names and identifiers: the first 50 of each compared, a warning', async () => {
      const n = 40_000;
      const patient = {
        resourceType: 'Patient', birthDate: '1970-01-01',
        name: Array.from({ length: n }, (_, i) => ({ family: i === 0 ? 'Lee' : `Fam${i}`, given: [i === 0 ? 'Ann' : `G${i}`] })),
        identifier: Array.from({ length: n }, (_, i) => ({ system: `urn:s${i}`, value: `v${i}` })),
      };
      const res = await api.post('Patient/$match', { resourceType: 'Parameters', parameter: [{ name: 'resource', resource: patient }, { name: 'count', valueInteger: 100 }] });
      const bundle = (await res.json()) as Json;
      expect(res.status).toBe(200);
      const warnings = bundle.entry.filter((e: Json) => e.search.mode === 'outcome').flatMap((e: Json) => e.resource.issue);
      expect(warnings).toContainEqual(expect.objectContaining({ severity: 'warning', code: 'too-costly', diagnostics: expect.stringContaining('more than 50 values of identifier, family, given') }));
      // Family name and birth date agree with every candidate; their identifiers' systems conflict.
      expect(bundle.entry.filter((e: Json) => e.search.mode === 'match').length).toBe(CANDIDATES);
    });
  });
});
