/**
 * `Patient/{id}/$everything` and `Patient/$everything` (FHIR R4 Patient operation): the patients, every
 * resource in their compartments, and the resources those refer to, paged across types. `start` and
 * `end` (care dates), `_since`, `_type` and `_count` as R4 defines them; patient-context tokens see only their own patient. The rows are
 * listed, so a type needs read and search to be in them (enumerationAccess); the instance's Patient is read by id.
 * Matches come patient after patient (the one, or every live Patient in id order), each patient's type
 * after type (Patient first, then the compartment's other types in the CompartmentDefinition's order),
 * each type's by id; a page's `_cursor` is the position of its last match (its patient at the type
 * level, its type's index, its id). src/fhir/everything-rows.ts reads them.
 */
import { FhirError, type FhirIssue } from '../errors.ts';
import type { CompartmentRow, Condition, ResourceVersion } from '../store/types.ts';
import type { FhirDeps, FhirRequest } from './crud.ts';
import { readResource } from './crud.ts';
import { enumerationAccess, requireAccess } from './access.ts';
import { compartmentTypes, paramOf } from './definitions.ts';
import { countedEverything, countParams, countsOnly } from './everything-count.ts';
import { everythingRows } from './everything-rows.ts';
import { pageRows } from './everything-fill.ts';
import { dateTest } from './search-compile.ts';
import { queryDateRange } from './dates.ts';
import { addIncludes, DEFAULT_COUNT, includeKeysOf, MAX_COUNT, MAX_INCLUDES, PAGE_READ_IN_REACH, type PageLinks } from './search.ts';
import { attachmentUrls, mayNameBinary } from './attachments.ts';
import { MAX_BUNDLE_READ_CHARS } from './bundle-reads.ts';
import { readableVersions } from './read-many.ts';
import { parseReference } from './references.ts';
import { typeList } from './search-system.ts';
import { ID_PATTERN } from './resource-types.ts';
import { issue } from './outcome.ts';

export interface EverythingPage {
  rows: ResourceVersion[];
  included: ResourceVersion[];
  next?: string;
  self: URLSearchParams;
  /** A page after the first: its own cursor, for its `self` link (with a `first` link without it), as search's. */
  page?: PageLinks;
  /** Parameters ignored under lenient handling (the Bundle's OperationOutcome), and what the page left out. */
  warnings: FhirIssue[];
  /** The warnings of `warnings` about the parameters alone (ignored under lenient handling). */
  ignored?: FhirIssue[];
  /** `_count=0`: how many matches the pages hold (countedEverything), the page none. */
  total?: number;
}

/** The parameters `$everything` takes (R4 Patient- and Encounter-everything: `_since`, `_type`, `_count`; `_cursor` pages). */
const PARAMETERS = new Set(['_since', '_type', '_count', '_cursor', '_format', '_pretty']);
/** R4 Patient-everything's care dates, which Encounter-everything does not define. */
const CARE_DATES = ['start', 'end'];

/**
 * The parameters of `params` that the `$everything` does not take (`careDates`: whether it takes `start`
 * and `end`). Under strict handling a 400 naming the first, otherwise a warning each, as a search ignores
 * an unknown parameter.
 */
function ignored(params: URLSearchParams, strict: boolean, careDates: boolean): FhirIssue[] {
  const out: FhirIssue[] = [];
  for (const key of new Set(params.keys())) {
    if (PARAMETERS.has(key) || (careDates && CARE_DATES.includes(key))) continue;
    const what = `'${key}' is not a parameter of $everything`;
    if (strict) throw new FhirError('not-supported', what, { expression: [key] });
    out.push(issue('warning', 'not-supported', `${what} and was ignored`, [key]));
  }
  return out;
}

/** R4's clinical-date search parameter: the care date of the types it is defined on (Observation, Encounter, Procedure...). */
const CLINICAL_DATE = 'http://hl7.org/fhir/SearchParameter/clinical-date';

