import { describe, expect, test } from 'bun:test';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { diffResources } from '../../../src/fhir/diff/diff.ts';
import { applyFhirPathPatch, parseFhirPathPatch } from '../../../src/fhir/patch/fhirpath-patch.ts';
import { cloneExact, parseExact } from '../../../src/fhir/exact-json.ts';
import { LIST_MUTATIONS, MUTATIONS, mutate, prng } from '../../helpers/mutations.ts';
import { counted } from '../../helpers/counted.ts';

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
        const to = cloneExact(from);
        if (!plan.map((k) => mutate(to, k, random)).some(Boolean)) continue;
        pairs++;
        for (const [a, b] of [[from, to], [to, from]] as const) {
          try {
            const diff = diffResources(a, b, { includeMeta: true });
            const got = apply(a, diff);
            if (!Bun.deepEquals(got, b)) failures.push(`${file} ${plan.join('+')}: result differs`);
            // One item inserted, deleted or moved is one operation, wherever it is in its list; so is one item of a
            // list of primitives left with extensions alone (a replace of that item, not of an element holding it).
            const count = (diff.parameter as unknown[] | undefined)?.length ?? 0;
            const one = [...LIST_MUTATIONS, 'bare-item'].includes(plan[0]!);
            if (plan.length === 1 && one && count !== 1 && !Bun.deepEquals(a, b)) failures.push(`${file} ${plan[0]}: ${count} operations`);
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

describe('diffResources: lists aligned', () => {
  const patient = (given: string[][]) => ({ resourceType: 'Patient', id: 'p', contact: given.map((g) => ({ name: { given: g } })) });
  const types = (diff: Json) => ((diff.parameter ?? []) as Json[]).map((p) => ((p.part as Json[])[0]!.valueCode as string));

  test('random edits of random lists: the diff applies, with no more operations than a comparison by position', () => {
    const random = prng(42);
    const pick = (n: number) => Math.floor(random() * n);
    for (let t = 0; t < 500; t++) {
      const alphabet = 1 + pick(6);
      const a = Array.from({ length: pick(9) }, () => `v${pick(alphabet)}`);
      const b = [...a];
      for (let k = pick(4); k >= 0; k--) {
        const at = pick(b.length + 1);
        if (k % 3 === 0) b.splice(at, 0, `v${pick(alphabet + 2)}`);
        else if (k % 3 === 1) b.splice(at, 1);
        else b.splice(pick(b.length + 1), 0, ...b.splice(at, 1));
      }
      const [from, to] = [patient([a, ['x']].filter((g) => g.length > 0)), patient([b, ['x']].filter((g) => g.length > 0))];
      const diff = diffResources(from, to);
      expect({ a, b, got: apply(from, diff) }).toEqual({ a, b, got: to });
      expect(types(diff).length).toBeLessThanOrEqual(Math.max(a.length, b.length) + 1);
    }
  });

  test('the cells the alignments fill are counted over the whole diff: past them, lists are compared by position', () => {
    const given = Array.from({ length: 1000 }, (_, i) => `g${i}`);
    // The five contacts take 25 cells, each reversed list of 1,000 a million: three are aligned (999 moves each), two compared by position.
    const diff = diffResources(patient([0, 1, 2, 3, 4].map(() => given)), patient([0, 1, 2, 3, 4].map(() => [...given].reverse())));
    expect(types(diff).filter((t) => t === 'move')).toHaveLength(3 * 999);
    expect(types(diff).filter((t) => t === 'replace')).toHaveLength(2 * 1000);
    expect(apply(patient([0, 1, 2, 3, 4].map(() => given)), diff)).toEqual(patient([0, 1, 2, 3, 4].map(() => [...given].reverse())));
  });
});

describe('diffResources: the work of nested lists', () => {
  test('a change under 150 nested items reads about as many members as one under 1: their size, not their size times their depth', () => {
    // A QuestionnaireResponse whose item holds an item ... `depth` deep, the last holding 2,000 answers, of which the last changes.
    const nested = (depth: number, last: string) => {
      let item: Json = { linkId: 'leaf', answer: Array.from({ length: 2_000 }, (_, i) => ({ valueString: i === 1_999 ? last : `answer ${i}` })) };
      for (let d = depth - 1; d > 0; d--) item = { linkId: `l${d}`, item: [item] };
      return { resourceType: 'QuestionnaireResponse', status: 'completed', item: [item] };
    };
    const work = (depth: number) => {
      const reads = { n: 0 };
      const diff = diffResources(counted(nested(depth, 'before'), reads), counted(nested(depth, 'after'), reads));
      expect(diff.parameter).toHaveLength(1);
      expect((diff.parameter as Json[])[0]!.part).toContainEqual({ name: 'path', valueString: `QuestionnaireResponse${'.item[0]'.repeat(depth)}.answer[1999].value` });
      return reads.n;
    };
    const flat = work(1);
    const deep = work(150);
    // Keyed anew at each level, the deep one read about 100 times as many.
    expect(deep).toBeLessThan(2 * flat);
  });
});
