import type { Sealer } from '../auth/sealed.ts';
import type { Clock } from '../clock.ts';
import { FhirError, type FhirIssue } from '../errors.ts';
import { NO_INDEX_ROWS, StoreConflictError, type CurrentVersion, type ResourceVersion, type ResourceWriter, type Store } from '../store/types.ts';
import { operatorAccess, requireAccess, type Access, type Permission } from './access.ts';
import { hasCoreResources, type CoreLayer } from './core-layer.ts';
import { lookups } from './core-search.ts';
import { inPatientCompartment } from './definitions.ts';
import { compartmentsOf } from './indexer.ts';
import type { CodeSet } from './search-compile.ts';
import { matchConditions, type MatchContext } from './search-match.ts';
import { provenanceOfReadableRecord, PROVENANCE_REFUSAL, requireOwnTargets, writerTargetReads, type TargetReads } from './provenance-reach.ts';
import { prepareVersionPaced, storesSameMeasured, versionToWrite, wouldStoreSame, type PreparedVersion, type PutMethod } from './prepared.ts';
import { requireReferences, type ReferenceReach, type ReferentialIntegrity } from './referential-integrity.ts';
import { asResource, checkTypeAndId, newId, withoutId, type Resource } from './resource.ts';
import { R4_RESOURCE_TYPES, versionNumber } from './resource-types.ts';
import { securityContextTarget, splitStoredBinary } from './binary.ts';
import { requireIfMatch, requireIfNoneMatch, type IfMatch, type UpdatePreconditions } from './if-match.ts';
export type { UpdatePreconditions } from './if-match.ts';
import { invalidResource, requireValidPaced } from './validation/check.ts';
import type { ValidationLevel } from './validation/validate.ts';
import { readsProfiles, type ProfileValidator } from './validation/profile/profile-check.ts';
import type { WrittenTerminology } from '../terminology/written-source.ts';
import { isActivated } from './subscriptions/activation.ts';
import type { ActivateSubscription, SubscriptionHub } from './subscriptions/hub.ts';
import { isTopicResource, noteTopicWritten, parseTopic } from './subscriptions/topics.ts';
import type { QuestionnaireValidator } from './validation/questionnaire/validator.ts';
import { atWriteTime, noteRaisedStamp } from '../store/write-times.ts';

export interface FhirDeps {
  store: Store;
  clock: Clock;
  /**
   * The codes of a CodeSet (a ValueSet by canonical URL or location, or a code system's subsumption) for the
   * `:in`, `:not-in`, `:below` and `:above` search modifiers, at most MAX_SEARCH_VALUES + 1 (the
   * terminology service); absent where no terminology service is wired. With `written`, as a transaction writing
   * those CodeSystems and ValueSets leaves the tenant's terminology (a Subscription's `:in` naming one it writes).
   */
  expandCodes?: (tenant: string, codes: CodeSet, written?: WrittenTerminology) => Promise<{ system: string; code: string }[]>;
  /** How writes are validated (CINDER_VALIDATION); `strict` when absent. */
  validation?: ValidationLevel;
  /** Validation against the profiles a resource claims in `meta.profile` (at `strict`); absent: none. */
  profiles?: ProfileValidator;
  /** Validation of a QuestionnaireResponse against its Questionnaire (at `strict`); absent: none. */
  questionnaires?: QuestionnaireValidator;
  /** `CINDER_REFERENTIAL_INTEGRITY=on`: REST writes must refer to existing resources (absent: off). */
  referentialIntegrity?: ReferentialIntegrity;
  /**
   * The FHIR R4 core CodeSystems and ValueSets, read and searched as every tenant's resources unless
   * the tenant stored one of the same id (absent: none, e.g. in `cinder import`).
   */
  core?: CoreLayer;
  /**
   * The tenant's FHIR base (`{CINDER_BASE_URL}/tenants/{tenant}/fhir/R4`): an absolute reference under it
   * names the tenant's resource, as a relative one does; any other absolute URL is another server's
   * (parseReference). Absent: no absolute reference is local.
   */
  fhirBase?: (tenant: string) => string;
  /**
   * FHIR R4 Subscriptions (src/fhir/subscriptions/): Subscriptions are activated as they are written, and
   * every write records the notifications it gives in its transaction. Absent (`cinder import`): neither.
   */
  subscriptions?: SubscriptionHub;
  /**
   * Seals the place a sorted search's next page starts from (the last match's sort keys: names, dates, codes)
   * into an opaque, tamper-evident `_cursor` bound to the tenant (src/auth/sealed.ts). Absent (the CLI, which
   * pages no search): such a search pages by offset, which tells nothing of the matches.
   */
  cursors?: Sealer;
}

/** The validation level of `deps`. */
export function validationLevel(deps: FhirDeps): ValidationLevel {
  return deps.validation ?? 'strict';
}

/**
 * A write's check of the profiles `resource` and the resources inside it (contained ones, a document's or
 * collection's entries) claim (`meta.profile`) that Cinder knows, or are held to unclaimed (a vital sign's), and then of its extensions against their
 * definitions, and of a QuestionnaireResponse against its Questionnaire, at `strict`: a 422 for an error,
 * as base validation's (`at`: the resource's FHIRPath, `what`: what the message names). Undefined at once
 * for a resource where none is claimed or implied and that answers no Questionnaire, so that such a write costs
 * nothing more (not even an await).
 */
export function requireProfiles(deps: FhirDeps, tenant: string, resource: Resource, at?: string, what?: string, access?: Access): Promise<void> | undefined {
  if (validationLevel(deps) !== 'strict') return undefined;
  const json = resource as Record<string, unknown>;
  const answered = deps.questionnaires?.issues(tenant, json, { warnings: false, ...(at !== undefined && { at }), ...(access !== undefined && { access }) });
  const reads = access === undefined || readsProfiles(access);
  if (answered === undefined) return deps.profiles?.requireValid(tenant, json, at, what, true, reads);
  // One 422 listing the profiles' problems and the Questionnaire's together.
  return Promise.all([deps.profiles?.writeIssues(tenant, json, at, true, undefined, undefined, reads), answered]).then(([profiled, answers]) => {
    const errors = [...(profiled ?? []), ...answers];
    if (errors.length > 0) throw invalidResource(errors, what ?? at ?? resource.resourceType);
  });
}

/**
 * Before a write validated below `strict`: the tenant may now hold resources that are not valid R4,
 * so its bulk exports validate what they read (TenantRepo.validationDebt) until `cinder validate`
 * finds nothing invalid.
 */
export async function noteValidationLevel(deps: FhirDeps, tenant: string): Promise<void> {
  if (validationLevel(deps) !== 'strict') await deps.store.tenants.markUnvalidated(tenant);
}

/** Who asks, in which tenant. */
export interface FhirRequest {
  tenant: string;
  access: Access;
}

export interface WriteResult {
  version: ResourceVersion;
  created: boolean;
  /** The update would have stored the current version again (storesSame): nothing was written and `version` is the current one. */
  unchanged: boolean;
  /** A conditional create's condition matched `version`, the current version of an existing resource: nothing was written. */
  matched?: true;
  /** An update that changed nothing although validation refused it (PutOptions.unvalidated): the refusal's issues. */
  refused?: FhirIssue[];
}

/** Attempts of a write whose transaction clashed with a concurrent one (writeTx). */
const WRITE_ATTEMPTS = 5;

/**
 * Runs `fn` in one store transaction. A clash with a concurrent writer (StoreConflictError: on PostgreSQL,
 * another transaction created a resource this one found absent, or a deadlock between two that create
 * several) rolls it back and runs `fn` again, after a random wait that grows, so that it finds the
 * other's rows and locks them as any update does: requests creating one id at once (update as create)
 * end as they would one after another, as on SQLite, whose writes are serialised. Every `fn` reads
 * what it writes over inside the transaction and keeps no state across runs. Past WRITE_ATTEMPTS the
 * clash is a 409 the client may retry instead of a 500.
 */
