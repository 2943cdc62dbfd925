/**
 * Compiled search conditions evaluated in memory on one resource, with the meaning the adapters' SQL
 * gives them (src/store/search-sql.ts): bulk export checks the versions it reads from the history this
 * way. Chains and `_has` look their other side up in the store (its current state; an export first rewrites
 * them as of its transactionTime, src/export/links-as-of.ts); through canonical references, by the `url` and
 * `version` rows (src/fhir/search-canonical.ts).
 */
import type { CompositePart, Condition, DateTest, IndexEntry, IndexRows, NumberTest, SearchQuery, StringValue, TextEntry, TokenValue } from '../store/types.ts';
import { foldAscii } from '../store/search-sql.ts';
import { compartmentsOf, indexEntries } from './indexer.ts';
import { isNear } from './near.ts';
import { canonicalCondition, namedCanonicals, namingCanonicals } from './search-canonical.ts';
import { compareText } from './search-order.ts';
import { textIndexOf, textMatches } from './text-index.ts';

type Json = Record<string, unknown>;

export interface MatchContext {
  /** Whether any current resource matches the query (chains, `_has`). */
  exists(query: SearchQuery): Promise<boolean>;
  /** The tenant's FHIR base, under which absolute references are the tenant's (FhirDeps.fhirBase). */
  base?: string;
}

const AFTER_PREFIX_POINT = 0x10ffff;

const URL_PATTERNS = new Map<string, RegExp>();
/** A `missing` condition's `urls` pattern, compiled once (a few: one per type a parameter is restricted to). */
const urlPattern = (p: string): RegExp => URL_PATTERNS.get(p) ?? URL_PATTERNS.set(p, new RegExp(p)).get(p)!;

function tokenMatches(v: TokenValue, system: string, value: string): boolean {
  return (v.system === undefined || v.system === system) && (v.value === undefined || v.value === value);
}

type TokenCondition = Extract<Condition, { kind: 'token' }>;

/** Whether row `e` matches one of the values of token condition `c` (its values as written, or folded: `fold`), as SqlBuilder.tokens. */
function tokenRowMatches(c: TokenCondition, e: IndexEntry): boolean {
  const system = c.fold ? foldAscii(e.system) : e.system;
  const value = c.fold ? foldAscii(e.value) : e.value;
  return c.values.some((v) => tokenMatches(v, system, value) ||
    // `unequal` on a reference: a canonical URL without a version is equal to its versions too.
    (c.unequal === true && c.reference === true && v.system === '' && v.value !== undefined && value.startsWith(`${v.value}|`)));
}

/** Token condition `c` on the rows `tokens`: a row of the parameter matches (`not`: none does; `unequal`: one of `systems`, if given, matches none of the values). */
function tokenConditionHolds(c: TokenCondition, tokens: IndexEntry[]): boolean {
  if (c.unequal) return tokens.some((e) => e.param === c.param && (!c.systems || c.systems.includes(e.system)) && !tokenRowMatches(c, e));
  // `canonical`: a `url` row beside a `url|...` row of its parameter names no other version (namedCanonicals).
  const named = (e: IndexEntry) => !c.canonical || !tokens.some((w) => w.param === e.param && w.system === e.system && w.value.startsWith(`${e.value}|`));
  return tokens.some((e) => e.param === c.param && tokenRowMatches(c, e) && named(e)) !== (c.not === true);
}

/** A date test on stored [lo, hi), as SqlBuilder.date. */
export function dateMatches(lo: number, hi: number, t: DateTest): boolean {
  switch (t.op) {
    case 'eq': return lo >= t.low && hi <= t.high;
    case 'ne': return lo < t.low || hi > t.high;
    case 'gt': return hi > t.high;
    case 'lt': return lo < t.low;
    case 'ge': return hi > t.high || (lo >= t.low && hi <= t.high);
    case 'le': return lo < t.low || (lo >= t.low && hi <= t.high);
    case 'sa': return lo >= t.high;
    case 'eb': return hi <= t.low;
    case 'ap': return lo < t.high && hi > t.low;
    case 'co': return lo <= t.low && hi >= t.high;
  }
}

