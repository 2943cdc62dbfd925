import { createHash } from 'node:crypto';
import type { Condition, IndexRows, SearchQuery, TokenValue } from './interface/search.ts';
import { StoreValueError } from './interface/errors.ts';

/**
 * The bytes a value in one of PostgreSQL's index columns may have as it is: a B-tree entry holds at
 * most 2,704 (a third of a page), and a longer value that does not compress would fail its write.
 */
export const POSTGRES_MAX_INDEXED_BYTES = 2000;

/** The bytes of a longer value that its bounded form keeps before its digest. */
const KEPT_BYTES = 1900;

/**
 * The longest `:below` value on a uri (`uri-prefix`) that bounded forms answer exactly: a value kept
 * whole by every bounded form that starts with it (a form keeps at least KEPT_BYTES - 3 bytes, cut
 * between characters).
 */
export const MAX_PREFIX_SEARCH_BYTES = KEPT_BYTES - 3;

/** Separates a bounded form's kept bytes from its digest; no search value holds it (the compiler refuses control characters). */
const DIGEST_MARK = '\u0001';

/**
 * `s` as PostgreSQL's indexes hold it: itself up to POSTGRES_MAX_INDEXED_BYTES, else its first
 * KEPT_BYTES (whole characters), U+0001 and the SHA-256 of all of it (base64url): 1,944 bytes at most.
 * Two values have the same bounded form when they are equal (SHA-256 collisions aside), and a longer
 * value's form starts with every prefix of it up to MAX_PREFIX_SEARCH_BYTES, so equality and `:below`
 * within that length compare bounded forms exactly; an order by bounded forms is the values' order up to
 * the kept bytes.
 */
export function boundedValue(s: string): string {
  if (s.length * 3 <= POSTGRES_MAX_INDEXED_BYTES || Buffer.byteLength(s) <= POSTGRES_MAX_INDEXED_BYTES) return s;
  return `${prefixWithin(s, KEPT_BYTES)}${DIGEST_MARK}${createHash('sha256').update(s).digest('base64url')}`;
}

/** The longest prefix of `s` of whole characters within `maxBytes` UTF-8 bytes. */
function prefixWithin(s: string, maxBytes: number): string {
  let bytes = 0;
  let i = 0;
  while (i < s.length) {
    const c = s.charCodeAt(i);
    const pair = c >= 0xd800 && c <= 0xdbff && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00;
    const n = pair ? 4 : c < 0x80 ? 1 : c < 0x800 ? 2 : 3;
    if (bytes + n > maxBytes) break;
    bytes += n;
    i += pair ? 2 : 1;
  }
  return s.slice(0, i);
}

/** Whether `s` may have a bounded form other than itself (cheap: at most 3 bytes per UTF-16 unit). */
const mayBeLong = (s: string | undefined): s is string => s !== undefined && s.length * 3 > POSTGRES_MAX_INDEXED_BYTES;

/**
 * Puts `index`'s values that PostgreSQL indexes (a token's system and value, a quantity's unit system
 * and code, a composite's first system and value) in their bounded form, in place. A string's matching
 * form is cut to 256 characters by the indexer, so within the bound already. A versioned canonical `url|v`
 * whose bounded form no longer starts with its bounded `url` and a `|` gets a marker row beside it
 * (versionedMarkers). Idempotent.
 */
export function boundIndexRows(index: IndexRows): void {
  const markers = versionedMarkers(index);
  for (const e of index.tokens) {
    if (mayBeLong(e.system)) e.system = boundedValue(e.system);
    if (mayBeLong(e.value) && !e.value.endsWith(MARKER_END)) e.value = boundedValue(e.value);
  }
  index.tokens.push(...markers);
  for (const e of index.ranges) {
    if (mayBeLong(e.system)) e.system = boundedValue(e.system);
    if (mayBeLong(e.code)) e.code = boundedValue(e.code);
  }
  for (const e of index.composites) {
    if (mayBeLong(e.system1)) e.system1 = boundedValue(e.system1);
    if (mayBeLong(e.value1)) e.value1 = boundedValue(e.value1);
  }
}

/**
 * A canonical reference `url|v` is indexed with its `url` alone too (a reference row of system ''), and a `url` row
 * beside a `url|...` row of its key is that reference's, naming no other version (search-sql.ts canonicalRow, which
 * looks for a row from `url|` to `url}`). Bounded, `url|v` keeps only the first KEPT_BYTES of it and a digest, out
 * of that range when the url is that long: such a pair gets a row `bounded(url)|` U+0001 beside them, in the range,
 * which no search value equals (none holds U+0001). Only for a pair written so (its `url` row among the rows). Kept
 * as it is (at most 2,002 bytes, within PostgreSQL's B-tree entry).
 */