export async function writeTx<T>(deps: FhirDeps, tenant: string, fn: (w: ResourceWriter) => Promise<T>): Promise<T> {
  // The tenant's subscriptions are told of what the transaction writes, in it (hub.ts).
  const hook = deps.subscriptions && (await deps.subscriptions.hook(tenant));
  for (let attempt = 1; ; ) {
    try {
      const out = await deps.store.resources.write(tenant, hook ? hook.wrap(fn) : fn);
      await hook?.committed();
      return out;
    } catch (err) {
      // It matched Subscriptions whose owners the hook judges outside the transaction (hub.ts OwnersToJudge): run again,
      // with no wait and no attempt counted (a run asks only of Subscriptions no earlier run judged: the runs are bounded).
      if (hook && (await hook.judge(err))) continue;
      if (!(err instanceof StoreConflictError)) throw err;
      if (attempt === WRITE_ATTEMPTS) throw new FhirError('conflict', 'A concurrent write changed the same resource; retry the request', { cause: err });
    }
    await Bun.sleep(Math.random() * 2 ** attempt);
    attempt++;
  }
}

/**
 * With patient-context scopes for `perm`, throws 403 unless `resource` is in that patient's compartment
 * (`base`: the tenant's FHIR base, FhirDeps.fhirBase); see requireInCompartment for writes.
 */
export function requireCompartment(access: Access, resource: Resource, base: string | undefined, perm: Permission): void {
  requireInCompartment(access, resource.resourceType, () => compartmentsOf(resource, base), perm);
}

/**
 * requireCompartment for a resource of `type` whose compartments `compartments()` lists. A patient's
 * token reads what is in the patient's compartment; it writes (creates, updates, deletes) only what is
 * in that compartment and no other patient's: an Observation of another patient that it merely performed,
 * a Group of several patients, is that other patient's record too (SMART: `patient/` scopes are for
 * "the current patient"). Nor does it write a type outside the compartment (a Practitioner, an
 * Organization: shared records); a Binary is judged by its securityContext instead.
 */
function requireInCompartment(access: Access, type: string, compartments: () => string[], perm: Permission): void {
  const patient = access.patientLimit(type, perm);
  if (patient === undefined) return;
  const writes = perm !== 'r' && perm !== 's';
  if (!inPatientCompartment(type)) {
    if (writes && type !== 'Binary') throw new FhirError('forbidden', `A patient-context token may not ${WRITE_VERBS[perm]} ${type}: it is outside the patient compartment`);
    return;
  }
  const of = compartments();
  if (!of.includes(patient)) {
    throw new FhirError('forbidden', `${type} is outside the patient compartment the token is limited to`);
  }
  if (writes && of.some((other) => other !== patient)) {
    throw new FhirError('forbidden', `${type} is in another patient's compartment too: a patient-context token writes its own patient's records alone`);
  }
}

const WRITE_VERBS: Record<string, string> = { c: 'create', u: 'update', d: 'delete' };

/**
 * requireCompartment for a read of `resource` by `req`, except that a Provenance outside the patient's
 * compartment is within reach when it names a record of that patient the token may read
 * (src/fhir/provenance-reach.ts).
 */
export async function requireReadReach(deps: FhirDeps, req: FhirRequest, resource: Resource, reads?: TargetReads): Promise<void> {
  const base = deps.fhirBase?.(req.tenant);
  const patient = req.access.patientLimit(resource.resourceType, 'r');
  if (resource.resourceType !== 'Provenance' || patient === undefined || compartmentsOf(resource, base).includes(patient)) {
    requireCompartment(req.access, resource, base, 'r');
    return;
  }
  if (await provenanceOfReadableRecord(deps, req, resource, patient, reads)) return;
  throw new FhirError('forbidden', `Provenance/${resource.id} ${PROVENANCE_REFUSAL}`);
}

/**
 * Throws 403 unless the stored `type/id` (if any) is within the token's reach for `perm` (an update or a
 * delete): in a patient-context token's compartment, meeting the token's SMART v2 scope filters for
 * `perm` (`system/Observation.d?category=laboratory` deletes laboratory Observations alone), and for a
 * Binary readable through its securityContext. An update or delete may not reach a resource outside
 * them, whatever the new content says.
 */
export async function requireStoredInReach(deps: FhirDeps, req: FhirRequest, type: string, id: string, perm: 'u' | 'd'): Promise<Judged> {
  const compartment = req.access.patientLimit(type, perm) !== undefined && inPatientCompartment(type);
  const filtered = req.access.filters?.(type, perm) !== undefined;
  if (!reachJudged(req.access, type, perm)) return undefined;
  // A Binary is judged on its elements but its data, which the store leaves out (a large one's content was read whole
  // here, and again by the write: docs/PERFORMANCE.md, Memory of large request bodies).
  const binary = type === 'Binary';
  const repo = deps.store.resources;
  const current = binary ? await repo.readWithoutData(req.tenant, type, id) : filtered ? await repo.read(req.tenant, type, id) : await storedOrJudged(deps, req, type, id, perm);
  if (typeof current === 'number') return current;
  const judged = current?.versionId ?? 0;
  // An update of a deleted resource creates it again, continuing its history: it is held to the
  // content the resource had before its deletion, so that a token cannot take over another patient's
  // record (what refers to it would then name the new content). A delete of a deleted resource answers
  // the deletion's version, which is judged as a read of it is (checkDeletionReadable): by that content.
  const stored = current && (await lastContent(deps, req.tenant, current, binary ? (...a) => repo.readWithoutData(...a) : undefined));
  if (!stored || stored.deleted) return judged;
  const resource = binary ? splitStoredBinary(stored.content).resource : (JSON.parse(stored.content) as Resource);
  if (binary) {
    await requireContextReadable(deps, req, resource);
    requireFiled(req.access, resource, deps.fhirBase?.(req.tenant), perm);
  } else if (compartment) requireCompartment(req.access, resource, deps.fhirBase?.(req.tenant), perm);
  if (filtered) await requireFilter(req.access, perm, resource, stored.lastUpdated, lookups(deps, req.tenant));
  return judged;
}

/**
 * The current version of `type/id` as requireStoredInReach judges it for a patient's compartment alone: read whole when
 * small (measured); a large live one judged by its compartment rows, its text unread (judgedByCompartment), giving the
 * version judged; read whole when they cannot tell.
 */
async function storedOrJudged(deps: FhirDeps, req: FhirRequest, type: string, id: string, perm: 'u' | 'd'): Promise<ResourceVersion | number | null> {
  const repo = deps.store.resources;
  const m = await repo.measured(req.tenant, type, id);
  if (m === null) return null;
  if (m.content !== undefined) return { ...m, type, id, content: m.content };
  if (!m.deleted && (await judgedByCompartment(deps, req, type, id, m.versionId, perm))) return m.versionId;
  return repo.read(req.tenant, type, id);
}

/**
 * What requireStoredInReach judged: the stored version (0: none) whose reach it read, or undefined when the
 * token's reach of the type does not depend on what is stored.
 */
export type Judged = number | undefined;

/** Whether `access`'s `perm` on `type` depends on what is stored (requireStoredInReach judges it): a compartment, a filter, a Binary. */
export function reachJudged(access: Access, type: string, perm: 'u' | 'd'): boolean {
  return type === 'Binary' || (access.patientLimit(type, perm) !== undefined && inPatientCompartment(type)) || access.filters?.(type, perm) !== undefined;
}

