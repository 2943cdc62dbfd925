/**
 * The subscriptions side of every REST write (crud.ts writeTx, putVersion): activation of Subscriptions as
 * they are written, and after each write the notifications of the tenant's active rest-hook and websocket
 * subscriptions whose criteria its new versions match, recorded in the write's own transaction (ResourceWriter.notify);
 * topic-based ones (topics.ts) are told of the creates, updates and deletes their topic's triggers pass.
 * A tenant's active subscriptions are compiled once and kept until the store's change token of
 * Subscription, ValueSet and CodeSystem moves (any process's write), read at most every
 * CHECK_INTERVAL_MS and at once after such a write of this process: a tenant without subscriptions pays one cached lookup per write.
 */
import { FhirError } from '../../errors.ts';
import type { Clock } from '../../clock.ts';
import type { Logger } from '../../log.ts';
import type { IndexRows, MeasuredVersion, NotificationToWrite, ResourceWriter, VersionToWrite } from '../../store/types.ts';
import type { SyncOrAsync } from '../../sync-or-async.ts';
import { ChangeWatch } from '../../terminology/store-watch.ts';
import type { Access } from '../access.ts';
import { rowsInReach, type ContextReads, type FhirDeps, type FhirRequest } from '../crud.ts';
import { provenanceMatchInReach, type TargetReads } from '../provenance-reach.ts';
import type { Resource } from '../resource.ts';
import { compileFilter } from '../search.ts';
import { matchConditions } from '../search-match.ts';
import { textIndexOf } from '../text-index.ts';
import type { Client, Condition, ResourceVersion, TextEntry } from '../../store/types.ts';
import { ACTIVE_QUERY, activateSubscription, DELIVERED_CHANNELS, MAX_ACTIVE, isActivated, prepareActivation, type Activated, type ActivationReads, type Together } from './activation.ts';
import { compileCriteria } from './criteria.ts';
import { fhirPathHolds } from './fhirpath-criteria.ts';
import type { CompiledTopicCriteria } from '../validation/fhirpath-engine.ts';
import { cachedLookups } from './lookups.ts';
import { compileTopic, findTopic, isTopicCriteria, topicRequest } from './topic-subscription.ts';
import { CRITERIA_REFUSED_HEAD, refusedError, refusedPauseOf, TOPIC_REFUSED_HEAD } from './refused.ts';
import { tenantTopics, type Interaction, type Topic, type TopicTrigger } from './topics.ts';
import { indexEntries } from '../indexer.ts';
import { endpointUrl, systemResolve, type ResolveHost } from './endpoint.ts';
import { authorityRevoked, ownerAccess, ownerClient, ownerPatient, ownerUser, type OwnerUser, type RestoreAccess } from './owner.ts';
import { grantReaches, searchesWhatItSelects, topicRefusal, unsearchedTriggers } from './owner-reach.ts';
import { SHOWN_PER_WRITE, showSilenced, type Resumed, type ShowFailure, type Silenced } from './silenced.ts';
import { statusBefore, TOPIC_PAUSE_HEAD, topicPausedFor } from './client-authority.ts';
import type { PatientChoice } from '../../auth/patient-held.ts';
import type { UserLookup, UsersLookup } from '../../auth/user-cache.ts';
import type { User } from '../../store/types.ts';

/** How long a read of the Subscription change token is trusted before it is read again (ms). */
export const CHECK_INTERVAL_MS = 250;
/** The most active subscriptions of one tenant that are matched (activation refuses more; an import may store more: then some are left out, and a warning logged). */
export { MAX_ACTIVE };

export interface HubOptions {
  /** What criteria compile and match with (store, terminology, core resources, FHIR base). */
  fhir: FhirDeps;
  clock: Clock;
  log: Logger;
  restoreAccess: RestoreAccess;
  /**
   * The registration of the client that activated a subscription, as the token endpoint reads it (src/app.ts: the
   * client cache, so every process sees a change within CLIENT_CACHE_TTL_MS): one disabled or deleted (`cinder
   * client disable|delete`) has its subscriptions notify nothing until it is enabled again, and a change of its
   * scopes compiles them again (restoreAccess holds the recorded scopes to what the client still has registered).
   */
  client: (clientId: string) => Promise<Client | null>;
  /**
   * The user on whose authority a subscription was activated (src/app.ts: a cache of CLIENT_CACHE_TTL_MS, as the
   * client's): once their tokens are revoked after the activation (owner.ts authorityRevoked) it notifies nothing.
   */
  user: UserLookup;
  /**
   * The records of the clients and of a tenant's users of `ids`, those their caches do not hold read in one statement
   * each (null for one not found): a write judges all its tenant's owners with them, two reads in all once the caches
   * lapsed, not one per owner.
   */
  clients: (ids: Iterable<string>) => Promise<Map<string, Client | null>>;
  users: UsersLookup;
  /**
   * Whether the patient in context a user's sign-in chose, recorded with a subscription activated with its token, is
   * still one the user may choose (src/auth/patient-held.ts, cached as `user`): once it is not (a guardian's record no
   * longer names the child, the Patient deleted), the subscription is matched for nothing, as the token reads nothing;
   * named again, it is matched again. Asked only of the Subscriptions a write matched, all of them together (one search
   * per user and hundred patients when its cache lapsed), outside the write's transaction (WriteHook.judge). Without it,
   * not asked.
   */
  patientHeld?: (choices: readonly PatientChoice[]) => SyncOrAsync<boolean[]>;
  /** What patientHeld answers from what it remembers, reading nothing (undefined: not known). Without it, each is read. */
  patientKnown?: (choices: readonly PatientChoice[]) => (boolean | undefined)[];
  /** CINDER_SUBSCRIPTION_ALLOW_PRIVATE. */
  allowPrivate: boolean;
  /**
   * Tells the terminology service of `fhir` that a write of this process changed the tenant's ValueSets or CodeSystems
   * (src/app.ts: its markChanged), before the hub settles the Subscriptions after such a write (WriteHook.committed), so
   * that their criteria's `:in` resolve as written: the request's own notice comes only once its answer is sent.
   */
  terminologyChanged?: (tenant: string) => void;
  resolve?: ResolveHost;
}

/** An active subscription of a delivered channel, ready to match. */
interface Compiled {
  id: string;
  type: string;
  where: Condition[];
  access: Access;
  /** The owner's record (owner.ts) and the criteria, to compile it again when its client's registration changes. */
  owner: string;
  criteria: unknown;
  /** The client that activated it; null for one the operator's access activated. */
  clientId: string | null;
  /** That client's registered scopes when it was compiled (null: no such client). */
  registered: string | null;
  /**
   * A topic-based Subscription's trigger on this type (topics.ts): `where` holds its filters and owner's
   * reach, `criteria` their search; `previous`/`current` the trigger's queryCriteria tests (resolved with the
   * owner's access too: a reference `:below`/`:above` walks what it may search). `of`: the topic and the
   * Subscription it was compiled from, to compile it again as a whole when its client's registration changes.
   */
  topic?: { url: string; trigger: TopicTrigger; previous?: Condition[]; current?: Condition[]; of: { topic: Topic; subscription: Record<string, unknown> } };
  /** The signed-in user whose authority activated it, if a user's (owner.ts). */
  user: OwnerUser | null;
}

