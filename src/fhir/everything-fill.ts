/**
 * The rows of one page of `Patient/$everything`, `Patient/{id}/$everything` or `Encounter/{id}/$everything`
 * (src/fhir/everything.ts, src/fhir/encounter-everything.ts), and what they refer to.
 *
 * Without a `_type` outside the compartment every row read is a match: a page reads `_count` rows (and one
 * more, to know whether a next page has any). With one (`_type=Organization`, `_type=Observation,Medication`),
 * a page reads every type's rows to follow their references, and most rows are no match: it reads on, in
 * reads growing fourfold, until what it returns reaches `_count` (its matches, and the resources of `_type`
 * outside the compartment that its rows refer to, each once; a resource of a type returned as matches, the
 * Encounter an Observation names under `_type=Encounter,Organization`, is the match of its own page and so
 * no measure of this one), or it has read FILL_ROWS rows (`_count` when larger) or FILL_CHARS characters of rows
 * after its first read, or the records end; only then
 * does it give its `next`. A page so never stops empty while records are left within its row budget (a row whose
 * references pass the includes' bounds, which ends a page, is taken by a page that has nothing else: it is no
 * empty page before that row's own), a request
 * reads a bounded number of rows whatever the records, and each page but the last reads at least `_count` rows
 * (`_count` matches are as many rows), so no walk takes more pages than one that read `_count` rows a page.
 */
import type { FhirIssue } from '../errors.ts';
import type { ResourceVersion } from '../store/types.ts';
import type { FhirDeps, FhirRequest } from './crud.ts';
import { includeNamer, namedBinaries, referenced, type EverythingInput, type IncludedSoFar, type Referenced } from './everything.ts';
import { issue } from './outcome.ts';
import { MAX_INCLUDES } from './search.ts';
import { MAX_BUNDLE_READ_CHARS } from './bundle-reads.ts';

/**
 * Most rows one page reads to fill itself when `_type` names a type outside the compartment (`_count`
 * when larger): twice a page of `_count=1000`, about 0.1 s at most on a loaded 2-core machine
 * (docs/PERFORMANCE.md, "`$everything` pages that read types outside `_type`").
 */
export const FILL_ROWS = 2000;
/** How much larger each read of a page that fills itself is than the one before. */
const GROWTH = 4;
/**
 * Most characters of rows a page that fills itself reads past its first read of `_count` rows (a search Bundle's
 * GET entries' bound): its reads are sized by the characters of the rows read so far too, so that records of
 * megabytes (a DocumentReference's inline PDF) are not read a thousand at once for a page of `_count=1`.
 */
export const FILL_CHARS = MAX_BUNDLE_READ_CHARS;

/** A page's rows: its matches, what it includes, and the last row it read when more are left (its `next`'s position). */
export interface PageRows<R extends ResourceVersion> {
  matches: R[];
  included: ResourceVersion[];
  last?: R;
}

/**
 * The rows of a page. `readRows(after, count)` reads the first `count` rows after the row `after` (undefined:
 * from the page's cursor); `leaveOut` the types never included (referenced). `warnings` takes what the
 * includes left out, and a note on a page that read its row budget without anything to return.
 *
 * Where a page's rows name more than its includes take (MAX_INCLUDES, `Referenced.over`), the page ends before
 * the row that passes them (`fitted`), so that it holds whole what its rows refer to and the rows after come
 * with theirs on the next page (the includes past the bound were left out, and no page gave them). `_since`
 * keeps the included resources updated since then too (R4: "Resources updated after this period will be
 * included in the response").
 */
