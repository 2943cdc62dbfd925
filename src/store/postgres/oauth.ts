import { PRINCIPAL_REVOCATIONS, type CounterRepo, type OAuthRepo, type Revocation } from '../types.ts';
import { REFRESH_COLUMN } from '../rows/oauth.ts';
import { CODE_RETENTION_MS, codeRow, lastSeq, refreshRow, toCode, toRefresh, toRevocation, unredeemed } from '../rows/oauth.ts';
import type { CodeRow, RefreshRow, RevocationRow } from '../rows/oauth.ts';
import type { Pg } from './db.ts';
import { dbNowOf } from './export-jobs.ts';
import { transaction } from './transaction.ts';

/**
 * Codes, refresh tokens, revocations and client-assertion jtis on Postgres (migrations 2, 22, 23, 27, revocation_sequence and sign_in_revocation_seq). Code
 * redemption is one conditional UPDATE: under READ COMMITTED a concurrent redeemer waits for the
 * winner's commit, re-checks `consumed_at IS NULL` and updates nothing.
 */
export function createPostgresOAuth(sql: Pg): OAuthRepo {
  return {
    async createCode(c) {
      await sql`INSERT INTO auth_codes ${sql(codeRow(c))}`;
    },
    async redeemCode(codeHash, clientId, now, proof) {
      const proven = proof ? sql`AND redirect_uri = ${proof.redirectUri} AND code_challenge IS NOT DISTINCT FROM ${proof.challenge}::text` : sql``;
      const [won] = await sql<CodeRow[]>`
        UPDATE auth_codes SET consumed_at = ${now}
        WHERE code_hash = ${codeHash} AND client_id = ${clientId} AND consumed_at IS NULL AND expires_at > ${now} ${proven}
        RETURNING *`;
      if (won) return { status: 'redeemed', code: toCode(won) };
      const [row] = await sql<CodeRow[]>`SELECT * FROM auth_codes WHERE code_hash = ${codeHash}`;
      return unredeemed(row, clientId, now);
    },
    async createRefreshToken(t) {
      await sql`INSERT INTO refresh_tokens ${sql(refreshRow(t))}`;
    },
    async getRefreshToken(tokenHash) {
      const [r] = await sql<RefreshRow[]>`SELECT * FROM refresh_tokens WHERE token_hash = ${tokenHash}`;
      return r ? toRefresh(r) : null;
    },
    async revoke(given: Revocation) {
      return transaction(sql, async (tx) => {
        // One revocation at a time (the lock conflicts with itself, not with readers), so the sequence's order is
        // the order they commit in and a poll that has read number n will never later find a smaller one.
        await tx`LOCK TABLE revocations IN SHARE ROW EXCLUSIVE MODE`;
        // As given: the caller's clock is the one the servers stamp `crt`/`urt` by (the command line raises its own to
        // the database's first, databaseNow); the database's here refused the tokens of a server behind it.
        let r = given;
        if (PRINCIPAL_REVOCATIONS.includes(r.kind)) {
          const [{ seq }] = await tx<{ seq: number }[]>`
            INSERT INTO revocations (kind, value, revoked_at, expires_at) VALUES (${r.kind}, ${r.value}, ${r.revokedAt}, ${r.expiresAt})
            ON CONFLICT (kind, value) DO UPDATE SET
              revoked_at = GREATEST(revocations.revoked_at, EXCLUDED.revoked_at), expires_at = GREATEST(revocations.expires_at, EXCLUDED.expires_at),
              seq = EXCLUDED.seq
            RETURNING seq`;
          r = { ...r, seq: Number(seq) };
        } else {
          await tx`
            INSERT INTO revocations (kind, value, revoked_at, expires_at) VALUES (${r.kind}, ${r.value}, ${r.revokedAt}, ${r.expiresAt})
            ON CONFLICT (kind, value) DO NOTHING`;
        }
        const column = REFRESH_COLUMN[r.kind];
        if (column) await tx`UPDATE refresh_tokens SET revoked_at = ${r.revokedAt} WHERE ${tx(column)} = ${r.value} AND revoked_at IS NULL`;
        return r;
      });
    },
    async databaseNow() {
      const [{ now }] = await sql<{ now: string }[]>`SELECT ${dbNowOf(sql)} AS now`;
      return Number(now);
    },
    async isRevoked(q) {
      const rows = await sql`
        SELECT 1 FROM revocations
        WHERE (kind = 'jti' AND value = ${q.jti ?? ''}) OR (kind = 'grant' AND value = ${q.grantId ?? ''})
           OR (kind IN ('client', 'client-access') AND value = ${q.client?.id ?? ''} AND CASE
                 -- By its number where the token states the record's (crs; for a user's below, urs or the sign-in's),
                 -- else by its time; a row numbered 0 (recorded before revocations were numbered) by its time.
                 WHEN ${q.client?.seq ?? -1}::bigint >= 0 AND seq > 0 THEN seq > ${q.client?.seq ?? -1}::bigint
                 ELSE revoked_at >= ${q.client?.readAt ?? 0} END)
           OR (kind = 'user' AND value = ${q.user?.id ?? ''} AND CASE
                 WHEN ${q.user?.seq ?? -1}::bigint >= 0 AND seq > 0 THEN seq > ${q.user?.seq ?? -1}::bigint
                 ELSE revoked_at >= ${q.user?.readAt ?? 0} END)
        LIMIT 1`;
      return rows.length > 0;
    },
    async revokedSince(after, now) {
      const rows = await sql<RevocationRow[]>`
        SELECT kind, value, revoked_at, expires_at, seq FROM revocations WHERE seq > ${after} AND expires_at > ${now}`;
      return { revocations: rows.map(toRevocation), last: lastSeq(rows, after) };
    },
    async useJti(clientId, jti, expiresAt, now) {
      const rows = await sql`
        INSERT INTO assertion_jtis (client_id, jti, expires_at) VALUES (${clientId}, ${jti}, ${expiresAt})
        ON CONFLICT (client_id, jti) DO UPDATE SET expires_at = EXCLUDED.expires_at WHERE assertion_jtis.expires_at <= ${now}
        RETURNING 1`;
      return rows.length > 0;
    },
    async purgeExpired(now) {
      const results = await Promise.all([
        sql`DELETE FROM auth_codes WHERE expires_at < ${now - CODE_RETENTION_MS}`,
        sql`DELETE FROM refresh_tokens WHERE expires_at < ${now}`,
        sql`DELETE FROM revocations WHERE expires_at < ${now}`,
        sql`DELETE FROM assertion_jtis WHERE expires_at < ${now}`,
        sql`DELETE FROM rate_counters WHERE reset_at < ${now}`,
      ]);
      return results.reduce((n, r) => n + r.count, 0);
    },
  };
}

