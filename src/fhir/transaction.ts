import { FhirError } from '../errors.ts';
import { batch, operationEntry, type OperationCall } from './batch.ts';
import { writeConditions, exclusively, type Settle } from './conditional.ts';
import { parseBundle, type Entry } from './bundle-entries.ts';
import { entriesPerAttempt, entryResources, errorEntry, followerEntry, hasConditionalReferences, judgeEntry, judgesReach, patchedIssues, plan, requireEntriesInReach, requireJudgedEntries, requireValidPatched, RefusedNoOps, rewriteReferences, settledConditions, storedOtherwise, writeEntry, writtenBy, type FullUrlScope, type Json, type Planned } from './bundle-ops.ts';
import { requireVersionsWritten, settleVersions, writtenAnew } from './bundle-versions.ts';
import { conditionElement, withStaticIds } from './bundle-match-urls.ts';
import { checkRead, checkReadDeletion, checkReadTarget, readBudget, readEntry } from './bundle-reads.ts';
import { lockActivationsFirst, noteValidationLevel, putOptions, referenceReach, validationLevel, writeTx, type FhirDeps, type FhirRequest } from './crud.ts';
import { requireReferences } from './referential-integrity.ts';
import { pacedShellErrors } from './bundle-shell.ts';
import { newId, type Resource } from './resource.ts';
import { pacedTurns } from './turns.ts';
import { invalidResource, validationErrorsPaced } from './validation/check.ts';
import type { ValidationIssue } from './validation/validate.ts';
import { profileCost } from './validation/profile/run.ts';
import { readsProfiles } from './validation/profile/profile-check.ts';
import { writtenScope } from './validation/profile/targets.ts';
import { atWriteTime } from '../store/write-times.ts';
import { HeldSearches } from './bundle-held-searches.ts';
import { settleLinkedConditions, type ForcedAnswers } from './bundle-linked-conditions.ts';
import { mayLink } from './bundle-conditional.ts';
import type { PendingVersion } from './bundle-versions.ts';

const ORDER: Record<string, number> = { DELETE: 0, POST: 1, PUT: 2, PATCH: 2, GET: 3 };

/**
 * No two entries may act on one resource (FHIR R4 http 3.1.0.11.2), and a conditional create may not
 * settle on a resource another entry updates or patches (one another entry deletes it does not find:
 * plan). Entries that follow another's write (sharedWrites) act through it.
 */
function checkTargets(planned: Planned[]): void {
  const changed = new Set<string>();
  // A conditional entry's target is its condition's: the element holding it is named (`request.url`, `request.ifNoneExist`).
  const at = (p: Planned) => ({ expression: [p.entry.condition ? conditionElement(p.entry) : `Bundle.entry[${p.entry.index}]`] });
  for (const p of planned) {
    if (!p.id || p.entry.method === 'GET' || p.existing || p.follows) continue;
    const key = `${p.entry.type}/${p.id}`;
    if (changed.has(key)) throw new FhirError('invalid', `Bundle.entry[${p.entry.index}]: ${key} is the target of more than one entry`, at(p));
    changed.add(key);
  }
  for (const p of planned) {
    const key = `${p.entry.type}/${p.id}`;
    if (p.existing && changed.has(key)) {
      throw new FhirError('invalid', `Bundle.entry[${p.entry.index}]: ifNoneExist matches ${key}, which another entry changes`, at(p));
    }
  }
}

/**
 * A transaction: every entry or none (FHIR R4 http 3.1.0.11.2), in DELETE, POST, PUT/PATCH, GET order.
 * GET entries are checked before the commit (access, parameters, the target's existence after the
 * writes) and read after it, so a failing GET cannot leave the writes half-reported.
 */
