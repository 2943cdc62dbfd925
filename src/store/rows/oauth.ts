import type { AuthCode, CodeRedemption, FhirContextItem, RefreshToken, Revocation } from '../types.ts';

/** Used codes are kept this long after expiry, so a late replay is still detected (RFC 9700 4.4). */
export const CODE_RETENTION_MS = 24 * 3600 * 1000;

/** An `auth_codes` row (the same columns on both adapters). */
export type CodeRow = {
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
  /** Migration 24 (SQLite) / 27 (PostgreSQL): the `fhirContext` as JSON text; null without one, and in rows written before it. */
  fhir_context: string | null;
  /** Migration 24 (SQLite) / 27 (PostgreSQL): INTEGER 0/1 on SQLite, BOOLEAN on PostgreSQL; true in rows written before it. */
  need_patient_banner: boolean | number;
  /** Migration sign_in_revocation_seq (SQLite 50, PostgreSQL 54): BIGINT on PostgreSQL; null in rows written before it. */
  auth_revocation_seq: number | string | null;
  /** Migration sign_in_client_revocation_seq (SQLite 51, PostgreSQL 55): as auth_revocation_seq, the client's; null in rows written before it. */
  auth_client_revocation_seq: number | string | null;
};

/** A `refresh_tokens` row (the same columns on both adapters). */
export type RefreshRow = {
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
  /** As CodeRow.fhir_context. */
  fhir_context: string | null;
  /** As CodeRow.need_patient_banner. */
  need_patient_banner: boolean | number;
  /** As CodeRow.auth_revocation_seq. */
  auth_revocation_seq: number | string | null;
};

/** A `revocations` row. */
export interface RevocationRow {
  kind: Revocation['kind'];
  value: string;
  revoked_at: number;
  expires_at: number;
  /** The order the database recorded it in (migration revocation_sequence). */
  seq: number;
}

const fromJson = (text: string | null): FhirContextItem[] | null => (text === null ? null : (JSON.parse(text) as FhirContextItem[]));
/** A sign-in's number as stored, for the domain's optional field (absent in rows written before it). */
const signInSeq = (v: number | string | null | undefined) => (v === null || v === undefined ? {} : { authRevocationSeq: Number(v) });
/** The client's number at the sign-in as stored, likewise. */
const clientSeq = (v: number | string | null | undefined) => (v === null || v === undefined ? {} : { authClientRevocationSeq: Number(v) });
const toJson = (items: FhirContextItem[] | null): string | null => (items === null ? null : JSON.stringify(items));

/** Maps an `auth_codes` row to the domain AuthCode. */
export function toCode(r: CodeRow): AuthCode {
  return {
    codeHash: r.code_hash, grantId: r.grant_id, clientId: r.client_id, tenant: r.tenant, userId: r.user_id,
    redirectUri: r.redirect_uri, scope: r.scope, nonce: r.nonce, codeChallenge: r.code_challenge, authTime: r.auth_time,
    expiresAt: r.expires_at, consumedAt: r.consumed_at, patient: r.patient ?? null, encounter: r.encounter ?? null,
    fhirContext: fromJson(r.fhir_context), needPatientBanner: Boolean(r.need_patient_banner), ...signInSeq(r.auth_revocation_seq),
    ...clientSeq(r.auth_client_revocation_seq),
  };
}

/**
 * What a code's row says when the conditional UPDATE redeemed nothing: a replay when it was consumed; refused when it
 * is unused, unexpired and of `clientId` (the request's proof did not match it); otherwise invalid. Both adapters alike.
 */
export function unredeemed(row: CodeRow | null | undefined, clientId: string, now: number): CodeRedemption {
  if (!row) return { status: 'invalid' };
  if (row.consumed_at !== null) return { status: 'replayed', code: toCode(row) };
  if (row.client_id === clientId && Number(row.expires_at) > now) return { status: 'refused', code: toCode(row) };
  return { status: 'invalid' };
}

/** Maps an AuthCode to its `auth_codes` row. */
export function codeRow(c: AuthCode): CodeRow {
  return {
    code_hash: c.codeHash, grant_id: c.grantId, client_id: c.clientId, tenant: c.tenant, user_id: c.userId, redirect_uri: c.redirectUri,
    scope: c.scope, nonce: c.nonce, code_challenge: c.codeChallenge, auth_time: c.authTime, expires_at: c.expiresAt, consumed_at: c.consumedAt,
    patient: c.patient, encounter: c.encounter, fhir_context: toJson(c.fhirContext), need_patient_banner: c.needPatientBanner,
    auth_revocation_seq: c.authRevocationSeq ?? null, auth_client_revocation_seq: c.authClientRevocationSeq ?? null,
  };
}

/** Maps a `refresh_tokens` row to the domain RefreshToken. */
export function toRefresh(r: RefreshRow): RefreshToken {
  return {
    tokenHash: r.token_hash, grantId: r.grant_id, clientId: r.client_id, tenant: r.tenant, userId: r.user_id, scope: r.scope,
    authTime: r.auth_time, createdAt: r.created_at, expiresAt: r.expires_at, revokedAt: r.revoked_at, patient: r.patient ?? null,
    encounter: r.encounter ?? null, fhirContext: fromJson(r.fhir_context), needPatientBanner: Boolean(r.need_patient_banner),
    ...signInSeq(r.auth_revocation_seq),
  };
}

/** Maps a RefreshToken to its `refresh_tokens` row. */
export function refreshRow(t: RefreshToken): RefreshRow {
  return {
    token_hash: t.tokenHash, grant_id: t.grantId, client_id: t.clientId, tenant: t.tenant, user_id: t.userId, scope: t.scope,
    auth_time: t.authTime, created_at: t.createdAt, expires_at: t.expiresAt, revoked_at: t.revokedAt, patient: t.patient,
    encounter: t.encounter, fhir_context: toJson(t.fhirContext), need_patient_banner: t.needPatientBanner,
    auth_revocation_seq: t.authRevocationSeq ?? null,
  };
}

/** Maps a `revocations` row to the domain Revocation. */
/** The `refresh_tokens` column a revocation of this kind revokes refresh tokens by (none: access tokens only). */
export const REFRESH_COLUMN: Partial<Record<Revocation['kind'], 'grant_id' | 'client_id' | 'user_id'>> = {
  grant: 'grant_id', client: 'client_id', user: 'user_id',
};

export function toRevocation(r: RevocationRow): Revocation {
  return { kind: r.kind, value: r.value, revokedAt: r.revoked_at, expiresAt: r.expires_at, seq: Number(r.seq) };
}

/** The highest `seq` of the rows a poll read, or `after` when it read none (revokedSince). */
export function lastSeq(rows: RevocationRow[], after: number): number {
  return rows.reduce((max, r) => Math.max(max, Number(r.seq)), after);
}
