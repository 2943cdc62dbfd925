import { describe, expect, test } from 'bun:test';
import { CodeSystemIndex } from '../../../src/terminology/compile/code-system-index.ts';
import { parseCodeSystem } from '../../../src/terminology/model/code-system.ts';
import { fixtureResources } from '../../helpers/memory-terminology.ts';

async function fixture(id: string): Promise<CodeSystemIndex> {
  const raw = (await fixtureResources('code-systems.json')).find((r) => r.id === id);
  const cs = parseCodeSystem(raw);
  return new CodeSystemIndex({ ...cs, url: cs.url ?? '' });
}

describe('CodeSystemIndex', () => {
  test('builds the hierarchy from nested concepts and parent/child properties', async () => {
    const cs = await fixture('animals-2');
    expect(cs.find('dog')?.parents).toEqual(['mammal']);
    expect(cs.find('mammal')?.children).toEqual(['dog', 'cat', 'whale', 'mammoth', 'platypus']);
    expect(cs.find('platypus')?.parents).toEqual(['mammal']); // parent property
    expect(cs.find('ant')?.parents).toEqual(['insect']); // child property on insect
    expect(cs.find('insect')?.parents).toEqual(['invertebrate']);
    expect(cs.subsumes('animal', 'dog')).toBe(true);
    expect(cs.subsumes('invertebrate', 'ant')).toBe(true);
    expect(cs.subsumes('mammal', 'mammal')).toBe(true);
    expect(cs.subsumes('bird', 'dog')).toBe(false);
    expect(cs.subsumes('dog', 'mammal')).toBe(false);
  });

  test('status flags: notSelectable, inactive property, retired status', async () => {
    const cs = await fixture('animals-2');
    expect(cs.find('animal')?.abstract).toBe(true);
    expect(cs.find('dog')?.abstract).toBe(false);
    expect(cs.find('mammoth')?.inactive).toBe(true);
    expect(cs.find('dodo')).toMatchObject({ inactive: true, status: 'retired' });
    expect(cs.find('cat')?.inactive).toBe(false);
  });

  test('case sensitivity follows caseSensitive', async () => {
    expect((await fixture('animals-2')).find('DOG')).toBeUndefined();
    const twin = await fixture('animals-ci');
    expect(twin.find('dog')?.code).toBe('Dog');
    expect(twin.find('WHALE')?.code).toBe('Whale');
  });

  test('multiple parents and cycles in bad data terminate', () => {
    const cs = new CodeSystemIndex({
      resourceType: 'CodeSystem',
      url: 'urn:x',
      content: 'complete',
      concept: [
        { code: 'a', property: [{ code: 'parent', valueCode: 'c' }] },
        { code: 'b', property: [{ code: 'parent', valueCode: 'a' }] },
        { code: 'c', property: [{ code: 'parent', valueCode: 'b' }] },
        { code: 'd', property: [{ code: 'parent', valueCode: 'a' }, { code: 'parent', valueCode: 'x' }] },
        { code: 'x' },
      ],
    });
    expect(cs.subsumes('b', 'a')).toBe(true);
    expect(cs.subsumes('zzz', 'a')).toBe(false);
    expect(cs.subsumes('x', 'd')).toBe(true);
    expect(cs.subsumes('c', 'd')).toBe(true);
    expect(cs.subsumes('zzz', 'd')).toBe(false);
  });

  /** A deterministic pseudo-random generator (tests must not depend on luck). */
  function lcg(seed: number) {
    let x = seed;
    return (n: number) => (x = (x * 1103515245 + 12345) % 2 ** 31) % n;
  }

  /** Ancestors by definition: the closure of the parent property, computed naively. */
  function ancestorsOf(parents: Map<string, string[]>, code: string): Set<string> {
    const seen = new Set<string>([code]);
    const stack = [code];
    while (stack.length > 0) for (const p of parents.get(stack.pop()!) ?? []) if (!seen.has(p)) (seen.add(p), stack.push(p));
    return seen;
  }

  test.each([
    ['a forest (one parent at most)', 0],
    ['a polyhierarchy (some concepts with two parents)', 0.1],
    ['a forest with a cycle in bad data', -1],
  ] as const)('is-a on %s equals the closure of the parent links', (_, multi) => {
    for (let seed = 1; seed <= 5; seed++) {
      const next = lcg(seed);
      const n = 300;
      const parents = new Map<string, string[]>();
      for (let i = 0; i < n; i++) {
        const list: string[] = [];
        if (i > 0 && next(10) > 0) list.push(`c${next(i)}`);
        if (multi > 0 && i > 1 && next(100) < multi * 100) list.push(`c${next(i)}`);
        parents.set(`c${i}`, [...new Set(list)]);
      }
      if (multi < 0) {
        parents.set('c1', ['c2']);
        parents.set('c2', ['c1']);
      }
      const cs = new CodeSystemIndex({
        resourceType: 'CodeSystem', url: 'urn:gen', content: 'complete',
        concept: [...parents].map(([code, ps]) => ({ code, property: ps.map((p) => ({ code: 'parent', valueCode: p })) })),
      });
      for (let k = 0; k < 2000; k++) {
        const [a, b] = [`c${next(n)}`, `c${next(n)}`];
        expect({ a, b, isA: cs.subsumes(a, b) }).toEqual({ a, b, isA: ancestorsOf(parents, b).has(a) });
      }
      // The predicates a filter makes once (is-a X over every concept; generalizes X) agree with it.
      for (let k = 0; k < 20; k++) {
        const x = cs.find(`c${next(n)}`)!;
        const below = cs.isAOf(x);
        const above = cs.ancestorsOf(x);
        for (const e of cs.entries()) {
          expect({ x: x.code, e: e.code, below: below(e), above: above(e) }).toEqual({
            x: x.code, e: e.code, below: ancestorsOf(parents, e.code).has(x.code), above: ancestorsOf(parents, x.code).has(e.code),
          });
        }
      }
    }
  });

  test('nested concepts form the same tree as parent properties', () => {
    const cs = new CodeSystemIndex({
      resourceType: 'CodeSystem', url: 'urn:nested', content: 'complete',
      concept: [
        { code: 'root', concept: [{ code: 'l', concept: [{ code: 'll' }, { code: 'lr' }] }, { code: 'r', concept: [{ code: 'rl' }] }] },
        { code: 'other', concept: [{ code: 'o1' }] },
      ],
    });
    for (const code of ['root', 'l', 'll', 'lr', 'r', 'rl']) expect(cs.subsumes('root', code)).toBe(true);
    expect(cs.subsumes('l', 'rl')).toBe(false);
    expect(cs.subsumes('r', 'rl')).toBe(true);
    expect(cs.subsumes('ll', 'l')).toBe(false);
    expect(cs.subsumes('root', 'o1')).toBe(false);
    expect(cs.subsumes('other', 'o1')).toBe(true);
  });
});
