import { entryTextFields, INDEX_TABLES, rowsOf } from '../../store/index-tables.ts';
import type { IndexRows } from '../../store/types.ts';
import type { PreparedVersion } from '../prepared.ts';

/**
 * Prepared versions packed for postMessage: every string field concatenated into one string, with the
 * end offset of each field, and the index rows' numbers in one array. Cloning one string and a few
 * typed arrays costs a fraction of cloning an object per version with its nested entries, on both threads.
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
}

const SHAPE = INDEX_TABLES.length + 1;
/** The text fields of each table's entries, in packing order. */
const TEXT = INDEX_TABLES.map(entryTextFields);

/** Packs `versions` (see PackedVersions). */
export function packVersions(versions: PreparedVersion[]): PackedVersions {
  const parts: string[] = [];
  const nums: number[] = [];
  const shape = new Int32Array(versions.length * SHAPE);
  versions.forEach((v, i) => {
    parts.push(v.type, v.id, v.tail);
    INDEX_TABLES.forEach((t, k) => {
      const rows = rowsOf(v.index, t);
      for (const e of rows) {
        for (const c of TEXT[k]!) parts.push((e[c] as string | undefined) ?? '');
        for (const c of t.num) nums.push(e[c] as number);
      }
      shape[SHAPE * i + k] = rows.length;
    });
    for (const p of v.compartments) parts.push(p);
    shape[SHAPE * i + INDEX_TABLES.length] = v.compartments.length;
    parts.push(v.index.text?.narrative ?? '', v.index.text?.content ?? '');
  });
  const ends = new Int32Array(parts.length);
  let at = 0;
  parts.forEach((p, i) => (ends[i] = at += p.length));
  return { text: parts.join(''), ends, numbers: Float64Array.from(nums), shape };
}

/** Unpacks what packVersions packed. */
export function unpackVersions({ text, ends, numbers, shape }: PackedVersions): PreparedVersion[] {
  const out: PreparedVersion[] = [];
  let field = 0;
  let start = 0;
  let num = 0;
  const next = () => text.slice(start, (start = ends[field++]!));
  for (let i = 0; i < shape.length; i += SHAPE) {
    const index: IndexRows = { tokens: [], strings: [], ranges: [], composites: [] };
    const v: PreparedVersion = { type: next(), id: next(), tail: next(), index, compartments: [] };
    INDEX_TABLES.forEach((t, k) => {
      const rows = rowsOf(index, t);
      for (let n = shape[i + k]!; n > 0; n--) {
        const e: Record<string, string | number> = {};
        for (const c of TEXT[k]!) {
          const value = next();
          if (value !== '' || !t.optional?.includes(c)) e[c] = value;
        }
        for (const c of t.num) e[c] = numbers[num++]!;
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
  return out;
}
