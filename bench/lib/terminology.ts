/**
 * Generated terminology for benchmarks and load tests: an is-a hierarchy of `size` concepts as
 * nested `concept` elements (every concept has `branching` children, breadth first), and a
 * ValueSet selecting the descendants of one concept by an `is-a` filter.
 */
export const BENCH_SYSTEM = 'http://cinder.test/CodeSystem/generated';
export const BENCH_VALUE_SET = 'http://cinder.test/ValueSet/generated-is-a';

interface GeneratedConcept {
  code: string;
  display: string;
  concept?: GeneratedConcept[];
}

/** Concept `i` has children `branching*i+1 .. branching*i+branching` (codes `C<i>`). */
export function generatedCodeSystem(size: number, branching = 10) {
  const nodes: GeneratedConcept[] = Array.from({ length: size }, (_, i) => ({ code: `C${i}`, display: `Generated concept ${i}` }));
  for (let i = 1; i < size; i++) {
    const parent = nodes[Math.floor((i - 1) / branching)] as GeneratedConcept;
    (parent.concept ??= []).push(nodes[i] as GeneratedConcept);
  }
  return {
    resourceType: 'CodeSystem',
    id: 'generated',
    url: BENCH_SYSTEM,
    version: '1',
    name: 'Generated',
    status: 'active',
    content: 'complete',
    caseSensitive: true,
    hierarchyMeaning: 'is-a',
    count: size,
    concept: [nodes[0] as GeneratedConcept],
  };
}

/** The ValueSet of `root` and its descendants. */
export function generatedIsAValueSet(root = 'C1') {
  return {
    resourceType: 'ValueSet',
    id: 'generated-is-a',
    url: BENCH_VALUE_SET,
    status: 'active',
    compose: { include: [{ system: BENCH_SYSTEM, filter: [{ property: 'concept', op: 'is-a', value: root }] }] },
  };
}

/** Whether generated concept `i` descends from (or is) concept `root`. */
export function isDescendant(i: number, root: number, branching = 10): boolean {
  for (let n = i; n >= root; n = Math.floor((n - 1) / branching)) {
    if (n === root) return true;
    if (n === 0) break;
  }
  return false;
}
