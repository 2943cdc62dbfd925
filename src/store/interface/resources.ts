/** Resources: versions, the transactional writer, reads, search, history and index maintenance. */
import type { CompartmentReads } from './compartments.ts';
import type { Condition, IndexRows, ReindexTable, SearchQuery } from './search.ts';
import type { SnapshotPage, SnapshotQuery } from './snapshot.ts';
import type { NotificationToWrite } from './subscriptions.ts';

/**
 * The interaction that wrote a version, as a history Bundle's `entry.request.method` names it (FHIR R4
 * http-verb): a create (POST), an update or create-on-update (PUT), a patch (PATCH), a deletion (DELETE).
 */
export type WriteMethod = 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** One stored version of a resource. `content` is the resource JSON text exactly as served. */
export interface ResourceVersion {
  type: string;
  id: string;
  versionId: number;
  lastUpdated: number;
  deleted: boolean;
  /** JSON text, including `meta.versionId`/`meta.lastUpdated`; empty for a deletion. */
  content: string;
  /**
   * The interaction that wrote it, on the rows of `history()` (other reads leave it out); absent for a
   * version written before it was recorded (SQLite migration 27, PostgreSQL 30, `write_method`).
   */
  method?: WriteMethod;
  /**
   * On the rows of `history()`, for a live version: whether it made the resource exist, as the version
   * before it is none (version 1) or a deletion (a PUT that re-creates), so that it was answered 201.
   */
  created?: boolean;
}

export interface VersionToWrite extends ResourceVersion {
  /** Stored in the version's row: history tells the interaction instead of guessing it from the version number. */
  method: WriteMethod;
  index: IndexRows;
  /** Ids of the patients whose compartment holds this version. */
  compartments: string[];
}

/**
 * A condition that a conditional create or update settles by writing (src/fhir/conditional.ts): its key
 * (a hash of the type and criteria) and its claim count as read before the write searched (0: none).
 */
export interface ConditionClaim {
  key: string;
  seen: number;
}

/** How long a condition's claim outlives its last move (ResourceWriter.claim): far beyond any write's search-to-commit. */
export const CLAIM_KEPT_MS = 60 * 60 * 1000;

