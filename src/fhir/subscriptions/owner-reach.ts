/**
 * Whether a Subscription's owner may still search what it selects, judged by today's rules, whatever rules it was
 * activated under: the owner's access is rebuilt from the scopes recorded at activation (owner.ts) each time it is
 * judged, never kept from then. A token an older release issued could hold `patient/` scopes with no patient in
 * context beside filtered `user/` (or `system/`) ones, which then read every patient's records; today the `patient/`
 * scopes keep what they bound to nothing (src/auth/scopes.ts accessFromScopes). So such a Subscription's criteria
 * no longer compile for its owner: the hub matches nothing for it, the delivery loop sends nothing more of what was
 * matched under the old rules, and both write it `error`, saying why (grantError): its recorded scopes never change,
 * so nothing sets it back; the app activates it again (status requested) with a token that may search it.
 */
import { FhirError } from '../../errors.ts';
import type { Condition } from '../../store/types.ts';
import { requireAccess, type Access } from '../access.ts';
import type { FhirDeps } from '../crud.ts';
import { compileFilter, guardLinked } from '../search.ts';
import { splitCriteria } from './criteria.ts';
import { needsPatientContext } from '../../auth/scopes.ts';
import type { OwnerRecord, RestoreAccess } from './owner.ts';
import { compileTopic, findTopic, isTopicCriteria, topicRequest } from './topic-subscription.ts';
import { tenantTopics, type Topic } from './topics.ts';

type Json = Record<string, unknown>;

/** The `error` of a Subscription whose owner's recorded scopes no longer let it search what it selects. */
export function grantError(clientId: string): string {
  return `paused: the scopes of the token that activated it (client ${clientId}) no longer let it search what its criteria select ` +
    '(a patient/ scope with no patient in context grants nothing, nor what it kept to a patient of the filtered user/ or system/ scopes beside it); ' +
    'nothing sets it back: an app activates it again (status requested) with a token that may search it';
}

/**
 * Whether `access` may still search what Subscription `sub` selects: its criteria's type and the types its chains and
 * `_has` read (a topic-based one: each of its topic's trigger types, with its filters), as activation and the hub's
 * compilation require (a 403 there silences it). What cannot be judged here (a topic no longer found, a criteria that
 * does not compile for another reason) counts as allowed: the hub decides, as before.
 */
export async function searchesWhatItSelects(deps: FhirDeps, tenant: string, access: Access, sub: Json, now: number): Promise<boolean> {
  const check = async (criteria: string): Promise<Condition[]> => {
    const { type, query } = splitCriteria(criteria);
    requireAccess(access, type, 's');
    // Pending conditions (`:in`) are left unresolved: only the types read are judged.
    guardLinked(access, compileFilter(type, new URLSearchParams(query), now) as Condition[]);
    return [];
  };
  try {
    if (!isTopicCriteria(sub.criteria)) await check(sub.criteria as string);
    else {
      const request = topicRequest(sub);
      await compileTopic(deps, tenant, access, findTopic(await tenantTopics(deps, tenant, now), request), request, now, check);
    }
    return true;
  } catch (err) {
    if (err instanceof FhirError) return err.status !== 403;
    throw err;
  }
}

/**
 * Whether a grant of `scopes` (the recorded ones, `patient` the patient in context they were recorded with) is one an
 * older release read more with than today's rules allow, and no longer searches what `sub` selects for that alone: it
 * holds `patient/` scopes (or a launch context) with no patient in context, its access by today's rules (`access`,
 * built from `scopes`) does not search it, and the same scopes without the patient-context ones (what the filtered
 * `user/` or `system/` scopes beside them granted under the older rules) do. A grant that no longer searches it for
 * another reason (a topic the operator widened since to a type the owner does not search, a registration narrowed)
 * is not that: it is no grant of an older release, and its `error` set for good would blame the grant wrongly.
 */
export async function olderGrantLapsed(
  deps: FhirDeps, tenant: string, scopes: readonly string[], patient: string | undefined, access: (scopes: string[]) => Promise<Access>, sub: Json, now: number,
): Promise<boolean> {
  if (patient !== undefined || !scopes.some(needsPatientContext)) return false;
  if (await searchesWhatItSelects(deps, tenant, await access([...scopes]), sub, now)) return false;
  return searchesWhatItSelects(deps, tenant, await access(scopes.filter((s) => !needsPatientContext(s))), sub, now);
}

/**
 * Whether the scopes recorded for `owner` (owner.ts), by today's rules and whatever its client now has registered,
 * still let it search what `sub` selects: false for one an older release activated with a grant that today reaches
 * none of it (olderGrantLapsed). The operator's access reaches everything.
 */
export async function grantReaches(deps: FhirDeps, restore: RestoreAccess, tenant: string, owner: string, sub: Json, now: number): Promise<boolean> {
  const record = JSON.parse(owner) as OwnerRecord;
  if ('operator' in record) return true;
  return !(await olderGrantLapsed(deps, tenant, record.scopes, record.patient, (scopes) => restore(tenant, { ...record, scopes }, 'recorded'), sub, now));
}

/**
 * The trigger types of topic-based Subscription `sub`'s topic (among `topics`) that `access` may not search with the
 * Subscription's filter for that type (a 403 compiling it), in the topic's order: those a topic pause names.
 */
export async function unsearchedTriggers(deps: FhirDeps, tenant: string, access: Access, sub: Json, topics: Topic[], now: number): Promise<string[]> {
  const request = topicRequest(sub);
  const out: string[] = [];
  for (const trigger of findTopic(topics, request).triggers) {
    const query = request.filters.get(trigger.type);
    try {
      requireAccess(access, trigger.type, 's');
      const criteria = query === undefined ? trigger.type : `${trigger.type}?${query}`;
      const { type, query: q } = splitCriteria(criteria);
      guardLinked(access, compileFilter(type, new URLSearchParams(q), now) as Condition[]);
    } catch (err) {
      if (err instanceof FhirError && err.status === 403 && !out.includes(trigger.type)) out.push(trigger.type);
    }
  }
  return out;
}

/**
 * What refuses a topic-based Subscription its search, of its registration and its topic, from the trigger types each
 * access may not search (unsearchedTriggers): `recorded`, by the scopes recorded at its activation (today's rules), and
 * `registered`, by those held to its client's registration. The registration, where it refuses a type the recorded
 * scopes search, whatever the topic does (the pause `cinder client enable|update` lifts, then the topic's if it still
 * refuses); else the topic, widened since to types the recorded scopes do not search, naming them; else neither (undefined).
 */
export function topicRefusal(recorded: readonly string[], registered: readonly string[]): { why: 'scopes' } | { why: 'topic'; types: string[] } | undefined {
  if (registered.some((type) => !recorded.includes(type))) return { why: 'scopes' };
  return recorded.length ? { why: 'topic', types: [...recorded] } : undefined;
}