/** The stored version changed between requireStoredInReach and the write's transaction (judgedReach): judged again. */
class ReachRaced extends Error {
  override name = 'ReachRaced';
}

/** Attempts of an update or delete whose resource other writes keep changing between its judgement and its write. */
const REACH_ATTEMPTS = 5;

/**
 * Inside the write's transaction, the version `judged` (requireStoredInReach) must still be the stored one: the
 * judgement read the committed state before the transaction, and a resource created or changed since (out of the
 * token's compartment or filter) was written over or deleted on that judgement. PostgreSQL locks the row here.
 */
async function requireJudged(w: ResourceWriter, type: string, id: string, judged: Judged): Promise<void> {
  if (!(await stillJudged(w, type, id, judged))) throw new ReachRaced();
}

/** Whether the version `judged` (requireStoredInReach; undefined: nothing judged) is still the stored one, in the write's transaction. */
export async function stillJudged(w: ResourceWriter, type: string, id: string, judged: Judged): Promise<boolean> {
  // Its version alone: measured() leaves a large text unread (the row is found and locked alike).
  return judged === undefined || ((await w.measured(type, id))?.versionId ?? 0) === judged;
}

/**
 * Runs `write` (an update or delete of `type/id`) after requireStoredInReach, and again from the judgement while
 * the stored version changed in between (requireJudged), up to REACH_ATTEMPTS, then a 409.
 */
async function judgedReach<T>(deps: FhirDeps, req: FhirRequest, type: string, id: string, perm: 'u' | 'd', write: (judged: Judged) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const judged = await requireStoredInReach(deps, req, type, id, perm);
    try {
      return await write(judged);
    } catch (err) {
      if (!(err instanceof ReachRaced)) throw err;
      if (attempt === REACH_ATTEMPTS) throw new FhirError('conflict', `Other requests kept changing ${type}/${id} while this request wrote it; retry the request`);
    }
  }
}

/**
 * The version holding a resource's last content: `v` itself, or for a deletion the version before it
 * (null when there is none), read by `vread` (a Binary's access check reads it without its data). What a deleted
 * resource's history, and its creation again, are judged by.
 */
export async function lastContent(
  deps: FhirDeps, tenant: string, v: ResourceVersion,
  vread: (tenant: string, type: string, id: string, versionId: number) => Promise<ResourceVersion | null> = (...a) => deps.store.resources.vread(...a),
): Promise<ResourceVersion | null> {
  if (!v.deleted) return v;
  return v.versionId > 1 ? vread(tenant, v.type, v.id, v.versionId - 1) : null;
}

/**
 * A Binary whose `securityContext` names a resource (FHIR R4 binary.html) is within reach, for
 * reading and for writing, only of a request that may read that resource: its type's scopes, and
 * when those are limited to a patient's compartment or filtered, the stored resource itself. A context
 * that names no resource of this tenant admits only requests whose access to Binary is not limited
 * to a patient. Other resources, and Binaries without a context, pass (their type's scopes apply).
 */
export async function requireContextReadable(deps: FhirDeps, req: FhirRequest, resource: Resource, via?: ContextReads): Promise<void> {
  if (resource.resourceType !== 'Binary') return;
  const target = securityContextTarget(resource, deps.fhirBase?.(req.tenant));
  if (target === undefined) return;
  const { access } = req;
  const name = resource.id === undefined ? 'The Binary' : `Binary/${resource.id}`;
  // The element the refusal is about, whatever the reason (a write's client can tell what to change).
  const refuse = (why: string) => new FhirError('forbidden', `${name} is out of reach: ${why}`, { expression: ['Binary.securityContext'] });
  if (target === null) {
    if (access.patientLimit('Binary', 'r') === undefined) return;
    throw refuse('its securityContext names no resource of this server, so a patient-context token cannot reach it');
  }
  if (!access.can(target.type, 'r')) throw refuse(`the access token's scopes do not allow read of ${target.type}, its securityContext`);
  const limited = (access.patientLimit(target.type, 'r') !== undefined && inPatientCompartment(target.type)) || access.filters?.(target.type, 'r') !== undefined;
  if (!limited) return;
  const stored = await (via ? via.read(target.type, target.id) : deps.store.resources.read(req.tenant, target.type, target.id));
  // One refusal whether the context exists or not, naming no id: neither tells of another patient's record.
  const unreadable = () => refuse(`the access token may not read the ${target.type} its securityContext names (unknown, or out of the token's reach)`);
  if (!stored || stored.deleted) throw unreadable();
  const context = JSON.parse(stored.content) as Resource;
  try {
    // A Provenance of the patient's record is read as its read reads it (provenance-reach.ts), its targets read
    // through the write's transaction where `via` reads them; in a write's transaction reading no targets, the
    // compartment alone counts.
    if (via && !via.targets) requireCompartment(access, context, deps.fhirBase?.(req.tenant), 'r');
    else await requireReadReach(deps, req, context, via?.targets);
    await requireFilter(access, 'r', context, stored.lastUpdated, via?.lookups ?? lookups(deps, req.tenant));
  } catch (err) {
    if (err instanceof FhirError) throw unreadable();
    throw err;
  }
}

/**
 * How requireContextReadable reads a securityContext inside a write's transaction (a Subscription's match,
 * subscriptions/hub.ts): through the transaction's writer, which sees its own writes, and never on another
 * connection of the store, where the read could wait for ever on a pool that concurrent writes fill.
 */
export interface ContextReads {
  read(type: string, id: string): Promise<CurrentVersion | null>;
  /** The chains and `_has` of a scope filter. */
  lookups: MatchContext;
  /** How a Provenance's targets are read, to judge one as its read judges it (provenance-reach.ts); absent: its compartment alone counts. */
  targets?: TargetReads;
}

/**
 * A stored Binary is a record of the patient's only when filed under one: a token whose updates or deletes of Binary
 * are bound to a patient may not overwrite, refile or delete one without a securityContext (whose file it is nothing
 * says: another patient's report a DocumentReference of theirs names, as feeds store them), nor one filed under a
 * shared record (a Practitioner, an Organization), which it reads but does not write (requireInCompartment) (403).
 * It may create one without a context (an upload before the DocumentReference that names it), which is filed under its
 * patient when it reads its Patient (fileUnfiled): requireWritableContext.
 */
function requireFiled(access: Access, stored: Resource, base: string | undefined, perm: 'u' | 'd'): void {
  if (access.patientLimit('Binary', perm) === undefined) return;
  const target = securityContextTarget(stored, base);
  if (target === undefined) {
    throw new FhirError('forbidden', `Binary/${stored.id} is out of reach: it has no securityContext, so it is no record of the patient's that a patient-context token may ${WRITE_VERBS[perm]}`);
  }
  if (target !== null && !inPatientCompartment(target.type)) throw sharedContext(`Binary/${stored.id}`, target.type, perm);
}

const sharedContext = (name: string, type: string, perm: Permission) =>
  new FhirError('forbidden', `${name} is out of reach: it is filed under a ${type}, a shared record a patient-context token may not ${WRITE_VERBS[perm]} content of`);

/**
 * Files a Binary that a token whose writes of Binary are bound to a patient writes without a securityContext under
 * that patient (`Patient/{id}`), when the token reads its Patient. Left unfiled, it was no record of the patient's
 * (requireFiled): the app that uploaded it could neither correct it, file it under the DocumentReference it wrote
 * next, nor delete it, and every other patient's token read it by its id. A token that may not read its Patient, or
 * only through a SMART v2 filter, might not read it filed there, and writes it unfiled, as sent.
 */