async function transaction(
  deps: FhirDeps, req: FhirRequest, first: Entry[], base: string, settle: Settle, copies: () => Entry[], scope?: FullUrlScope, operation?: OperationCall,
): Promise<Json[]> {
  const { entries, held, planned, ids, pending } = await planSettled(deps, req, first, base, copies, scope);
  // Validated as written, with the references rewritten: a reference's target type is checked on the
  // type its entry has (an Observation's subject naming a Medication entry's fullUrl is refused).
  // An update entry that changes nothing is let through, as a REST one is (RefusedNoOps).
  const noOps = new RefusedNoOps(deps, req, planned);
  await requireValidEntries(deps, entries, noOps);
  await requireValidPatched(planned, validationLevel(deps), noOps);
  await requireProfiledEntries(deps, req, entries, planned, noOps);
  await requireEntriesInReach(deps, req, planned);
  // Within a method, FHIR sets no order: Subscriptions come last, so that each finds a topic the Bundle writes by the same method.
  const sorted = [...planned].sort((a, b) => ORDER[a.entry.method]! - ORDER[b.entry.method]! || subscriptionLast(a) - subscriptionLast(b) || a.entry.index - b.entry.index);
  const reads = sorted.filter((p) => p.entry.method === 'GET');
  for (const p of reads) if (p.entry.capabilities === undefined) await checkRead(deps, req, p.entry);
  for (const p of reads) if (p.entry.capabilities === undefined) await checkReadDeletion(deps, req, p.entry);
  // `metadata` is answered after the commit, as the other reads (its query was checked with the Bundle).
  if (operation === undefined) {
    const metadata = reads.find((p) => p.entry.capabilities !== undefined);
    if (metadata) await operationEntry(metadata.entry, undefined);
  }
  const out: Json[] = new Array(entries.length);
  await deps.subscriptions?.resolveEndpoints(planned.map(writtenBy));
  // What the commit's walks of hierarchies would read off the pool, read before the store transaction holds a connection.
  await held.prepare();
  await atWriteTime(deps.store, deps.clock, async (now) => {
    const opts = putOptions(deps, req, now);
    // One unit (FHIR R4 http.html#transaction): a Subscription's `:in` may name a ValueSet the Bundle writes, or deletes.
    const deleted = planned.flatMap((p) => (p.entry.method === 'DELETE' && p.id !== undefined ? [{ type: p.entry.type, id: p.id }] : []));
    await deps.subscriptions?.prepare(planned.map(writtenBy), opts.activateSubscription, { deleted });
    await writeTx(deps, req.tenant, async (w) => {
      await lockActivationsFirst(w, opts, planned.map(writtenBy));
      await settle(w, settledConditions(planned));
      // The resources the entries change are looked up together (PostgreSQL locks them in one statement,
      // in key order), so that transactions changing the same resources in other orders wait for each
      // other instead of deadlocking (which PostgreSQL ends after a second, one of them a 409).
      // The matches of conditional creates, which their writes hold to (requireExistingCurrent), are among them,
      // and so are the resources its conditions and conditional references found (held), searched again then.
      const locked = [...sorted.filter((p) => changesExisting(p) || p.holdsExisting === true).map((p) => ({ type: p.entry.type, id: p.id! })), ...held.targets()];
      // Locked without reading a large stored text (measured): an entry's write reads it only if it may store it again.
      await Promise.all(locked.map((k) => w.measured(k.type, k.id)));
      await held.requireUnchanged(w);
      await requireJudgedEntries(w, planned);
      const versions = await settleVersions(w, pending, opts, (p) => writtenBy(p)!);
      const anew = (p: Planned) => versions.has(p) && writtenAnew(p, opts.activateSubscription !== undefined);
      // A patient's Provenance's targets and the token's write scope filters are judged once every entry is written: a record the Bundle writes counts, whatever the order.
      const deferred: { p: Planned; judge: () => Promise<void> }[] = [];
      const entryIds = new Map<string, string[]>();
      for (const p of sorted) {
        if (p.entry.method === 'GET' || p.follows) continue;
        const entryOpts = { ...noOps.options(p, anew(p) ? { ...opts, newVersion: true } : opts), deferTargets: (judge: () => Promise<void>) => void deferred.push({ p, judge }), entryIds };
        out[p.entry.index] = await writeEntry(w, p, entryOpts, base);
      }
      for (const p of sorted) {
        if (p.entry.method !== 'POST' || p.follows || p.id === undefined || !storedOtherwise(p.entry.resource, out[p.entry.index])) continue;
        (entryIds.get(p.entry.type) ?? entryIds.set(p.entry.type, []).get(p.entry.type)!).push(p.id);
      }
      for (const { p, judge } of deferred.sort((a, b) => a.p.entry.index - b.p.entry.index)) await judgeEntry(p, judge);
      requireVersionsWritten(versions, out);
      for (const p of planned) if (p.follows) out[p.entry.index] = followerEntry(out[p.follows.entry.index]!);
      await requireReferences(deps, w, req.tenant, entryResources(planned), referenceReach(deps, req));
      for (const p of reads) if (p.entry.capabilities === undefined) await checkReadTarget(w, p.entry, deps.core);
    });
  });
  if (scope) for (const [fullUrl, ref] of ids) scope.written(fullUrl, ref);
  const budget = readBudget();
  for (const p of reads) {
    try {
      out[p.entry.index] = p.entry.capabilities === undefined ? await readEntry(deps, req, p.entry, base, budget) : await operationEntry(p.entry, operation, budget);
    } catch (err) {
      // The writes are committed: a read that fails now (a concurrent delete) is reported in its entry.
      if (!(err instanceof FhirError)) throw err;
      out[p.entry.index] = errorEntry(err);
    }
  }
  return out;
}

