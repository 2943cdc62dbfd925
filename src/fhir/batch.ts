import { STATUS_CODES } from 'node:http';
import { FhirError, storeFailureAsFhir } from '../errors.ts';
import { located, type Entry } from './bundle-entries.ts';
import { writeConditions, exclusively, type Settle } from './conditional.ts';
import { requireValidPaced } from './validation/check.ts';
import { entriesPerAttempt, entryResources, errorEntry, hasConditionalReferences, judgesReach, plan, requireEntriesInReach, requireJudgedEntries, requireProfiledPatched, requireValidPatched, RefusedNoOps, rewriteReferences, settledConditions, writeEntry, writtenBy, type FullUrlScope, type Json } from './bundle-ops.ts';
import { chargeAnswer, readBudget, readEntry, type ReadBudget } from './bundle-reads.ts';
import { requireNoSiblingUrns } from './bundle-match-urls.ts';
import { isUrnReference } from './references.ts';
import { requireVersionsWritten, settleVersions } from './bundle-versions.ts';
import { isRefusal, lockActivationsFirst, putOptions, referenceReach, requireProfiles, validationLevel, writeTx, type FhirDeps, type FhirRequest } from './crud.ts';
import { requireReferences } from './referential-integrity.ts';
import { atWriteTime } from '../store/write-times.ts';
import { HeldSearches } from './bundle-held-searches.ts';

async function one(deps: FhirDeps, req: FhirRequest, entry: Entry, base: string, settle: Settle, budget: ReadBudget, scope?: FullUrlScope): Promise<Json> {
  if (entry.method === 'GET') return readEntry(deps, req, entry, base, budget);
  // As a transaction's: the searches its condition and conditional references were resolved by are searched again at the commit.
  const held = new HeldSearches(deps, req);
  const { planned, ids } = await plan(deps, req, [entry], base, scope?.get.bind(scope), held);
  const pending = await rewriteReferences(deps, req, planned, ids, base, scope, held);
  // Validated with its references rewritten, as a transaction's entries are; an update that changes nothing is let through (RefusedNoOps).
  const noOps = new RefusedNoOps(deps, req, planned);
  const unless = async (check: () => Promise<void> | void) => {
    try {
      await check();
    } catch (err) {
      if (!isRefusal(err) || !(await noOps.excuse(planned[0]!, err))) throw err;
    }
  };
  if (entry.resource) {
    const resource = entry.resource;
    await unless(() => requireValidPaced(resource, validationLevel(deps), `Bundle.entry[${entry.index}].resource`, entry.fullUrl !== undefined));
    await unless(() => requireProfiles(deps, req.tenant, resource, `Bundle.entry[${entry.index}].resource`, undefined, req.access));
  }
  await requireValidPatched(planned, validationLevel(deps), noOps);
  for (const p of planned) await unless(() => requireProfiledPatched(deps, req, p));
  await requireEntriesInReach(deps, req, planned);
  await deps.subscriptions?.resolveEndpoints(planned.map(writtenBy));
  // What the commit's walks of hierarchies would read off the pool, read before the store transaction holds a connection.
  await held.prepare();
  const out = await atWriteTime(deps.store, deps.clock, async (now) => {
    const opts = putOptions(deps, req, now);
    await deps.subscriptions?.prepare(planned.map(writtenBy), opts.activateSubscription);
    return writeTx(deps, req.tenant, async (w) => {
      await lockActivationsFirst(w, opts, planned.map(writtenBy));
      await settle(w, settledConditions(planned));
      await Promise.all(held.targets().map((k) => w.measured(k.type, k.id)));
      await held.requireUnchanged(w);
      await requireJudgedEntries(w, planned);
      // Its own fullUrl, with a version, in its resource (a batch's entries may not refer to each other).
      const versions = await settleVersions(w, pending, opts, (p) => writtenBy(p)!);
      const written = await writeEntry(w, planned[0]!, noOps.options(planned[0]!, opts), base);
      requireVersionsWritten(versions, [written]);
      await requireReferences(deps, w, req.tenant, entryResources(planned), referenceReach(deps, req));
      return written;
    });
  });
  if (scope) for (const [fullUrl, ref] of ids) scope.written(fullUrl, ref);
  return out;
}

