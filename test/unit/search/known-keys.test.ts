/** Search SQL compares index rows with keys the dialect knows, and looks the others up in search_keys. */
import { describe, expect, test } from 'bun:test';
import { compileSearch } from '../../../src/fhir/search.ts';
import type { SearchKey } from '../../../src/store/search-keys.ts';
import { searchSql, SQLITE, type Dialect } from '../../../src/store/search-sql.ts';
import type { SearchQuery } from '../../../src/store/types.ts';

/** A dialect that knows the keys listed (by `param|system|code`), and records every key it was asked for. */
function knowing(known: Record<string, number>) {
  const asked: SearchKey[] = [];
  const dialect: Dialect = {
    ...SQLITE,
    knownKey: (key) => {
      asked.push(key);
      return known[`${key.param}|${key.system}|${key.code}`];
    },
  };
  return { dialect, asked };
}

function sqlOf(dialect: Dialect, type: string, query: string) {
  const q = compileSearch(type, new URLSearchParams(query), true);
  return searchSql(dialect, 't1', { ...q.query, where: q.pending } as SearchQuery);
}

describe('known keys in search SQL', () => {
  test('a reference, a token with its system and a date each name one key: compared with it, no subquery', () => {
    const { dialect, asked } = knowing({ 'subject|Patient|': 7, 'code|http://loinc.org|': 8, 'date||': 9 });
    const { sql, values } = sqlOf(dialect, 'Observation', 'patient=p1&code=http://loinc.org|8867-4&date=ge2020');
    expect(sql).not.toContain('search_keys');
    expect(values).toEqual(expect.arrayContaining([7, 8, 9]));
    expect(asked).toEqual(expect.arrayContaining([
      { tenant: 't1', type: 'Observation', param: 'subject', system: 'Patient', code: '' },
      { tenant: 't1', type: 'Observation', param: 'code', system: 'http://loinc.org', code: '' },
      { tenant: 't1', type: 'Observation', param: 'date', system: '', code: '' },
    ]));
  });

  test('a token without a system may have several keys: looked up in search_keys', () => {
    const { dialect, asked } = knowing({ 'subject|Patient|': 7 });
    const { sql } = sqlOf(dialect, 'Condition', 'clinical-status=active&patient=p1');
    expect(sql.match(/FROM search_keys/g)).toHaveLength(1);
    expect(asked.map((k) => k.param)).toEqual(['subject']);
  });

  test('a key the dialect does not know (not written yet, or not committed) is looked up in search_keys', () => {
    const { dialect } = knowing({});
    const { sql } = sqlOf(dialect, 'Observation', 'patient=p1');
    expect(sql).toContain('FROM search_keys');
  });

  test('without knownKey (PostgreSQL), every key is looked up in search_keys, dates narrowed to their one key', () => {
    const { sql, values } = sqlOf(SQLITE, 'Observation', 'date=ge2020');
    expect(sql).toMatch(/\.system = \?\d+ AND k\d+\.code = \?\d+/);
    expect(values.filter((v) => v === '')).toHaveLength(2);
  });
});