/** Patient-everything's care dates: `start` and `end` as given (for the links), and the instants they bound. */
export interface CareDates {
  start?: string;
  end?: string;
  /** From the start of `start`'s day (month, year), to the end of `end`'s. */
  from?: number;
  until?: number;
}

/**
 * R4 Patient-everything's `start` and `end` ("care dates, not record currency dates"), each a date (or
 * dateTime) without a prefix, once, start not after end; 400 naming the one at fault. Undefined when neither is given.
 */
function careDates(params: URLSearchParams, now: number): CareDates | undefined {
  const out: CareDates = {};
  for (const name of ['start', 'end'] as const) {
    const all = params.getAll(name);
    if (all.length === 0) continue;
    const raw = all[0]!;
    if (all.length > 1) throw new FhirError('invalid', `$everything takes one '${name}'`, { expression: [name] });
    // A date, as R4 types it (a dateTime too): no search prefix, which the parameter does not take (nor does its
    // 400 offer one: the search's words for a bad date list the prefixes).
    const range = /^\d{4}/.test(raw) ? careDate(name, raw, now) : undefined;
    if (range === undefined) throw new FhirError('invalid', `Invalid ${name} '${raw}': expected a date (YYYY, YYYY-MM or YYYY-MM-DD)`, { expression: [name] });
    out[name] = raw;
    if (name === 'start') out.from = range.low;
    else out.until = range.high;
  }
  if (out.from !== undefined && out.until !== undefined && out.from >= out.until) {
    throw new FhirError('invalid', `start '${out.start}' is after end '${out.end}'`, { expression: ['start'] });
  }
  return out.start === undefined && out.end === undefined ? undefined : out;
}

/** The range of a care date as `dateTest` reads it, or undefined where it is no date. */
function careDate(name: string, raw: string, now: number): ReturnType<typeof dateTest> | undefined {
  try {
    return dateTest(name, raw, now);
  } catch (err) {
    if (err instanceof FhirError && err.status === 400) return undefined;
    throw err;
  }
}

/**
 * What `start` and `end` keep of a type: on the types R4's clinical-date parameter is defined on (their
 * `date`: Observation's effective[x], Encounter's period...), the resources whose care date overlaps
 * [start, end] (ends after the start's beginning, begins before the end's end: an Encounter from
 * 2023-12-20 to 2024-01-05 is in `end=2023` and in `start=2024`); one without a care date is in no range.
 * The other types (the Patient, a Condition, a MedicationRequest) have no care date and are kept whole.
 */
export function careConditions(type: string, care: CareDates): Condition[] | undefined {
  if (paramOf(type, 'date')?.url !== CLINICAL_DATE) return undefined;
  const out: Condition[] = [];
  // `gt` tests the stored range's high end against the test's, `lt` its low end against the test's (SqlBuilder.date).
  if (care.from !== undefined) out.push({ kind: 'date', param: 'date', tests: [{ op: 'gt', low: care.from, high: care.from }] });
  if (care.until !== undefined) out.push({ kind: 'date', param: 'date', tests: [{ op: 'lt', low: care.until, high: care.until }] });
  return out;
}

/**
 * Where a page starts: the patient (type level), the type (its index in the types read) and the last id of that
 * type read. Its cursor names the type (`y`): an index means another type where the types read differ (another
 * `_type`, a token of other scopes, another release's compartment).
 */
export interface Position {
  p?: string;
  t: number;
  a?: string;
}

/** A cursor as given: the type by name (`y`), or, in the format before it, by its index in the types read (`t`). */
interface Cursor {
  p?: string;
  y?: string;
  t?: number;
  a?: string;
}

const INVALID_CURSOR = 'Invalid _cursor: it is none this server gives; search again from the first page (without _cursor)';