/**
 * The most times a transaction is planned with the answers of its linked conditions (settleLinkedConditions): each
 * planning may settle one more of a chain of such entries whose answers follow from one another's.
 */
const LINKED_ROUNDS = 8;

/**
 * Plans a transaction (its targets, its references rewritten) until the conditional entries whose chains or `_has` read
 * what its earlier steps write find what the planning gave them (settleLinkedConditions): planned again, from copies of
 * the entries as they came (`copies`), with the answers those conditions have in the state the earlier steps leave. An
 * answer that changes the writes another reads (a conditional update that now updates another Patient, which an
 * Observation's fullUrl reference names) may change that one's: planned once more than there are entries whose
 * conditions may hold a chain or `_has` (at most LINKED_ROUNDS times), answers that still change are a 400.
 * The searches its conditional entries and references were resolved by are held to the commit (`held`).
 */
async function planSettled(
  deps: FhirDeps, req: FhirRequest, first: Entry[], base: string, copies: () => Entry[], scope?: FullUrlScope,
): Promise<{ entries: Entry[]; held: HeldSearches; planned: Planned[]; ids: Map<string, string>; pending: PendingVersion[] }> {
  let entries = first;
  let forced: ForcedAnswers = new Map();
  const rounds = Math.min(LINKED_ROUNDS, 1 + first.filter((e) => e.condition !== undefined && mayLink(e.condition)).length);
  for (let round = 1; ; round++) {
    const held = new HeldSearches(deps, req);
    const { planned, ids } = await plan(deps, req, entries, base, scope?.get.bind(scope), held, forced);
    const pending = await rewriteReferences(deps, req, planned, ids, base, scope, held);
    const changed = await settleLinkedConditions(deps, req, planned, ids, base, scope, held);
    // Judged on the settled plan: a conditional create that the stored state matched with a resource another entry
    // updates may find nothing once a DELETE's write is seen.
    if (changed === undefined) {
      checkTargets(planned);
      return { entries, held, planned, ids, pending };
    }
    if (round >= rounds) {
      const first = Math.min(...changed.keys());
      throw new FhirError('invalid', `Bundle.entry[${first}]: the conditional entries whose chains or _has read what other entries write change one another's answers and do not settle on one: name the resources by their ids`, {
        expression: [conditionElement(entries.find((e) => e.index === first)!)],
      });
    }
    forced = new Map([...forced, ...changed]);
    entries = copies();
  }
}

/** 1 for an entry writing a Subscription (activated against the topics written before it), else 0. */
function subscriptionLast(p: Planned): number {
  return p.entry.type === 'Subscription' ? 1 : 0;
}

/** Whether an entry acts on a resource that may exist: an update, a patch or a delete (a create's id is new). */
function changesExisting(p: Planned): boolean {
  return p.id !== undefined && !p.existing && !p.follows && (p.entry.method === 'PUT' || p.entry.method === 'PATCH' || p.entry.method === 'DELETE');
}

/**
 * Every entry's resource must be valid, one with a fullUrl as in a Bundle `$validate` checks (its relative
 * references of the REST shape), unless it is an update that changes nothing (RefusedNoOps); the 422 lists the
 * problems of all of them, each under its entry.
 */
async function requireValidEntries(deps: FhirDeps, entries: Entry[], noOps: RefusedNoOps): Promise<void> {
  const level = validationLevel(deps);
  const errors = [];
  // Entry by entry, letting other requests run every few ms: 20,000 entries take a second or more.
  const pace = pacedTurns();
  for (const e of entries) {
    if (e.resource) errors.push(...(await excused(e, await validationErrorsPaced(e.resource, level, `Bundle.entry[${e.index}].resource`, e.fullUrl !== undefined), noOps)));
    await pace();
  }
  if (errors.length > 0) throw invalidResource(errors, 'The transaction (nothing was written)');
}

/**
 * `issues`, an entry's validation errors, unless it is an update that changes nothing (RefusedNoOps), which they
 * would refuse: none then.
 */
async function excused(e: Entry | Planned, issues: ValidationIssue[], noOps: RefusedNoOps): Promise<ValidationIssue[]> {
  if (issues.length === 0) return issues;
  return (await noOps.excuse(e, invalidResource(issues, 'The transaction (nothing was written)'))) ? [] : issues;
}

/**
 * Every entry's resource (and patched result) must satisfy the profiles it claims that Cinder knows, and
 * its extensions their definitions, and a QuestionnaireResponse its Questionnaire, unless it is an update that
 * changes nothing (RefusedNoOps); the 422 lists the problems of all entries, as base validation's does.
 */
