/**
 * ContactPoint token values (telecom, phone, email): R4's token table gives a ContactPoint no system
 * (search.html: code = ContactPoint.value; `|code` is "no system"), so `|value` finds it whatever its
 * `system`; `system|value` with its ContactPoint.system (`phone|555-1234`) still finds it, as HAPI FHIR
 * indexes it (a documented extension); `:not` and `_filter` agree. Both databases, SQL and in memory.
 */
import { afterAll, beforeAll, describe, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectBothWays, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const DATA: Json[] = [
  { resourceType: 'Patient', id: 'mail', telecom: [{ system: 'email', value: 'a@b.org' }] },
  { resourceType: 'Patient', id: 'tel', telecom: [{ system: 'phone', value: '555-1234' }] },
  { resourceType: 'Patient', id: 'bare', telecom: [{ system: 'other', value: '999' }] },
  { resourceType: 'Patient', id: 'none', gender: 'other' },
];

const q = (s: string) => s.replace(/\|/g, '%7C').replace(/@/g, '%40');
const CASES: [string, string[]][] = [
  [q('email=|a@b.org'), ['mail']],
  [q('telecom=|a@b.org'), ['mail']],
  [q('telecom=|555-1234'), ['tel']],
  [q('phone=|555-1234'), ['tel']],
  [q('email=|555-1234'), []],
  [q('telecom=555-1234'), ['tel']],
  [q('telecom=phone|555-1234'), ['tel']],
  [q('telecom=email|555-1234'), []],
  [q('telecom=|999'), ['bare']],
  [q('telecom=phone|999'), []],
  [q('phone:not=|555-1234'), ['bare', 'mail', 'none']],
  [q('telecom:not=|a@b.org,|999'), ['none', 'tel']],
  [`_filter=${encodeURIComponent('telecom eq |555-1234')}`, ['tel']],
  [`_filter=${encodeURIComponent('telecom ne |555-1234')}`, ['bare', 'mail']],
];

await eachStore((kind, fresh) => {
  describe(`ContactPoint tokens on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const r of DATA) await api.put200(r);
    });
    afterAll(() => t.close());

    test('|value finds a ContactPoint whatever its system; system|value with its system too; in SQL and in memory', async () => {
      for (const [query, expected] of CASES) {
        await expectBothWays(t, api, 'Patient', query, DATA.map((r) => r.id as string), expected);
      }
    });
  });
});