function decode(raw: string): Cursor {
  try {
    const v = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as Cursor | null;
    // Only what encode writes: a type, and ids where present (a forged cursor is a 400, never a 500).
    const id = (x: unknown) => x === undefined || (typeof x === 'string' && ID_PATTERN.test(x));
    const type = v !== null && typeof v === 'object' && (typeof v.y === 'string' ? v.t === undefined : Number.isSafeInteger(v.t) && v.t! >= 0);
    if (type && id(v!.p) && id(v!.a)) return v!;
  } catch {
    // fall through
  }
  throw new FhirError('invalid', INVALID_CURSOR, { expression: ['_cursor'] });
}

/**
 * The position a cursor names among `walk` (`all`: the operation's every type, in order). A type not read now
 * (the token reads other types than the one given the cursor) starts at the next type read after it. A cursor of
 * the earlier format names a type by its index, which meant what it means now unless `_type` names a type outside
 * the compartment (it indexed `_type`'s compartment types, and since their references are followed, every type read): that
 * one is a 400 telling the client to start again, not a walk restarted or gone on from another type.
 */
function positionOf(raw: string | null, all: string[], types: string[], walk: string[]): Position {
  if (raw === null) return { t: 0 };
  const c = decode(raw);
  const at = (p: Position): Position => (c.p === undefined ? p : { p: c.p, ...p });
  if (c.y === undefined) {
    if (walk !== types) {
      throw new FhirError('invalid', '_cursor: this cursor was given by an earlier version of this server and cannot be continued with a _type naming a type outside the compartment: start again from the first page (without _cursor)', { expression: ['_cursor'] });
    }
    return at({ t: c.t!, ...(c.a !== undefined && { a: c.a }) });
  }
  const t = walk.indexOf(c.y);
  if (t >= 0) return at({ t, ...(c.a !== undefined && { a: c.a }) });
  const rank = all.indexOf(c.y);
  if (rank < 0) throw new FhirError('invalid', INVALID_CURSOR, { expression: ['_cursor'] });
  const next = walk.findIndex((x) => all.indexOf(x) > rank);
  return at({ t: next < 0 ? walk.length : next });
}

/** The cursor of the position after `id` of `type` (of `patient`, at the type level). */
export const encodePosition = (p: { p?: string; type: string; a: string }) => Buffer.from(JSON.stringify({ ...(p.p !== undefined && { p: p.p }), y: p.type, a: p.a })).toString('base64url');

/**
 * The types an `$everything` returns: `all` (its focus's type first) restricted by `_type`, those the token
 * reads. Without `_type`, not AuditEvent: the record of who read and wrote the patient's data (CINDER_AUDIT
 * writes one for each request, this one too) is no part of the patient's record, and would grow it with every
 * read; `_type=AuditEvent` asks for it.
 */
function typesOf(req: FhirRequest, all: string[], raw: string | null, includes: (type: string) => boolean): { types: string[]; walk: string[] } {
  const every = all.filter((t) => t !== 'AuditEvent' && req.access.can(t, 'r'));
  if (raw === null) return { types: every, walk: every };
  const wanted = typeList(raw);
  // As a search's: a `_type` of no type answered an empty page, as if the patient had no records.
  if (wanted.length === 0) throw new FhirError('invalid', '_type names no resource type', { expression: ['_type'] });
  const types = all.filter((t) => wanted.includes(t) && req.access.can(t, 'r'));
  // A type outside the compartments (Practitioner, Organization, Medication, Binary...) comes only as what the
  // records refer to, whichever records those are: the pages read every type (R4: `_type` names the types of
  // the resources returned, not those whose references are followed; HAPI FHIR's issue 4844). One the token may not
  // read is none of them: every record was read for nothing.
  const outside = wanted.some((t) => !all.includes(t) && includes(t));
  return { types, walk: outside ? all.filter((t) => types.includes(t) || every.includes(t)) : types };
}

