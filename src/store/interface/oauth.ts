/** OAuth state: authorization codes, refresh tokens, revocations, assertion jtis and login counters. */

/**
 * An item of an EHR launch's `fhirContext` (SMART App Launch 2.2, Scopes and Launch Context): at least one of
 * `reference` (relative, `Type/id`), `canonical` and `identifier`, with an optional `type` and `role`.
 * The store keeps the list as given (JSON text).
 */
export interface FhirContextItem {
  reference?: string;
  canonical?: string;
  identifier?: FhirContextIdentifier;
  type?: string;
  role?: string;
}

/** The FHIR Identifier of a `fhirContext` item (the elements Cinder takes of one). */
export interface FhirContextIdentifier {
  use?: string;
  type?: { coding?: { system?: string; version?: string; code?: string; display?: string }[]; text?: string };
  system?: string;
  value?: string;
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
  /**
   * The number of the user's last revocation committed when they signed in (User.revocationSeq of the record their
   * password was checked against): a user revocation numbered above it refuses the grant. Absent in codes written
   * before it was kept (judged by `authTime`).
   */
  authRevocationSeq?: number;
  /**
   * The number of the last revocation of the client's tokens committed when the user signed in (Client.revocationSeq
   * of the record the authorization request was read on): a client revocation numbered above it refuses the code.
   * Absent in codes written before it was kept (judged by `authTime`).
   */
  authClientRevocationSeq?: number;
  expiresAt: number;
  consumedAt: number | null;
  /**
   * The patient in context the user chose at sign-in (SMART standalone launch, `launch/patient`);
   * null when none was chosen (a Patient user's own record is derived from the user, as before).
   */
  patient: string | null;
  /** The encounter in context of an EHR launch (SMART `launch` with an encounter); null otherwise, and in older codes. */
  encounter: string | null;
  /** The further resources in context of an EHR launch (its `fhirContext`); null without any, and in older codes. */
  fhirContext: FhirContextItem[] | null;
  /**
   * SMART `need_patient_banner`: false only when the EHR launch said its own UI shows the patient; true for
   * every other sign-in (a standalone launch has no EHR UI around the app), and in older codes.
   */
  needPatientBanner: boolean;
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
  /** The sign-in's number (AuthCode.authRevocationSeq), kept for every refresh; absent in older tokens (judged by `authTime`). */
  authRevocationSeq?: number;
  createdAt: number;
  expiresAt: number;
  revokedAt: number | null;
  /** The chosen patient in context of the grant (AuthCode.patient), kept for every refresh. */
  patient: string | null;
  /** The encounter in context of the grant (AuthCode.encounter), kept for every refresh. */
  encounter: string | null;
  /** The further resources in context of the grant (AuthCode.fhirContext), kept for every refresh. */
  fhirContext: FhirContextItem[] | null;
  /** Whether the app needs to show a patient banner (AuthCode.needPatientBanner), kept for every refresh. */
  needPatientBanner: boolean;
}

/**
 * A revoked access token (`jti`), a whole revoked grant (`grant`, every token issued from one login), or every
 * token a client or user was issued up to `revokedAt`: `client` and `user` (access and refresh tokens: a disable,
 * a delete, a new password) and `client-access` (access tokens only: a client's scopes narrowed). Recording a
 * client or user revocation again moves its `revokedAt` forward.
 */
export interface Revocation {
  kind: 'jti' | 'grant' | 'client' | 'client-access' | 'user';
  value: string;
  revokedAt: number;
  /** When the revoked tokens would have expired anyway; the row may go after that. */
  expiresAt: number;
  /** Its number in the order the database recorded revocations (revokedSince), as recorded: absent on one not yet recorded. */
  seq?: number;
}

/** Kinds that revoke everything a client or user was issued up to a time. */
export const PRINCIPAL_REVOCATIONS: readonly Revocation['kind'][] = ['client', 'client-access', 'user'];

/**
 * What `isRevoked` asks about a token: its `jti`, its grant, and the client and user it was issued to, each with the
 * time (epoch ms) their record was read to issue it: a client or user revocation recorded at or after that time applies.
 */
export interface RevocationQuery {
  jti?: string | null;
  grantId?: string | null;
  /** `seq`: the client record's Client.revocationSeq, when the token states it (`crs`): compared with the revocation's number, not its time. */
  client?: { id: string; readAt: number; seq?: number };
  /**
   * Asked only of tokens issued to a signed-in user, and of sign-ins. `seq`: the user record's User.revocationSeq, when
   * the token (`urs`) or the sign-in (AuthCode.authRevocationSeq) states it: compared with the revocation's number, not its time.
   */
  user?: { id: string; readAt: number; seq?: number };
}

/**
 * Result of redeeming a code: redeemed now, already redeemed (a replay), unusable, or (with a proof) refused: an
 * unused, unexpired code of this client whose redirect URI or PKCE challenge the request does not match, left unused.
 */
export type CodeRedemption =
  | { status: 'redeemed'; code: AuthCode }
  | { status: 'replayed'; code: AuthCode }
  | { status: 'refused'; code: AuthCode }
  | { status: 'invalid' };

/** What a token request proves of a code (RFC 6749 4.1.3, RFC 7636 4.6): its redirect URI, and the S256 of its verifier or null. */
export interface CodeProof {
  redirectUri: string;
  challenge: string | null;
}

export interface OAuthRepo {
  createCode(code: AuthCode): Promise<void>;
  /**
   * Consumes the code with one conditional UPDATE (unconsumed, unexpired, issued to `clientId`, and matching `proof`
   * when given: its redirect URI, and its challenge, null for none), so of N concurrent redemptions exactly one
   * succeeds. Reports a replay when the code was already consumed; one the proof does not match is refused and stays
   * unused, so whoever intercepted a code without its verifier cannot use it up before its client.
   */
  redeemCode(codeHash: string, clientId: string, now: number, proof?: CodeProof): Promise<CodeRedemption>;
  createRefreshToken(token: RefreshToken): Promise<void>;
  getRefreshToken(tokenHash: string): Promise<RefreshToken | null>;
  /**
   * Records a revocation; for a grant also marks its refresh tokens revoked, and for a `client` or `user` every
   * refresh token of theirs not yet revoked, in one transaction. Idempotent. Returns the revocation as recorded, its
   * time as given on every store: the caller's clock, the one the servers stamp `crt`/`urt` by (a command line whose
   * clock may run behind the servers' raises it first: databaseNow); a client's or user's with the number the database
   * gave it (`seq`), which a client's tokens are compared with (Client.revocationSeq).
   */
  revoke(revocation: Revocation): Promise<Revocation>;
  /**
   * The database's clock (epoch ms) where it has one of its own (PostgreSQL's clock_timestamp()), null on SQLite, whose
   * processes all run on the machine that holds the file and read its one clock.
   */
  databaseNow(): Promise<number | null>;
  /** Whether any revocation recorded applies to the token `query` describes (what it leaves out is not asked). */
  isRevoked(query: RevocationQuery): Promise<boolean>;
  /**
   * Revocations recorded (or recorded again) after the one numbered `after` in the order the database recorded
   * them, unexpired at `now`, and the number to ask after next time (`after` when there are none). The numbers
   * come from the database (a sequence), never from a process's clock, so a poll misses nothing whatever the
   * clock of the process that recorded them; -1 asks for every unexpired revocation.
   */
  revokedSince(after: number, now: number): Promise<{ revocations: Revocation[]; last: number }>;
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
  /** Takes back one of the current window's count (never below 0; nothing once the window has ended). */
  decrement(key: string, now: number): Promise<void>;
  clear(key: string): Promise<void>;
}
