import type { Database } from 'bun:sqlite';
import { PRINCIPAL_REVOCATIONS, type CounterRepo, type OAuthRepo, type Revocation } from '../types.ts';
import { REFRESH_COLUMN } from '../rows/oauth.ts';
import { CODE_RETENTION_MS, codeRow, lastSeq, refreshRow, toCode, toRefresh, toRevocation, unredeemed } from '../rows/oauth.ts';
import type { CodeRow, RefreshRow, RevocationRow } from '../rows/oauth.ts';

/** Codes, refresh tokens, revocations and client-assertion jtis on SQLite (migrations 2, 19, 20, 24, revocation_sequence, sign_in_revocation_seq and sign_in_client_revocation_seq). */
export function createSqliteOAuth(db: Database): OAuthRepo {
  // Writes on SQLite are serialised: the counter's order is the order they commit in.
  const nextSeq = () => db.query<{ n: number }, []>('UPDATE revocation_sequence SET n = n + 1 RETURNING n').get()!.n;
  const revokeTx = db.transaction((r: Revocation): Revocation => {
    if (PRINCIPAL_REVOCATIONS.includes(r.kind)) {
      const seq = nextSeq();
      db.query(
        `INSERT INTO revocations (kind, value, revoked_at, expires_at, seq) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (kind, value) DO UPDATE SET revoked_at = MAX(revoked_at, excluded.revoked_at), expires_at = MAX(expires_at, excluded.expires_at),
             seq = excluded.seq`,
      ).run(r.kind, r.value, r.revokedAt, r.expiresAt, seq);
      const column = REFRESH_COLUMN[r.kind];
      if (column) db.query(`UPDATE refresh_tokens SET revoked_at = ? WHERE ${column} = ? AND revoked_at IS NULL`).run(r.revokedAt, r.value);
      return { ...r, seq };
    } else {
      db.query('INSERT OR IGNORE INTO revocations (kind, value, revoked_at, expires_at, seq) VALUES (?, ?, ?, ?, ?)').run(r.kind, r.value, r.revokedAt, r.expiresAt, nextSeq());
    }
    const column = REFRESH_COLUMN[r.kind];
    if (column) db.query(`UPDATE refresh_tokens SET revoked_at = ? WHERE ${column} = ? AND revoked_at IS NULL`).run(r.revokedAt, r.value);
    return r;
  });
  return {
    async createCode(c) {
      db.query(
        `INSERT INTO auth_codes (code_hash, grant_id, client_id, tenant, user_id, redirect_uri, scope, nonce, code_challenge,
           auth_time, expires_at, consumed_at, patient, encounter, fhir_context, need_patient_banner, auth_revocation_seq, auth_client_revocation_seq)
         VALUES ($code_hash, $grant_id, $client_id, $tenant, $user_id, $redirect_uri, $scope, $nonce, $code_challenge,
           $auth_time, $expires_at, $consumed_at, $patient, $encounter, $fhir_context, $need_patient_banner, $auth_revocation_seq, $auth_client_revocation_seq)`,
      ).run(codeRow(c));
    },
    async redeemCode(codeHash, clientId, now, proof) {
      // `IS` compares NULL as a value: a code requested without PKCE matches only a request without a verifier.
      const won = proof
        ? db
          .query<CodeRow, [number, string, string, number, string, string | null]>(
            `UPDATE auth_codes SET consumed_at = ? WHERE code_hash = ? AND client_id = ? AND consumed_at IS NULL AND expires_at > ?
               AND redirect_uri = ? AND code_challenge IS ? RETURNING *`,
          )
          .get(now, codeHash, clientId, now, proof.redirectUri, proof.challenge)
        : db
          .query<CodeRow, [number, string, string, number]>(
            'UPDATE auth_codes SET consumed_at = ? WHERE code_hash = ? AND client_id = ? AND consumed_at IS NULL AND expires_at > ? RETURNING *',
          )
          .get(now, codeHash, clientId, now);
      if (won) return { status: 'redeemed', code: toCode(won) };
      const row = db.query<CodeRow, [string]>('SELECT * FROM auth_codes WHERE code_hash = ?').get(codeHash);
      return unredeemed(row, clientId, now);
    },
    async createRefreshToken(t) {
      db.query(
        `INSERT INTO refresh_tokens (token_hash, grant_id, client_id, tenant, user_id, scope, auth_time, created_at, expires_at, revoked_at,
           patient, encounter, fhir_context, need_patient_banner, auth_revocation_seq)
         VALUES ($token_hash, $grant_id, $client_id, $tenant, $user_id, $scope, $auth_time, $created_at, $expires_at, $revoked_at,
           $patient, $encounter, $fhir_context, $need_patient_banner, $auth_revocation_seq)`,
      ).run(refreshRow(t));
    },
    async getRefreshToken(tokenHash) {
      const r = db.query<RefreshRow, [string]>('SELECT * FROM refresh_tokens WHERE token_hash = ?').get(tokenHash);
      return r ? toRefresh(r) : null;
    },
    async revoke(r) {
      return revokeTx(r);
    },
    async databaseNow() {
      return null;
    },
    async isRevoked(q) {
      const r = db
        .query<{ one: number }, [string, string, string, number, number, number, string, number, number, number]>(
          // A client's or user's revocation by its number where the token (crs, urs) or the sign-in states the record's,
          // else by its time; a row numbered 0 (recorded before revocations were numbered) by its time.
          `SELECT 1 AS one FROM revocations
           WHERE (kind = 'jti' AND value = ?) OR (kind = 'grant' AND value = ?)
              OR (kind IN ('client', 'client-access') AND value = ? AND CASE WHEN ? >= 0 AND seq > 0 THEN seq > ? ELSE revoked_at >= ? END)
              OR (kind = 'user' AND value = ? AND CASE WHEN ? >= 0 AND seq > 0 THEN seq > ? ELSE revoked_at >= ? END)
           LIMIT 1`,
        )
        .get(q.jti ?? '', q.grantId ?? '', q.client?.id ?? '', q.client?.seq ?? -1, q.client?.seq ?? -1, q.client?.readAt ?? 0,
          q.user?.id ?? '', q.user?.seq ?? -1, q.user?.seq ?? -1, q.user?.readAt ?? 0);
      return r !== null;
    },
    async revokedSince(after, now) {
      const rows = db
        .query<RevocationRow, [number, number]>('SELECT kind, value, revoked_at, expires_at, seq FROM revocations WHERE seq > ? AND expires_at > ?')
        .all(after, now);
      return { revocations: rows.map(toRevocation), last: lastSeq(rows, after) };
    },
    async useJti(clientId, jti, expiresAt, now) {
      const r = db
        .query<{ one: number }, [string, string, number, number]>(
          `INSERT INTO assertion_jtis (client_id, jti, expires_at) VALUES (?, ?, ?)
             ON CONFLICT (client_id, jti) DO UPDATE SET expires_at = excluded.expires_at WHERE assertion_jtis.expires_at <= ?
             RETURNING 1 AS one`,
        )
        .get(clientId, jti, expiresAt, now);
      return r !== null;
    },
    async purgeExpired(now) {
      let n = 0;
      n += db.query('DELETE FROM auth_codes WHERE expires_at < ?').run(now - CODE_RETENTION_MS).changes;
      n += db.query('DELETE FROM refresh_tokens WHERE expires_at < ?').run(now).changes;
      n += db.query('DELETE FROM revocations WHERE expires_at < ?').run(now).changes;
      n += db.query('DELETE FROM assertion_jtis WHERE expires_at < ?').run(now).changes;
      n += db.query('DELETE FROM rate_counters WHERE reset_at < ?').run(now).changes;
      return n;
    },
  };
}