/** Every `_type` parameter's types as one comma-separated list (R4 repeats the parameter, as search ORs a list), or null without one. */
function typesParam(params: URLSearchParams): string | null {
  const all = params.getAll('_type');
  return all.length === 0 ? null : all.join(',');
}

/** What a page of an `$everything` asks for (R4 Patient- and Encounter-everything take the same parameters). */
export interface EverythingInput {
  warnings: FhirIssue[];
  /** `_count`: the page's most matches. */
  limit: number;
  /** `_since`'s range. */
  since?: { low: number; high: number };
  /** `start` and `end` (Patient-everything's care dates). */
  care?: CareDates;
  /** The types returned as matches, in order (restricted by `_type` and the token's scopes). */
  types: string[];
  /**
   * The types whose rows a page reads, in order (`_type`'s cursor positions index it): `types`, or, when `_type`
   * names a type outside the compartment, every type the token reads, whose references the page follows.
   */
  walk: string[];
  /** Where the page starts (`_cursor`). */
  pos: Position;
  /** The parameters its links carry. */
  self: URLSearchParams;
  /** A page after the first: its own cursor, for its `self` link. */
  page: { page?: PageLinks };
}

/**
 * The parameters of an `$everything` over `all` (the focus's type first), checked: 400 naming the one that
 * is wrong. `includes`: whether the page reads a type as an include (read on it, as `_include`'s targets are
 * read); `careDates`: whether it takes `start` and `end` (Patient-everything does, Encounter-everything not).
 */
export function everythingInput(deps: FhirDeps, req: FhirRequest, params: URLSearchParams, strict: boolean, all: string[], includes: (type: string) => boolean, takesCareDates = false): EverythingInput {
  const warnings = ignored(params, strict, takesCareDates);
  const care = takesCareDates ? careDates(params, deps.clock.now()) : undefined;
  // Digits alone, as search's _count (`1e9`, `0x10` and ` 5` were taken); at most a page's most (0 is countedEverything's).
  const rawCount = params.get('_count');
  if (rawCount !== null && !/^\d+$/.test(rawCount)) throw new FhirError('invalid', `Invalid _count '${rawCount}': expected a non-negative integer`, { expression: ['_count'] });
  const limit = rawCount === null ? DEFAULT_COUNT : rawCount.length > 6 ? MAX_COUNT : Math.min(Number(rawCount), MAX_COUNT);
  const rawSince = params.get('_since');
  // An instant (a date or dateTime taken too), as history's `_since`: no search prefix (`_since=lt2026` was taken as `ge`).
  const since = rawSince === null ? undefined : queryDateRange(rawSince);
  if (since === null) throw new FhirError('invalid', `Invalid _since '${rawSince}': expected a FHIR instant, dateTime or date`, { expression: ['_since'] });
  // `_type` may be repeated (R4: 0..*, each a comma-separated list): the types of all of them.
  const wantedTypes = typesParam(params);
  const { types, walk } = typesOf(req, all, wantedTypes, includes);
  const self = new URLSearchParams();
  for (const key of ['_since', '_type', '_count', ...(care ? CARE_DATES : [])]) if (params.get(key) !== null) self.set(key, key === '_type' ? wantedTypes! : params.get(key)!);
  const cursor = params.get('_cursor');
  // Keyset pages: the previous page's cursor is not known, so there is no `previous` link.
  const page = cursor === null ? {} : { page: { cursor } };
  return { warnings, limit, types, walk, pos: positionOf(cursor, all, types, walk), self, page, ...(since && { since: { low: since.low, high: since.high } }), ...(care && { care }) };
}

/**
 * What the earlier reads of a page included (everything-fill.ts reads a page in several): not read again,
 * and the Binaries' characters counted against the page's bound.
 */
export interface IncludedSoFar {
  included: Map<string, ResourceVersion>;
  chars: number;
}

