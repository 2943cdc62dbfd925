/**
 * The storage interface the rest of Cinder uses. SQL lives only in the adapters (sqlite/, postgres/);
 * one contract suite (test/store/) runs against both. Times are epoch milliseconds.
 */
import type { JWK } from 'jose';

export interface Tenant {
  id: string;
  createdAt: number;
}

export interface Client {
  tenant: string;
  clientId: string;
  name: string;
  /** Hex SHA-256 digest of the client secret; null for public and key-authenticated clients. */
  secretHash: string | null;
  grants: string[];
  scopes: string[];
  redirectUris: string[];
  /** Inline JWK Set for private_key_jwt. */
  jwks: { keys: JWK[] } | null;
  jwksUrl: string | null;
  /** User attributes the client may read (OpenID claims); null means all. */
  readAttributes: string[] | null;
  /** Access token lifetime override in seconds. */
  accessTokenTtl: number | null;
  createdAt: number;
  disabled: boolean;
}

export interface SigningKey {
  kid: string;
  alg: string;
  privateJwk: JWK;
  publicJwk: JWK;
  createdAt: number;
  /** When the key stopped signing; it stays published until tokens signed with it expire. */
  retiredAt: number | null;
}

/** One stored version of a resource. `content` is the resource JSON text exactly as served. */
export interface ResourceVersion {
  type: string;
  id: string;
  versionId: number;
  lastUpdated: number;
  deleted: boolean;
  /** JSON text, including `meta.versionId`/`meta.lastUpdated`; empty for a deletion. */
  content: string;
}

/**
 * A token, reference or uri value (`search_index`). Tokens: system + code; references: system = target
 * type, value = id; uris: system ''. `display`: a coded value's text (its CodeableConcept's text and its
 * display, normalised), which `:text` searches.
 */
export interface IndexEntry {
  param: string;
  system: string;
  value: string;
  display?: string;
}

/** A string value (`search_string`): `value` normalised for matching (lower case, accents removed), `exact` as written. */
export interface StringEntry {
  param: string;
  value: string;
  exact: string;
}

/**
 * A date, number or quantity value (`search_range`): dates as [low, high) in epoch ms at their precision
 * (open ends infinite); numbers and quantities as low = high = the value (a Range: its bounds);
 * quantities with their unit's system and code.
 */
export interface RangeEntry {
  param: string;
  system: string;
  code: string;
  low: number;
  high: number;
}

/**
 * A composite value (`search_composite`): the first component a token (system1|value1); the second as
 * a token or reference (system2|value2), a string (value2 normalised), a quantity (low/high with the
 * unit in system2|value2), a date or a number (low/high). Three-component composites (MolecularSequence
 * coordinates) keep their number components in low and high.
 */
export interface CompositeEntry {
  param: string;
  system1: string;
  value1: string;
  system2: string;
  value2: string;
  low: number;
  high: number;
}

/** A version's search index rows, by table. */
export interface IndexRows {
  tokens: IndexEntry[];
  strings: StringEntry[];
  ranges: RangeEntry[];
  composites: CompositeEntry[];
}

export const NO_INDEX_ROWS: IndexRows = Object.freeze({ tokens: [], strings: [], ranges: [], composites: [] }) as IndexRows;

export interface VersionToWrite extends ResourceVersion {
  index: IndexRows;
  /** Ids of the patients whose compartment holds this version. */
  compartments: string[];
}

export interface CurrentVersion {
  versionId: number;
  lastUpdated: number;
  deleted: boolean;
}

/** Writes inside one database transaction; everything is committed or nothing is. */
export interface ResourceWriter {
  /** The current version of a resource (locked for the rest of the transaction where the database can). */
  current(type: string, id: string): Promise<CurrentVersion | null>;
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
   * Bulk creation: stores each version whose resource has no row yet (never written in this tenant),
   * with its index and compartment rows, and tells per version whether it did. Resources that exist,
   * deleted ones included, are left untouched for the caller to write with current() and put().
   * The versions' type/id pairs must be distinct.
   */
  insertNew(versions: VersionToWrite[]): Promise<boolean[]>;
  /**
   * Replaces the index and compartment rows of current, live resources (reindexing), leaving their
   * versions alone; resources that no longer exist or are deleted are skipped.
   */
  replaceIndex(items: { type: string; id: string; index: IndexRows; compartments: string[] }[]): Promise<void>;
}

