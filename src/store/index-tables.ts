import type { IndexRows, IndexTable, ReindexTable } from './types.ts';

/** The row lists of IndexRows (the words of `text` have a table of their own, `search_text`). */
export type IndexRowLists = Omit<IndexRows, 'text'>;

/**
 * The search index tables. A row is `(res, k, <columns>)`: `k` names, in `search_keys`, the tenant,
 * the resource type, the entry's `param` and the entry fields of `key` (a token's system; a quantity's
 * unit system and code), so the row stores none of them. The writers of both adapters, bulk COPY and
 * the import workers' packing all go through this list.
 */
export interface IndexTableSpec {
  table: IndexTable;
  rows: keyof IndexRowLists;
  /** Entry fields the key holds after the param, as `search_keys.system` and then `search_keys.code` ('' when fewer). */
  key: readonly string[];
  /** Text columns of the row after `(res, k)`, then its number columns (REAL / double precision). */
  text: readonly string[];
  num: readonly string[];
  /** Text columns that may be absent from an entry (written as ''). */
  optional?: readonly string[];
}

export const INDEX_TABLES: readonly IndexTableSpec[] = [
  { table: 'search_index', rows: 'tokens', key: ['system'], text: ['value', 'display'], num: [], optional: ['display'] },
  { table: 'search_string', rows: 'strings', key: [], text: ['value', 'exact'], num: [] },
  { table: 'search_range', rows: 'ranges', key: ['system', 'code'], text: [], num: ['low', 'high'] },
  { table: 'search_composite', rows: 'composites', key: [], text: ['system1', 'value1', 'system2', 'value2'], num: ['low', 'high'] },
];

/** The spec of the table holding `rows`. */
export function specOf(rows: keyof IndexRowLists): IndexTableSpec {
  return INDEX_TABLES.find((t) => t.rows === rows)!;
}

/** An entry of any index table. */
export type AnyIndexEntry = IndexRowLists[keyof IndexRowLists][number];

/** An entry of an index table, as a plain record. */
export type IndexEntryRecord = Record<string, string | number>;

/** The rows of one table of `index`, as plain records. */
export function rowsOf(index: IndexRows, spec: IndexTableSpec): IndexEntryRecord[] {
  return index[spec.rows] as unknown as IndexEntryRecord[];
}

/** The column names after `(res, k)`. */
export function columnsOf(spec: IndexTableSpec): string[] {
  return [...spec.text, ...spec.num];
}

/** How many index rows `index` holds in all. */
export function rowCount(index: IndexRows): number {
  return index.tokens.length + index.strings.length + index.ranges.length + index.composites.length;
}

/** `index` with the rows of `tables` alone (the words with `search_text` only): what a reindex of those tables writes. */
export function onlyTables(index: IndexRows, tables: readonly ReindexTable[]): IndexRows {
  const out: IndexRows = { tokens: [], strings: [], ranges: [], composites: [] };
  for (const spec of INDEX_TABLES) if (tables.includes(spec.table)) (out[spec.rows] as unknown[]) = index[spec.rows];
  if (tables.includes('search_text') && index.text) out.text = index.text;
  return out;
}
