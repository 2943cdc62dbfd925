import type { Client, SigningKey } from '../types.ts';

/**
 * A `clients` row as both adapters read it. List values are JSON text; `disabled` is an INTEGER 0/1
 * on SQLite and a BOOLEAN on Postgres. A type alias, not an interface, so bun:sqlite accepts it as
 * named parameters.
 */
export type ClientRow = {
  client_id: string;
  tenant: string;
  name: string;
  secret_hash: string | null;
  grants: string;
  scopes: string;
  redirect_uris: string;
  jwks: string | null;
  jwks_url: string | null;
  read_attributes: string | null;
  access_token_ttl: number | null;
  created_at: number;
  disabled: boolean | number;
  previous_secret_hash: string | null;
  previous_secret_until: number | null;
  deleted_at: number | null;
  tokens_revoked_at: number | null;
  /** Migration tokens_revoked_seq (SQLite 52, PostgreSQL 56): BIGINT on PostgreSQL; null where none was kept. */
  tokens_revoked_seq: number | string | null;
  /** Read with the record (CLIENT_COLUMNS), never written. */
  revocation_seq?: number | string | null;
};

/** Maps a `clients` row to the domain Client. */
export function toClient(r: ClientRow): Client {
  return {
    tenant: r.tenant,
    clientId: r.client_id,
    name: r.name,
    secretHash: r.secret_hash,
    grants: JSON.parse(r.grants),
    scopes: JSON.parse(r.scopes),
    redirectUris: JSON.parse(r.redirect_uris),
    jwks: r.jwks ? JSON.parse(r.jwks) : null,
    jwksUrl: r.jwks_url,
    readAttributes: r.read_attributes ? JSON.parse(r.read_attributes) : null,
    accessTokenTtl: r.access_token_ttl,
    createdAt: r.created_at,
    disabled: Boolean(r.disabled),
    previousSecretHash: r.previous_secret_hash,
    previousSecretUntil: r.previous_secret_until,
    deletedAt: r.deleted_at,
    tokensRevokedAt: r.tokens_revoked_at ?? null,
    ...(r.tokens_revoked_seq !== null && r.tokens_revoked_seq !== undefined && { tokensRevokedSeq: Number(r.tokens_revoked_seq) }),
    ...(r.revocation_seq !== undefined && { revocationSeq: Number(r.revocation_seq ?? 0) }),
  };
}

/** Maps a Client to its `clients` row (booleans as they are: Postgres stores them, bun:sqlite binds them as 1/0). */
export function clientRow(c: Client): ClientRow {
  return {
    client_id: c.clientId,
    tenant: c.tenant,
    name: c.name,
    secret_hash: c.secretHash,
    grants: JSON.stringify(c.grants),
    scopes: JSON.stringify(c.scopes),
    redirect_uris: JSON.stringify(c.redirectUris),
    jwks: c.jwks ? JSON.stringify(c.jwks) : null,
    jwks_url: c.jwksUrl,
    read_attributes: c.readAttributes ? JSON.stringify(c.readAttributes) : null,
    access_token_ttl: c.accessTokenTtl,
    created_at: c.createdAt,
    disabled: c.disabled,
    previous_secret_hash: c.previousSecretHash,
    previous_secret_until: c.previousSecretUntil,
    deleted_at: c.deletedAt,
    tokens_revoked_at: c.tokensRevokedAt,
    tokens_revoked_seq: c.tokensRevokedSeq ?? null,
  };
}

/** A `signing_keys` row; the JWKs are JSON text. */
export interface KeyRow {
  kid: string;
  alg: string;
  private_jwk: string;
  public_jwk: string;
  created_at: number;
  retired_at: number | null;
}

/** Maps a `signing_keys` row to the domain SigningKey. */
export function toSigningKey(r: KeyRow): SigningKey {
  return {
    kid: r.kid,
    alg: r.alg,
    privateJwk: JSON.parse(r.private_jwk),
    publicJwk: JSON.parse(r.public_jwk),
    createdAt: r.created_at,
    retiredAt: r.retired_at,
  };
}

/**
 * What a read of client records selects (`FROM clients`): the row and the number of the last revocation of the
 * client's tokens committed (Client.revocationSeq), in the same statement, so that the two are of one moment: with the
 * number kept on the record (tokens_revoked_seq), which outlives its revocation row (as rows/users.ts USER_COLUMNS).
 */
export const CLIENT_COLUMNS =
  "clients.*, MAX(COALESCE((SELECT MAX(seq) FROM revocations WHERE kind IN ('client', 'client-access') AND value = clients.client_id), 0), COALESCE(clients.tokens_revoked_seq, 0)) AS revocation_seq";
