import type { Clock } from '../clock.ts';
import type { SyncOrAsync } from '../sync-or-async.ts';
import type { Revocation, RevocationQuery, Store } from '../store/types.ts';
import { CLIENT_CACHE_TTL_MS } from './client-cache.ts';
import type { RevocationCheck, VerifiedToken } from './tokens.ts';

/** How often a process reads revocations recorded by other processes. */
export const REVOCATION_POLL_MS = 5_000;

/**
 * How long a process may hold a client's record (its client cache, src/auth/client-cache.ts) before it issues a
 * token on it. A token states when the client and user records it was issued on were read (`crt`, `urt`); one
 * issued by an older release states neither, and is taken to rest on records read this long before its `iat`.
 */
export const PRINCIPAL_REVOCATION_MARGIN_MS = CLIENT_CACHE_TTL_MS;

/**
 * The revocation query of a verified access token (the store's `isRevoked`, and this list): a client or user
 * revocation made after their record was read to issue the token refuses it. A token issued after a client was
 * enabled again, on a record read after it, passes; one a process issued on a record it still held from before a
 * disable is refused. "After" is told by the database's numbering of revocations where the token states the record's
 * (`crs`, `urs`): a server whose clock runs behind the database's (or the command line's) no longer refuses, for that
 * lag, the tokens it issued after a change; else by the time the record was read (`crt`, `urt`).
 */
export function revocationQuery(token: VerifiedToken): RevocationQuery {
  const legacy = token.iat * 1000 - PRINCIPAL_REVOCATION_MARGIN_MS;
  return {
    jti: token.jti, grantId: token.gid ?? null,
    client: { id: token.client_id, readAt: token.crt ?? legacy, ...(token.crs !== undefined && { seq: token.crs }) },
    ...(token.gid !== undefined && { user: { id: token.sub, readAt: token.urt ?? legacy, ...(token.urs !== undefined && { seq: token.urs }) } }),
  };
}

export interface RevocationList extends RevocationCheck {
  /** Records a revocation in the database and, at once, in this process. */
  add(revocation: Revocation): Promise<void>;
}

/**
 * Revoked access tokens and grants, mirrored in memory so the FHIR API's bearer check stays free of a
 * database read per request. A revocation made in this process applies at once; one made by another
 * process (or by the `cinder` command line) applies here within REVOCATION_POLL_MS (one read per interval,
 * shared by concurrent requests). A client or user revocation refuses every access token issued to them on a
 * record read before it (revocationQuery). The poll asks for what the database recorded after what it last read,
 * by the database's numbering (OAuthRepo.revokedSince), so the clock of the process that recorded a revocation
 * cannot hide it; what `add` remembers is the revocation as the store recorded it (at the time it was given, by this
 * process's clock: the one `crt`/`urt` are stamped by).
 */
export function createRevocationList(store: Store, clock: Clock, pollMs = REVOCATION_POLL_MS): RevocationList {
  const revoked = new Map<string, Revocation>();
  let lastPoll = Number.NEGATIVE_INFINITY;
  /** The number of the last revocation read (OAuthRepo.revokedSince): the database's order, not any clock's. */
  let lastSeq = -1;
  let polling: Promise<void> | null = null;

  const key = (kind: Revocation['kind'], value: string) => `${kind}:${value}`;
  function remember(r: Revocation) {
    const k = key(r.kind, r.value);
    const known = revoked.get(k);
    // A client or user revoked again moves its time and number forward (the store keeps the latest too).
    if (!known) revoked.set(k, r);
    else {
      const seq = Math.max(known.seq ?? 0, r.seq ?? 0);
      revoked.set(k, { ...known, revokedAt: Math.max(known.revokedAt, r.revokedAt), expiresAt: Math.max(known.expiresAt, r.expiresAt), ...(seq > 0 && { seq }) });
    }
  }

  /** As the store's isRevoked: by the revocation's number where the token states the record's (`seq`), else by time. */
  function principalRevoked(kind: Revocation['kind'], value: string, readAt: number, seq?: number): boolean {
    const r = revoked.get(key(kind, value));
    if (r === undefined) return false;
    return seq !== undefined && r.seq !== undefined && r.seq > 0 ? r.seq > seq : r.revokedAt >= readAt;
  }

  function pollDue(): boolean {
    const now = clock.now();
    return now - lastPoll >= pollMs || now < lastPoll;
  }

  function listed(token: VerifiedToken): boolean {
    if (revoked.has(key('jti', token.jti))) return true;
    // As revocationQuery says, without building one on this hot path.
    const legacy = token.iat * 1000 - PRINCIPAL_REVOCATION_MARGIN_MS;
    if (token.gid !== undefined && (revoked.has(key('grant', token.gid)) || principalRevoked('user', token.sub, token.urt ?? legacy, token.urs))) return true;
    const crt = token.crt ?? legacy;
    return principalRevoked('client', token.client_id, crt, token.crs) || principalRevoked('client-access', token.client_id, crt, token.crs);
  }

  async function poll(): Promise<void> {
    const now = clock.now();
    const { revocations, last } = await store.oauth.revokedSince(lastSeq, now);
    for (const r of revocations) remember(r);
    lastSeq = last;
    for (const [k, r] of revoked) if (r.expiresAt <= now) revoked.delete(k);
    lastPoll = now;
  }

  return {
    isRevoked(token: VerifiedToken): SyncOrAsync<boolean> {
      if (!pollDue()) return listed(token);
      polling ??= poll().finally(() => (polling = null));
      return polling.then(() => listed(token));
    },
    async add(r) {
      remember(await store.oauth.revoke(r));
    },
  };
}