/** A string value against a stored string (normalised `value`, `exact` as written), as SqlBuilder.stringTest. */
export function stringMatches(e: { value: string; exact: string }, v: StringValue): boolean {
  switch (v.match) {
    case 'prefix': return prefixOf(e.value, v.value);
    case 'equal': return e.value === v.value;
    case 'exact': return e.exact === v.value;
    case 'contains': return e.value.includes(v.value);
    case 'suffix': return e.value.endsWith(v.value);
    case 'unequal': return e.value !== v.value;
    case 'gt': return compareText(e.value, v.value) > 0;
    case 'ge': return compareText(e.value, v.value) >= 0;
    case 'lt': return compareText(e.value, v.value) < 0;
    case 'le': return compareText(e.value, v.value) <= 0;
  }
}

/** A number test on stored [lo, hi], as SqlBuilder.number. */
export function numberMatches(lo: number, hi: number, t: NumberTest): boolean {
  switch (t.op) {
    case 'eq': return lo >= t.low && hi < t.high;
    case 'ne': return lo < t.low || hi >= t.high;
    case 'gt': return hi > t.value;
    case 'sa': return lo > t.value;
    case 'ge': return hi >= t.value;
    case 'lt': return lo < t.value;
    case 'eb': return hi < t.value;
    case 'le': return lo <= t.value;
    case 'ap': return hi >= t.low && lo < t.high;
  }
}

/** A `_lastUpdated` test on an instant, as SqlBuilder.instant. */
export function instantMatches(at: number, t: DateTest): boolean {
  switch (t.op) {
    case 'eq': case 'ap': return at >= t.low && at < t.high;
    case 'ne': return at < t.low || at >= t.high;
    case 'gt': case 'sa': return at >= t.high;
    case 'ge': return at >= t.low;
    case 'lt': case 'eb': return at < t.low;
    case 'le': return at < t.high;
    // The instant's own millisecond holds the value's range.
    case 'co': return at <= t.low && at + 1 >= t.high;
  }
}

/**
 * Whether `stored` is in [prefix, prefix + U+10FFFF) in code point order, as SqlBuilder.prefix compares (UTF-8 bytes,
 * "C" collation): it starts with `prefix`, and U+10FFFF does not follow. Compared by UTF-16 units, a character of
 * U+E000-U+FFFF after the prefix (halfwidth katakana, fullwidth letters) sorted after the bound: a resource the store
 * finds was matched by none in memory.
 */
const prefixOf = (stored: string, prefix: string) => stored.startsWith(prefix) && stored.codePointAt(prefix.length) !== AFTER_PREFIX_POINT;

function unitMatches(t: NumberTest, system: string, code: string): boolean {
  return (t.system === undefined || t.system === system) && (t.code === undefined || t.code === code);
}

function partMatches(p: CompositePart, e: IndexRows['composites'][number]): boolean {
  switch (p.kind) {
    case 'token': return tokenMatches(p, e.system2, e.value2);
    case 'string': return prefixOf(e.value2, p.value);
    case 'date': return dateMatches(e.low, e.high, p.test);
    case 'number': {
      const lo = p.column === 'high' ? e.high : e.low;
      const hi = p.column === 'low' ? e.low : e.high;
      return numberMatches(lo, hi, p.test) && unitMatches(p.test, e.system2, e.value2);
    }
  }
}

/**
 * Whether `resource` (last updated at `lastUpdated`) meets every condition. `rows`: its index rows when
 * known (the core layer keeps them), else computed from `resource` when a condition needs them; as
 * `wordsOf` gives its words for full-text search.
 */