/** What `referenced` gives: the resources, and where the rows' attached Binaries passed the page's characters. */
export interface Referenced {
  included: ResourceVersion[];
  /**
   * The index of the first row whose attached Binaries did not fit the page's characters (MAX_ATTACHED_CHARS):
   * the page ends before it, and the next page includes them with it. Undefined when all fit, or when that row
   * is the page's first (its Binaries past the bound are then named in a warning).
   */
  cut?: number;
  /**
   * Whether the rows name more than a page includes (MAX_INCLUDES of `_include`'s targets, or of Binaries): some
   * were left out, with a warning (everything-fill.ts then ends the page before the row that passes the bound).
   */
  over: boolean;
  /**
   * Whether reading what the rows name stopped past PAGE_READ_IN_REACH references to resources not held or out of
   * reach (`over` too): those not read were left out, with a warning naming the row when it is the one read.
   */
  stopped?: boolean;
  /** The ids of the Binaries of the page's first row left out past the page's bound, named in a warning. */
  leftOut?: string[];
}

/**
 * The resources a page's rows refer to (Practitioner, Organization, Medication...), once per page,
 * but those of the types `leaveOut` names, then the Binaries their Attachments name by url
 * (attachedBinaries); `_type` restricts them too. `warnings` takes what was left out for its cost;
 * `so`, what the page's earlier reads included, when it is read in several; `first`, whether `rows[0]` is
 * the page's first row.
 */
export async function referenced(deps: FhirDeps, req: FhirRequest, rows: ResourceVersion[], params: URLSearchParams, leaveOut: (type: string) => boolean, warnings: FhirIssue[], so?: IncludedSoFar, first = true): Promise<Referenced> {
  const includes = [...new Set(rows.map((r) => r.type))].map((source) => ({ source, param: '*', iterate: false }));
  const wanted = typesParam(params);
  const only = wanted === null ? undefined : new Set(wanted.split(',').map((x) => x.trim()));
  // Only `_type`'s types are read: the others, read to be dropped, took the page's MAX_INCLUDES (an Organization
  // named after 1,000 Practitioners was left out, silently) and cost a read each.
  // Past PAGE_READ_IN_REACH references read to no purpose reading stops, in $everything's words: it takes no `_include`
  // to narrow, and a record naming that many would otherwise be a 400 on every page that reaches it.
  const reading = { stopped: false };
  const pastReach = (unread: number) => {
    reading.stopped = true;
    // Kept only where the row is the page's one (everything-fill.ts reads fewer rows again otherwise).
    const row = `${rows[0]!.type}/${rows[0]!.id}`;
    const what = rows.length === 1 ? row : `The records from ${row} on`;
    return issue('warning', 'too-costly', `${what} name${rows.length === 1 ? 's' : ''} more than ${PAGE_READ_IN_REACH} resources that are not held or out of this token's reach: reading the references stopped after them, and the ${unread} named past them are left out; read them by the references ${rows.length === 1 ? `${row} holds` : 'those records hold'}`);
  };
  const inc = await addIncludes(deps, req, { includes, revincludes: [] }, rows, only ? (type) => leaveOut(type) || !only.has(type) : leaveOut, [], pastReach);
  // Past MAX_INCLUDES the rest are left out: the page says so, as a search's does.
  for (const w of inc.warnings) if (!warnings.some((x) => x.diagnostics === w.diagnostics)) warnings.push(w);
  const included = only ? inc.included.filter((r) => only.has(r.type)) : inc.included;
  const over = inc.warnings.length > 0;
  if (only && !only.has('Binary')) return { included, over, ...(reading.stopped && { stopped: true }) };
  const attached = await attachedBinaries(deps, req, rows, included, warnings, first, so);
  return {
    included: [...included, ...attached.binaries], over: over || attached.over, ...(attached.cut !== undefined && { cut: attached.cut }),
    ...(reading.stopped && { stopped: true }), ...(attached.left?.length && { leftOut: attached.left }),
  };
}

