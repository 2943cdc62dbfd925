/**
 * valuesMerged (src/fhir/bundle-held-searches.ts): a transaction's searches of one shape, searched again at its
 * commit as one superset, one condition per place with every search's values; none where a place differs otherwise.
 */
import { describe, expect, test } from 'bun:test';
import { valuesMerged } from '../../src/fhir/bundle-held-searches.ts';
import type { Condition } from '../../src/store/types.ts';

const family = (value: string): Condition => ({ kind: 'string', param: 'family', values: [{ value, match: 'prefix' }] });
const given = (value: string): Condition => ({ kind: 'string', param: 'given', values: [{ value, match: 'prefix' }] });
const gender = (code: string, not = false): Condition => ({ kind: 'token', param: 'gender', values: [{ value: code }], ...(not ? { not } : {}) });

describe('valuesMerged', () => {
  test('family and given of each search: one condition per place with all their values, a repeated value once', () => {
    expect(valuesMerged([[family('a'), given('x')], [family('b'), given('y')], [family('a'), given('z')]])).toEqual([
      { kind: 'string', param: 'family', values: [{ value: 'a', match: 'prefix' }, { value: 'b', match: 'prefix' }] },
      { kind: 'string', param: 'given', values: [{ value: 'x', match: 'prefix' }, { value: 'y', match: 'prefix' }, { value: 'z', match: 'prefix' }] },
    ]);
  });

  test('a token whose values merge beside a condition all share', () => {
    const scope: Condition = { kind: 'date', param: 'birthdate', tests: [{ prefix: 'ge', low: 0, high: 1 }] } as unknown as Condition;
    expect(valuesMerged([[scope, gender('male')], [scope, gender('female')]])).toEqual([scope, { kind: 'token', param: 'gender', values: [{ value: 'male' }, { value: 'female' }] }]);
  });

  test('none where the shapes differ: another parameter, another count of conditions, `:not`, a condition that is not shared and does not merge', () => {
    expect(valuesMerged([[family('a')], [given('a')]])).toBeUndefined();
    expect(valuesMerged([[family('a'), given('x')], [family('b')]])).toBeUndefined();
    expect(valuesMerged([[gender('male', true)], [gender('female', true)]])).toBeUndefined();
    const date = (high: number) => ({ kind: 'date', param: 'birthdate', tests: [{ prefix: 'ge', low: 0, high }] }) as unknown as Condition;
    expect(valuesMerged([[date(1), family('a')], [date(2), family('b')]])).toBeUndefined();
    expect(valuesMerged([[], []])).toBeUndefined();
  });
});
