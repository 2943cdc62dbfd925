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
});