/**
 * What `referenced` reads for one row, as keys (`Type/id`, a version's, a canonical's): what its references name
 * of the types it includes (readable, not left out, `_type`'s when given), and the Binaries its Attachments name
 * by url. A page counts them to keep its includes within MAX_INCLUDES (everything-fill.ts).
 */
export function includeNamer(deps: FhirDeps, req: FhirRequest, params: URLSearchParams, leaveOut: (type: string) => boolean): (row: ResourceVersion) => string[] {
  const wanted = typesParam(params);
  const only = wanted === null ? undefined : new Set(wanted.split(',').map((x) => x.trim()));
  const base = deps.fhirBase?.(req.tenant);
  const binaries = (!only || only.has('Binary')) && req.access.can('Binary', 'r');
  return (row) => {
    const out = includeKeysOf(row, base).filter(([type]) => req.access.can(type, 'r') && !leaveOut(type) && (!only || only.has(type))).map(([, key]) => key);
    if (binaries && mayNameBinary(row.content)) {
      for (const url of attachmentUrls(JSON.parse(row.content) as Record<string, unknown>)) {
        const ref = parseReference(url, base);
        if (ref?.type === 'Binary') out.push(`Binary/${ref.id}`);
      }
    }
    return out;
  };
}

/** Most characters of Binaries one page includes for its Attachments (a search Bundle's GET entries' bound). */
const MAX_ATTACHED_CHARS = MAX_BUNDLE_READ_CHARS;

/**
 * The Binaries of this server that the matches' Attachments name by url (`Binary/{id}`, or under the
 * tenant's FHIR base; R4 Patient-everything: "including binaries and attachments"), those not among the
 * matches or `already` included, read as `_include` reads its targets (the token's access, a Binary's
 * securityContext): one the token may not read, unknown or deleted is left out. Their content is bounded
 * per page (MAX_ATTACHED_CHARS, MAX_INCLUDES of them): the page ends before the row whose Binaries pass it
 * (`cut`), which comes with them on the next page; those of the page's first row (`first`) past it are left
 * out with a warning naming them, to be read by their url.
 */
async function attachedBinaries(deps: FhirDeps, req: FhirRequest, rows: ResourceVersion[], already: ResourceVersion[], warnings: FhirIssue[], first: boolean, so?: IncludedSoFar): Promise<{ binaries: ResourceVersion[]; cut?: number; over: boolean; left?: string[] }> {
  if (!req.access.can('Binary', 'r')) return { binaries: [], over: false };
  const base = deps.fhirBase?.(req.tenant);
  const earlier = so ? [...so.included.values()] : [];
  const have = new Set([...rows, ...already, ...earlier].filter((r) => r.type === 'Binary').map((r) => r.id));
  const ids: string[] = [];
  /** The row that names each id first. */
  const rowOf = new Map<string, number>();
  for (const [i, r] of rows.entries()) {
    if (!mayNameBinary(r.content)) continue;
    for (const url of attachmentUrls(JSON.parse(r.content) as Record<string, unknown>)) {
      const ref = parseReference(url, base);
      if (ref?.type === 'Binary' && !have.has(ref.id)) (have.add(ref.id), ids.push(ref.id), rowOf.set(ref.id, i));
    }
  }
  if (ids.length === 0) return { binaries: [], over: false };
  // The page's bound counts the Binaries its earlier reads included.
  const room = Math.max(0, MAX_INCLUDES - earlier.filter((r) => r.type === 'Binary').length);
  const found = room ? await readableVersions(deps, req, 'Binary', ids.slice(0, room)) : new Map<string, ResourceVersion>();
  const out: ResourceVersion[] = [];
  const left: string[] = ids.slice(room);
  let chars = so?.chars ?? 0;
  let cut: number | undefined;
  for (const id of ids.slice(0, room)) {
    const v = found.get(id);
    if (v === undefined) continue;
    if (chars + v.content.length <= MAX_ATTACHED_CHARS) (chars += v.content.length, out.push(v));
    else if (rowOf.get(id)! > 0 || !first) {
      // The page ends before the row that names it: the Binaries of the rows after are the next page's too.
      cut = rowOf.get(id)!;
      break;
    } else left.push(id);
  }
  if (so) so.chars = chars;
  const over = ids.length > room;
  if (cut !== undefined) return { binaries: out.filter((v) => rowOf.get(v.id)! < cut!), cut, over };
  if (left.length) {
    warnings.push(issue('warning', 'too-costly', `${rows[0]!.type}/${rows[0]!.id}'s attachments name more Binaries than one page includes (${MAX_INCLUDES}, ${MAX_ATTACHED_CHARS} characters): ${left.length} left out (${namedBinaries(left)}), to be read by their url`));
  }
  return { binaries: out, over, left };
}

