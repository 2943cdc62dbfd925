import { describe, expect, test } from 'bun:test';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { diffResources } from '../../../src/fhir/diff/diff.ts';
import { applyFhirPathPatch, parseFhirPathPatch } from '../../../src/fhir/patch/fhirpath-patch.ts';
import { parseExact } from '../../../src/fhir/exact-json.ts';
import { MUTATIONS, mutate, prng } from '../../helpers/mutations.ts';

type Json = Record<string, unknown>;
const DIR = join(import.meta.dir, '../../../node_modules/hl7.fhir.r4.examples');

/** Applies `diff` to `from` as a PATCH does. */
function apply(from: Json, diff: Json): Json {
  return applyFhirPathPatch(from, parseFhirPathPatch(diff));
}

describe('diffResources: the diff applied to from gives to', () => {
  const files = readdirSync(DIR).filter((f) => f.endsWith('.json') && !f.startsWith('package')).sort();
  // Every 25th example (but the largest, the whole-R4 Bundles), a few mutations of each kind and a chain of several at once.
  const sample = files.filter((f, i) => i % 25 === 0 && statSync(join(DIR, f)).size < 100_000);
  test(`over ${sample.length} R4 examples, each mutation kind and mixtures`, () => {
    const failures: string[] = [];
    let pairs = 0;
    sample.forEach((file, n) => {
      const from = parseExact(readFileSync(join(DIR, file), 'utf8')) as Json;
      if (typeof from.resourceType !== 'string') return;
      const random = prng(n + 1);
      const plans = [...MUTATIONS.map((k) => [k]), [0, 1, 2, 3].map(() => MUTATIONS[Math.floor(random() * MUTATIONS.length)]!)];
      for (const plan of plans) {
        const to = structuredClone(from);
        if (!plan.map((k) => mutate(to, k, random)).some(Boolean)) continue;
        pairs++;
        for (const [a, b] of [[from, to], [to, from]] as const) {
          try {
            const diff = diffResources(a, b, { includeMeta: true });
            const got = apply(a, diff);
            if (!Bun.deepEquals(got, b)) failures.push(`${file} ${plan.join('+')}: result differs`);
          } catch (err) {
            failures.push(`${file} ${plan.join('+')}: ${(err as Error).message}`);
          }
        }
      }
    });
    expect(failures.slice(0, 10)).toEqual([]);
    expect(pairs).toBeGreaterThan(150);
  });
});