export async function pageRows<R extends ResourceVersion>(
  deps: FhirDeps, req: FhirRequest, params: URLSearchParams, input: Pick<EverythingInput, 'types' | 'walk' | 'limit' | 'since'>,
  readRows: (after: R | undefined, count: number) => Promise<R[]>, leaveOut: (type: string) => boolean, warnings: FhirIssue[],
): Promise<PageRows<R>> {
  const { types, walk, limit, since } = input;
  const namesOf = includeNamer(deps, req, params, leaveOut);
  const recent = (vs: ResourceVersion[]) => (since === undefined ? vs : vs.filter((v) => v.lastUpdated >= since.low));
  /**
   * What `rows` refer to, the page's first rows when `first`; where they name more than the includes take, those
   * of the first rows that do not (their warnings dropped), then `kept`, how many. From a read after the page's
   * first, none: the page ends before it (`kept` 0).
   */
  const fit = async (rows: R[], first: boolean, so?: IncludedSoFar): Promise<Referenced & { kept: number }> => {
    const before = { warnings: warnings.length, chars: so?.chars ?? 0 };
    // Rows naming more than PAGE_READ_IN_REACH resources not held or out of reach stop the reading (`stopped`), as
    // rows naming more than the includes take do: fewer rows are read; the first row alone is the page.
    const refs = await referenced(deps, req, rows, params, leaveOut, warnings, so, first);
    if (!refs.over) return { ...refs, kept: rows.length };
    // The page's first row alone names more: it is the page, with what was read of its references and one warning
    // naming it: reading stopped (pastReach's), or past MAX_INCLUDES (passedBound's, in place of the includes' own
    // warnings: search's "Only the first 1000", the attachments' Binaries left out).
    if (first && rows.length === 1) {
      if (refs.stopped) return { ...refs, kept: 1 };
      warnings.length = before.warnings;
      warnings.push(passedBound(rows[0]!, namesOf, refs, since === undefined ? undefined : recent(refs.included).length));
      return { ...refs, kept: 1 };
    }
    warnings.length = before.warnings;
    if (so) so.chars = before.chars;
    if (!first) return { included: [], over: false, kept: 0 };
    const kept = fitted(rows, namesOf);
    if (kept === 1) return fit(rows.slice(0, 1), true, so);
    return { ...(await referenced(deps, req, rows.slice(0, kept), params, leaveOut, warnings, so, first)), kept };
  };
  if (types === walk) {
    const rows = await readRows(undefined, limit + 1);
    const refs = await fit(rows.slice(0, limit), true);
    // The page ends before the row whose attached Binaries passed its characters (never its first).
    const matches = rows.slice(0, refs.cut ?? refs.kept);
    return { matches, included: recent(refs.included), ...(rows.length > matches.length && { last: matches[matches.length - 1] }) };
  }
  const budget = Math.max(FILL_ROWS, limit);
  const matches: R[] = [];
  const so: IncludedSoFar = { included: new Map(), chars: 0 };
  const warned = warnings.length;
  let read = 0;
  /** The characters of the rows read. */
  let chars = 0;
  /** The included resources of types only includes bring (those of a type returned as matches are some page's match). */
  let outside = 0;
  let last: R | undefined;
  let more = true;
  /** Whether the page has nothing to return yet: no match, nothing included. */
  const empty = () => matches.length === 0 && so.included.size === 0;
  /** Adds rows read, `chunk`, to the page: its matches, and `refs`, what they refer to. */
  const take = (chunk: R[], refs: Referenced) => {
    for (const r of chunk) if (types.includes(r.type)) matches.push(r);
    read += chunk.length;
    for (const r of chunk) chars += r.content.length;
    if (chunk.length) last = chunk[chunk.length - 1];
    for (const v of recent(refs.included)) {
      const key = `${v.type}/${v.id}`;
      if (!so.included.has(key) && !types.includes(v.type)) outside++;
      so.included.set(key, v);
    }
  };
  for (let size = limit; more; size *= GROWTH) {
    // After the first read, no more rows than the characters left take at the size of those read so far.
    const room = read === 0 ? size : Math.max(1, Math.floor((FILL_CHARS - chars) / (chars / read)));
    const count = Math.min(size, budget - read, room);
    const rows = await readRows(last, count + 1);
    let chunk = rows.slice(0, count);
    // At most `_count` matches: the page ends at the row that makes them so.
    for (let i = 0, m = matches.length; i < chunk.length; i++) {
      if (types.includes(chunk[i]!.type) && ++m === limit) (chunk = chunk.slice(0, i + 1));
    }
    // And before the row whose references pass what the includes take, or whose attached Binaries pass the
    // page's characters (those of the rows before it fit). Rows after reads that found nothing to return are read as
    // the page's first: the row that passes is then the page's (alone, with what was read of its references and a
    // warning), not left to a next page after an empty one.
    const refs: Referenced & { kept: number } = chunk.length ? await fit(chunk, read === 0 || empty(), so) : { included: [], over: false, kept: 0 };
    let taken = refs.cut ?? refs.kept;
    const full = taken < chunk.length;
    take(chunk.slice(0, taken), refs);
    // The rows before the one that passes found nothing either: that row joins them, read as the page's first row
    // alone (its references read up to their bounds), so that the page carries it, and what it refers to or the
    // warning of what it left out, rather than coming back empty (the rows read before it are no page of their own).
    if (full && empty()) {
      const alone = await fit(chunk.slice(taken, taken + 1), true, so);
      const kept = alone.cut ?? alone.kept;
      take(chunk.slice(taken, taken + kept), alone);
      taken += kept;
    }
    more = rows.length > taken;
    // What the includes left out (past their bounds) ends the page, as do MAX_INCLUDES included (of the types that
    // do not count, the Encounters Observations name under `_type=Encounter,Organization`): the next page reads on.
    if (full || matches.length + outside >= limit || read >= budget || chars >= FILL_CHARS || warnings.length > warned || so.included.size >= MAX_INCLUDES) break;
  }
  // A resource the first reads included that a later read has as a match is a match alone (bdl-7: once in a Bundle).
  const kept = new Set(matches.map((r) => `${r.type}/${r.id}`));
  const included = [...so.included.values()].filter((v) => !kept.has(`${v.type}/${v.id}`));
  if (more && matches.length + included.length === 0) {
    warnings.push(issue('information', 'informational', `This page read ${read} records without finding any resource of _type; the records go on: its next link reads on from where it stopped`, ['_type']));
  }
  return { matches, included, ...(more && { last }) };
}