interface ActiveSet {
  token: string;
  /**
   * Those activated on a client's own authority that its registered scopes no longer let search what they select (their
   * compilation a 403), with the scopes judged: they notify nothing, and are paused as `cinder client update --scope`
   * pauses them (silenced.ts), one activated with a token the servers had not yet refused having escaped that. And
   * those, whoever's, whose recorded scopes themselves no longer let them search it by today's rules (owner-reach.ts).
   */
  refused: Silenced[];
  /** Those paused for their topic (topicPausedError) whose topic compiles for their owner again: set back (silenced.ts). */
  resumed: Resumed[];
  /**
   * Those paused for their topic, or refused by their topic or criteria, that a client activated, with its registered
   * scopes when judged (`registered`): a user's is turned `off` once that sign-in ends (notifying), as an active one is,
   * not left paused while nothing can set it back; one whose client's registration changed since is judged again at the
   * write that finds it so (rejudged), as an active one is compiled again, not at the next write of a watched type.
   */
  held: Silenced[];
  byType: Map<string, Compiled[]>;
  /** The types some topic-based Subscription triggers on: their writes are read with their previous version, deletions too. */
  topicTypes: Set<string>;
}

/** What pausedForTopic finds of the Subscriptions the server paused (ActiveSet's `resumed`, `refused` and `held`). */
interface PausedJudged {
  resumed: Resumed[];
  renamed: Silenced[];
  held: Silenced[];
}

/** The owner whose reach subscription `id`'s notifications are matched with, if it is active. */
function ownerMatched(active: ActiveSet, id: string): string | undefined {
  for (const list of active.byType.values()) {
    const found = list.find((c) => c.id === id);
    if (found) return found.owner;
  }
  return undefined;
}

/**
 * A version written, with the version it replaced (looked up for topic triggers alone), as ResourceWriter.measured()
 * finds it: its text when small, otherwise its length, the text then read (by vread, from history) only if a
 * Subscription's matching needs it (the previous version's queryCriteria, a fhirPathCriteria reading `%previous`, a
 * deletion), never for a trigger that needs only whether it existed (a create or an update).
 */
interface Written {
  v: VersionToWrite;
  previous?: MeasuredVersion | null;
}

/** The stored text of the version `written` replaced (live), read from this transaction (history, its own writes included) when measured() left it out. */
async function previousText(w: ResourceWriter, written: VersionToWrite, previous: MeasuredVersion): Promise<string> {
  if (previous.content !== undefined) return previous.content;
  const read = await w.vread(written.type, written.id, previous.versionId);
  if (read === null) throw new Error(`${written.type}/${written.id}/_history/${previous.versionId}, the version this write replaced, could not be read in its transaction`);
  return read.content;
}

interface TenantState {
  watch: ChangeWatch;
  set?: ActiveSet;
  loading?: { token: string; set: Promise<ActiveSet> };
}

/** Binds a write's Subscriptions to activation (PutOptions.activateSubscription). */
export interface ActivateSubscription {
  (resource: Resource, w: ResourceWriter, stored?: { id: string; resource: Record<string, unknown> }): Promise<Activated | undefined>;
  /**
   * Reads what activating the Subscriptions among `resources` reads of the committed state (topics, the ValueSets,
   * code systems and hierarchies their criteria resolve), before the write's transaction begins (SubscriptionHub.prepare).
   * `together`: they are a transaction's, written as one unit, so its CodeSystems and ValueSets are resolved as written
   * (and as it deletes them).
   */
  prepare(resources: readonly (Resource | undefined)[], together?: Together): Promise<void>;
}

/**
 * Thrown by a write's transaction (WriteHook.wrap), which it rolls back, when what it wrote matched Subscriptions whose
 * user's chosen patient is not known to hold now (its cache lapsed): judged outside the transaction (WriteHook.judge),
 * where reading on the store's other connections holds up no transaction, the write runs again.
 */
export class OwnersToJudge extends Error {
  constructor(readonly subscriptions: readonly Compiled[]) {
    super('Subscriptions matched whose owners are to be judged before the write runs again');
  }
}

/** What one write does around its transaction: `wrap` the function it runs, `committed` once it committed. */
export interface WriteHook {
  wrap<T>(fn: (w: ResourceWriter) => Promise<T>): (w: ResourceWriter) => Promise<T>;
  /**
   * Whether `err`, which ended a run of the transaction, asked for owners to be judged (OwnersToJudge): then they are,
   * once the transaction is over, and the write is to run again (crud.ts writeTx), finding them judged.
   */
  judge(err: unknown): Promise<boolean>;
  /** After the commit: the cache dropped after a watched write, and the Subscriptions found silenced shown (silenced.ts). */
  committed(): Promise<void>;
}

/** Active Subscriptions, and the topic rest-hook ones awaiting their handshake (stored `requested`: activation.ts isActivated). */
/**
 * Those in `error` whose text holds the words of a topic pause (topicPausedError's head, by the full-text index of
 * `_content`): the server's topic pauses (resumable) among them, found without reading every Subscription in `error`
 * (failed rest-hooks stay so and pile up: 10,000 of them cost each reload about 33 ms on SQLite and 120-200 ms on
 * PostgreSQL; now about 1 ms and 5 ms: docs/PERFORMANCE.md, "Forty-seventh session").
 */
const pausedQuery = (head: string) => new URLSearchParams({ status: 'error', _content: head.replace(/[^A-Za-z]+/g, ' ').trim() });
/**
 * The heads of the `error`s of the Subscriptions the server set back once they compile again (pausedForTopic): a topic
 * pause, and a refusal by the topic or the criteria (refused.ts), each found by its words.
 */
const pauseHeads = () => [TOPIC_PAUSE_HEAD, TOPIC_REFUSED_HEAD, CRITERIA_REFUSED_HEAD];
/** How many Subscriptions in `error` pausedForTopic reads at a time. */
const PAUSED_PAGE = 1_000;
/**
 * The types whose change compiles a tenant's subscriptions again: theirs, the terminology that a
 * criteria's `:in`, `:below` or `:above` (and an owner's scope filter) was expanded from, and Basic, which
 * holds the SubscriptionTopics.
 */
const WATCHED_TYPES = ['Subscription', 'ValueSet', 'CodeSystem', 'Basic'];
/**
 * Those of WATCHED_TYPES Subscriptions rest on (a topic, what a criteria's `:in`, `:below`, `:above` resolves): their
 * write settles the tenant's Subscriptions as it commits (settle), those it refuses set `error` and those it accepts
 * again set back.
 */
const GROUNDS_TYPES = ['ValueSet', 'CodeSystem', 'Basic'];

