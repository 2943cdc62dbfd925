/**
 * An R4 invariant whose evaluation fails (FHIRPath's run-time error) does not hold: it is reported at its severity,
 * as HL7's validator reports an invariant that throws, where it held before (the resource then went without its
 * word). On writes and in `$validate`, on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const issues = (outcome: Json, key: string) => (outcome.issue as Json[]).filter((i) => String(i.details?.text).endsWith(`(${key})`)).map((i) => `${i.severity} ${i.expression?.[0]}: ${i.details.text}`);

await eachStore((kind, fresh) => {
  describe(`R4 invariants that cannot be evaluated (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    test('per-1 on a Period whose end is no date: reported as an error naming the invariant (it held, and was not said)', async () => {
      const encounter = {
        resourceType: 'Encounter', status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
        period: { start: '2023-06-21', end: 5 },
      };
      const outcome = await expectOutcome(await api.post('Encounter', encounter), 422);
      expect(issues(outcome, 'per-1')).toEqual([expect.stringMatching(/^error Encounter\.period: .*\(the invariant cannot be evaluated here: cannot compare string with number as dates or times\) \(per-1\)$/)]);
      const validated = (await (await api.post('Encounter/$validate', encounter)).json()) as Json;
      expect(issues(validated, 'per-1')).toEqual(issues(outcome, 'per-1'));
      expect(await countVersions(t)).toBe(0);
    });

    test("a warning invariant that cannot be evaluated is a warning (vsd-0 on a ValueSet's name that is no string)", async () => {
      const valueSet = { resourceType: 'ValueSet', status: 'draft', url: 'http://example.org/vs', name: 5 };
      const validated = (await (await api.post('ValueSet/$validate', valueSet)).json()) as Json;
      expect(issues(validated, 'vsd-0')).toEqual([expect.stringMatching(/^warning ValueSet: .*\(the invariant cannot be evaluated here: a string was expected\) \(vsd-0\)$/)]);
    });
  });
});