/**
 * How many of `rows`, from the first, name at most MAX_INCLUDES resources together (`namesOf`: ids, versions,
 * canonicals, attached Binaries, held or not: at least what the includes read); the first always (a row naming
 * more alone is a page of its own: passedBound).
 */
function fitted(rows: ResourceVersion[], namesOf: (row: ResourceVersion) => string[]): number {
  const keys = new Set<string>();
  let k = 0;
  for (const row of rows) {
    const fresh = new Set(namesOf(row).filter((x) => !keys.has(x)));
    if (keys.size + fresh.size > MAX_INCLUDES && k > 0) break;
    for (const x of fresh) keys.add(x);
    k++;
  }
  return k;
}

/**
 * The one warning of a page that is `row` alone, whose references pass what a page includes: how many resources
 * it names (`namesOf`, held or not), how many of them the page includes (`since`: how many of those read were
 * updated since `_since`, the page's, where it is given), and the Binaries of its attachments left out (the first
 * ten), to be read by the references it holds.
 */
function passedBound(row: ResourceVersion, namesOf: (row: ResourceVersion) => string[], refs: Referenced, since?: number): FhirIssue {
  const name = `${row.type}/${row.id}`;
  const names = new Set(namesOf(row)).size;
  const binaries = refs.leftOut?.length ? ` (of its attachments' Binaries ${refs.leftOut.length} left out: ${namedBinaries(refs.leftOut)}, to be read by their url)` : '';
  const included = since === undefined ? `${refs.included.length} are included` : `${refs.included.length} were read, ${since} of them updated since _since are included,`;
  return issue('warning', 'too-costly', `${name} refers to ${names} resources, more than a page includes (${MAX_INCLUDES}): ${included} and the others left out${binaries}; read them by the references ${name} holds`);
}