/** How long an activation trusts a host name's resolution, or its failure (ms): prepare() resolves it before the write's transaction. */
export const RESOLVED_FOR_MS = 30_000;
/** The most host names remembered (then the memory starts afresh). */
const RESOLVED_MAX = 1_000;

/**
 * The `error` of Subscription `r` whose compilation for its owner failed with `err`, where that is a refusal of what it
 * rests on (refused.ts): a topic-based one's topic refusing it (a 422), an R4 criteria one's criteria not compiling (a
 * 4xx besides the owner's reach, a 403, and a lookup too slow or too costly now, a 408 or 429, which may pass). Else
 * undefined: a 403 is the owner's authority (judged apart), a 5xx or another failure no verdict on the Subscription.
 */
function refusalOf(err: unknown, r: Record<string, unknown>): string | undefined {
  if (!(err instanceof FhirError)) return undefined;
  if (isTopicCriteria(r.criteria)) return err.status === 422 ? refusedError('topic', err) : undefined;
  const transient = (e: unknown) => e instanceof FhirError && (e.status === 408 || e.status === 429 || e.status >= 500);
  if (err.status >= 500 || err.status === 403 || transient(err) || transient(err.cause)) return undefined;
  return err.status >= 400 ? refusedError('criteria', err) : undefined;
}

export class SubscriptionHub {
  private readonly tenants = new Map<string, TenantState>();
  private readonly resolve: ResolveHost;
  /** The silenced Subscriptions being shown by this process (silenced.ts), by tenant and id. */
  private readonly showing = new Set<string>();
  /** Those whose write failed, by tenant and id: tried again only after a wait (silenced.ts). */
  private readonly showFailed = new Map<string, ShowFailure>();
  /** Host names as resolved for activations, with when (see prepare). */
  private readonly resolved = new Map<string, { at: number; addresses: Promise<string[]> }>();

  constructor(private readonly options: HubOptions) {
    const resolve = options.resolve ?? systemResolve;
    this.resolve = (host) => this.resolvedHost(host, resolve);
  }

  /**
   * Resolves the endpoint host names of the rest-hook Subscriptions among `resources` that ask to be
   * active, before the write's transaction begins, so that their activation inside it finds them resolved
   * (RESOLVED_FOR_MS) instead of holding the transaction (on SQLite, every write) during a DNS lookup; and
   * with the write's `activation`, reads what their activation reads of the committed state (prepareActivation; a
   * transaction's, `together`, as its own CodeSystems and ValueSets leave it).
   */
  async prepare(resources: readonly (Resource | undefined)[], activation?: ActivateSubscription, together?: Together): Promise<void> {
    await activation?.prepare(resources, together);
    await this.resolveEndpoints(resources);
  }

  /**
   * Resolves the endpoint host names of the rest-hook Subscriptions among `resources` that ask to be active
   * (prepare). A write does it before it takes its timestamp too (crud.ts): a slow lookup then holds back
   * no safe time (src/store/write-times.ts), and prepare finds the names resolved.
   */
  async resolveEndpoints(resources: readonly (Resource | undefined)[]): Promise<void> {
    const hosts = resources.flatMap((r) => {
      const sub = r as { resourceType?: string; status?: string; channel?: { type?: string; endpoint?: unknown } } | undefined;
      if (sub?.resourceType !== 'Subscription' || (sub.status !== 'requested' && sub.status !== 'active') || sub.channel?.type !== 'rest-hook') return [];
      const url = endpointUrl(sub.channel.endpoint);
      return typeof url === 'string' ? [] : [url.hostname];
    });
    await Promise.all(hosts.map((h) => this.resolve(h).catch(() => undefined)));
  }

  private resolvedHost(host: string, resolve: ResolveHost): Promise<string[]> {
    const now = this.options.clock.now();
    const known = this.resolved.get(host);
    if (known && now - known.at < RESOLVED_FOR_MS && now >= known.at) return known.addresses;
    if (this.resolved.size >= RESOLVED_MAX) this.resolved.clear();
    // A name that did not resolve is kept as long (an activation accepts it: each delivery resolves it again): asked
    // again inside the transaction, a slow failing lookup held it once per Subscription (0.2 s apiece here).
    const addresses = resolve(host);
    this.resolved.set(host, { at: now, addresses });
    addresses.catch(() => undefined);
    return addresses;
  }

  /** Activation for the writes of `req` (crud.ts putOptions). */
  activation(req: FhirRequest, now: number): ActivateSubscription {
    const { fhir, allowPrivate } = this.options;
    // Filled before the write's transaction (prepare), read in it: nothing is read on another connection there.
    const reads: ActivationReads = { resolved: new Map() };
    const ctx = { deps: fhir, tenant: req.tenant, access: req.access, now, allowPrivate, resolve: this.resolve, reads };
    return Object.assign(
      (resource: Resource, writer: ResourceWriter, stored?: { id: string; resource: Record<string, unknown> }) => activateSubscription(resource, { ...ctx, writer, ...(stored && { stored }) }),
      { prepare: (resources: readonly (Resource | undefined)[], together?: Together) => prepareActivation(resources, ctx, together) },
    );
  }