function fileUnfiled(access: Access, resource: Resource, perm: 'c' | 'u'): void {
  if (resource.resourceType !== 'Binary' || resource.securityContext !== undefined) return;
  const patient = access.patientLimit('Binary', perm);
  if (patient === undefined || !access.can('Patient', 'r') || access.filters?.('Patient', 'r') !== undefined) return;
  resource.securityContext = { reference: `Patient/${patient}` };
}

/**
 * requireContextReadable for the content a write files, and for a token whose writes of Binary are bound to a
 * patient, a securityContext that is a record of a patient (a type of the Patient compartment), not a shared one
 * (a Practitioner, an Organization: content filed there is every patient's to read). `via`: how the context is read
 * when the write is not the only one of its request (a transaction's entry filed under another entry's resource).
 */
export async function requireWritableContext(deps: FhirDeps, req: FhirRequest, resource: Resource, perm: 'c' | 'u', via?: ContextReads): Promise<void> {
  fileUnfiled(req.access, resource, perm);
  await requireContextReadable(deps, req, resource, via);
  if (resource.resourceType !== 'Binary' || req.access.patientLimit('Binary', perm) === undefined) return;
  const target = securityContextTarget(resource, deps.fhirBase?.(req.tenant));
  if (target && !inPatientCompartment(target.type)) throw sharedContext(resource.id === undefined ? 'The Binary' : `Binary/${resource.id}`, target.type, perm);
}

/**
 * Whether a search of Binary by `access` lists the Binaries without a securityContext (which follow the Binary scopes
 * alone): not when its Binary searches are bound to a patient. Such a Binary is read by its id, the url an Attachment
 * of the patient's records names (`$everything` and `_include` follow those), but listed it is every patient's file
 * that no context files (a `GET Binary` of `patient/*.rs` listed the tenant's lab reports and scans of every patient).
 */
export function listsUnfiled(access: Access): boolean {
  return access.patientLimit('Binary', 's') === undefined;
}

/**
 * Whether requireContextReadable may refuse some Binary to `access`: its access to Binary is bound to a
 * patient (a context naming no resource of this tenant is out of reach), or a type a securityContext may
 * name is one it may not read, or reads only within a patient's compartment or a scope filter. A token
 * that reads every type whole reaches every Binary, and its counts need not read them.
 */
export function binaryReachLimited(access: Access): boolean {
  if (access.patientLimit('Binary', 'r') !== undefined) return true;
  return R4_RESOURCE_TYPES.some((t) => !access.can(t, 'r') || access.filters?.(t, 'r') !== undefined ||
    (access.patientLimit(t, 'r') !== undefined && inPatientCompartment(t)));
}

/**
 * The versions among `rows` within the request's reach: Binaries whose securityContext it may not
 * read are left out (requireContextReadable, read `via` a write's transaction when given); deletions and other types stay.
 * A context is judged once for all the Binaries among `rows` that name it (a patient's files name a few
 * records: a page read past 20,000 Binaries of another patient read that patient 20,000 times).
 * `listed`: the rows are a search's matches, which a token whose Binary searches are bound to a patient may not
 * be listed without a context (listsUnfiled).
 */
export async function rowsInReach(deps: FhirDeps, req: FhirRequest, rows: ResourceVersion[], via?: ContextReads, listed = false): Promise<ResourceVersion[]> {
  const base = deps.fhirBase?.(req.tenant);
  const byContext = new Map<string, boolean>();
  const out: ResourceVersion[] = [];
  const unfiled = !listed || listsUnfiled(req.access);
  for (const v of rows) {
    if (v.type !== 'Binary' || v.deleted) {
      out.push(v);
      continue;
    }
    const resource = splitStoredBinary(v.content).resource;
    const target = securityContextTarget(resource, base);
    if (target === undefined && !unfiled) continue;
    const key = target ? `${target.type}/${target.id}` : undefined;
    let ok = key === undefined ? undefined : byContext.get(key);
    if (ok === undefined) {
      const judged = await requireContextReadable(deps, req, resource, via).then(() => true, (err: unknown) => (err instanceof FhirError ? false : Promise.reject(err)));
      if (key !== undefined) byContext.set(key, judged);
      ok = judged;
    }
    if (ok) out.push(v);
  }
  return out;
}

/**
 * How requireContextReadable reads inside the write's transaction `w` (a transaction's conditional search of Binary,
 * searched again at its commit): the securityContext by its id (no lock), a Provenance's targets and the chains of
 * scope filters through `w` too, so that a Binary is judged as a read judges it.
 */
export function writerContextReads(deps: FhirDeps, tenant: string, w: Pick<ResourceWriter, 'search' | 'vread' | 'present'>): ContextReads {
  const targets = writerTargetReads(deps, tenant, w);
  return { read: async (type, id) => (await w.search({ type, where: [{ kind: 'id', ids: [id] }], sort: [], count: 1 }))[0] ?? null, lookups: targets.lookups!, targets };
}

export interface PutOptions {
  /** The request's If-Match, or the version a patch was applied to (which must still be current). */
  ifMatch?: IfMatch;
  /** An update's If-None-Match: `*` (only create) or tags naming versions it must not write over. */
  ifNoneMatch?: IfMatch;
  now: number;
  access: Access;
  /** The core resources, which a delete refuses (FhirDeps.core). */
  core?: CoreLayer;
  /** The tenant's FHIR base (FhirDeps.fhirBase): absolute references under it are indexed as the tenant's. */
  base?: string;
  /**
   * The write may only create: a conditional update whose condition matched nothing, with an id in its
   * body. A live resource of that id did not match, so overwriting it is a 409 (FHIR R5 clarifies R4's
   * "update as create" so).
   */
  createOnly?: boolean;
  /** Checks a Subscription asking to be active and gives it as stored, with its owner (FhirDeps.subscriptions); absent: stored as written. */
  activateSubscription?: ActivateSubscription;
  /**
   * The write stores a new version even where it would store the current one again: a transaction's
   * Subscription entry that other entries refer to by version, whose version is settled before activation
   * rewrites it (bundle-versions.ts settleVersions).
   */
  newVersion?: boolean;
  /**
   * Validation refused the resource, which was let through as the update that changes nothing it looked like
   * (refusedNoOp): a write of it (the current version changed since, or a Subscription is activated anew)
   * throws this refusal instead.
   */
  unvalidated?: FhirError;
  /**
   * Takes the judgement of a patient's Provenance's targets (requireOwnTargets), of the token's create or update
   * scope filter and of a conditional create's own condition (whose chains may name another entry's resource:
   * requireFoundByCondition), to run once every write of the request is made, in
   * the same transaction: a transaction's entries, so that a record another entry writes, before or after this one in
   * the Bundle's order, counts as written. Absent: judged as the resource is written.
   */
  deferTargets?: (judge: () => Promise<void>) => void;
  /**
   * A transaction's: the ids of the resources its create entries stored otherwise than their Bundle copies, by type,
   * filled once all entries are written, among which a conditional create's condition must find no other resource
   * (writeEntry: the planning matched the copies). Absent: a write alone.
   */
  entryIds?: ReadonlyMap<string, readonly string[]>;
  /**
   * How the chains and `_has` of the token's create or update scope filter (`Observation.cu?subject:Patient.name=x`)
   * look the other resources up inside the write's transaction `w` (its search and present: the transaction's own
   * writes included, and no second connection waited for). Absent (an import, the server's own writes): such a
   * filter admits nothing, as no lookup finds anything.
   */
  filterLookups?: (w: ResourceWriter) => MatchContext;
}

/** The options of a request's writes at `now`: its access, the core resources, the tenant's FHIR base and Subscription activation. */
export function putOptions(deps: FhirDeps, req: FhirRequest, now: number): PutOptions {
  const base = deps.fhirBase?.(req.tenant);
  return {
    now, access: req.access, ...(deps.core ? { core: deps.core } : {}), ...(base !== undefined && { base }),
    ...(deps.subscriptions && { activateSubscription: deps.subscriptions.activation(req, now) }),
    filterLookups: (w) => writerTargetReads(deps, req.tenant, w).lookups!,
  };
}

