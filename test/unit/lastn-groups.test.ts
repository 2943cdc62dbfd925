/** `$lastn`'s groups (R4 observation-operation-lastn.html's table): codings one Observation holds together are one group. */
import { expect, test } from 'bun:test';
import { groupsOf } from '../../src/fhir/lastn.ts';

/** The pairs codingPairs gives for Observations of these codings (system `s`). */
const pairsOf = (observations: string[][]) => [...new Set(observations.flatMap((codes) => codes.flatMap((a) => codes.map((b) => `${a} ${b}`))))]
  .map((p) => p.split(' ')).map(([a, b]) => ({ system1: 's', value1: a!, system2: 's', value2: b! }));

test('R4\'s examples: a|b|c is three groups, a|b|a,c two, a|b|a,b one; joins are transitive', () => {
  expect(groupsOf(pairsOf([['a'], ['b'], ['c']]))).toEqual([['s|a'], ['s|b'], ['s|c']]);
  expect(groupsOf(pairsOf([['a'], ['b'], ['a', 'c']]))).toEqual([['s|a', 's|c'], ['s|b']]);
  expect(groupsOf(pairsOf([['a'], ['b'], ['a', 'b']]))).toEqual([['s|a', 's|b']]);
  expect(groupsOf(pairsOf([['d', 'c'], ['b', 'a'], ['c', 'b'], ['x']]))).toEqual([['s|a', 's|b', 's|c', 's|d'], ['s|x']]);
});

test('the same code in two systems is two codes; search\'s special characters are escaped', () => {
  expect(groupsOf([{ system1: 'http://a', value1: '1', system2: 'http://a', value2: '1' }, { system1: 'http://b', value1: '1', system2: 'http://b', value2: '1' }]))
    .toEqual([['http://a|1'], ['http://b|1']]);
  expect(groupsOf([{ system1: 'urn:x', value1: 'a,b|c$d\\e', system2: 'urn:x', value2: 'a,b|c$d\\e' }])).toEqual([['urn:x|a\\,b\\|c\\$d\\\\e']]);
});