/** Fixed-window counters on Postgres: one upsert per increment, shared by every process. */
export function createPostgresCounters(sql: Pg): CounterRepo {
  return {
    async increment(key, windowMs, now) {
      const [r] = await sql<{ count: number; reset_at: number }[]>`
        INSERT INTO rate_counters (key, count, reset_at) VALUES (${key}, 1, ${now + windowMs})
        ON CONFLICT (key) DO UPDATE SET
          count = CASE WHEN rate_counters.reset_at <= ${now} THEN 1 ELSE rate_counters.count + 1 END,
          reset_at = CASE WHEN rate_counters.reset_at <= ${now} THEN EXCLUDED.reset_at ELSE rate_counters.reset_at END
        RETURNING count, reset_at`;
      return { count: r!.count, resetAt: r!.reset_at };
    },
    async peek(key, now) {
      const [r] = await sql<{ count: number; reset_at: number }[]>`SELECT count, reset_at FROM rate_counters WHERE key = ${key} AND reset_at > ${now}`;
      return r ? { count: r.count, resetAt: r.reset_at } : { count: 0, resetAt: now };
    },
    async decrement(key, now) {
      await sql`UPDATE rate_counters SET count = count - 1 WHERE key = ${key} AND count > 0 AND reset_at > ${now}`;
    },
    async clear(key) {
      await sql`DELETE FROM rate_counters WHERE key = ${key}`;
    },
  };
}
