import type { IndexRows, ResourceVersion, SortKey } from '../store/types.ts';
import { keysetSort } from '../store/search-sql.ts';

/** A resource to order: its version, and its index rows when a sort on a parameter needs them. */
export interface Sortable {
  readonly version: ResourceVersion;
  readonly rows: () => IndexRows;
}

type Key = string | number | null;

/**
 * Strings in Unicode code point order, which is the order of their UTF-8 bytes: how both databases
 * compare the key columns (SQLite's BINARY, PostgreSQL's "C" collation). JavaScript's `<` compares
 * UTF-16 code units, which differs only where a surrogate pair meets U+E000..U+FFFF.
 */
export function compareText(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return codePointRank(x) - codePointRank(y);
  }
  return a.length - b.length;
}

/** Code units ranked so that surrogates (astral code points) sort after the rest of the BMP. */
function codePointRank(unit: number): number {
  if (unit < 0xd800) return unit;
  return unit >= 0xe000 ? unit - 0x800 : unit + 0x2000;
}

function compareKeys(a: Key, b: Key): number {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  return compareText(a as string, b as string);
}

/**
 * A sort key's value for one resource, as `SqlBuilder.sortKey` reads it from the index tables: the
 * lowest value of the parameter (the highest, descending; a range's high end then), null for none.
 */
function paramKey(rows: IndexRows, k: SortKey & { by: 'param' }): Key {
  const values: Key[] = [];
  if (k.table === 'search_index') for (const e of rows.tokens) if (e.param === k.param) values.push(e.value);
  if (k.table === 'search_string') for (const e of rows.strings) if (e.param === k.param) values.push(e.value);
  if (k.table === 'search_range') for (const e of rows.ranges) if (e.param === k.param) values.push(k.descending ? e.high : e.low);
  if (k.table === 'search_composite') for (const e of rows.composites) if (e.param === k.param) values.push(e.value1);
  let best: Key = null;
  for (const v of values) if (best === null || (k.descending ? compareKeys(v, best) > 0 : compareKeys(v, best) < 0)) best = v;
  return best;
}

/** One ORDER BY term: how to read the key and in which direction, nulls last. */
interface Term {
  key: (s: Sortable) => Key;
  descending: boolean;
}

function term(k: SortKey): Term {
  if (k.by === 'id') return { key: (s) => s.version.id, descending: k.descending };
  if (k.by === 'lastUpdated') return { key: (s) => s.version.lastUpdated, descending: k.descending };
  return { key: (s) => paramKey(s.rows(), k), descending: k.descending };
}

/**
 * The order of a search's results, exactly as `searchSql` orders them in the database: a keyset sort
 * by `_id` or `_lastUpdated` (ties by id in the same direction), else the sort keys with nulls last
 * and ties by id ascending. Merging stored and core resources (core-search.ts) relies on the two
 * agreeing.
 */
export function searchOrder(sort: SortKey[]): (a: Sortable, b: Sortable) => number {
  const keyset = keysetSort(sort);
  let terms: Term[];
  if (keyset) {
    const byId = term({ by: 'id', descending: keyset.descending });
    terms = keyset.by === 'id' ? [byId] : [term(keyset), byId];
  } else {
    terms = sort.map(term);
    if (!sort.some((k) => k.by === 'id')) terms.push(term({ by: 'id', descending: false }));
  }
  return (a, b) => {
    for (const t of terms) {
      const x = t.key(a);
      const y = t.key(b);
      if (x === y) continue;
      if (x === null) return 1;
      if (y === null) return -1;
      const c = compareKeys(x, y);
      if (c !== 0) return t.descending ? -c : c;
    }
    return 0;
  };
}
