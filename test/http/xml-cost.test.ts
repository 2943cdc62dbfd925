/**
 * The cost of reading an XML body grows with its size alone (src/fhir/xml/xml-parse.ts): many attributes
 * on one element are no quadratic work. Each body here is a few MB, well within the resource limit, that
 * took seconds (minutes at the limit) when every attribute was compared with the ones before it.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';

const NS = 'xmlns="http://hl7.org/fhir"';

describe('XML body cost', () => {
  let t: TestApp;
  let token: string;
  const post = (body: string) =>
    t.request(`${t.fhir()}/Patient`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+xml', Accept: 'application/fhir+json' }, body });

  beforeAll(async () => {
    t = await createTestApp();
    token = await t.token();
  });
  afterAll(() => t.close());

  test('100,000 attributes on one element: a 400 naming the first one not allowed, in time', async () => {
    const attrs = Array.from({ length: 100_000 }, (_, i) => `a${i}=""`).join(' ');
    const started = performance.now();
    const res = await post(`<Patient ${NS}><gender ${attrs} value="male"/></Patient>`);
    // Blocking work: the test's own timeout cannot interrupt it, so the time is checked here (about 17 s before).
    expect(performance.now() - started).toBeLessThan(3000);
    const body = (await res.json()) as { issue: { diagnostics: string; expression: string[] }[] };
    expect([res.status, body.issue[0]!.diagnostics, body.issue[0]!.expression]).toEqual([400, "Attribute 'a0' is not allowed on Patient.gender", ['Patient.gender']]);
  });

  test('a duplicate attribute among many is still found', async () => {
    const attrs = Array.from({ length: 1000 }, (_, i) => `a${i}=""`).join(' ');
    const res = await post(`<Patient ${NS}><gender ${attrs} a500="" value="male"/></Patient>`);
    const body = (await res.json()) as { issue: { diagnostics: string }[] };
    expect([res.status, body.issue[0]!.diagnostics]).toEqual([400, expect.stringContaining("Attribute 'a500' is given twice")]);
  });
});
