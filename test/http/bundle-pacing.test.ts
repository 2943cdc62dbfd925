/**
 * A large transaction lets the process's other requests run while its entries are resolved, validated and
 * checked (src/fhir/turns.ts, in src/fhir/transaction.ts and src/fhir/bundle-ops.ts): each of those steps
 * ran over every entry with nothing but settled awaits, holding the event loop for the whole of them
 * (1-2.5 s for 20,000 entries on two busy cores), and what it answers is unchanged.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { tailHold } from '../helpers/loop.ts';
import type { Json } from '../helpers/fhir.ts';

/** An Observation with many components: its validation costs far more than its entry's shell or its JSON text. */
function observation(i: number, status = 'final'): Json {
  return {
    fullUrl: `urn:uuid:00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    resource: {
      resourceType: 'Observation', status,
      code: { coding: [{ system: 'http://loinc.org', code: '85354-9' }], text: `panel ${i}` },
      subject: { reference: 'urn:uuid:00000000-0000-4000-8000-000000000000' },
      effectiveDateTime: '2020-01-01T00:00:00Z',
      component: Array.from({ length: 12 }, (_, k) => ({
        code: { coding: [{ system: 'http://loinc.org', code: '8480-6', display: 'Systolic' }], text: `c${k}` },
        valueQuantity: { value: 100 + k, unit: 'mm[Hg]', system: 'http://unitsofmeasure.org', code: 'mm[Hg]' },
        interpretation: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation', code: 'N' }] }],
      })),
    },
    request: { method: 'POST', url: 'Observation' },
  };
}

await eachStore((kind, fresh) => {
  describe(`a large transaction and the event loop (${kind})`, () => {
    let t: TestApp;
    let token: string;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
    });
    afterAll(() => t.close());

    test('its entries are validated with turns of the event loop up to its answer; the 422 lists the invalid entry, nothing is written', async () => {
      const n = 3000;
      const entry = [
        { fullUrl: 'urn:uuid:00000000-0000-4000-8000-000000000000', resource: { resourceType: 'Patient', name: [{ family: 'Lee' }] }, request: { method: 'POST', url: 'Patient' } },
        ...Array.from({ length: n }, (_, i) => observation(i + 1, i === n - 1 ? 'bogus' : 'final')),
      ];
      // Encoded before: what the client does is not the server's work.
      const body = new TextEncoder().encode(JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry }));
      const { result: res, took, tail } = await tailHold(() =>
        t.request(t.fhir(), { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' }, body }));
      const outcome = (await res.json()) as Json;
      expect([res.status, outcome.issue.map((i: Json) => i.expression[0])]).toEqual([422, [`Bundle.entry[${n}].resource.status`]]);
      const count = (await (await t.request(`${t.fhir()}/Observation?_summary=count`, { headers: { Authorization: `Bearer ${token}` } })).json()) as Json;
      expect(count.total).toBe(0);
      // Its entries' steps were one hold from the JSON parse to the answer (its tail: 80-100% of its time on two
      // busy cores); paced, the loop turns every 10 ms (WORK_SLICE_MS) up to the invalid entry, and the 422 follows.
      expect({ took: took > 80, tail: tail < took / 4 }).toEqual({ took: true, tail: true });
    });
  });
});
