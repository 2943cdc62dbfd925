import { FhirError } from '../errors.ts';
import type { HistoryQuery, ResourceVersion } from '../store/types.ts';
import { hasCoreResources } from './core-layer.ts';
import { provenancesInReach } from './provenance-reach.ts';
import { binaryReachLimited, lastContent, readResource, requireContextReadable, judgedByCompartment, requireReadReach, requireFilter, type FhirDeps, type FhirRequest } from './crud.ts';
import { enumerationAccess, requireAccess } from './access.ts';
import { splitStoredBinary } from './binary.ts';
import { queryDateRange } from './dates.ts';
import { inPatientCompartment } from './definitions.ts';
import { currentSince, historyPage, keptPage, reachedPage, type HistoryCursor } from './history-at.ts';
import { lookups } from './core-search.ts';
import { checkTypeAndId, type Resource } from './resource.ts';
import { hasEndpoint, ID_PATTERN, isResourceType } from './resource-types.ts';
import { PAGE_READ_IN_REACH, parseCount, type PageLinks } from './search.ts';
import { unknownParameters } from './operation-params.ts';

/** The parameters history reads (`_format` and `_pretty` are every interaction's). */
const HISTORY_PARAMETERS = ['_count', '_since', '_at', '_cursor', '_summary', '_elements'];

export interface HistoryResult {
  rows: ResourceVersion[];
  /**
   * The Bundle's `meta.lastUpdated`: every version stamped at or before it had committed when the read began.
   * A page after the first says the first page's time: it reads on below that page's keyset, so a version
   * written since (stamped later) is on none of its pages, and a poll `_since` a later time would miss it.
   */
  at: number;
  next?: string;
  self: URLSearchParams;
  /** A page after the first: its own cursor, for its `self` link (with a `first` link without it), as search's. */
  page?: PageLinks;
}

/**
 * A page's cursor: where the previous page ended and `asOf`, the first page's Bundle time (the safe time
 * before its read, src/store/write-times.ts). Cursors written before `asOf` was carried have none.
 */
interface PageCursor {
  before: HistoryCursor;
  asOf?: number;
}

function decodeBefore(raw: string): PageCursor {
  try {
    const [lastUpdated, type, id, versionId, asOf] = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
    // Only what encodeBefore writes, within what the databases take (a time of 1e20 or 1.5 was a 500 on PostgreSQL).
    if (Number.isSafeInteger(lastUpdated) && Number.isSafeInteger(versionId) && versionId >= 0 && typeof type === 'string' && isResourceType(type) &&
      typeof id === 'string' && ID_PATTERN.test(id) && (asOf === undefined || (Number.isSafeInteger(asOf) && asOf >= 0))) {
      return { before: { lastUpdated, type, id, versionId }, ...(asOf !== undefined && { asOf }) };
    }
  } catch {
    // fall through
  }
  throw new FhirError('invalid', 'Invalid _cursor: it is none this server gives; search again from the first page (without _cursor)', { expression: ['_cursor'] });
}

function encodeBefore(c: HistoryCursor, asOf: number): string {
  return Buffer.from(JSON.stringify([c.lastUpdated, c.type, c.id, c.versionId, asOf])).toString('base64url');
}

function period(param: string, raw: string): { low: number; high: number } {
  const r = queryDateRange(raw);
  if (!r) throw new FhirError('invalid', `Invalid ${param} '${raw}': expected a FHIR instant, dateTime or date`, { expression: [param] });
  return r;
}

/** The periods an `_at` value with each prefix names, of its date's [low, high) (search 3.1.1.5.9, as `_lastUpdated`'s). */
const AT_PREFIXES: Partial<Record<string, (r: { low: number; high: number }) => { low: number; high: number }>> = {
  eq: (r) => r,
  ge: (r) => ({ low: r.low, high: Infinity }),
  gt: (r) => ({ low: r.high, high: Infinity }),
  le: (r) => ({ low: -Infinity, high: r.high }),
  lt: (r) => ({ low: -Infinity, high: r.low }),
};