/**
 * Takes the tenant's activation lock (ResourceWriter.lockActivations) first thing in a write's transaction when one of
 * `resources` is a Subscription asking to be active, before any row is locked: a lock taken in the middle (as activation
 * counts) after rows, by one transaction, and before rows, by another (a row it found absent and then met created,
 * a server's status write), made them wait for each other, ended by PostgreSQL's deadlock check a second later and run
 * again. Taken first by every activating transaction, they run one after the other; the others never wait for it.
 */
export async function lockActivationsFirst(w: ResourceWriter, opts: Pick<PutOptions, 'activateSubscription'>, resources: readonly (Resource | undefined)[]): Promise<void> {
  if (opts.activateSubscription === undefined) return;
  const asks = (r: Resource | undefined) => r?.resourceType === 'Subscription' && ((r as { status?: unknown }).status === 'active' || (r as { status?: unknown }).status === 'requested');
  if (resources.some(asks)) await w.lockActivations();
}

/**
 * Writes `resource` as the next version of `type/id` inside an open transaction (FHIR R4 update,
 * create-on-update). Shared by create, update, patch, transactions and import; `method` is the
 * interaction, which the version's history entry names (FHIR R4 http 3.1.0.11).
 */
export async function putVersion(w: ResourceWriter, resource: Resource, id: string, opts: PutOptions, method: PutMethod): Promise<WriteResult> {
  // The version it replaces, if live: whether it was active, and whether a topic rest-hook's endpoint was verified.
  const before = resource.resourceType === 'Subscription' && opts.activateSubscription ? await w.current('Subscription', id) : undefined;
  const stored = before && !before.deleted ? (JSON.parse(before.content) as Record<string, unknown>) : undefined;
  // A Subscription asking to be active is stored active (or off, past its end), its writer as its owner.
  // Its topic may have been written earlier in the same transaction: activation sees this writer's topics.
  const activated = resource.resourceType === 'Subscription' && opts.activateSubscription ? await opts.activateSubscription(resource, w, stored && { id, resource: stored }) : undefined;
  // A SubscriptionTopic (a Basic coded so, subscriptions/topics.ts) is checked as it is written: a 422 naming what Cinder cannot honour.
  const topic = opts.activateSubscription && resource.resourceType === 'Basic'
    ? (isTopicResource(resource) ? parseTopic(resource as unknown as Record<string, unknown>) : null)
    : undefined;
  // Whether it was active before (or a topic rest-hook's awaiting its handshake): if not (new, deleted, off, error, or
  // stored by `cinder import`, never activated), this is an activation anew.
  const wasActive = !!activated && !!stored && isActivated(stored) && activated.unowned !== true;
  // `requested` asks the server to activate it (R4 subscription.html; the Backport IG's handshake): an active one is activated
  // again, never left unchanged although it is stored `active` as it was: a new version, its writer the owner, a handshake.
  // So is a topic rest-hook one written `active` whose endpoint is not verified (activation.ts): it is stored `requested`.
  // One `cinder import` stored is activated by any such write, though it stores the same text.
  const reactivated = (wasActive && ((resource as { status?: unknown }).status === 'requested' || activated.handshake === true)) || activated?.unowned === true;
  const written = await putPrepared(w, await prepareVersionPaced(activated?.resource ?? resource, id, opts.base), opts, method, reactivated || opts.newVersion === true);
  if (topic !== undefined) noteTopicWritten(w, id, topic);
  if (activated && !written.unchanged) {
    const heartbeat = activated.heartbeatMs === undefined ? undefined : { periodMs: activated.heartbeatMs, now: opts.now };
    await w.ownSubscription(id, activated.owner, activated.channel, heartbeat, !wasActive);
    // A topic-based Subscription asking to be activated is sent a handshake (subscriptions/topics.ts), in order with its events.
    if (activated.handshake) await w.notify([{ subscriptionId: id, type: 'Subscription', id, versionId: written.version.versionId, event: 'handshake' }], opts.now);
  }
  return written;
}

/**
 * putVersion for a resource already prepared for storage (bulk import prepares on another thread). An
 * update that would store the current version again writes nothing and answers that version
 * (`unchanged`), after the same checks as a write (access, If-Match, compartment, scope filters), unless
 * `always` (a Subscription asked to be activated again) writes it as a new version.
 */
export async function putPrepared(w: ResourceWriter, p: PreparedVersion, opts: PutOptions, method: PutMethod, always = false): Promise<WriteResult> {
  const { type, id } = p;
  // Its text only when small: a large one is read only if the update may store it again (storesSameMeasured).
  const current = await w.measured(type, id);
  const exists = current !== null && !current.deleted;
  const shadowed = current === null ? await shadowedVersionId(opts.core, type, id) : 0;
  requireAccess(opts.access, type, exists ? 'u' : 'c');
  if (exists) refuseAuditChange(opts.access, type, 'updated');
  requireIfMatch(opts.ifMatch, `${type}/${id}`, current ?? coreCurrent(shadowed));
  requireIfNoneMatch(opts.ifNoneMatch, `${type}/${id}`, current ?? coreCurrent(shadowed));
  if (opts.createOnly && exists) {
    throw new FhirError('conflict', `${type}/${id} exists but does not match the condition: a conditional update that matches nothing only creates`, { expression: ['id'] });
  }
  const versionId = (current?.versionId ?? shadowed) + 1;
  const lastUpdated = Math.max(opts.now, (current?.lastUpdated ?? 0) + 1);
  if (lastUpdated > opts.now) noteRaisedStamp(lastUpdated);
  requireInCompartment(opts.access, type, () => p.compartments, exists ? 'u' : 'c');
  const v = versionToWrite(p, versionId, lastUpdated, method);
  await refusePatientTopic(opts.access, type, exists ? 'u' : 'c', v.content, exists ? async () => current.content ?? (await w.current(type, id))!.content : undefined);
  const provenanceOf = type === 'Provenance' ? opts.access.patientLimit(type, exists ? 'u' : 'c') : undefined;
  if (provenanceOf !== undefined) {
    const judge = () => requireOwnTargets(w, JSON.parse(v.content) as Record<string, unknown>, provenanceOf, opts.base);
    if (opts.deferTargets) opts.deferTargets(judge);
    else await judge();
  }
  if (opts.access.filters?.(type, exists ? 'u' : 'c')) {
    // Judged with the transaction's other writes made, when it has them: a chain may name a resource a later entry creates.
    const written = JSON.parse(v.content) as Resource;
    const judge = () => requireFilter(opts.access, exists ? 'u' : 'c', written, lastUpdated, opts.filterLookups?.(w) ?? txLookups(opts.base));
    if (opts.deferTargets) opts.deferTargets(judge);
    else await judge();
  }
  const same = exists && !always ? await storesSameMeasured(w, current, p, v.content) : undefined;
  if (same !== undefined) {
    const refused = opts.unvalidated && { refused: opts.unvalidated.issues };
    return { version: { type, id, versionId: same.versionId, lastUpdated: same.lastUpdated, deleted: false, content: same.content }, created: false, unchanged: true, ...refused };
  }
  if (opts.unvalidated) throw opts.unvalidated;
  await w.put(v);
  return { version: { type, id, versionId, lastUpdated, deleted: false, content: v.content }, created: !exists, unchanged: false };
}

