/**
 * GET entries of transactions and batches (FHIR R4 http 3.1.0.11): reads, vreads, searches (of a type,
 * across types, in a compartment) and instance, type or system history, answered as the REST
 * interactions answer them, with the same access checks.
 */
import { FhirError } from '../errors.ts';
import type { ResourceVersion, ResourceWriter } from '../store/types.ts';
import { requireAccess } from './access.ts';
import { entryPath, located, type Entry } from './bundle-entries.ts';
import { responseEntry, type Json } from './bundle-ops.ts';
import { etagMatches, historyJson, searchLinks, searchsetJson } from './bundle.ts';
import type { CoreLayer } from './core-layer.ts';
import { checkDeletionReadable, deletionReachLimited, readResource, vreadResource, type FhirDeps, type FhirRequest } from './crud.ts';
import { parseExact } from './exact-json.ts';
import { checkHistory, history } from './history.ts';
import { checkRestType, checkTypeAndId } from './resource.ts';
import { versionNumber } from './resource-types.ts';
import { compileSearch, openCursor, searchResources } from './search.ts';
import { checkSearchTypes, searchTypes } from './search-system.ts';
import { ownCursor, pagedAt } from './search-time.ts';
import { carriedTotal } from './search-total.ts';
import { instanceShape } from './subset.ts';
import { safeTimeNow } from '../store/write-times.ts';

/**
 * The most characters of stored resources the GET entries of one Bundle answer together, its operation
 * entries' answers included (32 Mi): the
 * response Bundle is built whole, and a batch of a few hundred searches of `_count=1000` (a few KB
 * each to send) grew it past a gigabyte, held the event loop seconds to serialise it.
 */
export const MAX_BUNDLE_READ_CHARS = 32 * 1024 * 1024;

/** What is left of a Bundle's MAX_BUNDLE_READ_CHARS for its GET entries; one per Bundle, shared by its entries. */
export interface ReadBudget {
  left: number;
}

export function readBudget(): ReadBudget {
  return { left: MAX_BUNDLE_READ_CHARS };
}

const budgetSpent = () =>
  new FhirError('invalid', `The Bundle's GET entries read more than ${MAX_BUNDLE_READ_CHARS} characters of resources together; read the rest in another request`, { issueCode: 'too-costly' });

/** Takes the characters of `versions` from `budget`; a 400 (`too-costly`) once it is spent. */
function charge(budget: ReadBudget, versions: ResourceVersion[]): void {
  for (const v of versions) budget.left -= v.content.length;
  if (budget.left < 0) throw budgetSpent();
}

/**
 * Takes an operation entry's answer (`chars` characters of JSON, its `$everything` or `$expand`) from
 * `budget`: a 400 (`too-costly`) when the budget was spent before it or is spent by it.
 */
export function chargeAnswer(budget: ReadBudget, chars: number): void {
  if (budget.left < 0) throw budgetSpent();
  budget.left -= chars;
  if (budget.left < 0) throw budgetSpent();
}

/** Checks a GET entry before anything is written: access, id, search or history parameters. */
export async function checkRead(deps: FhirDeps, req: FhirRequest, entry: Entry): Promise<void> {
  try {
    await checkOne(deps, req, entry);
  } catch (err) {
    throw err instanceof FhirError ? located(err, entryPath(entry), undefined, `${entryPath(entry)}.request.url`) : err;
  }
}

/**
 * Before a transaction's writes: a GET by id of a deletion the token may not see, judged by the content
 * it deleted (checkDeletionReadable), is the 403 its read answers, where checkReadTarget, inside the
 * transaction, would have answered 410 (telling that another patient's record existed and was deleted).
 */
export async function checkReadDeletion(deps: FhirDeps, req: FhirRequest, entry: Entry): Promise<void> {
  // A token whose reach of the type does not depend on content pays no read here.
  if (!entry.id || entry.history || !deletionReachLimited(req.access, entry.type)) return;
  const n = entry.version === undefined ? undefined : versionNumber(entry.version);
  if (entry.version !== undefined && n === undefined) return;
  const v = n === undefined ? await deps.store.resources.read(req.tenant, entry.type, entry.id) : await deps.store.resources.vread(req.tenant, entry.type, entry.id, n);
  try {
    if (v?.deleted) await checkDeletionReadable(deps, req, v);
  } catch (err) {
    throw err instanceof FhirError ? located(err, entryPath(entry), undefined, `${entryPath(entry)}.request.url`) : err;
  }
}

async function checkOne(deps: FhirDeps, req: FhirRequest, entry: Entry): Promise<void> {
  if (entry.compartment !== undefined) checkTypeAndId(entry.compartment.type, entry.compartment.id);
  if (entry.history) {
    checkHistory(req, entry.query!, historyType(entry), entry.id);
    instanceShape(entry.query!, false);
  } else if (entry.id) {
    checkTypeAndId(entry.type, entry.id);
    requireAccess(req.access, entry.type, 'r');
    instanceShape(entry.query!, false);
  } else if (across(entry)) {
    checkSearchTypes(req, carriedTotal(ownCursor(entry.query!).own).params, entry.compartment);
  } else {
    checkRestType(entry.type);
    requireAccess(req.access, entry.type, 's');
    // A place in a sort on parameters is sealed: opened for the tenant, as the search after the commit opens it.
    const { params: own } = carriedTotal(ownCursor(entry.query!).own);
    compileSearch(entry.type, own, false, deps.clock.now(), undefined, await openCursor(deps, req, entry.type, own.get('_cursor')));
  }
}

