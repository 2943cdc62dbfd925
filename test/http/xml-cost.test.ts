/**
 * The cost of reading an XML body grows with its size alone (src/fhir/xml/xml-parse.ts): many attributes
 * on one element, or many namespace declarations in scope, are no quadratic work. Each body here is a few
 * MB, well within the resource limit, that took seconds (minutes at the limit) when every attribute was
 * compared with the ones before it, or every element declaring a namespace copied all those in scope.
 * These check the answers; what the requests cost is measured by bench/hostile-input.ts (docs/PERFORMANCE.md).
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

  test('100,000 attributes on one element: a 400 naming the first one not allowed', async () => {
    const attrs = Array.from({ length: 100_000 }, (_, i) => `a${i}=""`).join(' ');
    const res = await post(`<Patient ${NS}><gender ${attrs} value="male"/></Patient>`);
    const body = (await res.json()) as { issue: { diagnostics: string; expression: string[] }[] };
    expect([res.status, body.issue[0]!.diagnostics, body.issue[0]!.expression]).toEqual([400, "Attribute 'a0' is not allowed on Patient.gender", ['Patient.gender']]);
  });

  test('a duplicate attribute among many is still found', async () => {
    const attrs = Array.from({ length: 1000 }, (_, i) => `a${i}=""`).join(' ');
    const res = await post(`<Patient ${NS}><gender ${attrs} a500="" value="male"/></Patient>`);
    const body = (await res.json()) as { issue: { diagnostics: string }[] };
    expect([res.status, body.issue[0]!.diagnostics]).toEqual([400, expect.stringContaining("Attribute 'a500' is given twice")]);
  });

  test('30,000 namespace declarations in scope and 30,000 elements declaring one more: read', async () => {
    const n = 30_000;
    const decls = Array.from({ length: n }, (_, i) => `xmlns:p${i}="urn:x"`).join(' ');
    const given = `<given xmlns:q="urn:y" value="A"/>`.repeat(n);
    const res = await post(`<Patient ${NS} ${decls}><name><family value="Lee"/>${given}</name></Patient>`);
    expect(res.status).toBe(201);
    const created = (await res.json()) as { name: { given: string[] }[] };
    expect(created.name[0]!.given.length).toBe(n);
  });

  test('a prefix declared on an element is out of scope after it, and a redeclared one is restored', async () => {
    const inner = await post(`<Patient ${NS}><gender xmlns:h="urn:h" value="male"/><h:birthDate value="2000-01-01"/></Patient>`);
    expect([inner.status, ((await inner.json()) as { issue: { diagnostics: string }[] }).issue[0]!.diagnostics]).toEqual([400, expect.stringContaining("Prefix 'h' is not declared")]);
    const restored = await post(`<f:Patient xmlns:f="http://hl7.org/fhir"><f:name xmlns:f="urn:other"/><f:gender value="male"/></f:Patient>`);
    expect(restored.status).toBe(400);
    const back = await post(`<f:Patient xmlns:f="http://hl7.org/fhir"><f:name xmlns:f="http://hl7.org/fhir"><f:family value="Lee"/></f:name><f:gender value="male"/></f:Patient>`);
    expect(back.status).toBe(201);
    const other = await post(`<f:Patient xmlns:f="http://hl7.org/fhir"><f:name><g:family xmlns:g="http://hl7.org/fhir" xmlns:f="urn:other" value="Lee"/></f:name><f:gender value="male"/></f:Patient>`);
    expect(other.status).toBe(201);
  });
});