  /**
   * The hook of one write in `tenant`, with the tenant's active subscriptions read before the write's
   * transaction begins (from the cache while it is current): `wrap` watches what the transaction writes and
   * records the notifications its new versions give before it commits; `committed` drops the cache after
   * a write of a Subscription, ValueSet or CodeSystem. With no subscription of a written type, it records nothing.
   */
  async hook(tenant: string): Promise<WriteHook> {
    const active = await this.active(tenant);
    // Before the transaction, as the set: matching in it reads nothing on another connection (a client's or user's
    // record read there, once its cache lapsed, waited for ever on a PostgreSQL pool that concurrent writes filled).
    const { notifying, silenced } = await this.notifying(tenant, active);
    // The chosen patients of the Subscriptions this write matched, judged between its runs (OwnersToJudge): a patient's
    // search each is what a Subscription costs, so only those the write matches pay it, not all the tenant has.
    const choices = new Map<Compiled, boolean>();
    let watchedWritten = false;
    // A topic (a Basic), ValueSet or CodeSystem written: what Subscriptions rest on changed (settled once it commits).
    let groundsWritten = false;
    return {
      judge: async (err) => {
        if (!(err instanceof OwnersToJudge)) return false;
        const held = await this.choicesHeld(tenant, err.subscriptions);
        err.subscriptions.forEach((s, i) => choices.set(s, held[i]!));
        return true;
      },
      wrap: (fn) => async (w) => {
        const written: Written[] = [];
        // FHIR writes a transaction's DELETEs, then its POSTs, then its PUTs: its events were written after a deletion of a
        // Subscription, so recorded for none, and before an activation of one by another owner, which drops what waits
        // from the earlier owner's reach, so numbered and kept for $events but not sent (as if written by an earlier request).
        const ended = new Set<string>();
        const reowned = new Set<string>();
        const note = (v: VersionToWrite, previous?: MeasuredVersion | null) => {
          if (WATCHED_TYPES.includes(v.type)) watchedWritten = true;
          if (GROUNDS_TYPES.includes(v.type)) groundsWritten = true;
          // A deletion notifies topic-based Subscriptions alone (R4 criteria have no deletion notification).
          if ((!v.deleted || active.topicTypes.has(v.type)) && active.byType.has(v.type)) written.push({ v, ...(previous !== undefined && { previous }) });
        };
        const watched: ResourceWriter = {
          ...w,
          put: async (v) => {
            // A topic trigger's interaction and `previous` test need the version replaced (this transaction's own included):
            // looked up without its text when large (the update's own lookup found it so: no second round trip).
            const previous = active.topicTypes.has(v.type) ? await w.measured(v.type, v.id) : undefined;
            await w.put(v);
            note(v, previous);
          },
          endSubscription: async (id) => {
            ended.add(id);
            await w.endSubscription(id);
          },
          ownSubscription: async (id, owner, channel, heartbeat, restart) => {
            if (restart === true || owner !== ownerMatched(active, id)) reowned.add(id);
            await w.ownSubscription(id, owner, channel, heartbeat, restart);
          },
          insertNew: async (vs) => {
            const inserted = await w.insertNew(vs);
            vs.forEach((v, i) => inserted[i] && note(v, null));
            return inserted;
          },
        };
        const result = await fn(watched);
        if (written.length) {
          const unjudged = new Set<Compiled>();
          const matched = await this.match(tenant, active, notifying, written, w, (s) => {
            const held = this.choiceKnown(tenant, s, choices);
            if (held === undefined) unjudged.add(s);
            return held === true;
          });
          if (unjudged.size) throw new OwnersToJudge([...unjudged]);
          const notifications = matched.flatMap((n) =>
            ended.has(n.subscriptionId) ? [] : reowned.has(n.subscriptionId) ? [{ ...n, unsent: true }] : [n]);
          if (notifications.length) await w.notify(notifications, this.options.clock.now());
        }
        return result;
      },
      committed: async () => {
        if (watchedWritten) this.state(tenant).watch.markStale();
        // Awaited, not left running: the response waits for these writes, which are rare (one per such Subscription).
        // Written through a FHIR layer without the hub: the set is read again at once, without them (only then, or for
        // one refused for scopes changed since: one left as it was, its client enabled since, costs no reading of the
        // whole set at each write).
        if (silenced.length && (await showSilenced({ fhir: this.options.fhir, clock: this.options.clock, log: this.options.log, showing: this.showing, failed: this.showFailed }, tenant, silenced))) {
          this.state(tenant).watch.markStale();
        }
        // A topic, ValueSet or CodeSystem written: the Subscriptions it refuses now are set `error`, and those it accepts
        // again set back, at once (the set read again as settle does), not at the tenant's next write, whose own
        // events a Subscription set back only then would miss. The write committed: a failure here is only logged.
        if (groundsWritten) {
          this.options.terminologyChanged?.(tenant);
          await this.settle(tenant, SHOWN_PER_WRITE).catch((err: unknown) => this.options.log.warn('judging the subscriptions after a write of what they rest on failed', { tenant, err }));
        }
      },
    };
  }

  /**
   * Compiles `tenant`'s active Subscriptions as a write's hook does and writes, with no write to wait for, what that finds
   * (showSilenced, all of them): those its topic refuses set `error` saying why, those paused for their owner's authority or
   * topic shown so, those whose topic compiles again set back. `serve` runs it for every tenant at start
   * (App.settleSubscriptions), so that a Subscription an older release activated, which today's rules refuse, reads so
   * in `$status` before the tenant's next write.
   */
  async settle(tenant: string, limit = Number.POSITIVE_INFINITY): Promise<void> {
    const active = await this.active(tenant);
    const { silenced } = await this.notifying(tenant, active);
    const deps = { fhir: this.options.fhir, clock: this.options.clock, log: this.options.log, showing: this.showing, failed: this.showFailed };
    if (silenced.length && (await showSilenced(deps, tenant, silenced, limit))) this.state(tenant).watch.markStale();
  }