/**
 * The period of history's `_at` (FHIR R4 http 3.1.0.11, "see Search notes on date searching"): a date
 * denotes the period its precision implies (`2026-02-03` the whole day, an instant its millisecond); a
 * prefix eq, ge, gt, le or lt opens it as search's date prefixes do (`ge2026-02-03`: from that day on;
 * `lt2026-02-03`: everything before it); several `_at` are the period all of them name (HAPI FHIR takes
 * `_at=ge…&_at=le…` as one range). `ne`, `sa`, `eb` and `ap` name no one period and are a 400.
 */
function atPeriod(values: string[]): { low: number; high: number } {
  let low = -Infinity;
  let high = Infinity;
  for (const raw of values) {
    const prefix = /^[a-z]{2}/.test(raw) ? raw.slice(0, 2) : undefined;
    const open = AT_PREFIXES[prefix ?? 'eq'];
    const range = open ? queryDateRange(prefix ? raw.slice(2) : raw) : null;
    if (!open || !range) {
      throw new FhirError('invalid', `Invalid _at '${raw}': expected a FHIR instant, dateTime or date, with an optional prefix eq, ge, gt, le or lt`, { expression: ['_at'] });
    }
    const r = open(range);
    low = Math.max(low, r.low);
    high = Math.min(high, r.high);
  }
  return { low, high };
}

/**
 * The request a history reads with: instance history reads one resource by its id, with read; type and system
 * history list every resource of their types, unknown ids included, as a search does, so they read with read
 * and search (enumerationAccess), within the narrower filter of the two.
 */
const historyRequest = (req: FhirRequest, id?: string): FhirRequest => (id ? req : { ...req, access: enumerationAccess(req.access) });

function checkAccess(req: FhirRequest, type?: string, id?: string): void {
  if (type) checkTypeAndId(type, id);
  if (type) requireAccess(req.access, type, 'r');
  if (type && !id) requireAccess(req.access, type, 's');
  else if (!type && !(req.access.can('*', 'r') && req.access.can('*', 's'))) throw new FhirError('forbidden', 'System history needs read and search access to every type');
  if (!id && historyRequest(req).access.patientLimit(type ?? '*', 'r') !== undefined) {
    throw new FhirError('forbidden', 'Patient-context tokens cannot read type or system history');
  }
}

/** The parameters of a history interaction: `_count`, `_since`, `_at`, `_cursor`; `_summary` and `_elements` (src/fhir/subset.ts) stay in its links. */
function parseParams(params: URLSearchParams) {
  const self = new URLSearchParams();
  const count = params.get('_count');
  // As search's: more than a page holds is that most, and the self link says so.
  const query: HistoryQuery = { count: parseCount(count) };
  if (count !== null) self.set('_count', String(query.count));
  const since = params.get('_since');
  if (since !== null) (query.since = period('_since', since).low), self.set('_since', since);
  const ats = params.getAll('_at');
  let atLow: number | undefined;
  if (ats.length > 0) {
    const range = atPeriod(ats);
    // `_at=lt2026&_at=gt2027`: a period of no time, in which no version was current.
    if (range.low >= range.high) query.count = 0;
    if (range.high !== Infinity) query.at = range.high - 1;
    if (range.low !== -Infinity) atLow = range.low;
    for (const at of ats) self.append('_at', at);
  }
  const cursor = params.get('_cursor');
  const page = cursor === null ? undefined : decodeBefore(cursor);
  if (page) query.before = page.before;
  for (const name of ['_summary', '_elements']) for (const value of params.getAll(name)) self.append(name, value);
  return { query, self, atLow, asOf: page?.asOf };
}

/** Of a batch of versions, those within the token's reach (in their order). */
type Reach = (rows: ResourceVersion[]) => Promise<ResourceVersion[]>;

/**
 * Instance history of a resource the request may see: 404 when it never existed. Where the token's
 * reach depends on content (a patient-context token's compartment, SMART v2 scope filters, a Binary's
 * securityContext), every rule applies at once: the latest content must be within reach, and only the
 * versions that are are shown, with the deletions (undefined: every version is).
 */