/**
 * The current version, as preconditions judge it, of a resource the tenant never stored: the core CodeSystem or
 * ValueSet of that id (version `shadowed`, as a read serves it with ETag `W/"1"`), or none (0). If-Match and
 * If-None-Match on an update or patch see the version a read gave (FHIR R4 http.html#concurrency), whether
 * the tenant stored it or the core serves it.
 */
function coreCurrent(shadowed: number): { versionId: number; deleted: false } | null {
  return shadowed > 0 ? { versionId: shadowed, deleted: false } : null;
}

/**
 * What a delete settled on: the deletion's version and when it was deleted, `wrote` false when `type/id` was deleted
 * already and nothing was written (FHIR R4 http.html#delete: deleting a deleted resource succeeds, no new version).
 */
export interface Deletion {
  versionId: number;
  lastUpdated: number;
  wrote: boolean;
}

/** Marks `type/id` deleted with a new version (or finds it deleted already); null when it never existed. */
export async function deleteVersion(w: ResourceWriter, type: string, id: string, opts: PutOptions): Promise<Deletion | null> {
  requireAccess(opts.access, type, 'd');
  refuseAuditChange(opts.access, type, 'deleted');
  // Its text only when small: a deletion needs it only to tell a SubscriptionTopic (a Basic), read then.
  const current = await w.measured(type, id);
  // A core resource is never deleted (409), whatever the preconditions say of it.
  if (current === null) await refuseCoreDelete(opts.core, type, id);
  requireIfMatch(opts.ifMatch, `${type}/${id}`, current);
  requireIfNoneMatch(opts.ifNoneMatch, `${type}/${id}`, current);
  if (current === null) return null;
  if (current.deleted) return { versionId: current.versionId, lastUpdated: current.lastUpdated, wrote: false };
  await refusePatientTopic(opts.access, type, 'd', async () => current.content ?? (await w.current(type, id))!.content);
  const versionId = current.versionId + 1;
  const lastUpdated = Math.max(opts.now, current.lastUpdated + 1);
  if (lastUpdated > opts.now) noteRaisedStamp(lastUpdated);
  const version = { type, id, versionId, lastUpdated, deleted: true, content: '' };
  await w.put({ ...version, index: NO_INDEX_ROWS, compartments: [], method: 'DELETE' });
  // A topic deleted here is no longer found by a Subscription written later in the transaction.
  if (type === 'Basic' && opts.activateSubscription) noteTopicWritten(w, id, null);
  // A deleted Subscription's events and delivery state end with it: one created again with its id starts afresh.
  if (type === 'Subscription') await w.endSubscription(id);
  return { versionId, lastUpdated, wrote: true };
}

/**
 * An AuditEvent is a record of what happened: once stored it is never updated, patched or deleted through
 * the API, whatever the scopes (405, as the interaction is not allowed on the type; HAPI FHIR's audit
 * repositories do the same). Creating one (a client's own audit record) is allowed. Retention is the
 * operator's (docs/operations.md, "Audit trail").
 */
function refuseAuditChange(access: Access, type: string, verb: string): void {
  if (type !== 'AuditEvent' || access === operatorAccess) return;
  throw new FhirError('method-not-allowed', `AuditEvents cannot be ${verb}: the audit trail is append-only`);
}

/**
 * A SubscriptionTopic (a Basic coded so, subscriptions/topics.ts) is the tenant's, not a patient's record, whatever
 * its `subject` or `author` (which put it in a patient's compartment): every app's topic-based Subscriptions name it
 * by its url, and a second active topic of that url silences theirs and refuses new ones. A token whose writes of
 * Basic are bound to a patient neither writes one, nor turns a Basic into one or one into another Basic, nor deletes
 * one (403), as patient-context scopes grant nothing on Subscription (src/auth/scopes.ts NOT_A_PATIENTS).
 */
async function refusePatientTopic(access: Access, type: string, perm: Permission, ...contents: (string | (() => Promise<string>) | undefined)[]): Promise<void> {
  if (type !== 'Basic' || access.patientLimit(type, perm) === undefined) return;
  const texts = await Promise.all(contents.map((c) => (typeof c === 'function' ? c() : c)));
  if (!texts.some((c) => c !== undefined && c !== '' && isTopicResource(JSON.parse(c)))) return;
  throw new FhirError('forbidden', `A patient-context token may not ${WRITE_VERBS[perm]} a SubscriptionTopic: it is the tenant's, named by every app's Subscriptions`);
}

/**
 * A core resource the tenant never stored cannot be deleted: 409 (FHIR R4 http 3.1.0.7: a refusal
 * for reasons specific to the resource), saying it is part of the built-in terminology.
 */
async function refuseCoreDelete(core: CoreLayer | undefined, type: string, id: string): Promise<void> {
  if (core === undefined || !hasCoreResources(type) || (await core.read(type, id)) === null) return;
  throw new FhirError('conflict', `${type}/${id} is part of the built-in FHIR R4 terminology and cannot be deleted; a ${type} stored with this id replaces it for this tenant`);
}

/**
 * The version a tenant's first write of `type/id` follows: the core resource's (1) when that id is a core
 * CodeSystem or ValueSet, which the tenant's own then replaces as version 2; otherwise 0. A version id
 * names one content (R4 http.html: version ids are unique among all versions of a resource), so the
 * core's ETag `W/"1"` stops matching once the tenant's content is served (If-None-Match, `ifNoneMatch`).
 */
export async function shadowedVersionId(core: CoreLayer | undefined, type: string, id: string): Promise<number> {
  if (core === undefined || !hasCoreResources(type)) return 0;
  return (await core.read(type, id))?.versionId ?? 0;
}

/** The core resource `type/id` (version 1), for a tenant that stored none of that id; null for other types. */
function coreVersion(deps: FhirDeps, type: string, id: string): Promise<ResourceVersion | null> | null {
  return deps.core !== undefined && hasCoreResources(type) ? deps.core.read(type, id) : null;
}

/**
 * A conditional write's claim of the conditions it settles (conditional.ts Settle), taken first in its transaction.
 * What it returns, if anything, judges the version written, after the write's other checks (that its resource
 * meets its condition: requireFoundByCondition).
 */
export type SettleIn = (w: ResourceWriter) => Promise<void | ((written: ResourceVersion) => Promise<void>)>;

/**
 * FHIR R4 create (3.1.0.8): server-assigned id; any id in the body is ignored. `method` PUT: a conditional
 * update that matched nothing and creates (its history names the PUT it was).
 */
export async function createResource(
  deps: FhirDeps, req: FhirRequest, type: string, body: unknown, settle?: SettleIn, method: 'POST' | 'PUT' = 'POST',
): Promise<WriteResult> {
  checkTypeAndId(type);
  const resource = asResource(withoutId(body), type);
  requireAccess(req.access, type, 'c');
  await requireValidPaced(resource, validationLevel(deps));
  const profiled = requireProfiles(deps, req.tenant, resource, undefined, undefined, req.access);
  if (profiled) await profiled;
  await requireWritableContext(deps, req, resource, 'c');
  await noteValidationLevel(deps, req.tenant);
  await deps.subscriptions?.resolveEndpoints([resource]);
  return atWriteTime(deps.store, deps.clock, async (now) => {
    const opts = putOptions(deps, req, now);
    await deps.subscriptions?.prepare([resource], opts.activateSubscription);
    return writeTx(deps, req.tenant, async (w) => {
      await lockActivationsFirst(w, opts, [resource]);
      const judge = await settle?.(w);
      const written = await putVersion(w, resource, newId(), opts, method);
      await requireReferences(deps, w, req.tenant, [{ resource, path: type }], referenceReach(deps, req));
      if (judge) await judge(written.version);
      return written;
    });
  });
}