  /**
   * The notifications `versions` give the tenant's active subscriptions: one per subscription whose criteria,
   * as its owner's search, matches; one per topic-based subscription with a trigger the write passes.
   */
  private async match(tenant: string, active: ActiveSet, notifying: ReadonlySet<Compiled>, versions: Written[], w: ResourceWriter, held: (s: Compiled) => boolean): Promise<NotificationToWrite[]> {
    // Chains and `_has` are searched in the write's transaction, as a Binary's securityContext is read there.
    const ctx = cachedLookups(this.options.fhir, tenant, { search: (query) => w.search(query), present: (type, ids) => w.present(type, ids) });
    // A Provenance's targets, and the earlier versions it names, are read in the write's transaction too (a vread).
    const targets: TargetReads = { search: (query) => w.search(query), vread: (type, id, versionId) => w.vread(type, id, versionId), lookups: ctx };
    // A Binary's securityContext is read in the write's transaction (it sees the transaction's own writes), by a search,
    // which locks nothing (ResourceWriter.current would lock it for the rest of the transaction); a Provenance there is
    // judged as its read is, by its targets.
    const contexts: ContextReads = {
      read: async (type: string, id: string) => (await w.search({ type, where: [{ kind: 'id', ids: [id] }], sort: [], count: 1 }))[0] ?? null,
      lookups: ctx,
      targets,
    };
    const base = this.options.fhir.fhirBase?.(tenant);
    const out: NotificationToWrite[] = [];
    for (const { v, previous } of versions) {
      const subs = active.byType.get(v.type) ?? [];
      const replaced = previous && !previous.deleted ? previous : undefined;
      // A topic event's interaction: an update replaces a live version; a deletion of nothing live is no event.
      const interaction: Interaction | undefined = v.deleted ? (replaced ? 'delete' : undefined) : replaced ? 'update' : 'create';
      // The version replaced, read and parsed once, when a test needs it (a deletion's matching, `previous` tests).
      let replacedText: Promise<string> | undefined;
      const textBefore = () => (replacedText ??= previousText(w, v, replaced!));
      let parsed: Promise<Record<string, unknown>> | undefined;
      const beforeOf = () => (parsed ??= textBefore().then((t) => JSON.parse(t) as Record<string, unknown>));
      // A deletion notifies only topic Subscriptions whose trigger takes deletions: the version it deleted is read for those alone.
      if (v.deleted && (!replaced || !subs.some((s) => s.topic?.trigger.interactions.includes('delete')))) continue;
      const resource = v.deleted ? await beforeOf() : (JSON.parse(v.content) as Record<string, unknown>);
      // The version's words for `_text` and `_content`, computed once for all the subscriptions (the stored ones when known).
      let words: TextEntry | undefined | null = v.index && !v.deleted ? (v.index.text ?? undefined) : null;
      const wordsOf = () => (words === null ? (words = textIndexOf(resource)) : words);
      const rows = v.deleted ? indexEntries(resource, base) : v.index;
      let beforeRows: IndexRows | undefined;
      const notified = new Set<string>();
      // A fhirPathCriteria reads the two versions alone: evaluated once per version for all the Subscriptions of its
      // topics (each evaluation may take its whole budget, and a topic may have many Subscriptions).
      const fhirPathResults = new Map<CompiledTopicCriteria, boolean>();
      const fhirPathPasses = async (fhirPath: NonNullable<TopicTrigger['fhirPath']>, topic: string): Promise<boolean> => {
        const test: CompiledTopicCriteria = fhirPath.test;
        let passes = fhirPathResults.get(test);
        if (passes === undefined) {
          // `%previous` read only by an expression naming it; a deletion's focus is the version it deleted.
          const before = replaced && (fhirPath.readsPrevious || v.deleted) ? await beforeOf() : undefined;
          passes = fhirPathHolds(test, v.type, { previous: before, current: v.deleted ? undefined : resource }, this.options.log, { tenant, topic, resource: `${v.type}/${v.id}` });
          fhirPathResults.set(test, passes);
        }
        return passes;
      };
      for (const s of subs) {
        if (v.deleted && !s.topic) continue;
        if (s.topic && (interaction === undefined || !s.topic.trigger.interactions.includes(interaction) || notified.has(s.id))) continue;
        if (s.clientId !== null && !notifying.has(s)) continue;
        // The owner's reach and the filters, on the version written (a deletion: on the one it deleted).
        if (!(await matchConditions(resource, v.deleted ? replaced!.lastUpdated : v.lastUpdated, s.where, ctx, rows, wordsOf))) continue;
        // A Binary is read through its securityContext where the owner's reach depends on it (search's rowsInReach).
        if (v.type === 'Binary' && !(await rowsInReach(this.options.fhir, { tenant, access: s.access }, [v.deleted ? { ...v, content: await textBefore(), deleted: false } : v], contexts)).length) continue;
        // A Provenance the criteria's index conditions found by a target naming a version is judged as its read is, its
        // targets and the earlier versions it names read in the transaction (provenance-reach.ts).
        if (v.type === 'Provenance' && !(await provenanceMatchInReach(this.options.fhir, { tenant, access: s.access }, resource, targets))) continue;
        if (s.topic) {
          const { trigger } = s.topic;
          const tests: boolean[] = [];
          if (s.topic.previous) {
            tests.push(interaction === 'create'
              ? trigger.passesOnCreate
              : await matchConditions(await beforeOf(), replaced!.lastUpdated, s.topic.previous, ctx, (beforeRows ??= indexEntries(await beforeOf(), base))));
          }
          if (s.topic.current) {
            tests.push(interaction === 'delete' ? trigger.passesOnDelete : await matchConditions(resource, v.lastUpdated, s.topic.current, ctx, rows, wordsOf));
          }
          if (tests.length && !(trigger.requireBoth ? tests.every(Boolean) : tests.some(Boolean))) continue;
          // fhirPathCriteria (fhirpath-criteria.ts) must hold as well as queryCriteria, on the versions as written.
          if (trigger.fhirPath && !(await fhirPathPasses(trigger.fhirPath, s.topic.url))) continue;
          if (!held(s)) continue;
          notified.add(s.id);
          out.push({ subscriptionId: s.id, type: v.type, id: v.id, versionId: v.versionId, event: interaction!, matchedFor: s.owner });
          continue;
        }
        if (!held(s)) continue;
        out.push({ subscriptionId: s.id, type: v.type, id: v.id, versionId: v.versionId, matchedFor: s.owner });
      }
    }
    return out;
  }

  /**
   * The subscriptions of a client in `active` that may notify now (current), judged before a write's transaction
   * begins: their clients' and users' records, and a compilation again, are read on the store's connections.
   */
  private async notifying(tenant: string, active: ActiveSet): Promise<{ notifying: Set<Compiled>; silenced: (Silenced | Resumed)[] }> {
    // Each client's and user's record read once for the write, not once per subscription (a tenant may have thousands):
    // then each subscription is judged without waiting, unless its client's registration changed (compiled again).
    const subs = new Set<Compiled>();
    for (const list of active.byType.values()) for (const s of list) if (s.clientId !== null) subs.add(s);
    // The owners of the refused paused for their scopes or topic too: a user's whose sign-in ended since is turned off for that.
    const refusedOwners = active.refused.map((r) => ({ r, user: r.why === 'scopes' || r.why === 'topic' ? ownerUser(r.owner) : null }));
    const heldOwners = active.held.map((r) => ({ r, user: ownerUser(r.owner) }));
    const clientIds = new Set<string>();
    const userIds = new Set<string>();
    for (const s of subs) {
      clientIds.add(s.clientId!);
      if (s.user !== null) userIds.add(s.user.id);
    }
    for (const { r, user } of refusedOwners) {
      if (user === null) continue;
      clientIds.add(r.clientId!);
      userIds.add(user.id);
    }
    // Those held paused: their clients whoever's (their registration judged), their users where a user's.
    for (const { r, user } of heldOwners) {
      clientIds.add(r.clientId!);
      if (user !== null) userIds.add(user.id);
    }
    // One read of the clients and one of the users for them all (those their caches hold, none), side by side.
    const [clients, users] = await Promise.all([
      clientIds.size ? this.options.clients(clientIds) : new Map<string, Client | null>(),
      userIds.size ? this.options.users(tenant, userIds) : new Map<string, User | null>(),
    ]);
    const out = new Set<Compiled>();
    // Those silenced for their owner's authority, once each (a Subscription has an entry per trigger type).
    const silenced = new Map<string, Silenced>();
    const revokedOf = (clientId: string, user: OwnerUser | null) => user !== null && authorityRevoked(clients.get(clientId) ?? null, users.get(user.id) ?? null, user);
    const live: Compiled[] = [];
    for (const s of subs) {
      const client = clients.get(s.clientId!) ?? null;
      const revoked = revokedOf(s.clientId!, s.user);
      if (revoked || (client?.disabled && s.user === null)) {
        silenced.set(s.id, { id: s.id, owner: s.owner, clientId: s.clientId!, why: revoked ? 'sign-in' : 'client', client });
        continue;
      }
      if (!client?.disabled) live.push(s);
    }
    for (const s of live) {
      const client = clients.get(s.clientId!) ?? null;
      const now = (client?.scopes.join(' ') ?? null) === s.registered ? 'notifies' : await this.current(tenant, active, s, client, s.user === null ? null : (users.get(s.user.id) ?? null));
      if (now === 'notifies') out.add(s);
      // Its client's registration no longer lets it search what it selects: paused for its scopes, as the set's load pauses one.
      else if (now === 'refused' && !silenced.has(s.id)) silenced.set(s.id, { id: s.id, owner: s.owner, clientId: s.clientId!, why: 'scopes', client: null, registered: client?.scopes.join(' ') ?? null });
    }
    // Those the set's load refused: a user's whose sign-in ended since is turned off for that rather than paused for its scopes or topic.
    for (const { r, user } of refusedOwners) silenced.set(r.id, user !== null && revokedOf(r.clientId!, user) ? { ...r, why: 'sign-in' } : r);
    // Those standing paused: a user's whose sign-in ended since turned off for that; one whose client's registration
    // changed since judged again (rejudged); the others left as they stand.
    const resumed = [...active.resumed];
    for (const { r, user } of heldOwners) {
      if (user !== null && revokedOf(r.clientId!, user)) silenced.set(r.id, { ...r, why: 'sign-in' });
      else if ((clients.get(r.clientId!)?.scopes.join(' ') ?? null) !== r.registered) {
        // Its judgement failing (its read, say) fails no write: it is judged again at the next one.
        const judged = await this.rejudged(tenant, r).catch((err: unknown) => {
          this.options.log.warn('a paused subscription could not be judged again', { tenant, subscription: r.id, err });
          return { resumed: [], renamed: [], held: [] } as PausedJudged;
        });
        for (const x of judged.renamed) silenced.set(x.id, x);
        resumed.push(...judged.resumed);
      }
    }
    return { notifying: out, silenced: [...silenced.values(), ...resumed] };
  }

