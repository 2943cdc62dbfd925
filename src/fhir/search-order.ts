import type { IndexRows, ResourceVersion, SortKey, SortPosition } from '../store/types.ts';
import { keysetSort } from '../store/search-sql.ts';

/** A resource to order: its version, and its index rows when a sort on a parameter needs them. */
export interface Sortable {
  readonly version: ResourceVersion;
  readonly rows: () => IndexRows;
}

/** One sort key's value: a string, a number, or null when the resource has none (sorted last). */
export type Key = string | number | null;

/** Code units at or above U+D800, whose UTF-16 order is not their code points' order. */
const HIGH_UNITS = /[\uD800-\uFFFF]/;

/**
 * `s` rewritten so that JavaScript's `<` (UTF-16 code units) orders such strings in Unicode code point
 * order, which is the order of their UTF-8 bytes: how both databases compare the key columns (SQLite's
 * BINARY, PostgreSQL's "C" collation). The two orders differ only where a surrogate pair meets
 * U+E000..U+FFFF, so only strings holding such units are rewritten: surrogates move above the rest.
 */
export function textKey(s: string): string {
  if (!HIGH_UNITS.test(s)) return s;
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const unit = s.charCodeAt(i);
    out += String.fromCharCode(unit < 0xd800 ? unit : unit >= 0xe000 ? unit - 0x800 : unit + 0x2000);
  }
  return out;
}

/** Strings in code point order (see textKey). */
export function compareText(a: string, b: string): number {
  const x = textKey(a);
  const y = textKey(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

function compareKeys(a: Key, b: Key): number {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  return a! < b! ? -1 : a! > b! ? 1 : 0;
}

/**
 * A sort key's value for one resource, as `SqlBuilder.sortKey` reads it from the index tables: the
 * lowest value of the parameter (the highest, descending; a range's high end then), null for none.
 */
function paramKey(rows: IndexRows, k: SortKey & { by: 'param' }): Key {
  const values: Key[] = [];
  if (k.table === 'search_index') for (const e of rows.tokens) if (e.param === k.param && (k.target === undefined || e.system === k.target)) values.push(e.value);
  if (k.table === 'search_string') for (const e of rows.strings) if (e.param === k.param) values.push(e.value);
  if (k.table === 'search_range') for (const e of rows.ranges) if (e.param === k.param) values.push(k.descending ? e.high : e.low);
  if (k.table === 'search_composite') for (const e of rows.composites) if (e.param === k.param) values.push(e.value1);
  let best: Key = null;
  for (const v of values) {
    const key = typeof v === 'string' ? textKey(v) : v;
    if (best === null || (k.descending ? compareKeys(key, best) > 0 : compareKeys(key, best) < 0)) best = key;
  }
  return best;
}

/**
 * The values of `sort`'s keys for one resource as the database holds them (SqlBuilder.sortKey): `_id`,
 * `_lastUpdated`, or a parameter's least value in `rows` (its greatest, descending; a range's high end
 * then), null for none. Strings as stored, compared in code point order as the key columns are: a
 * page's last row's place (SearchQuery.afterKeys) for the next page of a sort on parameters.
 */
export function sortKeysOf(version: ResourceVersion, rows: () => IndexRows, sort: SortKey[]): (string | number | null)[] {
  return sort.map((k) => {
    if (k.by === 'id') return version.id;
    if (k.by === 'lastUpdated') return version.lastUpdated;
    const index = rows();
    const values: (string | number)[] = [];
    if (k.table === 'search_index') for (const e of index.tokens) if (e.param === k.param && (k.target === undefined || e.system === k.target)) values.push(e.value);
    if (k.table === 'search_string') for (const e of index.strings) if (e.param === k.param) values.push(e.value);
    if (k.table === 'search_range') for (const e of index.ranges) if (e.param === k.param) values.push(k.descending ? e.high : e.low);
    if (k.table === 'search_composite') for (const e of index.composites) if (e.param === k.param) values.push(e.value1);
    let best: string | number | null = null;
    for (const v of values) {
      const c = best === null ? 0 : typeof v === 'string' ? compareText(v, best as string) : v - (best as number);
      if (best === null || (k.descending ? c > 0 : c < 0)) best = v;
    }
    return best;
  });
}

/** One ORDER BY term: how to read the key and in which direction, nulls last. */
interface Term {
  key: (s: Sortable) => Key;
  descending: boolean;
}

function term(k: SortKey): Term {
  if (k.by === 'id') return { key: (s) => textKey(s.version.id), descending: k.descending };
  if (k.by === 'lastUpdated') return { key: (s) => s.version.lastUpdated, descending: k.descending };
  return { key: (s) => paramKey(s.rows(), k), descending: k.descending };
}

/** A search's order: each resource's sort keys, read once, and how two key lists compare. */
export interface SearchOrder {
  keys(s: Sortable): Key[];
  compare(a: Key[], b: Key[]): number;
}

/**
 * The order of a search's results, exactly as `searchSql` orders them in the database: a keyset sort
 * by `_id` or `_lastUpdated` (ties by id in the same direction), else the sort keys with nulls last
 * and ties by id ascending. Merging stored and core resources (core-search.ts) relies on the two
 * agreeing.
 */
export function searchOrder(sort: SortKey[]): SearchOrder {
  const keyset = keysetSort(sort);
  let terms: Term[];
  if (keyset) {
    const byId = term({ by: 'id', descending: keyset.descending });
    terms = keyset.by === 'id' ? [byId] : [term(keyset), byId];
  } else {
    terms = sort.map(term);
    if (!sort.some((k) => k.by === 'id')) terms.push(term({ by: 'id', descending: false }));
  }
  const keys = (s: Sortable) => terms.map((t) => t.key(s));
  const compare = (a: Key[], b: Key[]) => {
    for (let i = 0; i < terms.length; i++) {
      const x = a[i]!;
      const y = b[i]!;
      if (x === y) continue;
      if (x === null) return 1;
      if (y === null) return -1;
      const c = compareKeys(x, y);
      if (c !== 0) return terms[i]!.descending ? -c : c;
    }
    return 0;
  };
  return { keys, compare };
}

/**
 * How two places in a sort on parameters compare (SearchQuery.afterKeys: sort keys as sortKeysOf reads them, and an
 * id), as `sortedAfter` compares a row with a cursor's place in the database: each key in its direction, nulls last,
 * then the id ascending (unless the sort names `_id`). A later page read as of its first page's time places the
 * versions then current of resources changed since by it (src/fhir/search-pin.ts).
 */
export function placeOrder(sort: SortKey[]): (a: SortPosition, b: SortPosition) => number {
  const order = searchOrder(sort);
  const named = sort.some((k) => k.by === 'id');
  const keys = (p: SortPosition): Key[] => [...p.keys.map((v) => (typeof v === 'string' ? textKey(v) : v)), ...(named ? [] : [textKey(p.id)])];
  return (a, b) => order.compare(keys(a), keys(b));
}