/** Fixed-window counters on SQLite: one upsert per increment. */
export function createSqliteCounters(db: Database): CounterRepo {
  return {
    async increment(key, windowMs, now) {
      const r = db
        .query<{ count: number; reset_at: number }, [string, number, number, number]>(
          `INSERT INTO rate_counters (key, count, reset_at) VALUES (?, 1, ?)
             ON CONFLICT (key) DO UPDATE SET
               count = CASE WHEN rate_counters.reset_at <= ? THEN 1 ELSE rate_counters.count + 1 END,
               reset_at = CASE WHEN rate_counters.reset_at <= ? THEN excluded.reset_at ELSE rate_counters.reset_at END
             RETURNING count, reset_at`,
        )
        .get(key, now + windowMs, now, now)!;
      return { count: r.count, resetAt: r.reset_at };
    },
    async peek(key, now) {
      const r = db.query<{ count: number; reset_at: number }, [string, number]>('SELECT count, reset_at FROM rate_counters WHERE key = ? AND reset_at > ?').get(key, now);
      return r ? { count: r.count, resetAt: r.reset_at } : { count: 0, resetAt: now };
    },
    async decrement(key, now) {
      db.query('UPDATE rate_counters SET count = count - 1 WHERE key = ? AND count > 0 AND reset_at > ?').run(key, now);
    },
    async clear(key) {
      db.query('DELETE FROM rate_counters WHERE key = ?').run(key);
    },
  };
}