async function instanceFilter(deps: FhirDeps, req: FhirRequest, type: string, id: string): Promise<Reach | undefined> {
  const repo = deps.store.resources;
  // Found by its row: a large text is read below only where a judgement needs it.
  const found = await repo.measured(req.tenant, type, id);
  if (!found) throw new FhirError('not-found', `${type}/${id} is not known`);
  const compartment = req.access.patientLimit(type, 'r') !== undefined && inPatientCompartment(type);
  const filtered = req.access.filters?.(type, 'r') !== undefined;
  if (type !== 'Binary' && !compartment && !filtered) return undefined;
  const find = lookups(deps, req.tenant);
  const check = async (v: ResourceVersion) => {
    const resource = type === 'Binary' ? splitStoredBinary(v.content).resource : (JSON.parse(v.content) as Resource);
    if (type === 'Binary') await requireContextReadable(deps, req, resource);
    if (compartment) await requireReadReach(deps, req, resource);
    if (filtered) await requireFilter(req.access, 'r', resource, v.lastUpdated, find);
  };
  // A large live current version judged by its compartment rows (judgedByCompartment) is shown without its text read or parsed.
  const judged = found.content === undefined && !found.deleted && (await judgedByCompartment(deps, req, type, id, found.versionId)) ? found.versionId : undefined;
  if (judged === undefined) {
    const current = found.content !== undefined ? { ...found, type, id, content: found.content } : await repo.read(req.tenant, type, id);
    const latest = current && (await lastContent(deps, req.tenant, current));
    if (latest && !latest.deleted) await check(latest);
  }
  // A Provenance's versions are judged together: the records their targets name read once for the page (provenance-reach.ts).
  const patient = compartment && type === 'Provenance' ? req.access.patientLimit(type, 'r') : undefined;
  if (patient !== undefined) {
    return async (rows: ResourceVersion[]) => {
      const live = rows.filter((v) => !v.deleted);
      const reached = await provenancesInReach(deps, req, live.map((v) => JSON.parse(v.content) as Resource), patient);
      const shown = new Set<ResourceVersion>();
      for (const [i, v] of live.entries()) {
        if (reached[i] && (!filtered || (await readable((w) => requireFilter(req.access, 'r', JSON.parse(w.content) as Resource, w.lastUpdated, find), v)))) shown.add(v);
      }
      return rows.filter((v) => v.deleted || shown.has(v));
    };
  }
  return async (rows: ResourceVersion[]) => {
    const shown: ResourceVersion[] = [];
    for (const v of rows) if (v.deleted || v.versionId === judged || (await readable(check, v))) shown.push(v);
    return shown;
  };
}


/** Whether `check` lets version `v` through: a 403 is a no, any other error is passed on. */
async function readable(check: (v: ResourceVersion) => Promise<void>, v: ResourceVersion): Promise<boolean> {
  try {
    await check(v);
    return true;
  } catch (err) {
    if (err instanceof FhirError && err.category === 'forbidden') return false;
    throw err;
  }
}

/**
 * Type history of a type the token's SMART v2 scope filters narrow, or of Binary when the token's reach
 * through a securityContext is limited (binaryReachLimited): only the versions the token could read,
 * each judged on its own content; a deletion when the version it deleted was. Undefined when every
 * version is readable.
 */
function typeFilter(deps: FhirDeps, req: FhirRequest, type: string): Reach | undefined {
  if (!((type === 'Binary' && binaryReachLimited(req.access)) || req.access.filters?.(type, 'r') !== undefined)) return undefined;
  const find = lookups(deps, req.tenant);
  const check = async (v: ResourceVersion) => {
    const resource = type === 'Binary' ? splitStoredBinary(v.content).resource : (JSON.parse(v.content) as Resource);
    await requireContextReadable(deps, req, resource);
    await requireFilter(req.access, 'r', resource, v.lastUpdated, find);
  };
  const one = async (v: ResourceVersion) => {
    if (!v.deleted) return readable(check, v);
    const before = await lastContent(deps, req.tenant, v);
    return !!before && !before.deleted && (await readable(check, before));
  };
  return async (rows) => {
    const shown: ResourceVersion[] = [];
    for (const v of rows) if (await one(v)) shown.push(v);
    return shown;
  };
}