/**
 * FHIR R4 update (3.1.0.4), with create-on-update, If-Match version locking and If-None-Match
 * (`*`: create only, RFC 9110 13.1.2, as R5's create-on-update has it). `method` PATCH: the result of a
 * patch (patch.ts), which its history names so.
 */
export async function updateResource(
  deps: FhirDeps, req: FhirRequest, type: string, id: string, body: unknown, pre: UpdatePreconditions = {}, settle?: SettleIn, createOnly = false,
  method: 'PUT' | 'PATCH' = 'PUT',
): Promise<WriteResult> {
  checkTypeAndId(type, id);
  const resource = asResource(body, type);
  if (resource.id === undefined) throw new FhirError('required', 'Resource in an update must carry an id', { expression: ['id'] });
  if (resource.id !== id) {
    throw new FhirError('invalid', `Resource id '${resource.id}' does not match the URL id '${id}'`, { expression: ['id'] });
  }
  // A refusal of the update that changes nothing (refusedNoOp) lets it through, as the no-op it is: nothing is written.
  let unvalidated: FhirError | undefined;
  try {
    await requireValidPaced(resource, validationLevel(deps));
    const profiled = requireProfiles(deps, req.tenant, resource, undefined, undefined, req.access);
    if (profiled) await profiled;
  } catch (err) {
    if (!isRefusal(err) || !(await refusedNoOp(deps, req, resource, id))) throw err;
    unvalidated = err;
  }
  return judgedReach(deps, req, type, id, 'u', async (judged) => {
    await requireWritableContext(deps, req, resource, 'u');
    await noteValidationLevel(deps, req.tenant);
    await deps.subscriptions?.resolveEndpoints([resource]);
    return atWriteTime(deps.store, deps.clock, async (now) => {
      const opts = putOptions(deps, req, now);
      await deps.subscriptions?.prepare([resource], opts.activateSubscription);
      if (pre.ifMatch !== undefined) opts.ifMatch = pre.ifMatch;
      if (pre.ifNoneMatch !== undefined) opts.ifNoneMatch = pre.ifNoneMatch;
      if (createOnly) opts.createOnly = true;
      if (unvalidated) opts.unvalidated = unvalidated;
      return writeTx(deps, req.tenant, async (w) => {
        await lockActivationsFirst(w, opts, [resource]);
        const judge = await settle?.(w);
        await requireJudged(w, type, id, judged);
        const written = await putVersion(w, resource, id, opts, method);
        await requireReferences(deps, w, req.tenant, [{ resource, path: type }], referenceReach(deps, req));
        if (judge) await judge(written.version);
        return written;
      });
    });
  });
}

/**
 * Whether an update of `type/id` with `resource`, which validation refused, is the update that changes nothing,
 * and so is not refused: it would store the current version again (storesSame), so it writes nothing and is
 * answered as any no-op is (200, the current version). A resource stored before rules that now refuse it (a later
 * release's validation, `strict` after `structural`, a profile applied to it since) can so be sent back
 * unchanged, as sync clients that PUT what they read do; any change is validated. Only for a token of
 * unlimitedReach. One read by key, made only after a refusal (a valid update costs nothing more); the write's
 * transaction looks again (putPrepared), and a version written in between makes it the refused write it then is
 * (PutOptions.unvalidated).
 */
export async function refusedNoOp(deps: FhirDeps, req: FhirRequest, resource: Resource, id: string): Promise<boolean> {
  if (!unlimitedReach(req.access, resource.resourceType)) return false;
  const current = await deps.store.resources.read(req.tenant, resource.resourceType, id);
  return current !== null && wouldStoreSame(current, resource, id);
}

/** Whether `err` is validation's refusal of a resource (invalidResource, a 422). */
export function isRefusal(err: unknown): err is FhirError {
  return err instanceof FhirError && err.category === 'invalid-resource';
}

/**
 * Whether `access` reads and updates every resource of `type`: no patient compartment, scope filter or
 * securityContext bounds it. Only such a token's refused update is looked at as a no-op: another's answers
 * (a 403 for the stored content out of its reach, a 422 for other content) would tell it what that resource holds.
 * An import's refused line is kept unchanged on the same terms (import/batches.ts BatchOptions.keepsUnchanged).
 */
export function unlimitedReach(access: Access, type: string): boolean {
  return access.can(type, 'r') && access.can(type, 'u') && !deletionReachLimited(access, type) &&
    access.patientLimit(type, 'u') === undefined && access.filters?.(type, 'u') === undefined;
}

/** FHIR R4 delete (3.1.0.7): idempotent; returns the deletion (written now or before), or null when nothing existed. */
export async function deleteResource(
  deps: FhirDeps, req: FhirRequest, type: string, id: string, ifMatch?: IfMatch, ifNoneMatch?: IfMatch,
): Promise<Deletion | null> {
  checkTypeAndId(type, id);
  requireAccess(req.access, type, 'd');
  return judgedReach(deps, req, type, id, 'd', (judged) => atWriteTime(deps.store, deps.clock, (now) => {
    const opts = putOptions(deps, req, now);
    if (ifMatch !== undefined) opts.ifMatch = ifMatch;
    if (ifNoneMatch !== undefined) opts.ifNoneMatch = ifNoneMatch;
    return writeTx(deps, req.tenant, async (w) => {
      await requireJudged(w, type, id, judged);
      return deleteVersion(w, type, id, opts);
    });
  }));
}

/**
 * FHIR R4 read (3.1.0.1): 404 when unknown, 410 when deleted. A core CodeSystem or ValueSet is read when
 * the tenant has no resource of that id.
 */
export async function readResource(deps: FhirDeps, req: FhirRequest, type: string, id: string): Promise<ResourceVersion> {
  checkTypeAndId(type, id);
  requireAccess(req.access, type, 'r');
  const v = (await deps.store.resources.read(req.tenant, type, id)) ?? (await coreVersion(deps, type, id));
  if (!v) throw new FhirError('not-found', `${type}/${id} is not known`);
  if (v.deleted) {
    await checkDeletionReadable(deps, req, v);
    throw new DeletionRead(`${type}/${id} was deleted`, v);
  }
  if (v.content.length < INDEX_JUDGED_CHARS || !(await judgedByCompartment(deps, req, v.type, v.id, v.versionId))) await checkReadable(deps, req, v);
  return v;
}

/**
 * The 410 of a read or vread of a deletion (http.html#read, #vread), with the deletion's version headers as a
 * read of a live version has them: `ETag` the version the deletion is, `Last-Modified` when it was deleted.
 */
export class DeletionRead extends FhirError {
  constructor(message: string, readonly deletion: { versionId: number; lastUpdated: number }) {
    super('gone', message, { headers: { ETag: `W/"${deletion.versionId}"`, 'Last-Modified': new Date(deletion.lastUpdated).toUTCString() } });
  }
}

/** The deletion a 410 of a read or vread is, or located (bundle-entries.ts) in an entry; undefined for any other error. */
export function deletionRead(err: unknown): DeletionRead['deletion'] | undefined {
  for (let e = err; e instanceof Error; e = e.cause) if (e instanceof DeletionRead) return e.deletion;
  return undefined;
}

/** A read's stored text from this many characters on is judged by the compartment index rather than parsed (judgedByCompartment). */
const INDEX_JUDGED_CHARS = 64 * 1024;

/**
 * Where a patient's compartment alone decides whether `req` may `perm` (read, by default; update, delete) `type` (a
 * patient-context token without a scope filter of it; not a Binary or a Provenance, judged by more than their
 * compartments), judges live version `versionId`, the current one, by its compartment rows, as a parse of its text would
 * (they are compartmentsOf that text), without reading it: throws the 403 a parse would give, and gives true. False
 * when it cannot: another rule decides, or the resource changed before its rows were read (a version's number only
 * grows, so the version measured again after them is the one they belong to).
 */