async function requireProfiledEntries(deps: FhirDeps, req: FhirRequest, entries: Entry[], planned: Planned[], noOps: RefusedNoOps): Promise<void> {
  if ((deps.profiles === undefined && deps.questionnaires === undefined) || validationLevel(deps) !== 'strict') return;
  const errors = [];
  // One budget for the invariants of every entry's profiles (run.ts).
  const cost = profileCost();
  // The entries' references, rewritten to `Type/id`, resolve to what the other entries write (target profiles, resolve() discriminators).
  const written = new Map<string, Json>();
  for (const p of planned) {
    const r = writtenBy(p);
    if (r !== undefined && p.id !== undefined) written.set(`${r.resourceType}/${p.id}`, r as Json);
  }
  const held = writtenScope(written);
  const reads = readsProfiles(req.access);
  for (const e of entries) {
    if (!e.resource) continue;
    const at = `Bundle.entry[${e.index}].resource`;
    const issues = [
      ...((await deps.profiles?.writeIssues(req.tenant, e.resource, at, true, cost, held, reads)) ?? []),
      ...((await deps.questionnaires?.issues(req.tenant, e.resource, { warnings: false, at, access: req.access })) ?? []),
    ];
    errors.push(...(await excused(e, issues, noOps)));
  }
  for (const p of planned) {
    if (!p.patched) continue;
    const issues = patchedIssues(p, [
      ...((await deps.profiles?.writeIssues(req.tenant, p.patched.resource, undefined, true, cost, held, reads)) ?? []),
      ...((await deps.questionnaires?.issues(req.tenant, p.patched.resource, { warnings: false, access: req.access })) ?? []),
    ]);
    errors.push(...(await excused(p, issues, noOps)));
  }
  if (errors.length > 0) throw invalidResource(errors, 'The transaction (nothing was written)');
}

/**
 * Processes a transaction or batch Bundle posted to the FHIR base and returns the response Bundle.
 * `scope` resolves references to fullUrls of other Bundles and learns this one's (`cinder import`).
 */
export async function processBundle(deps: FhirDeps, req: FhirRequest, body: unknown, base: string, scope?: FullUrlScope, operation?: OperationCall): Promise<Json> {
  // One pace for the Bundle's steps before its entries' own (src/fhir/turns.ts).
  const pace = pacedTurns();
  const { type, entries, invalid } = await parseBundle(body, base, pace);
  const shell = await pacedShellErrors(body as Resource, validationLevel(deps), pace);
  await noteValidationLevel(deps, req.tenant);
  let out: Json[];
  if (type === 'transaction') {
    if (invalid.length > 0) throw invalid[0]!.error;
    if (shell.length > 0) throw invalidResource(shell, 'The transaction Bundle (nothing was written)');
    // An operation would run beside the transaction, not in it: it could not see the transaction's writes.
    const op = entries.find((e) => e.operation !== undefined);
    if (op) {
      throw new FhirError('not-supported', `Bundle.entry[${op.index}]: operations ('${op.operation}') are invoked in batch Bundles, not in transactions`, {
        expression: [`Bundle.entry[${op.index}].request.url`],
      });
    }
    // Its conditional creates and updates wait for others of the same conditions (exclusively), as REST
    // ones do: with the fullUrls of plain updates and patches in them replaced by their ids first.
    withStaticIds(entries, base);
    const conditions = writeConditions(entries);
    const attemptOf = entriesPerAttempt(entries, conditions.length > 0 || judgesReach(req, entries) || hasConditionalReferences(entries));
    // Copies for a planning again (planSettled): its first attempt rewrote the entries' references in place.
    out = await exclusively(deps, req.tenant, conditions, (settle, attempt) => transaction(deps, req, attemptOf(attempt), base, settle, () => attemptOf(attempt + 1), scope, operation));
  } else {
    // The batch's own problems fail it whole; those of an entry's request or fullUrl are that entry's.
    const byEntry = new Map<number, ValidationIssue[]>();
    for (const issue of shell) {
      const index = /^Bundle\.entry\[(\d+)\]/.exec(issue.expression)?.[1];
      if (index === undefined) throw invalidResource(shell, 'The batch Bundle (nothing was written)');
      byEntry.set(Number(index), [...(byEntry.get(Number(index)) ?? []), issue]);
    }
    for (const [index, issues] of byEntry) {
      if (invalid.some((bad) => bad.index === index)) continue;
      entries.splice(entries.findIndex((e) => e.index === index), 1);
      invalid.push({ index, error: invalidResource(issues, `Bundle.entry[${index}]`) });
    }
    invalid.sort((a, b) => a.index - b.index);
    out = await batch(deps, req, entries, base, scope, operation);
    for (const bad of invalid) out.splice(bad.index, 0, errorEntry(bad.error));
  }
  // An empty batch or transaction answers a Bundle without `entry`: R4 JSON has no empty arrays (json.html).
  return { resourceType: 'Bundle', id: newId(), type: `${type}-response`, ...(out.length > 0 ? { entry: out } : {}) };
}