function versionedMarkers(index: IndexRows): IndexRows['tokens'] {
  const bare = new Set<string>();
  for (const e of index.tokens) if (e.system === '' && e.value.length >= KEPT_BYTES / 3) bare.add(`${e.param}\u0000${e.value}`);
  const markers: IndexRows['tokens'] = [];
  for (const e of index.tokens) {
    if (e.system !== '' || !mayBeLong(e.value) || e.value.includes(DIGEST_MARK)) continue;
    const bar = e.value.indexOf('|');
    if (bar <= 0 || !bare.has(`${e.param}\u0000${e.value.slice(0, bar)}`)) continue;
    const url = boundedValue(e.value.slice(0, bar));
    const marker = `${url}${MARKER_END}`;
    // One marker a url and parameter, however many of its versions the resource names there.
    if (!boundedValue(e.value).startsWith(`${url}|`) && !markers.some((m) => m.param === e.param && m.value === marker)) markers.push({ param: e.param, system: '', value: marker });
  }
  return markers;
}

/** How a marker row of versionedMarkers ends; no bounded form does (they end with a digest). */
const MARKER_END = `|${DIGEST_MARK}`;

/**
 * For a canonical `url` as a condition holds it (its bounded form on PostgreSQL, whole on SQLite): how the bounded
 * form of each of its versions `url|v` past the bound starts (its kept bytes and U+0001), where that start keeps no
 * `|` after the url, and the marker row (versionedMarkers) that a resource naming such a version holds beside it.
 * Undefined for a url whose versions' forms start with `url|`. A row starting so in a resource with the marker is
 * taken for a version of the url (another url of the same first KEPT_BYTES named there too would be as well).
 */
export function boundedVersions(url: string): { start: string; marker: string } | undefined {
  const mark = url.indexOf(DIGEST_MARK);
  if (mark >= 0) return { start: url.slice(0, mark + 1), marker: `${url}${MARKER_END}` };
  if (Buffer.byteLength(url) + 1 <= KEPT_BYTES) return undefined;
  return { start: `${prefixWithin(url, KEPT_BYTES)}${DIGEST_MARK}`, marker: `${url}${MARKER_END}` };
}

const boundedToken = (v: TokenValue): TokenValue => ({
  ...(v.system !== undefined && { system: boundedValue(v.system) }),
  ...(v.value !== undefined && { value: boundedValue(v.value) }),
});

/**
 * `c` comparing bounded forms (boundIndexRows) wherever it compares an indexed value: the same object
 * when no value of it is long. A `:below` value past MAX_PREFIX_SEARCH_BYTES, which the compiler
 * refuses, is a StoreValueError here too.
 */
export function boundedCondition(c: Condition): Condition {
  switch (c.kind) {
    case 'token':
      return c.values.some((v) => mayBeLong(v.system) || mayBeLong(v.value)) ? { ...c, values: c.values.map(boundedToken) } : c;
    case 'uri-prefix': {
      const long = c.values.find((v) => Buffer.byteLength(v) > MAX_PREFIX_SEARCH_BYTES);
      if (long !== undefined) throw new StoreValueError(`A ':below' value of '${c.param}' holds at most ${MAX_PREFIX_SEARCH_BYTES} bytes`);
      return c;
    }
    case 'number':
      return c.tests.some((t) => mayBeLong(t.system) || mayBeLong(t.code))
        ? { ...c, tests: c.tests.map((t) => ({ ...t, ...(t.system !== undefined && { system: boundedValue(t.system) }), ...(t.code !== undefined && { code: boundedValue(t.code) }) })) }
        : c;
    case 'composite':
      return c.tests.some((t) => mayBeLong(t.system1) || mayBeLong(t.value1))
        ? { ...c, tests: c.tests.map((t) => ({ ...t, ...(t.system1 !== undefined && { system1: boundedValue(t.system1) }), ...(t.value1 !== undefined && { value1: boundedValue(t.value1) }) })) }
        : c;
    case 'missing':
      return c.systems?.some(mayBeLong) ? { ...c, systems: c.systems.map(boundedValue) } : c;
    case 'chain':
    case 'has':
      return sameOrMapped(c.where, (where) => ({ ...c, where }), c);
    case 'or':
      return sameOrMapped(c.any, (any) => ({ ...c, any }), c);
    case 'and':
      return sameOrMapped(c.all, (all) => ({ ...c, all }), c);
    case 'not': {
      const condition = boundedCondition(c.condition);
      return condition === c.condition ? c : { ...c, condition };
    }
    default:
      return c;
  }
}

/** `conditions` bounded (boundedCondition): the same array when none changes. */
export function boundedConditions(conditions: Condition[]): Condition[] {
  return sameOrMapped(conditions, (mapped) => mapped, conditions);
}

function sameOrMapped<T>(conditions: Condition[], rebuild: (mapped: Condition[]) => T, same: T): T {
  const mapped = conditions.map(boundedCondition);
  return mapped.every((c, i) => c === conditions[i]) ? same : rebuild(mapped);
}

/** `q` with its conditions bounded (boundedCondition). */
export function boundedQuery(q: SearchQuery): SearchQuery {
  if (!q.where?.length) return q;
  const where = boundedConditions(q.where);
  return where === q.where ? q : { ...q, where };
}
