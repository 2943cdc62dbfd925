import { INDEX_TABLES, rowsOf, type IndexEntryRecord } from '../../store/index-tables.ts';
import type { IndexRows, SharedKey } from '../../store/types.ts';
import type { PreparedVersion, Refusal } from '../prepared.ts';

/**
 * Prepared versions packed for postMessage: every string field concatenated into one string, with the
 * end offset of each field, and the index rows' numbers in one array. Cloning one string and a few
 * typed arrays costs a fraction of cloning an object per version with its nested entries, on both
 * threads. An index row's key fields (its param, a token's system, a quantity's unit) are packed once
 * per distinct key, and the row names its key by number: unpacked, the rows of a key share one
 * SharedKey, which the writers resolve once per batch instead of once per row.
 */
export interface PackedVersions {
  text: string;
  /**
   * End offset in `text` of each field: type, id, tail, then the text columns of each index row (table
   * by table), then each compartment, then the words of `_text` and of `_content` (both '' for none).
   */
  ends: Int32Array;
  /** The number columns of each index row, table by table. */
  numbers: Float64Array;
  /** Per version: its number of rows in each index table, then of compartments. */
  shape: Int32Array;
  /** The distinct keys of the index rows: each one's table, as its place in INDEX_TABLES. */
  keyTables: Int32Array;
  /** Each distinct key's resource type, param, system and code ('' where none), four strings a key. */
  keyParts: string[];
  /** Per index row, in packing order: the place of its key in `keyTables`. */
  rowKeys: Int32Array;
  /** Per version: the line it was read from (PreparedVersion.line), 0 for none. */
  lines: Int32Array;
  /** The versions validation refused (PreparedVersion.refusal; few), by their place among the versions. */
  refusals: { at: number; refusal: Refusal }[];
}

const SHAPE = INDEX_TABLES.length + 1;
/** The key fields after the param of each table's entries: [system, code], either absent. */
const KEY = INDEX_TABLES.map((t) => [t.key[0], t.key[1]] as const);

/** Packs `versions` (see PackedVersions). */
export function packVersions(versions: PreparedVersion[]): PackedVersions {
  const parts: string[] = [];
  const nums: number[] = [];
  const shape = new Int32Array(versions.length * SHAPE);
  const lines = Int32Array.from(versions, (v) => v.line ?? 0);
  const refusals: PackedVersions['refusals'] = [];
  versions.forEach((v, at) => v.refusal && refusals.push({ at, refusal: v.refusal }));
  // Each table's keys by type, param, system and code: nested maps look the row's own strings up, where
  // one map would need a string built and hashed per row.
  const keyIds = INDEX_TABLES.map(() => new Map<string, Map<string, Map<string, Map<string, number>>>>());
  const keyTables: number[] = [];
  const keyParts: string[] = [];
  const rowKeys: number[] = [];
  versions.forEach((v, i) => {
    parts.push(v.type, v.id, v.tail);
    INDEX_TABLES.forEach((t, k) => {
      const rows = rowsOf(v.index, t);
      shape[SHAPE * i + k] = rows.length;
      if (!rows.length) return;
      const [systemField, codeField] = KEY[k]!;
      const ofType = keyIds[k]!;
      let byParam = ofType.get(v.type);
      if (!byParam) ofType.set(v.type, (byParam = new Map()));
      for (const e of rows) {
        const param = e.param as string;
        const system = systemField === undefined ? '' : ((e[systemField] as string | undefined) ?? '');
        const code = codeField === undefined ? '' : ((e[codeField] as string | undefined) ?? '');
        let bySystem = byParam.get(param);
        if (!bySystem) byParam.set(param, (bySystem = new Map()));
        let byCode = bySystem.get(system);
        if (!byCode) bySystem.set(system, (byCode = new Map()));
        let id = byCode.get(code);
        if (id === undefined) {
          byCode.set(code, (id = keyTables.length));
          keyTables.push(k);
          keyParts.push(v.type, param, system, code);
        }
        rowKeys.push(id);
        for (const c of t.text) parts.push((e[c] as string | undefined) ?? '');
        for (const c of t.num) nums.push(e[c] as number);
      }
    });
    for (const p of v.compartments) parts.push(p);
    shape[SHAPE * i + INDEX_TABLES.length] = v.compartments.length;
    parts.push(v.index.text?.narrative ?? '', v.index.text?.content ?? '');
  });
  const ends = new Int32Array(parts.length);
  let at = 0;
  parts.forEach((p, i) => (ends[i] = at += p.length));
  return {
    text: parts.join(''), ends, numbers: Float64Array.from(nums), shape,
    keyTables: Int32Array.from(keyTables), keyParts, rowKeys: Int32Array.from(rowKeys), lines, refusals,
  };
}

/** Unpacks what packVersions packed; the entries of one key share its SharedKey. */
export function unpackVersions({ text, ends, numbers, shape, keyTables, keyParts, rowKeys, lines, refusals }: PackedVersions): PreparedVersion[] {
  const keys: SharedKey[] = Array.from(keyTables, (k, i) => ({
    table: INDEX_TABLES[k]!.table, type: keyParts[4 * i]!, param: keyParts[4 * i + 1]!, system: keyParts[4 * i + 2]!, code: keyParts[4 * i + 3]!,
  }));
  const out: PreparedVersion[] = [];
  let field = 0;
  let start = 0;
  let num = 0;
  let row = 0;
  const next = () => text.slice(start, (start = ends[field++]!));
  for (let i = 0; i < shape.length; i += SHAPE) {
    const index: IndexRows = { tokens: [], strings: [], ranges: [], composites: [] };
    const v: PreparedVersion = { type: next(), id: next(), tail: next(), index, compartments: [] };
    const line = lines[i / SHAPE]!;
    if (line > 0) v.line = line;
    INDEX_TABLES.forEach((t, k) => {
      const rows = rowsOf(index, t);
      const [systemField, codeField] = KEY[k]!;
      for (let n = shape[i + k]!; n > 0; n--) {
        const key = keys[rowKeys[row++]!]!;
        const e: IndexEntryRecord & { key?: SharedKey } = { param: key.param };
        if (systemField !== undefined) e[systemField] = key.system;
        if (codeField !== undefined) e[codeField] = key.code;
        for (const c of t.text) {
          const value = next();
          if (value !== '' || !t.optional?.includes(c)) e[c] = value;
        }
        for (const c of t.num) e[c] = numbers[num++]!;
        e.key = key;
        rows.push(e);
      }
    });
    for (let n = shape[i + INDEX_TABLES.length]!; n > 0; n--) v.compartments.push(next());
    const narrative = next();
    const content = next();
    // Content holds every word of the narrative too: no content, no text.
    if (content !== '') index.text = { narrative, content };
    out.push(v);
  }
  for (const r of refusals) out[r.at]!.refusal = r.refusal;
  return out;
}