export async function matchConditions(
  resource: Json, lastUpdated: number, conditions: Condition[], ctx: MatchContext, rows?: IndexRows, wordsOf?: () => TextEntry | undefined,
): Promise<boolean> {
  const index = () => (rows ??= indexEntries(resource, ctx.base));
  // The words for `_text` and `_content`: the caller's (the core layer keeps them), or the resource's.
  let words: TextEntry | undefined | null = null;
  const text = () => (words === null ? (words = wordsOf ? wordsOf() : textIndexOf(resource)) : words);
  const type = resource.resourceType as string;
  const id = resource.id as string;
  const one = async (c: Condition): Promise<boolean> => {
    switch (c.kind) {
      case 'id': return c.ids.includes(id) !== (c.not === true);
      case 'lastUpdated': return c.tests.some((t) => instantMatches(lastUpdated, t));
      case 'token': return tokenConditionHolds(c, index().tokens);
      case 'token-text': return index().tokens.some((e) => e.param === c.param && c.values.some((v) => (e.display ?? '').includes(v)));
      case 'uri-prefix': return index().tokens.some((e) => e.param === c.param && c.values.some((v) => prefixOf(e.value, v)));
      case 'string':
        return index().strings.some((e) => e.param === c.param && c.values.some((v) => stringMatches(e, v)));
      case 'date': return index().ranges.some((e) => e.param === c.param && c.tests.some((t) => dateMatches(e.low, e.high, t)));
      case 'number':
        return index().ranges.some((e) => e.param === c.param && c.tests.some((t) => numberMatches(e.low, e.high, t) && unitMatches(t, e.system, e.code)));
      case 'near': return index().ranges.some((e) => e.param === c.param && c.points.some((p) => isNear(p, e.low, e.high)));
      case 'composite':
        return index().composites.some((e) => e.param === c.param && c.tests.some((t) =>
          tokenMatches({ system: t.system1, value: t.value1 }, e.system1, e.value1) && t.parts.every((p) => partMatches(p, e))));
      case 'missing': {
        const r = index();
        const list = c.table === 'search_index' ? r.tokens : c.table === 'search_string' ? r.strings : c.table === 'search_range' ? r.ranges : r.composites;
        const urls = c.urls?.map(urlPattern);
        const present = (list as { param: string; system?: string; value?: string }[]).some((e) => c.params.includes(e.param) &&
          (!c.systems || c.systems.includes(e.system ?? '') || (urls !== undefined && e.system === '' && urls.some((u) => u.test(e.value ?? '')))));
        return present !== c.missing;
      }
      case 'text': {
        const t = text();
        return !!t && c.values.some((terms) => textMatches(c.field === 'narrative' ? t.narrative : t.content, terms));
      }
      case 'compartment': return compartmentsOf(resource, ctx.base).includes(c.patient);
      case 'chain': {
        if (c.canonical) {
          const named = namedCanonicals(index().tokens.filter((e) => e.param === c.param && e.system === '').map((e) => e.value));
          return named.length > 0 && ctx.exists({ type: c.targetType, where: [canonicalCondition(named), ...c.where], sort: [], count: 1 });
        }
        const ids = index().tokens.filter((e) => e.param === c.param && e.system === c.targetType).map((e) => e.value);
        if (!ids.length) return false;
        return ctx.exists({ type: c.targetType, where: [{ kind: 'id', ids }, ...c.where], sort: [], count: 1 });
      }
      case 'has': {
        if (!c.canonical) {
          return ctx.exists({ type: c.type, where: [{ kind: 'token', param: c.param, values: [{ system: type, value: id }] }, ...c.where], sort: [], count: 1 });
        }
        // By this resource's `url` and `version` rows, as SqlBuilder.canonicalsNamed reads them.
        const rows = index().tokens;
        const versions = rows.filter((e) => e.param === 'version').map((e) => e.value);
        for (const url of new Set(rows.filter((e) => e.param === 'url' && e.system === '').map((e) => e.value))) {
          if (await ctx.exists({ type: c.type, where: [namingCanonicals(c.param, new Map([[url, versions]])), ...c.where], sort: [], count: 1 })) return true;
        }
        return false;
      }
      case 'not':
        return !(await one(c.condition));
      case 'and': {
        for (const x of c.all) if (!(await one(x))) return false;
        return true;
      }
      case 'or': {
        for (const x of c.any) if (await one(x)) return true;
        return false;
      }
    }
  };
  for (const c of conditions) if (!(await one(c))) return false;
  return true;
}