/** Claims in the order ResourceWriter.claim takes them (by key), so two transactions never wait for each other in a cycle. */
export function inKeyOrder(claims: ConditionClaim[]): ConditionClaim[] {
  return [...claims].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

export interface CurrentVersion {
  versionId: number;
  lastUpdated: number;
  deleted: boolean;
  /**
   * The stored JSON text (ResourceVersion.content; empty for a deletion), read by the same lookup, so
   * that an update can tell it would store the same resource again and write nothing (fhir/prepared.ts
   * storesSame) without another round trip.
   */
  content: string;
}

/**
 * Stored texts from this many bytes of UTF-8 on are not read by ResourceWriter.measured(): their length is given instead
 * (`bytes`). Below it the text comes with the lookup, as one round trip costs more than reading it.
 */
export const MEASURED_TEXT_BYTES = 64 * 1024;

/**
 * The current version as ResourceWriter.measured() finds it: its stored text (`content`) when that is shorter than
 * MEASURED_TEXT_BYTES in UTF-8 (or its length cannot be told without reading it), otherwise that length (`bytes`) and
 * not the text, which current() then reads.
 */
export type MeasuredVersion = Omit<CurrentVersion, 'content'> & ({ content: string; bytes?: undefined } | { content?: undefined; bytes: number });

/** Writes inside one database transaction; everything is committed or nothing is. */
export interface ResourceWriter {
  /**
   * The current version of a resource, its stored text included (locked for the rest of the
   * transaction where the database can). Sees this transaction's own writes.
   */
  current(type: string, id: string): Promise<CurrentVersion | null>;
  /**
   * current() without reading a large stored text: the row found and locked alike, with the text's length in UTF-8
   * bytes in its place when it is MEASURED_TEXT_BYTES or more, which both databases know without reading the text
   * (SQLite from the record's header, PostgreSQL from the TOAST pointer: `octet_length`). An update compares the text
   * it would store with it by that length first (fhir/prepared.ts measuresSame) and reads it by current() only when
   * the lengths agree. Sees this transaction's own writes.
   */
  measured(type: string, id: string): Promise<MeasuredVersion | null>;
  /**
   * The current resources of `query` (ResourceRepo.search), read in this transaction: it sees the transaction's
   * own writes, and on PostgreSQL it runs on the transaction's connection. Whatever must be searched while a write's
   * transaction is open (a Subscription's chains and `_has`, matched as the write commits: subscriptions/hub.ts) is
   * searched here: a search on another connection of the pool while the transaction holds one could wait for ever
   * on a pool that concurrent writes fill. SQLite, whose writes and reads do not wait for each other's connection,
   * searches as ResourceRepo.search does.
   */
  search(query: SearchQuery): Promise<ResourceVersion[]>;
  /**
   * ResourceRepo.vread in this transaction (on PostgreSQL on its connection, never on another of the pool): a version
   * of a resource, current or in its history, this transaction's own writes included; locks nothing. A Provenance
   * naming an earlier version of a patient's record is judged within a patient's token's reach by it inside a write
   * (a transaction's conditional search of Provenance, searched again at its commit: bundle-held-searches.ts).
   */
  vread(type: string, id: string, versionId: number): Promise<ResourceVersion | null>;
  /** Stores a new version: the previous one moves to history; index and compartment rows are replaced. */
  put(version: VersionToWrite): Promise<void>;
  /** Whether a non-deleted resource exists (for reference checks inside transactions). */
  exists(type: string, id: string): Promise<boolean>;
  /**
   * Which of these resources exist and are not deleted, in their order, in one lookup (referential
   * integrity checks every reference of a request at once). Sees this transaction's own writes; locks
   * nothing, so a concurrent delete of a target is not held up.
   */
  existing(keys: { type: string; id: string }[]): Promise<boolean[]>;
  /**
   * ResourceRepo.present in this transaction: the ids among `ids` with a current row of `type`, live or a deletion,
   * this transaction's own writes included, in any order; locks nothing. A search of CodeSystem or ValueSet inside a
   * write (a Subscription's chain or `_has` matched as it commits) asks it which core resources the tenant shadows.
   */
  present(type: string, ids: string[]): Promise<string[]>;
  /**
   * CompartmentReads.compartmentPatients in this transaction, its own writes included: the patients whose compartments
   * hold the current, live resources of `type` with these ids, each `{id, patient}` once, on the compartment index alone
   * (no stored text read); locks nothing. Referential integrity judges a patient-context token's targets by it.
   */
  compartmentPatients(type: string, ids: string[]): Promise<{ id: string; patient: string }[]>;
  /**
   * Bulk creation: stores each version whose resource has no row yet (never written in this tenant),
   * with its index and compartment rows, and tells per version whether it did. Resources that exist,
   * deleted ones included, are left untouched for the caller to write with current() and put().
   * The versions' type/id pairs must be distinct.
   */
  insertNew(versions: VersionToWrite[]): Promise<boolean[]>;
  /**
   * Replaces the index and compartment rows of current, live resources (reindexing), leaving their
   * versions alone; resources that no longer exist or are deleted are skipped, and so is one whose
   * current version is not the item's `versionId` when given (it changed after the reindexer read it,
   * and its own write indexed it). With `tables`, only the rows of those tables are replaced (the
   * items' other rows are ignored): the words only with `search_text`, and the compartments never.
   */
  replaceIndex(items: { type: string; id: string; versionId?: number; index: IndexRows; compartments: string[] }[], tables?: readonly ReindexTable[]): Promise<void>;
  /**
   * Moves each condition's claim on from `seen` (stamped `now`), in key order, and tells whether every
   * one was still at `seen`: false when another transaction has settled one of them since it was read
   * (committed, or commits first on PostgreSQL, where this waits for it). The caller then rolls back and
   * searches again. Claims not moved for an hour are purged here, a few per new claim.
   */
  claim(claims: ConditionClaim[], now: number): Promise<boolean>;
  /**
   * Records notifications in the subscriptions' outbox (stamped `now`), committed or rolled back with the
   * rest of the transaction: a write that is rolled back notifies nothing, one that commits loses none. A
   * topic event is stamped the later of `now` and its subscription's previous event's time, so that event
   * times never go back as numbers go up (a write that took `now` earlier may number its event later). One
   * matched for another owner than the one stored as it is recorded (`matchedFor`) is recorded as `unsent`.
   */
  notify(notifications: NotificationToWrite[], now: number): Promise<void>;
  /**
   * Records who activated subscription `id` (`owner`: their access as JSON) and its channel type
   * (`rest-hook`, `websocket`), replacing an earlier owner and clearing its delivery failures; with `heartbeat`,
   * its heartbeat period, counted from `now` (without: none). With `restart` (it was not active: an activation
   * anew), or when `owner` is not the owner stored (compared in the transaction, as the state row is written), the
   * notifications still waiting from the earlier activation are deleted: they were matched with what that owner
   * could read, and would be delivered to the endpoint the new owner set (the delivery loop drops them only once it
   * sees the subscription not active). The event count goes on: $events holds the events to each caller's reach.
   */
  ownSubscription(id: string, owner: string, channel: string, heartbeat?: { periodMs: number; now: number }, restart?: boolean): Promise<void>;
  /**
   * Whether subscription `id` has an owner recorded (it was activated through the API; one `cinder import` stored
   * has none), read in this transaction without a lock: a write's activation asks it while it holds a connection.
   */
  subscriptionOwned(id: string): Promise<boolean>;
  /**
   * Holds, until the transaction ends, the tenant's lock on Subscription activations, before the activated ones are
   * counted (subscriptions/activation.ts activatedIn): two transactions activating at once then count one after the
   * other, each seeing what the other committed, so the tenant's bound is never passed. PostgreSQL: a transaction-level
   * advisory lock per tenant (READ COMMITTED lets two counts run side by side otherwise). SQLite: nothing to take, as
   * a write already holds the database's one write lock (`BEGIN IMMEDIATE`).
   */
  lockActivations(): Promise<void>;
  /**
   * Whether a handshake waits unsent in subscription `id`'s outbox, read in this transaction without a lock: a
   * Subscription stored `active` with one waiting (by a release that activated a topic rest-hook one at once) never
   * had its endpoint verified, so a write of it `active` is an activation asking for a handshake (activation.ts).
   */
  handshakeWaiting(id: string): Promise<boolean>;
  /**
   * Ends subscription `id`'s delivery state as it is deleted (not expunged): its owner, event count, delivery
   * failures, waiting notifications and kept events are deleted, so that one created again with its id is a new
   * Subscription (its events numbered from 1, none of the deleted one's in $events). Its versions stay.
   */
  endSubscription(id: string): Promise<void>;
  /**
   * The lease fence of an `$import` batch (src/import/run-job.ts): renews import job `job`'s lease to `leaseMs` from the database's now
   * in this transaction when it is still in progress under `owner` (the claim's token, ImportJobRepo.claim), and
   * tells whether it was. False when another runner claimed the job after the lease ran out, or it was cancelled:
   * the caller then rolls back, so that a runner that lost its job commits nothing more of it. On PostgreSQL the
   * job's row stays locked until the commit (a claim skips it meanwhile, and sees the renewed lease after it): called
   * last in the transaction, it holds the lock no longer than the commit.
   */
  holdImportLease(job: string, owner: string, now: number, leaseMs: number): Promise<boolean>;
}

/** A current row as the reindexer reads it. */
export interface IndexedRow {
  pk: number;
  tenant: string;
  type: string;
  id: string;
  versionId: number;
  content: string;
}

/** Search index maintenance: which index model the stored rows follow and how far a rebuild got. */
export interface IndexMaintenance {
  state(): Promise<{ model: number; after: number }>;
  setState(state: { model: number; after: number }): Promise<void>;
  /** Current, live resources of every tenant with pk > `after`, in pk order, at most `limit`. */
  page(after: number, limit: number): Promise<IndexedRow[]>;
  /**
   * Brings the database's planner statistics of the resource, index and compartment tables up to date
   * after a bulk change (an import, a reindex), or with `onlyStale` only those of tables whose statistics
   * are missing or outgrown: tables that hold rows and have none (a database that never ran ANALYZE, such
   * as one loaded with autovacuum off or filled by writes since), and tables changed since their last
   * ANALYZE by more rows than they then held, and 50 more (autovacuum's 10% may never come). Returns
   * the tables analysed. PostgreSQL plans the searches' subqueries from these statistics (without them a
   * chained search took 33 s instead of 77 ms on a million resources); SQLite's searches are planned by
   * Cinder (SearchPlan), so it has nothing to refresh and returns [], but merges its full-text index
   * after a reindex (sqlite/text.ts mergeText). After a bulk change PostgreSQL
   * also vacuums the tables: a bulk load leaves their visibility map empty until autovacuum comes by
   * (never, where it is off), and until then every index-only scan reads the table's rows as well.
   * With `wrote`, the count of resources a bulk writer (an `$import` job) wrote: refreshed as after a bulk change
   * when they are more than STALE_ROWS and STALE_SHARE of the resources the statistics last counted (PostgreSQL's
   * estimate; on SQLite the largest row key), and nothing otherwise (returns []), so that a small import pays
   * nothing and a large one is planned by statistics that know it at once, not once the statistics watch or
   * autovacuum comes by (whose counts of the writes reach PostgreSQL up to seconds after they commit).
   */
  analyze(opts?: { onlyStale?: boolean; wrote?: number }): Promise<string[]>;
}

export interface HistoryQuery {
  type?: string;
  id?: string;
  /** Only versions updated at or after this time. */
  since?: number;
  /** Only versions updated at or before this time. */
  at?: number;
  count: number;
  /** Keyset position: versions strictly older than this (lastUpdated, then type/id/version). */
  before?: { lastUpdated: number; type: string; id: string; versionId: number };
}

/** A value of `_tag`, `_security` or `_profile` in use (ResourceRepo.metaInUse). */
export interface MetaValue {
  param: string;
  system: string;
  value: string;
}

/** What ResourceRepo.codingPairs reads. */
export interface CodingPairsQuery {
  type: string;
  param: string;
  via: { param: string; target: string; id: string };
  /**
   * Only resources that also hold a value of this token parameter among `values`, compared in lower
   * case whatever the system (a superset of what a search of those values matches, never less).
   */
  also?: { param: string; values: string[] };
  /**
   * Only resources that a search of `type` with these conditions (and, with `compartment`, in that
   * patient's compartment) selects, each tested by index probes on its own rows (SearchQuery's
   * `where` and `compartment`, the access conditions included): the codings of a search's matches.
   */
  matching?: { where: Condition[]; compartment?: string };
}

/** Two codings one resource holds together (ResourceRepo.codingPairs): system and code each. */
export interface CodingPair {
  system1: string;
  value1: string;
  system2: string;
  value2: string;
}

/** The parameters whose values ResourceRepo.metaInUse lists. */
/** The most versions a caller asks of ResourceRepo.vreadMany at once (one statement's parameters, bounded). */
export const VREAD_MANY_MAX = 500;

/**
 * Whether a version asked of ResourceRepo.vreadMany could be stored: an id of FHIR's id type and a version a store numbers
 * (1 to 2^31 - 1). Any other is held by no store and left out before the statement: an audited batch's `$convert` entry
 * echoes a resource whose meta.versionId may be any id (99999999999 failed PostgreSQL's int cast, and its event was lost).
 */
export function storableVersion(v: { id: string; versionId: number }): boolean {
  return Number.isInteger(v.versionId) && v.versionId >= 1 && v.versionId <= 0x7fffffff && typeof v.id === 'string' && /^[A-Za-z0-9\-.]{1,64}$/.test(v.id);
}

export const META_PARAMS: readonly string[] = ['_tag', '_security', '_profile'];

export interface ResourceRepo extends CompartmentReads {
  /** Current version (possibly a deletion), or null if the resource never existed. */
  read(tenant: string, type: string, id: string): Promise<ResourceVersion | null>;
  /**
   * read() as ResourceWriter.measured() reads, outside a transaction and locking nothing: the current version with its
   * text when that is under MEASURED_TEXT_BYTES in UTF-8 (or its length cannot be told without reading it), otherwise that
   * length alone. An import tells a line validation refused that changes a large stored resource by the length (a line
   * equal to it would store the same text: fhir/prepared.ts storesSameMeasured), and reads the text only when it agrees.
   */
  measured(tenant: string, type: string, id: string): Promise<MeasuredVersion | null>;
  vread(tenant: string, type: string, id: string, versionId: number): Promise<ResourceVersion | null>;
  /**
   * The current version (or, given `versionId`, that version, as `vread` reads it) with its content's top-level `data`
   * element left out by the database where it can (SQLite always; PostgreSQL where `data` is the last element, a string
   * needing no escapes, as in every Binary written from native content): a Binary's elements as judging its reach needs
   * them (its `securityContext`, meta), without its data crossing into this process (a 50 MiB Binary is 67 Mi characters).
   * splitStoredBinary reads from the content the resource it reads from the stored text; elements may come in any order.
   */
  readWithoutData(tenant: string, type: string, id: string, versionId?: number): Promise<ResourceVersion | null>;
  /**
   * The current version (or, given `versionId`, that version, as `vread` reads it) with its content cut by the database
   * to its first `chars` characters (the whole content when not longer): what the start of a stored text holds
   * (stampHead: `resourceType`, `id`, then `meta`) read without the rest crossing into this process.
   */
  readHead(tenant: string, type: string, id: string, chars: number, versionId?: number): Promise<ResourceVersion | null>;
  /**
   * The versions of `type` among `versions` (each id's version `versionId`, as `vread` reads it) that exist, in
   * any order, each once: one statement for the lot (the caller bounds how many it asks at once, VREAD_MANY_MAX).
   */
  vreadMany(tenant: string, type: string, versions: { id: string; versionId: number }[]): Promise<ResourceVersion[]>;
  /**
   * The ids among `ids` that have a current row of `type` in the tenant, live or a deletion (the
   * tenant's own resource, even deleted, shadows a core CodeSystem or ValueSet of that id), in any order.
   */
  present(tenant: string, type: string, ids: string[]): Promise<string[]>;
  /**
   * The types of which the tenant holds a current row (live or a deletion), in any order: read by
   * skipping through the (tenant, type, id) index, one probe per type present, never a scan.
   */
  types(tenant: string): Promise<string[]>;
  /**
   * Each (type, reference parameter, target) of the tenant whose index holds references to one of
   * `targets` (resource types), in any order: its search key exists. A key is created with its first
   * row and never removed, so the list may name a parameter whose rows are gone, never omit one that
   * has rows (`_revinclude=*` searches only these).
   */
  referrers(tenant: string, targets: string[]): Promise<{ type: string; param: string; target: string }[]>;
  /**
   * Each (type, parameter) of the tenant under which resources of `type` that other resources contain
   * are indexed (`_contained`): the keys of their id rows (`subject:Patient._id`, src/fhir/indexer.ts
   * containedRows), as `referrers` lists reference keys (one may name a parameter whose rows are gone).
   */
  containedKeys(tenant: string, type: string): Promise<{ type: string; param: string }[]>;
  /**
   * The distinct values (a token's system and code, a uri's value) the index holds for `_tag`, `_security`
   * and `_profile` on current resources of `types`, at most `cap` per parameter and type, in any order:
   * read by skipping through the (key, value) index, one probe per value, never a scan of the rows
   * (`$meta` at the type and system levels).
   */
  metaInUse(tenant: string, types: string[], cap: number): Promise<MetaValue[]>;
  /**
   * The codings that the token parameter `param` of `type` holds on the current resources of `type`
   * whose reference parameter `via.param` names `via.target`/`via.id` (a patient's Observations'
   * `code`s), as the distinct pairs of codings one resource holds together (a coding alone paired with
   * itself), at most `cap`, in any order: read from the index alone (the reference's rows, then each
   * resource's rows of `param` by its key; with `matching`, each resource row's key and the conditions'
   * probes), never the resources' content (`Observation/$lastn`'s groups).
   */
  codingPairs(tenant: string, q: CodingPairsQuery, cap: number): Promise<CodingPair[]>;
  /**
   * The texts, as written, of the values of `param` that hold no coding with a code (a CodeableConcept
   * of text alone: its `{param}:text` string rows) on the same resources as codingPairs reads, distinct,
   * at most `cap`, in any order; from the index alone.
   */
  codeTexts(tenant: string, q: CodingPairsQuery, cap: number): Promise<string[]>;
  /** Non-deleted current versions matching the query, in `sort` order, at most `count`. */
  search(tenant: string, query: SearchQuery): Promise<ResourceVersion[]>;
  /** Number of non-deleted current versions matching the query (ignores count/after). */
  count(tenant: string, query: SearchQuery): Promise<number>;
  /** Versions newest first, each with the `method` that wrote it where it was recorded. */
  history(tenant: string, query: HistoryQuery): Promise<ResourceVersion[]>;
  /**
   * The versions of `type` (current or past) stamped at or after `since`, as their ids and version numbers only,
   * never their texts, at most `count`, in any order: which resources changed since a time (a pinned page,
   * src/fhir/search-pin.ts). One statement, by the tables' `last_updated` indexes.
   */
  versionsSince(tenant: string, type: string, since: number, count: number): Promise<{ id: string; versionId: number }[]>;
  /** The claim count of each condition key (ResourceWriter.claim), in order; 0 for one never claimed (or purged). */
  claims(tenant: string, keys: string[]): Promise<number[]>;
  /** Runs `fn` in one transaction. Throws what `fn` throws, after rolling back. */
  write<T>(tenant: string, fn: (w: ResourceWriter) => Promise<T>): Promise<T>;
  /**
   * The tenant's write mark: a value that moves with every committed transaction changing the tenant's resources
   * or their index rows (a write, an import, a reindex, an expunge of current rows), by any process. Read before a
   * statement, an equal mark read later proves that statement's answer still holds (a `_total` carried across a
   * search's pages, src/fhir/search-total.ts).
   */
  writeMark(tenant: string): Promise<string>;
  /** A value that changes whenever any resource of these types changes in this tenant (any process). */
  changeToken(tenant: string, types: string[]): Promise<string>;
  /** changeToken of each of `tenants` (at most 1,000), read together in one statement. */
  changeTokens(tenants: readonly string[], types: string[]): Promise<Map<string, string>>;
  /** One keyset page of resources of one type as they were at `query.at` (bulk export). */
  snapshot(tenant: string, query: SnapshotQuery): Promise<SnapshotPage>;
  readonly indexing: IndexMaintenance;
}