  /** The choice of patient `s` was activated with (a user's, through a client), when it must be judged (HubOptions.patientHeld). */
  private choiceOf(tenant: string, s: Compiled): PatientChoice | null {
    const patient = s.user === null || s.clientId === null || !this.options.patientHeld ? null : ownerPatient(s.owner);
    return patient === null ? null : { tenant, clientId: s.clientId!, userId: s.user!.id, patient };
  }

  /**
   * Whether the patient in context `s` was activated with still holds, as known without reading: judged for this write
   * (`judged`), else remembered (HubOptions.patientKnown); undefined when it is to be read (OwnersToJudge). True for one without.
   */
  private choiceKnown(tenant: string, s: Compiled, judged: ReadonlyMap<Compiled, boolean>): boolean | undefined {
    const choice = this.choiceOf(tenant, s);
    if (choice === null) return true;
    return judged.get(s) ?? this.options.patientKnown?.([choice])[0];
  }

  /**
   * Whether the patient in context each of `subs` was activated with, a user's choice, still holds (HubOptions.patientHeld),
   * asked of them all together; true for one without.
   */
  private async choicesHeld(tenant: string, subs: readonly Compiled[]): Promise<boolean[]> {
    const asked: number[] = [];
    const choices: PatientChoice[] = [];
    subs.forEach((s, i) => {
      const choice = this.choiceOf(tenant, s);
      if (choice === null) return;
      asked.push(i);
      choices.push(choice);
    });
    const held = subs.map(() => true);
    if (!choices.length) return held;
    const answers = this.options.patientHeld!(choices);
    const found = answers instanceof Promise ? await answers : answers;
    asked.forEach((at, j) => (held[at] = found[j]!));
    return held;
  }

  /** A client's registered scopes, as compared to see whether its subscriptions need compiling again. */
  private async registeredScopes(clientId: string): Promise<string | null> {
    return (await this.options.client(clientId))?.scopes.join(' ') ?? null;
  }

  /**
   * Whether subscription `s` of a client may notify now: not while its client is disabled, nor once the user on whose
   * authority it was activated lost it (owner.ts authorityRevoked); and, its client's scopes changed since it was
   * compiled, compiled again first (in place: the set is this process's latest), as the set's load compiles it: a
   * topic-based one as a whole, each of its entries in `active` (one per trigger) given its filters, reach and
   * queryCriteria tests compiled with the new access. `refused` when that compilation is a 403: the scopes its client
   * now has registered no longer let it search what it selects (a pause to show). `client` and `user` are the records
   * `notifying` read for all its owners together: not read again per Subscription (a compilation of one before may have
   * outlived the caches, when each changed one read its client and user anew).
   */
  private async current(tenant: string, active: ActiveSet, s: Compiled, client: Client | null, user: User | null): Promise<'notifies' | 'silent' | 'refused'> {
    if (client?.disabled) return 'silent';
    if (s.user !== null && authorityRevoked(client, user, s.user)) return 'silent';
    const registered = client?.scopes.join(' ') ?? null;
    if (registered === s.registered) return 'notifies';
    const { fhir, clock, log, restoreAccess } = this.options;
    try {
      const access = await ownerAccess(tenant, s.owner, restoreAccess);
      if (s.topic) {
        const { topic, subscription } = s.topic.of;
        const triggers = await this.compileTopicWith(tenant, access, subscription, topic);
        // Its entries are changed once all compiled: a write matching meanwhile sees each as it was or as it is now.
        const entries = [...active.byType.values()].flat().filter((x) => x.id === s.id && x.topic?.of.topic === topic);
        for (const x of entries) {
          const t = triggers.find((c) => c.trigger === x.topic!.trigger)!;
          Object.assign(x, {
            access, where: t.where, criteria: t.criteria, registered,
            topic: { url: x.topic!.url, trigger: t.trigger, of: x.topic!.of, ...(t.previous && { previous: t.previous }), ...(t.current && { current: t.current }) },
          });
        }
        return 'notifies';
      }
      const c = await compileCriteria(fhir, tenant, access, s.criteria, clock.now());
      Object.assign(s, { access, where: c.where, registered });
      return 'notifies';
    } catch (err) {
      log.warn('an active subscription no longer compiles and notifies nothing', { tenant, subscription: s.id, err });
      if (!(err instanceof FhirError && err.status === 403)) return 'silent';
      // As the set's load judges one: a topic-based one by its whole topic (its queryCriteria included).
      if (s.topic) {
        const { topic, subscription } = s.topic.of;
        return (await this.refusedBy(tenant, s.owner, subscription, async () => [topic]))?.why === 'scopes' ? 'refused' : 'silent';
      }
      const compiles = (access: Access) => compileCriteria(fhir, tenant, access, s.criteria, clock.now()).then(() => true, () => false);
      return (await this.byRegistration(tenant, s.owner, compiles)) ? 'refused' : 'silent';
    }
  }

  /**
   * What refuses Subscription `r` of `owner` its search, its compilation for its owner's access (held to its client's
   * registration) having been a 403 and its grant not lapsed: its client's registration (`scopes`: the pause `cinder
   * client enable|update` lifts), where the registered scopes refuse what the scopes recorded at its activation search,
   * whatever its topic does; else a topic-based one's topic (`topic`), widened since to types the recorded scopes do not
   * search (named); else, when neither is found, the registration all the same where the recorded scopes search the
   * whole of it (byRegistration: what refuses is then in its queryCriteria), or nothing (undefined).
   */
  private async refusedBy(tenant: string, owner: string, r: Record<string, unknown>, topicsOf: () => Promise<Topic[]>): Promise<{ why: 'scopes' } | { why: 'topic'; types: string[] } | undefined> {
    const { fhir, clock, restoreAccess } = this.options;
    if (isTopicCriteria(r.criteria)) {
      const now = clock.now();
      const unsearched = async (mode?: 'recorded') => unsearchedTriggers(fhir, tenant, await ownerAccess(tenant, owner, restoreAccess, mode), r, await topicsOf(), now);
      const found = await Promise.all([unsearched('recorded'), unsearched()]).then(([recorded, registered]) => topicRefusal(recorded, registered), () => undefined);
      if (found !== undefined) return found;
    }
    return (await this.byRegistration(tenant, owner, (access) => searchesWhatItSelects(fhir, tenant, access, r, clock.now()))) ? { why: 'scopes' } : undefined;
  }