/**
 * The history of a core resource the tenant never stored: its one version, if the query's window and
 * cursor include it. Type and system history are the tenant's changes and leave the core out.
 */
function coreHistory(v: ResourceVersion, query: HistoryQuery): ResourceVersion[] {
  if (query.count === 0 || (query.since !== undefined && v.lastUpdated < query.since) || (query.at !== undefined && v.lastUpdated > query.at)) return [];
  const b = query.before;
  if (b !== undefined && (v.lastUpdated > b.lastUpdated || (v.lastUpdated === b.lastUpdated && v.versionId >= b.versionId))) return [];
  return [v];
}

/**
 * System history serves the types with a RESTful endpoint: versions of a Parameters stored before Cinder
 * refused the type (it has none, parameters.html) stay in the database but are not shown.
 */
const served = (v: ResourceVersion) => hasEndpoint(v.type);

/** A filter admitting what every one of `filters` admits; undefined when there is none. */
function allOf(filters: (((v: ResourceVersion) => boolean | Promise<boolean>) | undefined)[]): ((v: ResourceVersion) => Promise<boolean>) | undefined {
  const set = filters.filter((f) => f !== undefined);
  if (set.length === 0) return undefined;
  return async (v) => {
    for (const f of set) if (!(await f(v))) return false;
    return true;
  };
}

/** What a history interaction checks before it reads: access and parameters (a transaction's GET entries, before they commit). */
export function checkHistory(req: FhirRequest, params: URLSearchParams, type?: string, id?: string): void {
  checkAccess(req, type, id);
  parseParams(params);
}

/**
 * Instance, type or system history (FHIR R4 http 3.1.0.11) with `_since`, `_at`, `_count`, newest first,
 * paged by keyset. With a patient-context token only instance history of readable resources is offered.
 * Where some versions are out of the token's reach (instanceFilter, typeFilter), a page reads on past
 * them (reachedPage): it is the page the token would get were they not there, and never links to a page
 * of nothing it may see. `at` is the safe time taken before the read (HistoryResult.at).
 */
export async function history(
  deps: FhirDeps, req: FhirRequest, params: URLSearchParams, at: number, type?: string, id?: string, strict = false,
): Promise<HistoryResult> {
  checkAccess(req, type, id);
  // What history takes (http.html 3.1.0.11, less `_list`, which it does not support); the others are ignored, and
  // each is a 400 under `Prefer: handling=strict`, as a search's are.
  unknownParameters(params, HISTORY_PARAMETERS, 'history', strict);
  req = historyRequest(req, id);
  const { query, self, atLow, asOf } = parseParams(params);
  if (asOf !== undefined && asOf < at) at = asOf;
  if (type) query.type = type;
  if (id) query.id = id;
  // Keyset pages: the previous page's cursor is not known, so there is no `previous` link.
  const cursor = params.get('_cursor');
  const page = cursor === null ? {} : { page: { cursor } };
  if (type && id && deps.core !== undefined && hasCoreResources(type) && (await deps.store.resources.measured(req.tenant, type, id)) === null) {
    return { rows: coreHistory(await readResource(deps, req, type, id), query), self, at, ...page };
  }
  // System history needs every type read whole (checkAccess): every version is within its reach.
  const reach = type && id ? await instanceFilter(deps, req, type, id) : type ? typeFilter(deps, req, type) : undefined;
  const repo = deps.store.resources;
  const current = atLow === undefined ? undefined : currentSince(repo, req.tenant, atLow);
  const keep = allOf([current, type ? undefined : served]);
  const tooCostly = () => new FhirError('invalid', `A page of this history takes reading more than ${PAGE_READ_IN_REACH} versions out of this token's reach: narrow it with _since or _at`, { issueCode: 'too-costly', expression: ['_since', '_at'] });
  const rows = reach
    ? await reachedPage(repo, req.tenant, query, reach, keep, PAGE_READ_IN_REACH, tooCostly)
    : keep ? await keptPage(repo, req.tenant, query, keep) : await historyPage(repo, req.tenant, query);
  const result: HistoryResult = { rows: rows.rows, self, at, ...page };
  if (rows.next) result.next = encodeBefore(rows.next, at);
  return result;
}
