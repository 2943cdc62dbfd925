/**
 * validateInParts against one validation of the whole (validateResource) on broken resources: every R4 example with
 * an array of elements, mutated by a seeded generator (elements dropped, given values of other types, emptied or
 * repeated arrays, unknown elements, element ids given again, references to contained resources that may not
 * exist), validated two items at a time, at both levels, at the top and as a transaction entry's resource (`at`,
 * with a fullUrl): the same issues in the same order. The examples as published are compared in
 * validation-parts.test.ts; these reach the issues that valid resources never raise.
 */
import { expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { partedMember, validateInParts } from '../../src/fhir/validation/parts.ts';
import { validateResource } from '../../src/fhir/validation/validate.ts';
import { prng } from '../helpers/prng.ts';

type Json = Record<string, unknown>;

test('mutated R4 examples validated two items at a time: the issues of one validation of the whole, in its order', async () => {
  const random = prng(20261201);
  const pick = <T>(a: readonly T[]): T => a[Math.floor(random() * a.length)]!;
  const mutate = (v: unknown): unknown => {
    if (Array.isArray(v)) {
      const a = v.map(mutate);
      if (random() < 0.05 && a.length) a.push(a[0]);
      return random() < 0.03 ? [] : a;
    }
    if (v !== null && typeof v === 'object') {
      const o: Json = {};
      for (const [k, x] of Object.entries(v)) {
        const r = random();
        if (k === 'resourceType') o[k] = x;
        else if (r < 0.04) continue;
        else o[k] = r < 0.07 ? pick([3, 'x', true, null, {}, [], ' y ', '']) : mutate(x);
      }
      if (random() < 0.03) o.bogus = 1;
      if (random() < 0.03) o.id = pick(['a', 'b']);
      if (random() < 0.02) o.extension = [{ url: 'http://example.org/e', valueReference: { reference: pick(['#a', '#x']) } }];
      return o;
    }
    return typeof v === 'string' && random() < 0.03 ? pick(['', ' ', '2020-13-01', 'xxx']) : v;
  };
  const examples = new URL('../../node_modules/hl7.fhir.r4.examples/', import.meta.url);
  let parted = 0;
  let issues = 0;
  for (const file of readdirSync(examples).sort()) {
    if (!file.endsWith('.json') || file === 'package.json' || file.startsWith('.')) continue;
    const example = JSON.parse(readFileSync(new URL(file, examples), 'utf8')) as Json;
    if (typeof example.resourceType !== 'string' || example.resourceType === 'Bundle') continue;
    for (let k = 0; k < 2; k++) {
      const r = mutate(example) as Json;
      const member = partedMember(r, 2);
      if (member === undefined) continue;
      parted++;
      const at = k === 1 ? 'Bundle.entry[3].resource' : undefined;
      const options = { inEntryWithFullUrl: k === 1 };
      for (const level of ['strict', 'structural'] as const) {
        const want = validateResource(r, level, at, options);
        issues += want.length;
        const got = await validateInParts(r, member, level, { at, options, pace: () => undefined, partItems: 2 });
        expect([file, level, at, got]).toEqual([file, level, at, want]);
      }
    }
  }
  // Most examples with an array reach the parts, and the mutations give issues to compare.
  expect(parted).toBeGreaterThan(2000);
  expect(issues).toBeGreaterThan(10_000);
}, 300_000);