export async function judgedByCompartment(deps: FhirDeps, req: FhirRequest, type: string, id: string, versionId: number, perm: 'r' | 'u' | 'd' = 'r'): Promise<boolean> {
  const { access } = req;
  if (type === 'Binary' || type === 'Provenance' || !inPatientCompartment(type) || access.patientLimit(type, perm) === undefined || access.filters?.(type, perm) !== undefined) return false;
  const repo = deps.store.resources;
  const holders = (await repo.compartmentPatients(req.tenant, type, [id])).map((r) => r.patient);
  const again = await repo.measured(req.tenant, type, id);
  if (!again || again.deleted || again.versionId !== versionId) return false;
  requireInCompartment(access, type, () => holders, perm);
  return true;
}

/** FHIR R4 vread (3.1.0.2). */
export async function vreadResource(
  deps: FhirDeps, req: FhirRequest, type: string, id: string, versionId: string,
): Promise<ResourceVersion> {
  checkTypeAndId(type, id);
  requireAccess(req.access, type, 'r');
  const n = versionNumber(versionId);
  if (n === undefined) throw new FhirError('not-found', `${type}/${id} has no version '${versionId}'`);
  const v = (await deps.store.resources.vread(req.tenant, type, id, n)) ?? (await coreVread(deps, req, type, id, n));
  if (!v) throw new FhirError('not-found', `${type}/${id} has no version ${versionId}`);
  if (v.deleted) {
    await checkDeletionReadable(deps, req, v);
    throw new DeletionRead(`Version ${versionId} of ${type}/${id} is a deletion`, v);
  }
  if (v.content.length < INDEX_JUDGED_CHARS || !(await judgedByCompartment(deps, req, v.type, v.id, v.versionId))) await checkReadable(deps, req, v);
  return v;
}

/**
 * Whether a token's reach of `type` depends on a resource's content (Binary's securityContext, a scope
 * filter, a patient's compartment), so that a deletion of it must be judged by what it deleted.
 */
export function deletionReachLimited(access: Access, type: string): boolean {
  return type === 'Binary' || access.filters?.(type, 'r') !== undefined ||
    (access.patientLimit(type, 'r') !== undefined && inPatientCompartment(type));
}

/**
 * A deletion is within reach when the content it deleted was (lastContent), as instance history judges
 * it: a 410 would tell a token that another patient's record, or one outside its scope filter, existed
 * and was deleted, where a read of it before the deletion, its vread and its history answer 403.
 */
export async function checkDeletionReadable(deps: FhirDeps, req: FhirRequest, v: ResourceVersion): Promise<void> {
  if (!deletionReachLimited(req.access, v.type)) return;
  const last = await lastContent(deps, req.tenant, v);
  if (last && !last.deleted) await checkReadable(deps, req, last);
}

/** Version `versionId` of a core resource, for a tenant that stored none of that id. */
async function coreVread(deps: FhirDeps, req: FhirRequest, type: string, id: string, versionId: number): Promise<ResourceVersion | null> {
  if (deps.core === undefined || !hasCoreResources(type)) return null;
  const core = await deps.core.read(type, id);
  if (core === null || core.versionId !== versionId) return null;
  return (await deps.store.resources.read(req.tenant, type, id)) === null ? core : null;
}

/** Whether a read of the live version `v` by `req` would answer it (false: a 403 it would answer). */
export async function readable(deps: FhirDeps, req: FhirRequest, v: ResourceVersion): Promise<boolean> {
  return checkReadable(deps, req, v).then(() => true, (err: unknown) => (err instanceof FhirError && err.category === 'forbidden' ? false : Promise.reject(err)));
}

async function checkReadable(deps: FhirDeps, req: FhirRequest, v: ResourceVersion): Promise<void> {
  if (v.type === 'Binary') {
    // Not in the patient compartment; its scope filters cannot concern `data` (no search parameter reads it).
    const binary = splitStoredBinary(v.content).resource;
    await requireContextReadable(deps, req, binary);
    if (req.access.filters?.(v.type, 'r')) await requireFilter(req.access, 'r', binary, v.lastUpdated, lookups(deps, req.tenant));
    return;
  }
  if (req.access.patientLimit(v.type, 'r') !== undefined) await requireReadReach(deps, req, JSON.parse(v.content) as Resource);
  if (req.access.filters?.(v.type, 'r')) await requireFilter(req.access, 'r', JSON.parse(v.content) as Resource, v.lastUpdated, lookups(deps, req.tenant));
}

/**
 * The reference targets a request may read, for CINDER_REFERENTIAL_INTEGRITY (ReferenceReach): of a type
 * it reads only within its patient's compartment or under a scope filter, and Binaries when it reads
 * them only through their securityContext (binaryReachLimited) or under a scope filter of Binary. Each is
 * judged as its read is (checkReadable), every read of it made inside the write transaction: a Binary's
 * securityContext (requireContextReadable), a Provenance's targets and the earlier versions it names
 * (provenance-reach.ts), and the chains and `_has` of scope filters (writerTargetReads).
 */
export function referenceReach(deps: FhirDeps, req: FhirRequest): ReferenceReach {
  const { access } = req;
  const partly = (type: string) => access.filters?.(type, 'r') !== undefined || (access.patientLimit(type, 'r') !== undefined && inPatientCompartment(type));
  return {
    limited: (type) => access.can(type, 'r') && (type === 'Binary' ? binaryReachLimited(access) || access.filters?.(type, 'r') !== undefined : partly(type)),
    compartmentOf: (type) => (type !== 'Binary' && access.filters?.(type, 'r') === undefined && inPatientCompartment(type) ? access.patientLimit(type, 'r') : undefined),
    async holds(type, v, w) {
      const targets = writerTargetReads(deps, req.tenant, w);
      // The securityContext read by `current`, as every target is (held to the end of the transaction).
      const via: ContextReads = { read: (t, id) => w.current(t, id), lookups: targets.lookups!, targets };
      try {
        if (type === 'Binary') {
          const binary = splitStoredBinary(v.content).resource;
          await requireContextReadable(deps, req, binary, via);
          await requireFilter(access, 'r', binary, v.lastUpdated, via.lookups);
          return true;
        }
        const resource = JSON.parse(v.content) as Resource;
        if (access.patientLimit(type, 'r') !== undefined) await requireReadReach(deps, req, resource, targets);
        await requireFilter(access, 'r', resource, v.lastUpdated, via.lookups);
        return true;
      } catch (err) {
        if (err instanceof FhirError && err.category === 'forbidden') return false;
        throw err;
      }
    },
  };
}

/** Without a request's lookups (PutOptions.filterLookups), a write's own scope filter (`c`, `u`) is matched without a search: one with a chain does not admit the write. */
const NO_LOOKUPS: MatchContext = { exists: async () => false };

/** NO_LOOKUPS with the tenant's FHIR base, under which absolute references are the tenant's (MatchContext.base). */
const txLookups = (base: string | undefined): MatchContext => (base === undefined ? NO_LOOKUPS : { ...NO_LOOKUPS, base });

/** With SMART v2 scope filters for `perm` on its type (`patient/Observation.rs?category=laboratory`), throws 403 unless `resource` meets one. */
export async function requireFilter(access: Access, perm: Permission, resource: Resource, lastUpdated: number, lookups = NO_LOOKUPS): Promise<void> {
  const filters = access.filters?.(resource.resourceType, perm);
  if (!filters) return;
  for (const alternative of filters) if (await matchConditions(resource, lastUpdated, alternative, lookups)) return;
  throw new FhirError('forbidden', `${resource.resourceType}/${resource.id} is outside what the access token's scope filters allow`);
}