/** A current row as the reindexer reads it. */
export interface IndexedRow {
  pk: number;
  tenant: string;
  type: string;
  id: string;
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
   * after a bulk change (an import, a reindex), or with `onlyMissing` only those of tables that hold rows
   * and have none (a database that never ran ANALYZE, such as one loaded with autovacuum off). Returns
   * the tables analysed. PostgreSQL plans the searches' subqueries from these statistics (without them a
   * chained search took 33 s instead of 77 ms on a million resources); SQLite's searches are planned by
   * Cinder (SearchPlan), so it has nothing to refresh and returns [].
   */
  analyze(opts?: { onlyMissing?: boolean }): Promise<string[]>;
}

/** FHIR R4 search prefixes (search.html, 3.1.1.4.1). */
export type Comparator = 'eq' | 'ne' | 'gt' | 'ge' | 'lt' | 'le' | 'sa' | 'eb' | 'ap';

/** A date test: the search value's [low, high) in epoch ms (from its precision) against stored [low, high). */
export interface DateTest {
  op: Comparator;
  low: number;
  high: number;
}

/**
 * A number or quantity test: `value` as given, [low, high) the range its precision implies (`eq`,
 * `ne`; `ap` widens it by 10%). A quantity test may name the unit: `system` and/or `code` (`value||unit`:
 * code only, which matches the unit's code).
 */
export interface NumberTest {
  op: Comparator;
  value: number;
  low: number;
  high: number;
  system?: string;
  code?: string;
}

/** The second (and third) components of a composite test. */
export type CompositePart =
  | { kind: 'token'; system?: string; value?: string }
  | { kind: 'string'; value: string }
  | { kind: 'date'; test: DateTest }
  /** `column`: which stored number the test reads (three-component composites keep two). */
  | { kind: 'number'; test: NumberTest; column: 'low' | 'high' | 'both' };

export interface CompositeTest {
  system1?: string;
  value1?: string;
  parts: CompositePart[];
}

/** The index tables a `missing` condition can look in. */
export type IndexTable = 'search_index' | 'search_string' | 'search_range' | 'search_composite';

/** A token or reference value: `system` undefined matches any system, `value` undefined any value (`system|`). */
export interface TokenValue {
  system?: string;
  value?: string;
}

/**
 * One condition of a compiled search; a query's conditions are ANDed, the values inside one condition
 * ORed (FHIR's `,`). Every adapter renders these to SQL and `matchConditions` (src/fhir/search/match.ts)
 * evaluates them in memory, with the same meaning.
 */
export type Condition =
  | { kind: 'id'; ids: string[]; not?: boolean }
  | { kind: 'lastUpdated'; tests: DateTest[] }
  /** Tokens, references and uris (`search_index`); `not`: no value of the parameter matches (`:not`). */
  | { kind: 'token'; param: string; values: TokenValue[]; not?: boolean }
  /** `match`: starts-with on the normalised value, `exact` on the value as written, `contains` anywhere in the normalised value. */
  | { kind: 'string'; param: string; values: { value: string; match: 'prefix' | 'exact' | 'contains' }[] }
  | { kind: 'uri-prefix'; param: string; values: string[] }
  /** `:text` on tokens: the normalised text of a coded value contains one of the values. */
  | { kind: 'token-text'; param: string; values: string[] }
  | { kind: 'date'; param: string; tests: DateTest[] }
  | { kind: 'number'; param: string; tests: NumberTest[] }
  | { kind: 'composite'; param: string; tests: CompositeTest[] }
  | { kind: 'missing'; table: IndexTable; params: string[]; missing: boolean }
  /** A reference parameter whose target (of `targetType`) meets `where` (chaining). */
  | { kind: 'chain'; param: string; targetType: string; where: Condition[] }
  /** Resources of `type` meeting `where` refer to this one through `param` (`_has`). */
  | { kind: 'has'; type: string; param: string; where: Condition[] }
  /** Any of the alternatives holds (a parameter folded from several, such as `combo-code`). */
  | { kind: 'or'; any: Condition[] }
  /** The condition does not hold (`:not` on a folded parameter). */
  | { kind: 'not'; condition: Condition }
  /** Every condition holds (one alternative of SMART scope filters). */
  | { kind: 'and'; all: Condition[] };

