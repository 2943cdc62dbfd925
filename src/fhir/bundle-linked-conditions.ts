/**
 * A transaction's conditional entries (`ifNoneExist`, conditional PUT, PATCH and DELETE URLs) whose chain or `_has`
 * reads what other entries write, in FHIR R4 http.html's processing order (3.1.0.11.2: deletes, then creates, then
 * updates and patches; FHIR orders nothing within a step). The planning searched the store, the state before the
 * transaction; an entry's search is run in the state the earlier steps leave (LeftState: the stored resources they
 * keep and the resources they write), and where the writes of its own step would change that answer, which of them
 * comes first decides it and the entry is refused.
 */
import { FhirError } from '../errors.ts';
import type { ResourceVersion, SearchQuery } from '../store/types.ts';
import type { HeldSearches } from './bundle-held-searches.ts';
import { linkedWrites, mayLink, WrittenResources } from './bundle-conditional.ts';
import { LeftState } from './bundle-left-state.ts';
import { conditionElement, withEntryIds } from './bundle-match-urls.ts';
import { entryError, transactionWrites, type FullUrlScope, type Planned } from './bundle-ops.ts';
import { entryPath } from './bundle-entries.ts';
import { conditionKey, showCondition } from './conditional.ts';
import { findResources, lookups } from './core-search.ts';
import type { FhirDeps, FhirRequest } from './crud.ts';
import { compileSearch, storeQuery } from './search.ts';

/** http.html 3.1.0.11.2's processing steps: deletes, then creates, then updates and patches. */
const STEP: Record<string, number> = { DELETE: 0, POST: 1, PUT: 2, PATCH: 2 };

/** Forced answers (by entry index: the matched version, or null for none) of the conditions the planning answered otherwise. */
export type ForcedAnswers = Map<number, ResourceVersion | null>;

/**
 * Checks each conditional entry whose chain or `_has` reads what other entries write (linkedWrites: a resource of the
 * linked type they write meets the link's own conditions, or a stored one they replace met them). Its condition is
 * searched in the state the entries of earlier steps leave, the entry's own write left out: a conditional PUT sees the
 * Observations the Bundle's POSTs create, an `ifNoneExist` does not find what a DELETE removes. Where the writes of its
 * own step change that answer (a POST beside an `ifNoneExist`, a PUT beside a conditional PUT, a DELETE beside a
 * conditional DELETE), the answer depends on an order FHIR does not define: a 400 naming its condition. Several matches
 * are a 412, as for any conditional entry. Returns the answers that differ from the planning's, for it to plan again
 * with (undefined: none differs); such an entry is judged against its own step's writes in that planning, where the
 * writes naming its fullUrl name the resource it then targets. The searches of the answers kept are held to the commit
 * (`held`). Run once the references are rewritten (the written resources refer by id) and before anything is written.
 */
