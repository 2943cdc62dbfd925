import type { AuthCode, RefreshToken, Revocation } from '../types.ts';

/** Used codes are kept this long after expiry, so a late replay is still detected (RFC 9700 4.4). */
export const CODE_RETENTION_MS = 24 * 3600 * 1000;

/** An `auth_codes` row (the same columns on both adapters). */
export interface CodeRow {
  code_hash: string;
  grant_id: string;
  client_id: string;
  tenant: string;
  user_id: string;
  redirect_uri: string;
  scope: string;
  nonce: string | null;
  code_challenge: string | null;
  auth_time: number;
  expires_at: number;
  consumed_at: number | null;
  /** Migration 19 (SQLite) / 22 (PostgreSQL); null in rows written before it. */
  patient: string | null;
  /** Migration 20 (SQLite) / 23 (PostgreSQL); null in rows written before it. */
  encounter: string | null;
}

/** A `refresh_tokens` row (the same columns on both adapters). */
export interface RefreshRow {
  token_hash: string;
  grant_id: string;
  client_id: string;
  tenant: string;
  user_id: string;
  scope: string;
  auth_time: number;
  created_at: number;
  expires_at: number;
  revoked_at: number | null;
  /** Migration 19 (SQLite) / 22 (PostgreSQL); null in rows written before it. */
  patient: string | null;
  /** Migration 20 (SQLite) / 23 (PostgreSQL); null in rows written before it. */
  encounter: string | null;
}

/** A `revocations` row. */
export interface RevocationRow {
  kind: Revocation['kind'];
  value: string;
  revoked_at: number;
  expires_at: number;
}

/** Maps an `auth_codes` row to the domain AuthCode. */
export function toCode(r: CodeRow): AuthCode {
  return {
    codeHash: r.code_hash, grantId: r.grant_id, clientId: r.client_id, tenant: r.tenant, userId: r.user_id,
    redirectUri: r.redirect_uri, scope: r.scope, nonce: r.nonce, codeChallenge: r.code_challenge, authTime: r.auth_time,
    expiresAt: r.expires_at, consumedAt: r.consumed_at, patient: r.patient ?? null, encounter: r.encounter ?? null,
  };
}

/** Maps an AuthCode to its `auth_codes` row. */
export function codeRow(c: AuthCode): CodeRow {
  return {
    code_hash: c.codeHash, grant_id: c.grantId, client_id: c.clientId, tenant: c.tenant, user_id: c.userId, redirect_uri: c.redirectUri,
    scope: c.scope, nonce: c.nonce, code_challenge: c.codeChallenge, auth_time: c.authTime, expires_at: c.expiresAt, consumed_at: c.consumedAt,
    patient: c.patient, encounter: c.encounter,
  };
}

/** Maps a `refresh_tokens` row to the domain RefreshToken. */
export function toRefresh(r: RefreshRow): RefreshToken {
  return {
    tokenHash: r.token_hash, grantId: r.grant_id, clientId: r.client_id, tenant: r.tenant, userId: r.user_id, scope: r.scope,
    authTime: r.auth_time, createdAt: r.created_at, expiresAt: r.expires_at, revokedAt: r.revoked_at, patient: r.patient ?? null,
    encounter: r.encounter ?? null,
  };
}

/** Maps a RefreshToken to its `refresh_tokens` row. */
export function refreshRow(t: RefreshToken): RefreshRow {
  return {
    token_hash: t.tokenHash, grant_id: t.grantId, client_id: t.clientId, tenant: t.tenant, user_id: t.userId, scope: t.scope,
    auth_time: t.authTime, created_at: t.createdAt, expires_at: t.expiresAt, revoked_at: t.revokedAt, patient: t.patient,
    encounter: t.encounter,
  };
}

/** Maps a `revocations` row to the domain Revocation. */
export function toRevocation(r: RevocationRow): Revocation {
  return { kind: r.kind, value: r.value, revokedAt: r.revoked_at, expiresAt: r.expires_at };
}
