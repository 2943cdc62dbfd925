import { describe, expect, test } from 'bun:test';
import { specOf } from '../../src/store/index-tables.ts';
import { batchKeys, createKeyCache, entryKey, keyName, MAX_CACHED_KEYS, memoizedKeyOf } from '../../src/store/search-keys.ts';
import { NO_INDEX_ROWS, type SharedKey } from '../../src/store/types.ts';

describe('search keys', () => {
  test("an entry's key: the token's system, the quantity's unit system and code, '' where a part does not apply", () => {
    expect(entryKey(specOf('tokens'), 't', 'Observation', { param: 'code', system: 'http://loinc.org', value: '1-8' }))
      .toEqual({ tenant: 't', type: 'Observation', param: 'code', system: 'http://loinc.org', code: '' });
    expect(entryKey(specOf('ranges'), 't', 'Observation', { param: 'value-quantity', system: 'http://unitsofmeasure.org', code: 'mg', low: 1, high: 1 }))
      .toEqual({ tenant: 't', type: 'Observation', param: 'value-quantity', system: 'http://unitsofmeasure.org', code: 'mg' });
    expect(entryKey(specOf('composites'), 't', 'Observation', { param: 'c', system1: 's', value1: 'v', system2: 'u', value2: 'mg', low: 1, high: 1 }))
      .toEqual({ tenant: 't', type: 'Observation', param: 'c', system: '', code: '' });
  });

  test('names: parts that join into the same text are different keys', () => {
    const key = (param: string, system: string, code = '') => keyName({ tenant: 't', type: 'Patient', param, system, code });
    const names = [key('ab', 'c'), key('a', 'bc'), key('a', 'b', 'c'), key('a', '', 'bc'), key('abc', '')];
    expect(new Set(names).size).toBe(names.length);
  });

  test('a batch names each key once, with its k when the cache holds it', () => {
    const cache = createKeyCache();
    const known = { tenant: 't', type: 'Patient', param: 'identifier', system: 'a', code: '' };
    cache.set(keyName(known), 7);
    const index = { ...NO_INDEX_ROWS, tokens: [{ param: 'identifier', system: 'a', value: '1' }, { param: 'identifier', system: 'b', value: '2' }] };
    const { known: found, missing } = batchKeys('t', [{ type: 'Patient', index }, { type: 'Patient', index }], cache);
    expect([...found]).toEqual([[keyName(known), 7]]);
    expect([...missing.values()]).toEqual([{ ...known, system: 'b' }]);
  });

  test('entries sharing a key object: resolved once per batch and named once, the same k as by their fields', () => {
    const tokens = specOf('tokens');
    const shared: SharedKey = { table: 'search_index', type: 'Observation', param: 'code', system: 'http://loinc.org', code: '' };
    const rows = ['1-8', '2-6', '3-4'].map((value) => ({ param: 'code', system: 'http://loinc.org', value, key: shared }));
    const names: string[] = [];
    const keyOf = memoizedKeyOf((spec, type, e) => {
      const name = keyName(entryKey(spec, 't', type, e));
      names.push(name);
      return name.length;
    });
    const k = keyOf(tokens, 'Observation', { param: 'code', system: 'http://loinc.org', value: 'y' });
    expect(rows.map((e) => keyOf(tokens, 'Observation', e))).toEqual([k, k, k]);
    // Resolved once by the fields, once for the shared object: not once per row.
    expect(names).toHaveLength(2);
    expect(names[1]).toBe(names[0]);
    const index = { ...NO_INDEX_ROWS, tokens: rows };
    const { missing } = batchKeys('t', [{ type: 'Observation', index }, { type: 'Observation', index }], createKeyCache());
    expect([...missing.values()]).toEqual([{ tenant: 't', type: 'Observation', param: 'code', system: 'http://loinc.org', code: '' }]);
  });

  test('the cache starts afresh past its bound', () => {
    const cache = createKeyCache();
    for (let k = 0; k < MAX_CACHED_KEYS; k++) cache.set(`n${k}`, k);
    expect(cache.get('n0')).toBe(0);
    cache.set('n0', 0);
    expect(cache.get(`n${MAX_CACHED_KEYS - 1}`)).toBe(MAX_CACHED_KEYS - 1);
    cache.set('new', 1);
    expect([cache.get('n0'), cache.get('new')]).toEqual([undefined, 1]);
  });
});
