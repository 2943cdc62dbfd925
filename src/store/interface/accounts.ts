/** Tenants, OAuth clients, signing keys and users: the accounts the authorization server keeps. */

/**
 * A JSON Web Key (RFC 7517) as Cinder stores it: a JSON object, kept as written. The store reads none
 * of its members; these are named for readers (jose's own JWK type leaves `kty` optional too).
 */
export interface Jwk {
  kty?: string;
  kid?: string;
  alg?: string;
  use?: string;
  [member: string]: unknown;
}

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
  jwks: { keys: Jwk[] } | null;
  jwksUrl: string | null;
  /** User attributes the client may read (OpenID claims); null means all. */
  readAttributes: string[] | null;
  /** Access token lifetime override in seconds. */
  accessTokenTtl: number | null;
  createdAt: number;
  /** Disabled clients authenticate nowhere; a deleted one is disabled for good. */
  disabled: boolean;
  /**
   * The secret a rotation replaced, still accepted until `previousSecretUntil` (`cinder client rotate-secret
   * --grace`); both null when none is.
   */
  previousSecretHash: string | null;
  previousSecretUntil: number | null;
  /** When the client was deleted (soft: the row stays for the audit trail and its id is never reused); null while it exists. */
  deletedAt: number | null;
  /**
   * When every token of the client, refresh tokens included, was last revoked (disable, delete: the revocation's time
   * as the store recorded it), epoch ms; null if never. The sign-ins with it ended then: a Subscription it activated on
   * one before stays silent (src/fhir/subscriptions/owner.ts).
   */
  tokensRevokedAt: number | null;
  /**
   * That revocation's number (Revocation.seq), kept with it: a Subscription activated on a sign-in with a token that
   * states the client record's number (`crs`) is judged by it, not by the time. Absent where none was kept (never
   * revoked, revoked before it was kept, or by an older release since, which the database clears it for).
   */
  tokensRevokedSeq?: number;
  /**
   * The number (the database's order, Revocation.seq) of the last revocation of the client's tokens (`client`,
   * `client-access`) committed when the record was read, 0 for none; only on a record the store read. A token issued
   * on the record carries it (`crs`), and a revocation numbered above it refuses the token: whether the record was
   * read after the revocation is told by the database's numbering, not by comparing two machines' clocks.
   */
  revocationSeq?: number;
}

export interface SigningKey {
  kid: string;
  alg: string;
  privateJwk: Jwk;
  publicJwk: Jwk;
  createdAt: number;
  /**
   * When the key stops (or stopped) signing: a rotation sets it to when the new keys are to sign, so it may lie ahead.
   * It stays published until tokens signed with it expire.
   */
  retiredAt: number | null;
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
  /** The client, deleted ones included (their `deletedAt` is set). */
  get(clientId: string): Promise<Client | null>;
  /** The clients of `clientIds` found (deleted ones included), in one statement, in no particular order. */
  getMany(clientIds: readonly string[]): Promise<Client[]>;
  /** The tenant's clients, deleted ones included, oldest first. */
  list(tenant: string): Promise<Client[]>;
  /** Writes every field of an existing client but its id, tenant and creation time. */
  update(client: Client): Promise<void>;
}

export interface KeyRepo {
  /** Keys not retired, or retired after `publishedSince`, newest first. */
  list(publishedSince: number): Promise<SigningKey[]>;
  add(key: SigningKey): Promise<void>;
  /**
   * Marks these keys retired at `at` (they stop signing then; they stay published for a while), unless retired (or to be)
   * before it: a key whose retirement is scheduled later is retired at `at` instead.
   */
  retire(kids: string[], at: number): Promise<void>;
  /** Deletes these keys (withdrawn: their private parts may have leaked, so nothing they signed is to be taken). */
  remove(kids: string[]): Promise<void>;
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
  /** A disabled user cannot sign in; a deleted one is disabled for good. */
  disabled: boolean;
  /** When the user was deleted (soft: the row stays for the audit trail; id and username are never reused); null while they exist. */
  deletedAt: number | null;
  /**
   * When every token of the user was last revoked (disable, delete, a new password or fhirUser: the revocation's time
   * as the store recorded it), epoch ms; null if never. It outlives the revocation row: a Subscription activated on
   * the user's authority before it notifies nothing more (src/fhir/subscriptions/owner.ts).
   */
  tokensRevokedAt: number | null;
  /** That revocation's number (Revocation.seq), kept with it, as Client.tokensRevokedSeq: compared with a token's `urs`. */
  tokensRevokedSeq?: number;
  /**
   * The number (the database's order, Revocation.seq) of the last revocation of the user's tokens (`user`) committed
   * when the record was read, 0 for none; only on a record the store read (get, getMany, byUsername). A sign-in on the
   * record and the tokens issued on it carry it, and a user revocation numbered above it refuses them: whether the
   * record was read after the revocation is told by the database's numbering, not by comparing two machines' clocks.
   */
  revocationSeq?: number;
}

export interface UserRepo {
  /** Throws StoreConflictError when the username is taken in the tenant. */
  create(user: User): Promise<void>;
  get(tenant: string, id: string): Promise<User | null>;
  /** The tenant's users of `ids` found, in one statement, in no particular order. */
  getMany(tenant: string, ids: readonly string[]): Promise<User[]>;
  byUsername(tenant: string, username: string): Promise<User | null>;
  /** The tenant's users, deleted ones included, by username. */
  list(tenant: string): Promise<User[]>;
  /** Writes every field of an existing user but its id, tenant, username and creation time. */
  update(user: User): Promise<void>;
}
