/**
 * The narrative check (src/fhir/validation/xhtml.ts) costs what the narrative's size does: a start tag of
 * many attributes, or many namespace bindings in scope, is no quadratic work. Each narrative here is a
 * few MB, well within the resource limit, that took half a minute when every attribute was compared with
 * the ones before it (and each value looked for a `<` up to the tag's end), or every element's prefix was
 * looked for through every binding in scope. These check the answers; what the requests cost is measured
 * by bench/hostile-input.ts (docs/PERFORMANCE.md).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';

const XHTML = 'http://www.w3.org/1999/xhtml';

describe('narrative check cost', () => {
  let t: TestApp;
  let token: string;
  /** Creates a Patient with this narrative; the status and the answer. */
  const create = async (div: string) => {
    const res = await t.request(`${t.fhir()}/Patient`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' },
      body: JSON.stringify({ resourceType: 'Patient', text: { status: 'generated', div } }),
    });
    return { status: res.status, body: (await res.json()) as { issue?: { diagnostics: string }[] } };
  };

  beforeAll(async () => {
    t = await createTestApp();
    token = await t.token();
  });
  afterAll(() => t.close());

  test('a start tag of 100,000 namespace declarations: accepted', async () => {
    const decls = Array.from({ length: 100_000 }, (_, i) => `xmlns:p${i}="urn:x"`).join(' ');
    const r = await create(`<div xmlns="${XHTML}"><p ${decls}>x</p></div>`);
    expect(r.status).toBe(201);
  });

  test('an attribute given twice among many is still refused', async () => {
    const decls = Array.from({ length: 100 }, (_, i) => `xmlns:p${i}="urn:x"`).join(' ');
    const r = await create(`<div xmlns="${XHTML}"><p ${decls} xmlns:p50="urn:y">x</p></div>`);
    expect([r.status, r.body.issue?.[0]?.diagnostics]).toEqual([422, expect.stringContaining('has two xmlns:p50 attributes')]);
  });

  test('100,000 elements under 100,000 namespace bindings in scope: accepted', async () => {
    const levels = 2500;
    const open = Array.from({ length: levels }, (_, l) => `<span ${Array.from({ length: 40 }, (_, i) => `xmlns:p${l}_${i}="urn:x"`).join(' ')}>`).join('');
    const r = await create(`<div xmlns="${XHTML}">${open}${'<b>x</b>'.repeat(100_000)}${'</span>'.repeat(levels)}</div>`);
    expect(r.status).toBe(201);
  });

  test('a binding is out of scope once its element closes; an inner one hides an outer one', async () => {
    const gone = await create(`<div xmlns="${XHTML}"><span xmlns:h="${XHTML}">x</span><h:b>y</h:b></div>`);
    expect([gone.status, gone.body.issue?.[0]?.diagnostics]).toEqual([422, expect.stringContaining('the prefix h: is not declared')]);
    const hidden = await create(`<div xmlns="${XHTML}" xmlns:h="${XHTML}"><span xmlns:h="urn:other"><h:b>x</h:b></span></div>`);
    expect([hidden.status, hidden.body.issue?.[0]?.diagnostics]).toEqual([422, expect.stringContaining('is not in the XHTML namespace')]);
    const restored = await create(`<div xmlns="${XHTML}" xmlns:h="${XHTML}"><span xmlns:h="urn:other">x</span><h:b>y</h:b></div>`);
    expect(restored.status).toBe(201);
  });
});