/**
 * Invokes an operation for a Bundle entry (`GET ValueSet/$expand?url=...`, `POST ValueSet/$validate-code`
 * with its Parameters) as the same request to the REST API would, with the Bundle's credentials, and
 * returns its status and JSON body. Given by the HTTP layer; absent (`cinder import`), operations are refused.
 */
export type OperationCall = (method: 'GET' | 'POST', url: string, body?: Json) => Promise<{ status: number; body: Json | undefined; chars: number }>;

/**
/**
 * An operation entry's response, or a `metadata` entry's (Entry.capabilities, the same request to the
 * REST API): its status, and its result as `resource` (none for a HEAD), or its OperationOutcome as
 * `outcome`. Its answer is taken from the Bundle's read budget, as a GET entry's resources are.
 */
export async function operationEntry(entry: Entry, operation: OperationCall | undefined, budget?: ReadBudget): Promise<Json> {
  const at = `Bundle.entry[${entry.index}]`;
  const what = entry.capabilities === undefined ? 'operations are' : 'metadata is';
  if (operation === undefined) throw new FhirError('not-supported', `${at}: ${what} not invoked here`, { expression: [`${at}.request.url`] });
  // Spent before the entry: not invoked; spent by it: its answer is not kept.
  const spend = (chars: number) => {
    if (budget === undefined) return;
    try {
      chargeAnswer(budget, chars);
    } catch (err) {
      throw err instanceof FhirError ? located(err, at) : err;
    }
  };
  spend(0);
  const { status, body, chars } = await operation(entry.method as 'GET' | 'POST', (entry.operation ?? entry.capabilities)!, entry.resource as Json | undefined);
  spend(chars);
  const response: Json = { status: `${status} ${STATUS_CODES[status] ?? ''}`.trim() };
  if (status >= 400) return { response: body?.resourceType === 'OperationOutcome' ? { ...response, outcome: body } : response };
  return body === undefined || entry.head ? { response } : { resource: body, response };
}

/**
 * A batch (FHIR R4 http 3.1.0.11.1): each entry on its own, in its own store transaction; a failure
 * becomes that entry's response with an OperationOutcome and the others go on, but for a store failure
 * (a 503), which answers the entries after it too. `entries` are the valid entries in Bundle order.
 */
export async function batch(deps: FhirDeps, req: FhirRequest, entries: Entry[], base: string, scope?: FullUrlScope, operation?: OperationCall): Promise<Json[]> {
  const out: Json[] = [];
  // After a store failure (the database unavailable, or a statement it cancelled) the entries before it
  // stay written, each in its own transaction, and the response says which; the entries after it are
  // answered with the same failure untried (on SQLite each write would wait out the busy timeout).
  let storeFailed: FhirError | undefined;
  const fullUrls = new Set(entries.flatMap((e) => (e.fullUrl && isUrnReference(e.fullUrl) ? [e.fullUrl] : [])));
  const budget = readBudget();
  for (const entry of entries) {
    if (storeFailed) {
      out.push(errorEntry(storeFailed));
      continue;
    }
    try {
      if (entry.operation !== undefined || entry.capabilities !== undefined) {
        out.push(await operationEntry(entry, operation, budget));
        continue;
      }
      requireNoSiblingUrns(entry, fullUrls);
      const conditions = writeConditions([entry]);
      const attemptOf = entriesPerAttempt([entry], conditions.length > 0 || judgesReach(req, [entry]) || hasConditionalReferences([entry]));
      out.push(await exclusively(deps, req.tenant, conditions, (settle, attempt) => one(deps, req, attemptOf(attempt)[0]!, base, settle, budget, scope)));
    } catch (err) {
      const failure = err instanceof FhirError ? err : storeFailureAsFhir(err);
      if (failure === undefined) throw err;
      // A value the database cannot hold (400, or 422 past an index's size) is this entry's fault alone.
      if (failure !== err && failure.status === 503) storeFailed = failure;
      out.push(errorEntry(failure));
    }
  }
  return out;
}
