/**
 * `_offset`: the page that starts after the first N matches of a search, in its order (HAPI FHIR and
 * Medplum take it beside `_count`; R4 has no such parameter, and leaves paging to the server). It is
 * served as the cursor the server's own `next` links would have reached: the search is paged through
 * its first N matches (`_count` of at most MAX_COUNT a page, nothing included, counted or shaped), and
 * the page asked for is the page at that cursor. So an offset page is exactly a page of the cursor
 * paging, its `next` link the cursor's (stable as those are: keyset for `_id` and `_lastUpdated`
 * orders), and every kind of search (one type, a compartment, across types, `_contained`, the core
 * CodeSystems and ValueSets merged in) takes it alike. The walk costs a read of the matches skipped,
 * hence MAX_OFFSET; beyond it the `next` links go on. A search whose cursor is an offset already (a
 * type's sort on a parameter) names the page's cursor at once (`offsetCursor`), without the walk.
 */
import { FhirError, type FhirIssue } from '../errors.ts';
import { issue } from './outcome.ts';
import { MAX_COUNT, parseCount, type SearchResult } from './search.ts';

/** The most matches `_offset` skips (as Elasticsearch's `max_result_window`): each is read to reach the page. */
export const MAX_OFFSET = 10_000;

/**
 * The most matches the walk to an offset reads. A page may keep fewer matches than it read (Binaries out
 * of the token's reach through their securityContext, which no index holds: crud.ts rowsInReach; a
 * Provenance naming a version outside a patient's token's reach: provenance-reach.ts), so the
 * walk counts the matches the token sees, reading on past MAX_OFFSET; at most this many, then a 400.
 */
export const MAX_OFFSET_READ = 2 * MAX_OFFSET;

/** `_offset`: a non-negative integer, at most MAX_OFFSET; otherwise a 400 naming it. */
export function parseOffset(raw: string): number {
  if (!/^\d+$/.test(raw)) throw new FhirError('invalid', `Invalid _offset '${raw}': expected a non-negative integer`, { expression: ['_offset'] });
  if (raw.length > 6 || Number(raw) > MAX_OFFSET) {
    throw new FhirError('invalid', `_offset ${raw} is beyond ${MAX_OFFSET}, the most a search skips: page on with the next links (their _cursor) instead`, {
      expression: ['_offset'], issueCode: 'too-costly',
    });
  }
  return Number(raw);
}

/**
 * Checks `_offset` in a query (its modifier, its value, its repeats, and that it comes without a
 * `_cursor`), and gives its value, or undefined without one. A repeat is a warning in `warnings` (its
 * first value used), or a 400 when `strict`, as for the other result parameters read once.
 */
export function checkOffset(params: URLSearchParams, strict: boolean, warnings?: FhirIssue[]): number | undefined {
  let values: string[] = [];
  for (const [key, value] of params) {
    if (key.split(':', 1)[0] !== '_offset') continue;
    if (key !== '_offset') throw new FhirError('invalid', `Unknown modifier '${key.slice('_offset'.length)}' for '_offset', which takes none ('${key}')`, { expression: [key] });
    // Empty: ignored, as every result parameter given no value (search.html).
    if (value !== '') values = [...values, value];
  }
  if (values.length === 0) return undefined;
  if (values.length > 1) {
    const text = `'_offset' is given more than once: its first value '${values[0]}' is used, not '${values[1]}'`;
    if (strict) throw new FhirError('invalid', text, { expression: ['_offset'] });
    warnings?.push(issue('warning', 'not-supported', text, ['_offset']));
  }
  const offset = parseOffset(values[0]!);
  if (params.has('_cursor')) {
    throw new FhirError('invalid', "_offset and _cursor cannot be given together: a next link's _cursor continues the paging of an offset page", { expression: ['_offset'] });
  }
  return offset;
}

/** The query without `_offset` (any modifier). */
function withoutOffset(params: URLSearchParams): URLSearchParams {
  return new URLSearchParams([...params].filter(([key]) => key.split(':', 1)[0] !== '_offset'));
}

/** What a skipped page need not do: include, count, shape, or state its total. */
const NOT_FOR_SKIPPING = new Set(['_include', '_revinclude', '_total', '_summary', '_elements', '_count', '_cursor']);

/** A page of `count` matches of `base` from `cursor` (or the first), read only for where it ends. */
function skipQuery(base: URLSearchParams, count: number, cursor: string | undefined): URLSearchParams {
  const q = new URLSearchParams([...base].filter(([key]) => !NOT_FOR_SKIPPING.has(key.split(':', 1)[0]!)));
  q.set('_count', String(count));
  if (cursor !== undefined) q.set('_cursor', cursor);
  return q;
}

/**
 * Runs a search (`run`, of one query) at its `_offset`, if it has one: the cursor after the first
 * `_offset` matches is found by paging through them, and the page at that cursor is the answer, with
 * links of its own: `self` with `_offset`, `first`, `previous` (the offset `_count` before, or the first
 * page) and the cursor's `next`. Past the last match the page is empty (its `_total` as asked). With
 * `_summary=count` or `_count=0` no page is read and `_offset` means nothing.
 */
export async function searchAtOffset(
  params: URLSearchParams, strict: boolean, run: (params: URLSearchParams) => Promise<SearchResult>, offsetCursor?: (params: URLSearchParams, offset: number) => string | undefined,
): Promise<SearchResult> {
  const warnings: FhirIssue[] = [];
  const offset = checkOffset(params, strict, warnings);
  if (offset === undefined) return run(params);
  const base = withoutOffset(params);
  const count = parseCount(base.get('_count'));
  if (count === 0 || base.get('_summary') === 'count') return run(base);
  // A search paged by offset (a sort on a parameter) names the page's start itself: one statement, as its next links do.
  let cursor = offset === 0 ? undefined : offsetCursor?.(base, offset);
  let past = false;
  let read = 0;
  for (let skipped = cursor === undefined ? 0 : offset; skipped < offset;) {
    const n = Math.min(offset - skipped, MAX_COUNT);
    if ((read += n) > MAX_OFFSET_READ) {
      throw new FhirError('invalid', `Reaching _offset ${offset} takes reading more than ${MAX_OFFSET_READ} matches (Binaries out of the access token's reach are read and left out): narrow the search, or page on with the next links`, {
        expression: ['_offset'], issueCode: 'too-costly',
      });
    }
    const page = await run(skipQuery(base, n, cursor));
    // No match after these: the offset is at or past the last.
    if (page.next === undefined) {
      past = true;
      break;
    }
    cursor = page.next;
    // The matches the token sees: a page leaves out the Binaries out of its reach, which are not skipped.
    skipped += page.rows.length;
  }
  const at = new URLSearchParams(base);
  if (cursor !== undefined) at.set('_cursor', cursor);
  const result = await run(at);
  // Read by its own cursor, a page past the last match is empty already; otherwise it is made so.
  if (past) {
    result.rows = [];
    result.included = [];
    delete result.next;
    // Its `_total` as asked (`_total=accurate`), as any page after the first: not the first page's own.
    const total = base.get('_total');
    if (total !== 'accurate' && total !== 'estimate') delete result.total;
  }
  result.page = { offset: { at: offset, previous: offset === 0 ? undefined : offset > count ? offset - count : null } };
  if (warnings.length) result.warnings = [...warnings, ...result.warnings];
  return result;
}
