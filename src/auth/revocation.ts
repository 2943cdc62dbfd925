import type { Clock } from '../clock.ts';
import type { SyncOrAsync } from '../sync-or-async.ts';
import type { Revocation, Store } from '../store/types.ts';
import type { RevocationCheck, VerifiedToken } from './tokens.ts';

/** How often a process reads revocations recorded by other processes. */
export const REVOCATION_POLL_MS = 5_000;
/** Overlap of each poll with the previous one, covering clock skew between processes. */
const POLL_OVERLAP_MS = 60_000;

export interface RevocationList extends RevocationCheck {
  /** Records a revocation in the database and, at once, in this process. */
  add(revocation: Revocation): Promise<void>;
}

/**
 * Revoked access tokens and grants, mirrored in memory so the FHIR API's bearer check stays free of a
 * database read per request. A revocation made in this process applies at once; one made by another
 * process applies here within REVOCATION_POLL_MS (one read per interval, shared by concurrent requests).
 */
export function createRevocationList(store: Store, clock: Clock, pollMs = REVOCATION_POLL_MS): RevocationList {
  const revoked = new Map<string, number>();
  let lastPoll = Number.NEGATIVE_INFINITY;
  let polling: Promise<void> | null = null;

  const key = (kind: Revocation['kind'], value: string) => `${kind}:${value}`;
  function remember(r: Revocation) {
    revoked.set(key(r.kind, r.value), r.expiresAt);
  }

  function pollDue(): boolean {
    const now = clock.now();
    return now - lastPoll >= pollMs || now < lastPoll;
  }

  function listed(token: VerifiedToken): boolean {
    if (revoked.has(key('jti', token.jti))) return true;
    return token.gid !== undefined && revoked.has(key('grant', token.gid));
  }

  async function poll(): Promise<void> {
    const now = clock.now();
    const since = Number.isFinite(lastPoll) ? lastPoll - POLL_OVERLAP_MS : 0;
    for (const r of await store.oauth.revokedSince(since, now)) remember(r);
    for (const [k, exp] of revoked) if (exp <= now) revoked.delete(k);
    lastPoll = now;
  }

  return {
    isRevoked(token: VerifiedToken): SyncOrAsync<boolean> {
      if (!pollDue()) return listed(token);
      polling ??= poll().finally(() => (polling = null));
      return polling.then(() => listed(token));
    },
    async add(r) {
      await store.oauth.revoke(r);
      remember(r);
    },
  };
}
