import type { PreparedVersion } from '../prepared.ts';

/**
 * Prepared versions packed for postMessage: every string field concatenated into one string, with the
 * end offset of each field. Cloning one string and two typed arrays costs a fraction of cloning an
 * object per version with its nested entries, on both threads.
 */
export interface PackedVersions {
  text: string;
  /** End offset in `text` of each field: type, id, tail, then param/system/value per index entry, then each compartment. */
  ends: Int32Array;
  /** Per version: its number of index entries and of compartments. */
  shape: Int32Array;
}

/** Packs `versions` (see PackedVersions). */
export function packVersions(versions: PreparedVersion[]): PackedVersions {
  const parts: string[] = [];
  const shape = new Int32Array(versions.length * 2);
  versions.forEach((v, i) => {
    parts.push(v.type, v.id, v.tail);
    for (const e of v.index) parts.push(e.param, e.system, e.value);
    for (const p of v.compartments) parts.push(p);
    shape[2 * i] = v.index.length;
    shape[2 * i + 1] = v.compartments.length;
  });
  const ends = new Int32Array(parts.length);
  let at = 0;
  parts.forEach((p, i) => (ends[i] = at += p.length));
  return { text: parts.join(''), ends, shape };
}

/** Unpacks what packVersions packed. */
export function unpackVersions({ text, ends, shape }: PackedVersions): PreparedVersion[] {
  const out: PreparedVersion[] = [];
  let field = 0;
  let start = 0;
  const next = () => text.slice(start, (start = ends[field++]!));
  for (let i = 0; i < shape.length; i += 2) {
    const v: PreparedVersion = { type: next(), id: next(), tail: next(), index: [], compartments: [] };
    for (let n = shape[i]!; n > 0; n--) v.index.push({ param: next(), system: next(), value: next() });
    for (let n = shape[i + 1]!; n > 0; n--) v.compartments.push(next());
    out.push(v);
  }
  return out;
}