  /**
   * Whether it is its client's registration that keeps the Subscription owned by `owner` from searching what it selects:
   * the scopes recorded at its activation, as they are (by today's rules), still do (`searches`). Where they do not
   * either (a topic the operator widened since to a type its grant does not search), no change of the registration
   * would set it back: it is no pause for the registration, and notifies again once it compiles (as it did before).
   */
  private async byRegistration(tenant: string, owner: string, searches: (access: Access) => Promise<boolean>): Promise<boolean> {
    return searches(await ownerAccess(tenant, owner, this.options.restoreAccess, 'recorded')).catch(() => false);
  }

  private state(tenant: string): TenantState {
    let t = this.tenants.get(tenant);
    if (!t) {
      t = { watch: new ChangeWatch(tenant, WATCHED_TYPES, { store: this.options.fhir.store, clock: this.options.clock, checkIntervalMs: CHECK_INTERVAL_MS }) };
      this.tenants.set(tenant, t);
    }
    return t;
  }

  /** The tenant's active subscriptions of the delivered channels, compiled: at once while the cache is current. */
  private active(tenant: string): SyncOrAsync<ActiveSet> {
    const t = this.state(tenant);
    const token = t.watch.changeToken();
    if (typeof token === 'string' && t.set?.token === token) return t.set;
    return Promise.resolve(token).then((tok) => {
      if (t.set?.token === tok) return t.set;
      if (t.loading?.token !== tok) {
        const set = this.load(tenant, tok);
        t.loading = { token: tok, set };
        set.then((s) => {
          t.set = s;
          if (t.loading?.set === set) t.loading = undefined;
        }, () => {
          if (t.loading?.set === set) t.loading = undefined;
        });
      }
      return t.loading.set;
    });
  }

  private async load(tenant: string, token: string): Promise<ActiveSet> {
    const { fhir, clock, log, restoreAccess } = this.options;
    const where = compileFilter('Subscription', ACTIVE_QUERY) as Condition[];
    const rows = await fhir.store.resources.search(tenant, { type: 'Subscription', where, sort: [], count: MAX_ACTIVE + 1 });
    if (rows.length > MAX_ACTIVE) log.warn('a tenant has more active subscriptions than are matched', { tenant, matched: MAX_ACTIVE });
    const owners = await fhir.store.subscriptions.owners(tenant);
    // Their clients in one read, into the cache the compilations below read each from (registeredScopes, restoreAccess).
    const clientIds = new Set<string>();
    for (const row of rows.slice(0, MAX_ACTIVE)) {
      const owner = owners.get(row.id);
      const clientId = owner === undefined ? null : ownerClient(owner);
      if (clientId !== null) clientIds.add(clientId);
    }
    if (clientIds.size) await this.options.clients(clientIds);
    const byType = new Map<string, Compiled[]>();
    const topicTypes = new Set<string>();
    const add = (c: Compiled) => {
      const list = byType.get(c.type) ?? [];
      list.push(c);
      byType.set(c.type, list);
    };
    let topics: Promise<Topic[]> | undefined;
    const topicsOf = () => (topics ??= tenantTopics(fhir, tenant, clock.now()));
    const refused: Silenced[] = [];
    for (const row of rows.slice(0, MAX_ACTIVE)) {
      const r = JSON.parse(row.content) as Record<string, unknown> & { criteria?: unknown; channel?: { type?: string } };
      const owner = owners.get(row.id);
      // Without an owner (stored by `cinder import`, never activated through the API) a subscription notifies nothing.
      if (owner === undefined || !DELIVERED_CHANNELS.includes(r.channel?.type ?? '') || !isActivated(r)) continue;
      try {
        const clientId = ownerClient(owner);
        const registered = clientId === null ? null : await this.registeredScopes(clientId);
        const access = await ownerAccess(tenant, owner, restoreAccess);
        if (isTopicCriteria(r.criteria)) {
          const { topic, triggers } = await this.compileTopicOf(tenant, access, r, await topicsOf());
          for (const t of triggers) {
            topicTypes.add(t.trigger.type);
            add({
              id: row.id, type: t.trigger.type, where: t.where, access, owner, criteria: t.criteria, clientId, registered, user: ownerUser(owner),
              topic: { url: topic.url, trigger: t.trigger, of: { topic, subscription: r }, ...(t.previous && { previous: t.previous }), ...(t.current && { current: t.current }) },
            });
          }
          continue;
        }
        const c = await compileCriteria(fhir, tenant, access, r.criteria, clock.now());
        add({ id: row.id, type: c.type, where: c.where, access, owner, criteria: r.criteria, clientId, registered, user: ownerUser(owner) });
      } catch (err) {
        const clientId = ownerClient(owner);
        // Its topic refuses it (deleted, no longer active, edited since, or a filter an older release let through), or its
        // criteria no longer compile (the ValueSet its `:in` names deleted, a search an older release ran): set `error`,
        // saying what, not left reading `active` while it notifies nothing; set back once it compiles again (pausedForTopic).
        const error = refusalOf(err, r);
        if (error !== undefined) {
          log.warn(isTopicCriteria(r.criteria) ? 'a topic-based subscription its topic no longer accepts is set to error' : 'a subscription whose criteria no longer compile is set to error', { tenant, subscription: row.id, error });
          refused.push({ id: row.id, owner, clientId, why: 'refused', client: null, error });
          continue;
        }
        log.warn('an active subscription no longer compiles and notifies nothing', { tenant, subscription: row.id, err });
        if (!(err instanceof FhirError && err.status === 403 && clientId !== null)) continue;
        // Its own grant no longer reaching what it selects (an older release's, judged by today's rules), whoever's.
        const reaches = await grantReaches(fhir, restoreAccess, tenant, owner, r, clock.now()).catch(() => true);
        if (!reaches) {
          refused.push({ id: row.id, owner, clientId, why: 'grant', client: null });
          continue;
        }
        // A user's as a client's own: its client's registration is its reach too (a user's sign-in ended is `notifying`'s),
        // paused for it where the registration refuses (refusedBy); else, topic-based, paused for its topic, widened since
        // to types its owner may not search.
        const by = await this.refusedBy(tenant, owner, r, topicsOf);
        if (by?.why === 'scopes') refused.push({ id: row.id, owner, clientId, why: 'scopes', client: null, registered: await this.registeredScopes(clientId) });
        else if (by?.why === 'topic') refused.push({ id: row.id, owner, clientId, why: 'topic', client: null, types: by.types });
      }
    }
    const paused = await this.pausedForTopic(tenant, owners, topicsOf);
    return { token, byType, topicTypes, refused: [...refused, ...paused.renamed], resumed: paused.resumed, held: paused.held };
  }

