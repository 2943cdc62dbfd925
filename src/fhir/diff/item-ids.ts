/**
 * The ids `$diff` aligns lists by (list-align.ts): two items of a list pair get one id exactly when they are
 * equal (values and their `_name` companions, as diff.ts's `same` compares them), found through structural
 * hashes that one diff computes once per object and keeps (`Hashes`), then confirmed by `equal`.
 *
 * Keys written out in full (each item's members, sorted, as text) would cost, at every level of nested lists,
 * the size of everything below: a list item holding a list item holding ... a large element, changed at the
 * bottom, is keyed once per level, time quadratic in the resource (a QuestionnaireResponse of 400 nested items
 * and half a megabyte took 40 seconds). A hash computed once per object costs the resources' size over the
 * whole diff, and its comparisons a number each.
 */
import { literalOf } from '../exact-json.ts';

/** Per process, so that no one can write items whose hashes collide by design (they would cost `equal` calls). */
const SEED = BigInt(Math.floor(Math.random() * 2 ** 52));

function hashText(text: string): bigint {
  return Bun.hash.wyhash(text, SEED);
}

/** Structural hashes of one diff's values: equal values (`same`: members in any order, numbers by their text) share one. */
export class Hashes {
  private readonly memo = new WeakMap<object, bigint>();

  /** The hash of `v`, the value at `holder[k]` (whose number literal counts). */
  of(v: unknown, holder?: object, k?: string | number): bigint {
    if (v === null || typeof v !== 'object') return hashText(primitive(v, holder, k));
    const known = this.memo.get(v);
    if (known !== undefined) return known;
    let text: string;
    if (Array.isArray(v)) text = `[${v.map((x, i) => this.of(x, v, i).toString(36)).join(',')}`;
    else {
      const o = v as Record<string, unknown>;
      text = `{${Object.keys(o).sort().map((key) => `${JSON.stringify(key)}:${this.of(o[key], o, key).toString(36)}`).join(',')}`;
    }
    const h = hashText(text);
    this.memo.set(v, h);
    return h;
  }
}

function primitive(v: unknown, holder: object | undefined, k: string | number | undefined): string {
  if (typeof v === 'number') return `n${v}|${(holder === undefined || k === undefined ? undefined : literalOf(holder, k)) ?? ''}`;
  if (typeof v === 'string') return `s${v}`;
  return v === undefined ? 'u' : `p${String(v)}`;
}

/** Item `i` of a list with its companion (`exts[i]`, FHIR JSON's `_name`). */
export interface Item {
  items: unknown[];
  exts: unknown[];
  i: number;
}

/**
 * The ids of the items of from-list `a` and to-list `b` (with their companions): one id for items `equal`
 * holds of, found among those of one hash (almost always one), so that the ids cost the lists' size.
 */
export function itemIds(hashes: Hashes, a: Omit<Item, 'i'>, b: Omit<Item, 'i'>, equal: (x: Item, y: Item) => boolean): { a: Int32Array; b: Int32Array } {
  const buckets = new Map<bigint, Array<Item & { id: number }>>();
  let next = 0;
  const idOf = (item: Item): number => {
    const { items, exts, i } = item;
    const h = hashes.of(items[i], items, i) * 31n + hashes.of(exts[i] ?? null, exts, i);
    let bucket = buckets.get(h);
    if (bucket === undefined) buckets.set(h, (bucket = []));
    const found = bucket.find((other) => equal(other, item));
    if (found !== undefined) return found.id;
    bucket.push({ ...item, id: next });
    return next++;
  };
  return {
    a: Int32Array.from(a.items, (_, i) => idOf({ ...a, i })),
    b: Int32Array.from(b.items, (_, i) => idOf({ ...b, i })),
  };
}