/** The first ten of the Binaries `ids` (left out) as `Binary/id`, `...` after them when there are more. */
export function namedBinaries(ids: string[]): string {
  const named = ids.slice(0, 10).map((id) => `Binary/${id}`).join(', ');
  return `${named}${ids.length > 10 ? '...' : ''}`;
}

export async function everything(deps: FhirDeps, req: FhirRequest, given: URLSearchParams, strict: boolean, patientId?: string): Promise<EverythingPage> {
  const counting = countsOnly(given);
  const params = counting ? countParams(given) : given;
  requireAccess(req.access, 'Patient', 'r');
  // The compartments' rows are listed, as a search lists them: each type needs read and search; the one Patient
  // of the instance level is read by its id, with read alone. The type level lists the Patients too.
  const listed: FhirRequest = { ...req, access: enumerationAccess(req.access, patientId === undefined ? undefined : 'Patient') };
  if (patientId === undefined) requireAccess(listed.access, 'Patient', 's');
  const input = everythingInput(deps, listed, params, strict, ['Patient', ...compartmentTypes().filter((t) => t !== 'Patient')], (t) => req.access.can(t, 'r'), true);
  const { walk, pos } = input;
  const limited = listed.access.patientLimit('Patient', 'r');
  if (patientId !== undefined && !ID_PATTERN.test(patientId)) throw new FhirError('invalid', `Invalid id '${patientId}'`);
  // The patients whose everything this is: one, or (type level) each live patient in id order.
  const patient = patientId ?? limited;
  // 404 / 410 / 403 as a read would: the type level of a token bound to its patient answers as that patient's instance
  // level does (a deleted patient's other records, an Observation naming it, were listed under a 200).
  if (patient !== undefined) await readResource(deps, req, 'Patient', patient);
  /** The first `count` rows of `types` after `after` (undefined: from `from`). */
  const rowsOf = (types: string[], from: Position) => (after: CompartmentRow | undefined, count: number) => everythingRows(deps, listed, {
    types, count, ...(input.since && { since: input.since }),
    ...(input.care && { where: (type: string) => careConditions(type, input.care!) }),
    ...(patient !== undefined && { patient }),
    start: after === undefined ? { patient: from.p, type: from.t, id: from.a } : { patient: after.patient, type: types.indexOf(after.type), id: after.id },
  });
  // A count reads the matches alone: the types returned, from the start.
  if (counting) return countedEverything(input, rowsOf(input.types, { t: 0 }));
  const readRows = rowsOf(walk, pos);
  const warnings = input.warnings;
  const ignored = [...warnings];
  // Patients are not included: the patient is a match (on this page or another), and the others (a
  // Group's members, a Patient.link) are not this patient's record; at the type level each is a match of its own.
  const { matches, included, last } = await pageRows(deps, req, params, input, readRows, (type) => type === 'Patient', warnings);
  const result: EverythingPage = { rows: matches, included, self: input.self, warnings, ignored, ...input.page };
  if (last !== undefined) {
    result.next = encodePosition({ ...(patient === undefined && { p: last.patient }), type: last.type, a: last.id });
  }
  return result;
}
