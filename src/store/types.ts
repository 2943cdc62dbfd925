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

/** One search index value. Tokens: system + code; references: system = target type, value = id; uris/strings: system ''. */
export interface IndexEntry {
  param: string;
  system: string;
  value: string;
}

export interface VersionToWrite extends ResourceVersion {
  index: IndexEntry[];
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
}

export type Comparator = 'eq' | 'ne' | 'gt' | 'ge' | 'lt' | 'le';

export interface TimeCriterion {
  /** Inclusive lower / exclusive upper bound in ms, derived from the value's precision. */
  op: Comparator;
  low: number;
  high: number;
}

/** Values are ORed; `system` undefined matches any system, `value` undefined any value (token `system|`). */
export interface ParamCriterion {
  param: string;
  values: { system?: string; value?: string }[];
}

export interface SearchCursor {
  lastUpdated: number;
  id: string;
}

export interface SearchQuery {
  type: string;
  ids?: string[];
  lastUpdated?: TimeCriterion[];
  /** ANDed. */
  params?: ParamCriterion[];
  /** Restrict to one patient's compartment. */
  compartment?: string;
  sort: 'id' | 'lastUpdated' | '-lastUpdated';
  count: number;
  /** Keyset position: rows strictly after this one in `sort` order. */
  after?: SearchCursor;
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
}

export interface TenantRepo {
  create(id: string, now: number): Promise<Tenant>;
  get(id: string): Promise<Tenant | null>;
  list(): Promise<Tenant[]>;
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

export interface Store {
  readonly kind: 'sqlite' | 'postgres';
  /** Applies pending migrations (idempotent; safe when several processes start together). */
  migrate(): Promise<{ applied: string[] }>;
  /** Throws when the database cannot be reached. */
  ping(): Promise<void>;
  close(): Promise<void>;
  readonly tenants: TenantRepo;
  readonly clients: ClientRepo;
  readonly keys: KeyRepo;
  readonly users: UserRepo;
  readonly oauth: OAuthRepo;
  readonly counters: CounterRepo;
  readonly resources: ResourceRepo;
}

/** Thrown by adapters for a unique-key clash that callers may turn into 409 or retry. */
export class StoreConflictError extends Error {
  override name = 'StoreConflictError';
}