/** A search across types: of the system (`?_type=...`) or of a compartment's types (`{Compartment}/{id}/*`). */
const across = (entry: Entry) => entry.type === '' || entry.type === '*';

/** The type whose history an entry reads: none for system history. */
const historyType = (entry: Entry) => (entry.type === '' ? undefined : entry.type);

/** Where a search entry's links go, below the FHIR base, as the REST API's links for the same search. */
const searchPath = (entry: Entry) => (entry.compartment === undefined ? (entry.type === '' ? '' : `/${entry.type}`) : `/${entry.compartment.type}/${entry.compartment.id}/${entry.type}`);

/**
 * Inside a transaction, after its writes: a GET by id must find its resource (a current one for a
 * read; one that has that version for a vread; any for its history), or a core one the tenant never stored.
 */
export async function checkReadTarget(w: ResourceWriter, entry: Entry, core?: CoreLayer): Promise<void> {
  if (!entry.id) return;
  const { type, id, version } = entry;
  const current = await w.measured(type, id);
  if (!current && core !== undefined && (await core.read(type, id)) !== null) return;
  if (!current) throw new FhirError('not-found', `${entryPath(entry)}: ${type}/${id} is not known`, { expression: [entryPath(entry)] });
  if (entry.history) return;
  const n = version === undefined ? undefined : versionNumber(version);
  if (version !== undefined && (n === undefined || n > current.versionId)) {
    throw new FhirError('not-found', `${entryPath(entry)}: ${type}/${id} has no version '${version}'`, { expression: [entryPath(entry)] });
  }
  if (current.deleted && (n === undefined || n === current.versionId)) {
    throw new FhirError('gone', `${entryPath(entry)}: ${type}/${id} was deleted`, { expression: [entryPath(entry)] });
  }
}

/**
 * Whether a read entry's client holds `v` already: `request.ifNoneMatch` names its ETag (or `*`), or,
 * without it, `request.ifModifiedSince` is at or after its last update (FHIR R4 http 3.1.0.11: 304).
 */
function notModified(entry: Entry, v: ResourceVersion): boolean {
  if (entry.ifNoneMatch) return etagMatches(entry.ifNoneMatch, v.versionId);
  return entry.ifModifiedSince !== undefined && v.lastUpdated <= entry.ifModifiedSince;
}

/**
 * Performs a GET entry: a read or vread (304 without the resource when the client has it), a search or a
 * history, as a Bundle; what it reads is taken from `budget`, and one past it is a 400 `too-costly`.
 */
export async function readEntry(deps: FhirDeps, req: FhirRequest, entry: Entry, base: string, budget: ReadBudget): Promise<Json> {
  try {
    if (budget.left < 0) throw budgetSpent();
    const out = await readOne(deps, req, entry, base, budget);
    // A HEAD entry is answered as its GET, without the resource (as HEAD on the REST API: no body).
    if (entry.head) delete out.resource;
    return out;
  } catch (err) {
    throw err instanceof FhirError ? located(err, entryPath(entry), undefined, `${entryPath(entry)}.request.url`) : err;
  }
}

async function readOne(deps: FhirDeps, req: FhirRequest, entry: Entry, base: string, budget: ReadBudget): Promise<Json> {
  // `_summary` / `_elements` as on the REST read, vread and history.
  const shape = entry.history || entry.id ? instanceShape(entry.query!, false) : undefined;
  if (entry.history) {
    const at = safeTimeNow(deps.store, deps.clock);
    const r = await history(deps, req, entry.query!, at, historyType(entry), entry.id);
    charge(budget, r.rows);
    const links = searchLinks(base, `${entry.type ? `/${entry.type}` : ''}${entry.id ? `/${entry.id}` : ''}/_history`, r.self, r.next, r.page);
    return { ...responseEntry('200 OK'), resource: parseExact(historyJson(base, r.rows, links, r.at, shape)) };
  }
  if (entry.id) {
    const v = entry.version === undefined ? await readResource(deps, req, entry.type, entry.id) : await vreadResource(deps, req, entry.type, entry.id, entry.version);
    if (notModified(entry, v)) return responseEntry('304 Not Modified', v, base);
    charge(budget, [v]);
    return { ...responseEntry('200 OK', v, base), resource: parseExact(shape ? shape(v.content) : v.content) };
  }
  // The searchset a REST search answers: includes, _summary / _elements, warnings and paging links.
  const r = await pagedAt(entry.query!, safeTimeNow(deps.store, deps.clock), (query, asOf, pin) => (across(entry)
    ? searchTypes(deps, req, query, false, entry.compartment, asOf, pin)
    : searchResources(deps, req, entry.type, query, false, entry.compartment, asOf, pin)));
  charge(budget, r.rows);
  charge(budget, r.included);
  const links = searchLinks(base, searchPath(entry), r.self, r.next, r.page);
  const extra = { included: r.included, ...(r.shape ? { shape: r.shape } : {}), ...(r.includedShape ? { includedShape: r.includedShape } : {}) };
  return { ...responseEntry('200 OK'), resource: parseExact(searchsetJson(base, r.rows, links, r.total, r.warnings, r.at, extra)) };
}
