import { describe, expect, test } from 'bun:test';
import { CodeSystemIndex } from '../../../src/terminology/compile/code-system-index.ts';
import { checkFilter, compileFilter } from '../../../src/terminology/compile/filters.ts';
import { FhirError } from '../../../src/errors.ts';
import { parseCodeSystem } from '../../../src/terminology/model/code-system.ts';
import { fixtureResources } from '../../helpers/memory-terminology.ts';

const raw = (await fixtureResources('code-systems.json')).find((r) => r.id === 'animals-2');
const parsed = parseCodeSystem(raw);
const cs = new CodeSystemIndex({ ...parsed, url: parsed.url ?? '' });

function codes(property: string, op: string, value?: string): string[] {
  const predicate = compileFilter(checkFilter({ property, op, value }, cs.url, 'f'), cs, 'f');
  return [...cs.entries()].filter(predicate).map((e) => e.code).sort();
}

describe('filter operators (R4 FilterOperator)', () => {
  test('= on concept and on properties', () => {
    expect(codes('concept', '=', 'dog')).toEqual(['dog']);
    expect(codes('habitat', '=', 'sea')).toEqual(['octopus', 'penguin', 'whale']);
    expect(codes('legs', '=', '8')).toEqual(['octopus', 'spider']);
    expect(codes('parent', '=', 'insect')).toEqual(['ant']);
    expect(codes('inactive', '=', 'true')).toEqual(['dodo', 'mammoth']);
  });

  test('is-a, descendent-of, is-not-a, generalizes', () => {
    expect(codes('concept', 'is-a', 'mammal')).toEqual(['cat', 'dog', 'mammal', 'mammoth', 'platypus', 'whale']);
    expect(codes('concept', 'descendent-of', 'mammal')).toEqual(['cat', 'dog', 'mammoth', 'platypus', 'whale']);
    expect(codes('concept', 'is-not-a', 'vertebrate')).toEqual(['animal', 'ant', 'insect', 'invertebrate', 'octopus', 'spider']);
    expect(codes('concept', 'generalizes', 'dog')).toEqual(['animal', 'dog', 'mammal', 'vertebrate']);
  });

  test('in, not-in, regex (whole string), exists', () => {
    expect(codes('concept', 'in', 'dog, cat,nope')).toEqual(['cat', 'dog']);
    expect(codes('code', 'not-in', 'dog,cat').length).toBe(cs.size - 2);
    expect(codes('code', 'regex', 'd[a-z]*')).toEqual(['dodo', 'dog']);
    expect(codes('code', 'regex', 'og')).toEqual([]); // not a substring search
    expect(codes('legs', 'exists', 'false')).toEqual(['animal', 'bird', 'insect', 'invertebrate', 'mammal', 'vertebrate']);
    expect(codes('legs', 'in', '6,8')).toEqual(['ant', 'octopus', 'spider']);
    expect(codes('concept', 'exists', 'true').length).toBe(cs.size);
  });

  test('an unknown operator, a missing value, a bad regex or an unknown property is a 400', () => {
    const attempts: [string, string, string | undefined][] = [
      ['concept', 'sounds-like', 'dog'],
      ['concept', 'is-a', undefined],
      ['concept', 'is-a', ''],
      ['code', 'regex', '(unclosed'],
      ['legs', 'exists', 'maybe'],
      ['colour', '=', 'red'],
    ];
    for (const [property, op, value] of attempts) {
      let error: unknown;
      try {
        codes(property, op, value);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(FhirError);
      expect((error as FhirError).category).toBe('invalid');
    }
  });
});
