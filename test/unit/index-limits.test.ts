/** The bounded form of values longer than PostgreSQL's indexes hold (src/store/index-limits.ts). */
import { describe, expect, test } from 'bun:test';
import { boundedQuery, boundedValue, boundIndexRows, MAX_PREFIX_SEARCH_BYTES, POSTGRES_MAX_INDEXED_BYTES } from '../../src/store/index-limits.ts';
import type { IndexRows, SearchQuery } from '../../src/store/types.ts';

const bytes = (s: string) => Buffer.byteLength(s);

describe('boundedValue', () => {
  test('a value within the bound is itself, in any script', () => {
    for (const s of ['', 'abc', 'a'.repeat(POSTGRES_MAX_INDEXED_BYTES), 'é'.repeat(POSTGRES_MAX_INDEXED_BYTES / 2), '€'.repeat(666) + 'ab', '😀'.repeat(500)]) {
      expect(bytes(s)).toBeLessThanOrEqual(POSTGRES_MAX_INDEXED_BYTES);
      expect(boundedValue(s)).toBe(s);
    }
  });

  test('a longer one: within the bound, whole characters kept, every prefix up to MAX_PREFIX_SEARCH_BYTES kept, idempotent', () => {
    for (const unit of ['a', 'é', '€', '😀', 'a€', 'ab😀']) {
      for (let extra = 0; extra < 4; extra++) {
        const s = 'x'.repeat(extra) + unit.repeat(Math.ceil((POSTGRES_MAX_INDEXED_BYTES + 500) / bytes(unit)));
        const b = boundedValue(s);
        expect(b).not.toBe(s);
        expect(bytes(b)).toBeLessThanOrEqual(POSTGRES_MAX_INDEXED_BYTES);
        expect(b.isWellFormed()).toBe(true);
        const kept = b.slice(0, b.indexOf('\u0001'));
        expect(s.startsWith(kept)).toBe(true);
        expect(bytes(kept)).toBeGreaterThanOrEqual(MAX_PREFIX_SEARCH_BYTES);
        expect(boundedValue(b)).toBe(b);
      }
    }
  });

  test('values differing only past the kept bytes, or in length, have different forms; equal values the same', () => {
    const stem = 'y'.repeat(3000);
    const forms = new Set([stem, `${stem}a`, `${stem}b`, `${stem}aa`, `${'y'.repeat(2001)}`].map(boundedValue));
    expect(forms.size).toBe(5);
    expect(boundedValue(`${stem}a`)).toBe(boundedValue(`${'y'.repeat(3000)}a`));
  });
});

describe('boundIndexRows and boundedQuery', () => {
  const long = 'z'.repeat(2500);

  test('rows take bounded forms in place; the indexed columns only', () => {
    const rows: IndexRows = {
      tokens: [{ param: 'identifier', system: long, value: long, display: long }, { param: 'identifier', system: 's', value: 'v' }],
      strings: [],
      ranges: [{ param: 'value-quantity', system: long, code: long, low: 1, high: 2 }],
      composites: [{ param: 'code-value-quantity', system1: long, value1: long, system2: long, value2: long, low: 1, high: 2 }],
    };
    boundIndexRows(rows);
    const b = boundedValue(long);
    expect(rows.tokens).toEqual([{ param: 'identifier', system: b, value: b, display: long }, { param: 'identifier', system: 's', value: 'v' }]);
    expect(rows.ranges[0]).toMatchObject({ system: b, code: b });
    expect(rows.composites[0]).toMatchObject({ system1: b, value1: b, system2: long, value2: long });
  });

  test('conditions compare bounded forms, nested ones too; a query without long values is the same object', () => {
    const b = boundedValue(long);
    const short: SearchQuery = { type: 'Patient', where: [{ kind: 'token', param: 'identifier', values: [{ system: 's', value: 'v' }] }], sort: [], count: 10 };
    expect(boundedQuery(short)).toBe(short);
    const q: SearchQuery = {
      type: 'Patient', sort: [], count: 10,
      where: [
        { kind: 'not', condition: { kind: 'or', any: [{ kind: 'token', param: 'identifier', values: [{ value: long }, { system: 's' }] }] } },
        { kind: 'has', type: 'Observation', param: 'subject', where: [{ kind: 'number', param: 'value-quantity', tests: [{ op: 'eq', value: 1, low: 0.5, high: 1.5, system: long, code: long }] }] },
        { kind: 'chain', param: 'general-practitioner', targetType: 'Practitioner', where: [{ kind: 'composite', param: 'x', tests: [{ system1: long, value1: long, parts: [] }] }] },
        { kind: 'missing', table: 'search_index', params: ['link'], missing: false, systems: [long] },
      ],
    };
    expect(boundedQuery(q).where).toEqual([
      { kind: 'not', condition: { kind: 'or', any: [{ kind: 'token', param: 'identifier', values: [{ value: b }, { system: 's' }] }] } },
      { kind: 'has', type: 'Observation', param: 'subject', where: [{ kind: 'number', param: 'value-quantity', tests: [{ op: 'eq', value: 1, low: 0.5, high: 1.5, system: b, code: b }] }] },
      { kind: 'chain', param: 'general-practitioner', targetType: 'Practitioner', where: [{ kind: 'composite', param: 'x', tests: [{ system1: b, value1: b, parts: [] }] }] },
      { kind: 'missing', table: 'search_index', params: ['link'], missing: false, systems: [b] },
    ]);
  });

  test('a uri-prefix past MAX_PREFIX_SEARCH_BYTES cannot be answered: a StoreValueError', () => {
    const q = (value: string): SearchQuery => ({ type: 'ValueSet', where: [{ kind: 'uri-prefix', param: 'url', values: [value] }], sort: [], count: 10 });
    const within = q('u'.repeat(MAX_PREFIX_SEARCH_BYTES));
    expect(boundedQuery(within)).toBe(within);
    expect(() => boundedQuery(q('u'.repeat(MAX_PREFIX_SEARCH_BYTES + 1)))).toThrow(expect.objectContaining({ name: 'StoreValueError' }));
  });
});