  /**
   * Paused Subscription `held` (ActiveSet's `held`) judged again as the set's load judges it (judgePaused), its client's
   * registration having changed since: read as it stands now, and remembered with the registration judged, so that the
   * next writes do not judge it again until the registration changes once more.
   */
  private async rejudged(tenant: string, held: Silenced): Promise<PausedJudged> {
    const out: PausedJudged = { resumed: [], renamed: [], held: [] };
    const row = await this.options.fhir.store.resources.read(tenant, 'Subscription', held.id);
    held.registered = await this.registeredScopes(held.clientId!);
    if (row === null || row.deleted) return out;
    let topics: Promise<Topic[]> | undefined;
    const topicsOf = () => (topics ??= tenantTopics(this.options.fhir, tenant, this.options.clock.now()));
    await this.judgePaused(tenant, new Map([[held.id, held.owner]]), topicsOf, row, out);
    return out;
  }

  /** A topic-based Subscription `r` compiled for `access`: its topic (of `topics`) and its triggers' conditions. */
  private async compileTopicOf(tenant: string, access: Access, r: Record<string, unknown>, topics: Topic[]) {
    const topic = findTopic(topics, topicRequest(r));
    return { topic, triggers: await this.compileTopicWith(tenant, access, r, topic) };
  }

  /** The triggers of `topic` compiled for topic-based Subscription `r` and `access`: its filters, reach and queryCriteria tests. */
  private compileTopicWith(tenant: string, access: Access, r: Record<string, unknown>, topic: Topic) {
    const { fhir, clock } = this.options;
    const compile = async (criteria: string) => (await compileCriteria(fhir, tenant, access, criteria, clock.now())).where;
    return compileTopic(fhir, tenant, access, topic, topicRequest(r), clock.now(), compile);
  }

  /**
   * The Subscriptions of `tenant` the server paused for their topic (topicPausedError), judged again as the set is
   * loaded, which a write of a topic (Basic) brings about: those in `error` whose words are a topic pause's (an indexed
   * full-text search, pausedQuery: a tenant's failed rest-hooks in `error` are not read), PAUSED_PAGE at a time in id
   * order (the first MAX_ACTIVE alone left those past a tenant's first 1,000 paused for good), the rows whose text holds
   * no topic pause (words alike in another order) not parsed.
   * `resumed`: those whose topic compiles for their owner again (the operator reverted it, or removed the trigger),
   * each with the status it goes back to (statusBefore: only where each pause changed nothing but status and `error`).
   * `renamed`: those whose topic now selects other types their owner may not search than their `error` names.
   * Those its topic or criteria refused (refused.ts, by each head's words: pauseHeads) alike: `resumed` once they compile
   * for their owner again, `renamed` when refused now in other words. `held`: those a client activated (ActiveSet.held).
   */
  private async pausedForTopic(tenant: string, owners: Map<string, string>, topicsOf: () => Promise<Topic[]>): Promise<PausedJudged> {
    const { fhir } = this.options;
    // Built here, not as the module loads: TOPIC_PAUSE_HEAD's module may not have run yet then (an import cycle through crud.ts).
    const out: PausedJudged = { resumed: [], renamed: [], held: [] };
    const judged = new Set<string>();
    for (const head of pauseHeads()) {
      const where = compileFilter('Subscription', pausedQuery(head)) as Condition[];
      for (let after: string | undefined; ;) {
        const rows = await fhir.store.resources.search(tenant, {
          type: 'Subscription', where, sort: [], count: PAUSED_PAGE, ...(after === undefined ? {} : { after: { lastUpdated: 0, id: after } }),
        });
        for (const row of rows) {
          // One whose words match two heads' is judged once.
          if (!row.content.includes(head) || judged.has(row.id)) continue;
          judged.add(row.id);
          await this.judgePaused(tenant, owners, topicsOf, row, out);
        }
        if (rows.length < PAUSED_PAGE) break;
        after = rows[rows.length - 1]!.id;
      }
    }
    return out;
  }

  /** pausedForTopic's judgement of one Subscription in `error` (`row`), added to `out`. */
  private async judgePaused(
    tenant: string, owners: Map<string, string>, topicsOf: () => Promise<Topic[]>, row: ResourceVersion, out: PausedJudged,
  ): Promise<void> {
    const { log, restoreAccess, fhir, clock } = this.options;
    const r = JSON.parse(row.content) as Record<string, unknown> & { channel?: { type?: string } };
    const owner = owners.get(row.id);
    const named = topicPausedFor(r);
    // Refused by its topic or criteria (refused.ts): whoever's, the operator's too.
    const refused = named === undefined ? refusedPauseOf(r) : undefined;
    const clientId = owner === undefined ? null : ownerClient(owner);
    if (owner === undefined || (named === undefined && refused === undefined) || !DELIVERED_CHANNELS.includes(r.channel?.type ?? '')) return;
    if ((named !== undefined || refused === 'topic') !== isTopicCriteria(r.criteria) || (named !== undefined && clientId === null)) return;
    if (clientId !== null) out.held.push({ id: row.id, owner, clientId, why: 'topic', client: null, registered: await this.registeredScopes(clientId) });
    try {
      const access = await ownerAccess(tenant, owner, restoreAccess);
      if (isTopicCriteria(r.criteria)) await this.compileTopicOf(tenant, access, r, await topicsOf());
      else await compileCriteria(fhir, tenant, access, r.criteria, clock.now());
      const status = await statusBefore(fhir.store, tenant, row, clientId);
      if (status !== undefined) out.resumed.push({ id: row.id, owner, status, versionId: row.versionId });
    } catch (err) {
      if (!(err instanceof FhirError)) log.warn('a subscription paused for its topic or criteria could not be judged', { tenant, subscription: row.id, err });
      // Its topic refuses it now whoever asks (deleted, no longer active, its filter no longer offered), or its criteria do
      // not compile: an `error` saying so, as the set's load writes for an active one (written only when the words change).
      const error = refusalOf(err, r);
      if (error !== undefined) {
        if (error === r.error) return;
        log.warn(isTopicCriteria(r.criteria) ? 'a topic-based subscription its topic no longer accepts is set to error' : 'a subscription whose criteria no longer compile is set to error', { tenant, subscription: row.id, error });
        out.renamed.push({ id: row.id, owner, clientId, why: 'refused', client: null, error });
        return;
      }
      if (!(err instanceof FhirError && err.status === 403) || clientId === null) return;
      // Named anew by what refuses now: its registration (narrowed since, whatever the topic does, or the topic as it
      // was again), or its topic selecting other types than its `error` names.
      const by = await this.refusedBy(tenant, owner, r, topicsOf);
      if (by?.why === 'scopes') out.renamed.push({ id: row.id, owner, clientId, why: 'scopes', client: null, registered: await this.registeredScopes(clientId) });
      else if (by?.why === 'topic' && by.types.join(',') !== named?.join(',')) out.renamed.push({ id: row.id, owner, clientId, why: 'topic', client: null, types: by.types });
    }
  }
}
