import type { User } from '../types.ts';

/**
 * A `users` row as both adapters read it; the flags are INTEGER 0/1 on SQLite and BOOLEAN on Postgres.
 * A type alias, not an interface, so bun:sqlite accepts it as named parameters.
 */
export type UserRow = {
  id: string;
  tenant: string;
  username: string;
  password_hash: string;
  name: string | null;
  email: string | null;
  email_verified: boolean | number;
  phone: string | null;
  phone_verified: boolean | number;
  address: string | null;
  fhir_user: string | null;
  created_at: number;
  disabled: boolean | number;
  deleted_at: number | null;
  tokens_revoked_at: number | null;
  /** Migration tokens_revoked_seq (SQLite 52, PostgreSQL 56): BIGINT on PostgreSQL; null where none was kept. */
  tokens_revoked_seq: number | string | null;
  /** Read with the record (USER_COLUMNS), never written. */
  revocation_seq?: number | string | null;
};

/** Maps a User to its `users` row (booleans as they are: Postgres stores them, bun:sqlite binds them as 1/0). */
export function userRow(u: User): UserRow {
  return {
    id: u.id, tenant: u.tenant, username: u.username, password_hash: u.passwordHash, name: u.name, email: u.email,
    email_verified: u.emailVerified, phone: u.phone, phone_verified: u.phoneVerified, address: u.address, fhir_user: u.fhirUser,
    created_at: u.createdAt, disabled: u.disabled, deleted_at: u.deletedAt, tokens_revoked_at: u.tokensRevokedAt,
    tokens_revoked_seq: u.tokensRevokedSeq ?? null,
  };
}

/** Maps a `users` row to the domain User. */
export function toUser(r: UserRow): User {
  return {
    id: r.id, tenant: r.tenant, username: r.username, passwordHash: r.password_hash, name: r.name, email: r.email,
    emailVerified: Boolean(r.email_verified), phone: r.phone, phoneVerified: Boolean(r.phone_verified), address: r.address,
    fhirUser: r.fhir_user, createdAt: r.created_at, disabled: Boolean(r.disabled), deletedAt: r.deleted_at, tokensRevokedAt: r.tokens_revoked_at ?? null,
    ...(r.tokens_revoked_seq !== null && r.tokens_revoked_seq !== undefined && { tokensRevokedSeq: Number(r.tokens_revoked_seq) }),
    ...(r.revocation_seq !== undefined && { revocationSeq: Number(r.revocation_seq ?? 0) }),
  };
}

/**
 * What a read of user records selects (`FROM users`): the row and the number of the last revocation of the user's
 * tokens committed (User.revocationSeq), in the same statement, so that the two are of one moment: the greater of its
 * revocation row's and the number kept on the record (tokens_revoked_seq), which outlives the row (purged once the
 * tokens it covers expired), so that a token issued after the row went states a number at or above the kept one.
 */
export const USER_COLUMNS =
  "users.*, MAX(COALESCE((SELECT MAX(seq) FROM revocations WHERE kind = 'user' AND value = users.id), 0), COALESCE(users.tokens_revoked_seq, 0)) AS revocation_seq";
