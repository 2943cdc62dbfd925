import type { IndexRows, IndexTable } from './types.ts';

/**
 * The search index tables and the columns each row adds to `(res, tenant, type)`: text columns, then
 * number columns (REAL / double precision). The writers of both adapters, bulk COPY and the import
 * workers' packing all go through this list.
 */
export interface IndexTableSpec {
  table: IndexTable;
  rows: keyof IndexRows;
  text: readonly string[];
  num: readonly string[];
  /** Text columns that may be absent from an entry (written as ''). */
  optional?: readonly string[];
}

export const INDEX_TABLES: readonly IndexTableSpec[] = [
  { table: 'search_index', rows: 'tokens', text: ['param', 'system', 'value', 'display'], num: [], optional: ['display'] },
  { table: 'search_string', rows: 'strings', text: ['param', 'value', 'exact'], num: [] },
  { table: 'search_range', rows: 'ranges', text: ['param', 'system', 'code'], num: ['low', 'high'] },
  { table: 'search_composite', rows: 'composites', text: ['param', 'system1', 'value1', 'system2', 'value2'], num: ['low', 'high'] },
];

/** The rows of one table of `index`, as plain records. */
export function rowsOf(index: IndexRows, spec: IndexTableSpec): Record<string, string | number>[] {
  return index[spec.rows] as unknown as Record<string, string | number>[];
}

/** The column names after `(res, tenant, type)`. */
export function columnsOf(spec: IndexTableSpec): string[] {
  return [...spec.text, ...spec.num];
}

/** How many index rows `index` holds in all. */
export function rowCount(index: IndexRows): number {
  return index.tokens.length + index.strings.length + index.ranges.length + index.composites.length;
}