/** A sort key: `_id`, `_lastUpdated`, or a parameter's values in one index table (lowest first, highest for descending). */
export type SortKey =
  | { by: 'id'; descending: boolean }
  | { by: 'lastUpdated'; descending: boolean }
  | { by: 'param'; table: IndexTable; param: string; descending: boolean };

export interface SearchCursor {
  lastUpdated: number;
  id: string;
}

export interface SearchQuery {
  type: string;
  /** ANDed (none: every resource of the type). */
  where?: Condition[];
  /** Restrict to one patient's compartment. */
  compartment?: string;
  /** Empty: by id. Ties are broken by id. */
  sort: SortKey[];
  count: number;
  /** Keyset position for a sort on `_id` or `_lastUpdated` alone: rows strictly after this one. */
  after?: SearchCursor;
  /** Rows to skip, for other sorts. */
  offset?: number;
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

export interface ResourceRepo {
  /** Current version (possibly a deletion), or null if the resource never existed. */
  read(tenant: string, type: string, id: string): Promise<ResourceVersion | null>;
  vread(tenant: string, type: string, id: string, versionId: number): Promise<ResourceVersion | null>;
  /**
   * The ids among `ids` that have a current row of `type` in the tenant, live or a deletion (the
   * tenant's own resource, even deleted, shadows a core CodeSystem or ValueSet of that id), in any order.
   */
  present(tenant: string, type: string, ids: string[]): Promise<string[]>;
  /** Non-deleted current versions matching the query, in `sort` order, at most `count`. */
  search(tenant: string, query: SearchQuery): Promise<ResourceVersion[]>;
  /** Number of non-deleted current versions matching the query (ignores count/after). */
  count(tenant: string, query: SearchQuery): Promise<number>;
  /** Versions newest first. */
  history(tenant: string, query: HistoryQuery): Promise<ResourceVersion[]>;
  /** Runs `fn` in one transaction. Throws what `fn` throws, after rolling back. */
  write<T>(tenant: string, fn: (w: ResourceWriter) => Promise<T>): Promise<T>;
  /** A value that changes whenever any resource of these types changes in this tenant (any process). */
  changeToken(tenant: string, types: string[]): Promise<string>;
  /** One keyset page of resources of one type as they were at `query.at` (bulk export). */
  snapshot(tenant: string, query: SnapshotQuery): Promise<SnapshotPage>;
  readonly indexing: IndexMaintenance;
}

/** Which patient compartments a snapshot is limited to. */
export type SnapshotCompartment =
  /** In the compartment of any patient. */
  | { kind: 'any' }
  /** In the compartment of one of the patients stored for this export job (ExportJobRepo). */
  | { kind: 'job'; jobId: string };

/**
 * Resources of `type` in their version as of `at` (a bulk export's transactionTime): current rows last
 * updated at or before `at`, and for rows updated later their version as of `at` from the history.
 */
export interface SnapshotQuery {
  type: string;
  at: number;
  /** Only versions updated after this time; deletions after it are returned too (`deleted: true`). */
  since?: number;
  compartment?: SnapshotCompartment;
  /** With `since` and a job compartment: patients stored as `joined` match whatever their resources' time. */
  joinedSince?: boolean;
  /** ORed `_typeFilter` queries, each its ANDed conditions. */
  filters?: Condition[][];
  ids?: string[];
  /** Keyset position (`next` of the previous page). */
  after?: number;
  limit: number;
}

/** A version of a snapshot page that the database could not judge (see SnapshotPage.recheck). */
export interface SnapshotRow {
  id: string;
  versionId: number;
  lastUpdated: number;
  /** The resource was deleted as of `at` (only with `since`); `content` is its last version before. */
  deleted: boolean;
  content: string;
}

export interface SnapshotPage {
  /**
   * The versions the database judged against every condition (compartment, filters, since): their
   * stored JSON text, each followed by a newline, as UTF-8 bytes (NDJSON, never re-serialised).
   */
  lines: Uint8Array;
  /** How many lines `lines` holds. */
  count: number;
  /**
   * Versions the database could not judge (changed after `at`, or deletions), as they were at `at`:
   * the caller checks them against the conditions on their content.
   */
  recheck: SnapshotRow[];
  /** Keyset position for the next page; null when the scan is complete. */
  next: number | null;
}

export interface TenantRepo {
  create(id: string, now: number): Promise<Tenant>;
  get(id: string): Promise<Tenant | null>;
  list(): Promise<Tenant[]>;
  /**
   * Whether the tenant may hold resources that were not validated strictly (stored before validation
   * existed, or with CINDER_VALIDATION at structural or off): the generation of that mark, or null.
   */
  validationDebt(id: string): Promise<number | null>;
  /** Marks the tenant as maybe holding such resources (a new generation). */
  markUnvalidated(id: string): Promise<void>;
  /** Clears the mark if it is still at `generation` (nothing was written unvalidated since it was read); returns whether it did. */
  clearValidationDebt(id: string, generation: number): Promise<boolean>;
}

export interface ClientRepo {
  create(client: Client): Promise<void>;
  get(clientId: string): Promise<Client | null>;
  list(tenant: string): Promise<Client[]>;
}

export interface KeyRepo {
  /** Keys not retired, or retired after `publishedSince`, newest first. */
  list(publishedSince: number): Promise<SigningKey[]>;
  add(key: SigningKey): Promise<void>;
  /** Marks these keys retired at `at` (they stop signing; they stay published for a while). */
  retire(kids: string[], at: number): Promise<void>;
}

/** A person who signs in at `/oauth2/authorize`; belongs to one tenant. */
export interface User {
  id: string;
  tenant: string;
  username: string;
  /** `Bun.password` (argon2id) hash. */
  passwordHash: string;
  name: string | null;
  email: string | null;
  emailVerified: boolean;
  phone: string | null;
  phoneVerified: boolean;
  /** Formatted postal address (OpenID `address.formatted`). */
  address: string | null;
  /** FHIR reference to the user's resource, e.g. `Patient/123` or `Practitioner/7`. */
  fhirUser: string | null;
  createdAt: number;
  disabled: boolean;
}

export interface UserRepo {
  /** Throws StoreConflictError when the username is taken in the tenant. */
  create(user: User): Promise<void>;
  get(tenant: string, id: string): Promise<User | null>;
  byUsername(tenant: string, username: string): Promise<User | null>;
}

/** An authorization code, stored by the SHA-256 digest of its value. */
export interface AuthCode {
  codeHash: string;
  /** The authorization (login) the code starts; tokens issued from it carry this id. */
  grantId: string;
  clientId: string;
  tenant: string;
  userId: string;
  redirectUri: string;
  scope: string;
  nonce: string | null;
  /** PKCE S256 challenge, or null when the request had none. */
  codeChallenge: string | null;
  authTime: number;
  expiresAt: number;
  consumedAt: number | null;
}

/** A refresh token, stored by the SHA-256 digest of its value. */
export interface RefreshToken {
  tokenHash: string;
  grantId: string;
  clientId: string;
  tenant: string;
  userId: string;
  scope: string;
  authTime: number;
  createdAt: number;
  expiresAt: number;
  revokedAt: number | null;
}

/** A revoked access token (`jti`) or a whole revoked grant (`grant`, every token issued from one login). */
export interface Revocation {
  kind: 'jti' | 'grant';
  value: string;
  revokedAt: number;
  /** When the revoked tokens would have expired anyway; the row may go after that. */
  expiresAt: number;
}

/** Result of redeeming a code: redeemed now, already redeemed (a replay), or unusable. */
export type CodeRedemption =
  | { status: 'redeemed'; code: AuthCode }
  | { status: 'replayed'; code: AuthCode }
  | { status: 'invalid' };

export interface OAuthRepo {
  createCode(code: AuthCode): Promise<void>;
  /**
   * Consumes the code with one conditional UPDATE (unconsumed, unexpired, issued to `clientId`), so of
   * N concurrent redemptions exactly one succeeds. Reports a replay when the code was already consumed.
   */
  redeemCode(codeHash: string, clientId: string, now: number): Promise<CodeRedemption>;
  createRefreshToken(token: RefreshToken): Promise<void>;
  getRefreshToken(tokenHash: string): Promise<RefreshToken | null>;
  /** Records a revocation; for a grant also marks its refresh tokens revoked. Idempotent. */
  revoke(revocation: Revocation): Promise<void>;
  /** Whether the access token `jti` or the grant `grantId` is revoked (null: not asked). */
  isRevoked(jti: string | null, grantId: string | null): Promise<boolean>;
  /** Revocations recorded at or after `since` that have not expired at `now`. */
  revokedSince(since: number, now: number): Promise<Revocation[]>;
  /**
   * Records a client assertion's `jti` until `expiresAt`; false when the same client already used it
   * and it has not expired (RFC 7523 3, SMART Backend Services replay protection).
   */
  useJti(clientId: string, jti: string, expiresAt: number, now: number): Promise<boolean>;
  /** Deletes expired codes, refresh tokens, jtis, revocations and counters. */
  purgeExpired(now: number): Promise<number>;
}

/** A fixed-window counter (login throttling), shared by every process on the database. */
export interface CounterState {
  count: number;
  /** When the current window ends. */
  resetAt: number;
}

export interface CounterRepo {
  /** Adds one in the window of `windowMs` that contains `now` (a new window starts when the last ended). */
  increment(key: string, windowMs: number, now: number): Promise<CounterState>;
  /** The current window's count (0 when none is running). */
  peek(key: string, now: number): Promise<CounterState>;
  clear(key: string): Promise<void>;
}

// --- Bulk data export jobs (migration 3) ---

export type ExportJobState = 'accepted' | 'in-progress' | 'completed' | 'failed' | 'cancelled';

export interface ExportJob {
  id: string;
  tenant: string;
  /** Client that started the export; only it may poll, cancel and download. */
  clientId: string;
  state: ExportJobState;
  /** The kick-off request URL (the manifest's `request`). */
  request: string;
  /** Validated kick-off parameters as JSON text (owned by src/export). */
  spec: string;
  transactionTime: number;
  createdAt: number;
  updatedAt: number;
  /** Worker holding an in-progress job, and until when its lease runs. */
  leaseOwner: string | null;
  leaseUntil: number | null;
  /** How many times the job was claimed. */
  attempts: number;
  /** Checkpoint as JSON text (owned by src/export). */
  progress: string;
  /** Why a failed job failed. */
  error: string | null;
  completedAt: number | null;
  /** When the files of a completed or failed job expire. */
  expiresAt: number | null;
  /** The files were removed (expired or cancelled). */
  purged: boolean;
}

export type NewExportJob = Pick<ExportJob, 'id' | 'tenant' | 'clientId' | 'request' | 'spec' | 'transactionTime' | 'progress'> & {
  createdAt: number;
  /** Creates the job already claimed (in-progress, first attempt) by this owner until `leaseUntil`. */
  claim?: { owner: string; leaseUntil: number };
};

export interface ExportPatient {
  id: string;
  /** Joined the group after the export's `_since` (its resources match whatever their time). */
  joined: boolean;
}

export interface ExportJobRepo {
  /**
   * Persists an accepted job and its patients, unless the client already has `maxActive` accepted or
   * in-progress jobs (checked and inserted atomically); returns false then.
   */
  create(job: NewExportJob, patients: ExportPatient[], maxActive: number): Promise<boolean>;
  get(tenant: string, id: string): Promise<ExportJob | null>;
  /**
   * Claims one job (the oldest accepted one, or an in-progress one whose lease ran out; only `id` when
   * given): in-progress, leased to `owner` until `now + leaseMs`, attempts + 1.
   */
  claim(owner: string, now: number, leaseMs: number, id?: string): Promise<ExportJob | null>;
  /** Renews the lease and stores `progress` when given; false when the job is no longer in progress under `owner`. */
  checkpoint(id: string, owner: string, now: number, leaseMs: number, progress?: string): Promise<boolean>;
  /** in-progress -> completed (under `owner`); false when the lease was lost or the job cancelled. */
  complete(id: string, owner: string, now: number, progress: string, expiresAt: number): Promise<boolean>;
  /** in-progress -> failed (under `owner`). */
  fail(id: string, owner: string, now: number, error: string, expiresAt: number): Promise<boolean>;
  /** Gives an in-progress job back (accepted, no lease) so that any process resumes it at once. */
  release(id: string, owner: string, now: number, options?: ReleaseOptions): Promise<void>;
  /** Cancels a job that is not cancelled yet; returns its previous state, or null when unknown or already cancelled. */
  cancel(tenant: string, id: string, now: number): Promise<ExportJobState | null>;
  /**
   * Keeps the files of a completed job from removal until `until` while download `download` streams.
   * A download `starting` needs unexpired files; one under way only needs them not removed. False otherwise.
   */
  holdFiles(tenant: string, id: string, download: string, now: number, until: number, starting: boolean): Promise<boolean>;
  /** Ends a download's hold on the files. */
  releaseFiles(id: string, download: string): Promise<void>;
  /**
   * Jobs whose files may be removed at `now`: completed or failed and expired, or cancelled; never
   * while a worker lease or a download runs.
   */
  purgeable(now: number, limit: number): Promise<ExportJob[]>;
  /** Marks the files removed unless a download or worker lease started meanwhile; false then. */
  markPurged(id: string, now: number): Promise<boolean>;
  /** Deletes a job with its patients and bookkeeping. */
  remove(id: string): Promise<void>;
  /** Ids of removed jobs last updated before `before` (for deletion). */
  purgedBefore(before: number, limit: number): Promise<string[]>;
  /** The job's patients among `candidates`. */
  patientsIn(jobId: string, candidates: string[]): Promise<ExportPatient[]>;
  /** Notes Provenance `provenance` (ranked by `rank`) as a candidate latest Provenance of `target`; keeps the highest rank per target. */
  noteProvenance(jobId: string, rows: { target: string; provenance: string; rank: string }[]): Promise<void>;
  /** Distinct winning Provenance ids of the job, in id order after `after`. */
  latestProvenance(jobId: string, after: string, limit: number): Promise<string[]>;
  /** Counts by state (for metrics). */
  countByState(): Promise<Record<string, number>>;
}

/** A file being written into the database's export file storage; readable once closed. */
export interface ExportFileWriter {
  write(bytes: Uint8Array): Promise<void>;
  close(): Promise<void>;
  abort(): Promise<void>;
}

/** Export files kept in the database (PostgreSQL only), so that every process sharing it serves every file. */
export interface ExportFileRepo {
  create(key: string): ExportFileWriter;
  /** Size of a complete file, or null when there is none under `key`. */
  size(key: string): Promise<number | null>;
  /** The bytes of a complete file, or of the inclusive range `start`..`end`; streamed a chunk at a time. */
  read(key: string, range?: { start: number; end: number }): ReadableStream<Uint8Array>;
  /** Removes every file whose key starts with `prefix/`. */
  removePrefix(prefix: string): Promise<void>;
}

export interface Store {
  readonly kind: 'sqlite' | 'postgres';
  /** Applies pending migrations (idempotent; safe when several processes start together). */
  migrate(): Promise<{ applied: string[] }>;
  /** Throws when the database cannot be reached. */
  ping(): Promise<void>;
  /** Connection figures for /metrics (`cinder_db_pool{stat=...}`): pool size, queued writes... */
  stats(): Record<string, number>;
  close(): Promise<void>;
  readonly tenants: TenantRepo;
  readonly clients: ClientRepo;
  readonly keys: KeyRepo;
  readonly users: UserRepo;
  readonly oauth: OAuthRepo;
  readonly counters: CounterRepo;
  readonly resources: ResourceRepo;
  readonly exports: ExportJobRepo;
  /** Export file storage in the database, where the adapter offers it (PostgreSQL). */
  readonly exportFiles?: ExportFileRepo;
}

export interface ReleaseOptions {
  /**
   * Hands back the attempt too (its claim does not count towards the job's attempts): the attempt
   * ended because the database was unavailable, not because of the job.
   */
  refundAttempt?: boolean;
}

/** Thrown by adapters for a unique-key clash that callers may turn into 409 or retry. */
export class StoreConflictError extends Error {
  override name = 'StoreConflictError';
}

/**
 * Thrown by adapters when the database cannot serve the request for now (unreachable, restarting, locked
 * past the busy timeout, disk full, I/O error). Nothing of the failed call was written; the edge answers
 * 503 with `Retry-After`.
 */
export class StoreUnavailableError extends Error {
  override name = 'StoreUnavailableError';
}