export async function settleLinkedConditions(
  deps: FhirDeps, req: FhirRequest, planned: Planned[], ids: Map<string, string>, base: string, scope: FullUrlScope | undefined, held: HeldSearches,
): Promise<ForcedAnswers | undefined> {
  const lookup = (item: string) => ids.get(item) ?? scope?.get(item) ?? ids.get(`${base}/${item}`);
  const ctx = lookups(deps, req.tenant);
  const find = (q: SearchQuery) => findResources(deps, req.tenant, q);
  // The writes of each step and those before it, gathered once (a Bundle may hold thousands of such conditions).
  const upTo = new Map<number, WrittenResources>();
  const writtenUpTo = (step: number) => upTo.get(step) ?? upTo.set(step, new WrittenResources(transactionWrites(planned.filter((q) => (STEP[q.entry.method] ?? Infinity) <= step)), ctx, find)).get(step)!;
  let changed: ForcedAnswers | undefined;
  for (const p of planned) {
    const { entry } = p;
    const step = STEP[entry.method];
    // Most conditions (`identifier=...`) hold no chain or `_has`: nothing to read, no writes gathered.
    if (!entry.condition || step === undefined || !mayLink(entry.condition)) continue;
    const query = withEntryIds(entry.condition, lookup, () => false)!;
    try {
      const own = p.id === undefined ? undefined : { type: entry.type, id: p.id };
      // A chain is not changed by a resource created with a new id, which no stored resource refers to (storedOnly).
      const clash = await linkedWrites(deps, req, entry.type, query, () => writtenUpTo(step), true, own);
      if (clash.length === 0) continue;
      const others = (before: (s: number) => boolean) => transactionWrites(planned.filter((q) => before(STEP[q.entry.method] ?? Infinity) && !(q.entry.type === entry.type && q.id === p.id)));
      const earlier = await stateAnswer(deps, req, entry.type, query, others((s) => s < step));
      if (earlier.rows.length > 1) {
        throw new FhirError('precondition', `${entryPath(entry)}: condition '${showCondition(entry.type, query)}' matches more than one resource`, { expression: [conditionElement(entry)] });
      }
      // An entry that shares another's write (sharedWrites: the same condition) takes that one's answer.
      const shares = p.follows?.entry.condition !== undefined && conditionKey(p.follows.entry.type, p.follows.entry.condition) === conditionKey(entry.type, entry.condition);
      const answer = earlier.rows[0];
      if (!shares && answer?.id !== (p.follows ? undefined : p.found)) {
        // Planned again with this answer, and judged then: the writes referring to the entry's fullUrl name another resource.
        (changed ??= new Map()).set(entry.index, answer ?? null);
        continue;
      }
      const within = await stateAnswer(deps, req, entry.type, query, others((s) => s <= step));
      if (!sameAnswer(earlier.rows, within.rows)) throw unordered(entry, query, clash);
      if (earlier.query !== undefined) held.add(entry.type, query, entryPath(entry), 2, { rows: earlier.rows, query: earlier.query }, true);
    } catch (err) {
      throw err instanceof FhirError ? entryError(err, entry, undefined, conditionElement(entry)) : err;
    }
  }
  return changed;
}

/** The first two stored resources the condition finds in the state `writes` leave (their own lastUpdated: now), with the query run. */
async function stateAnswer(
  deps: FhirDeps, req: FhirRequest, type: string, query: URLSearchParams, writes: ReturnType<typeof transactionWrites>,
): Promise<{ rows: ResourceVersion[]; query: SearchQuery | undefined }> {
  const now = deps.clock.now();
  const search = await storeQuery(deps, req, type, compileSearch(type, query, true, now));
  if (search === undefined) return { rows: [], query: undefined };
  return new LeftState(deps, req, new WrittenResources(writes, lookups(deps, req.tenant)), now).stored(search, 2);
}

/** Whether two answers are the same: the same resource, none, or several alike. */
function sameAnswer(a: ResourceVersion[], b: ResourceVersion[]): boolean {
  if (a.length > 1 && b.length > 1) return true;
  return a.length === b.length && a.every((v, i) => v.id === b[i]!.id);
}

function unordered(entry: Planned['entry'], query: URLSearchParams, types: string[]): FhirError {
  const kind = entry.method === 'POST' ? 'ifNoneExist' : `conditional ${entry.method === 'PUT' ? 'update' : entry.method === 'PATCH' ? 'patch' : 'delete'}`;
  const peers = entry.method === 'DELETE' ? 'other deletes' : entry.method === 'POST' ? 'other creates' : 'other updates or patches';
  return new FhirError('invalid', `${entryPath(entry)}: ${kind} '${showCondition(entry.type, query)}' reads ${types.join(' and ')} through a chain or _has, which ${peers} of this transaction write, in the same step of FHIR's processing order, which orders nothing within a step: its answer depends on which comes first. Send those writes in a transaction of their own first, or name the resource by its id`, {
    expression: [conditionElement(entry)],
  });
}
