import type { Condition, IndexRows, ResourceVersion } from '../store/types.ts';
import { compareText, textKey } from './search-order.ts';
import { stringMatches } from './search-match.ts';

/** A resource the index holds: its version and its search index rows. */
export interface Indexed {
  readonly version: ResourceVersion;
  readonly rows: IndexRows;
}

interface StringValue<T> {
  readonly value: string;
  readonly exact: string;
  readonly item: T;
}

/**
 * Lookups over a fixed set of resources (the core CodeSystems or ValueSets) that answer the common
 * conditions without matching every resource: `_id`, token and uri values, and strings (starts-with by
 * binary search over the sorted values of the parameter, `:exact`, `:contains`). Each answers its
 * condition as `matchConditions` would, exactly, except a token with a system, whose lookup by value
 * alone leaves the system to match; the rest of a query is matched on what they leave.
 */
export class LookupIndex<T extends Indexed> {
  /** Every resource, in id order (code points, as the databases order ids). */
  readonly all: readonly T[];
  private readonly rank = new Map<T, number>();
  private readonly byId = new Map<string, T>();
  /** `param` NUL `value` -> the resources with that token value, in any system. */
  private readonly tokens = new Map<string, T[]>();
  /** Per string parameter, its values in code point order. */
  private readonly strings = new Map<string, StringValue<T>[]>();

  constructor(items: readonly T[]) {
    this.all = items.map((item) => ({ item, key: textKey(item.version.id) })).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)).map((x) => x.item);
    this.all.forEach((item, i) => this.rank.set(item, i));
    for (const item of this.all) {
      this.byId.set(item.version.id, item);
      for (const t of item.rows.tokens) {
        add(this.tokens, `${t.param}\u0000${t.value}`, item);
      }
      for (const s of item.rows.strings) {
        const list = this.strings.get(s.param) ?? this.strings.set(s.param, []).get(s.param)!;
        list.push({ value: s.value, exact: s.exact, item });
      }
    }
    for (const list of this.strings.values()) list.sort((a, b) => compareText(a.value, b.value));
  }

  /**
   * The resources that may meet `c` and whether exactly those do; undefined when this index cannot
   * tell (the caller matches `c` itself).
   */
  lookup(c: Condition): { items: Set<T>; exact: boolean } | undefined {
    switch (c.kind) {
      case 'id':
        return c.not ? undefined : { items: new Set(c.ids.flatMap((id) => this.byId.get(id) ?? [])), exact: true };
      case 'token': {
        if (c.not || c.fold || c.unequal || c.canonical || c.values.some((v) => v.value === undefined)) return undefined;
        const out = new Set<T>();
        for (const v of c.values) for (const item of this.tokens.get(`${c.param}\u0000${v.value}`) ?? []) out.add(item);
        return { items: out, exact: c.values.every((v) => v.system === undefined) };
      }
      case 'string': {
        const list = this.strings.get(c.param) ?? [];
        const out = new Set<T>();
        for (const v of c.values) {
          if (v.match === 'prefix') for (const s of prefixed(list, v.value)) out.add(s.item);
          else for (const s of list) if (stringMatches(s, v)) out.add(s.item);
        }
        return { items: out, exact: true };
      }
      default:
        return undefined;
    }
  }

  /**
   * The resources that may meet every condition of `where` (what the lookups find, intersected), in id
   * order, and the conditions still to match on them.
   */
  narrow(where: readonly Condition[]): { items: readonly T[]; rest: Condition[] } {
    let items: Set<T> | undefined;
    const rest: Condition[] = [];
    for (const c of where) {
      const found = this.lookup(c);
      if (found === undefined || !found.exact) rest.push(c);
      if (found !== undefined) items = items === undefined ? found.items : new Set([...items].filter((item) => found.items.has(item)));
    }
    return { items: items === undefined ? this.all : this.inOrder(items), rest };
  }

  /** A few resources sorted by their rank; many picked from `all` in its order. */
  private inOrder(items: Set<T>): T[] {
    if (items.size * 16 < this.all.length) return [...items].sort((a, b) => this.rank.get(a)! - this.rank.get(b)!);
    return this.all.filter((item) => items.has(item));
  }
}

/** The entries of a list sorted by value whose value starts with `prefix`. */
function prefixed<T>(list: readonly StringValue<T>[], prefix: string): StringValue<T>[] {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (compareText(list[mid]!.value, prefix) < 0) lo = mid + 1;
    else hi = mid;
  }
  const out: StringValue<T>[] = [];
  for (let i = lo; i < list.length && list[i]!.value.startsWith(prefix); i++) out.push(list[i]!);
  return out;
}

function add<T>(map: Map<string, T[]>, key: string, item: T): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [item]);
  else if (list[list.length - 1] !== item) list.push(item);
}
