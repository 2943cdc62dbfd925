import type { Client, ClientRepo, KeyRepo, SigningKey, TenantRepo } from '../types.ts';
import { asConflict } from './db.ts';
import type { Pg } from './db.ts';

interface ClientRow {
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
  disabled: boolean;
}

function toClient(r: ClientRow): Client {
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
    disabled: r.disabled,
  };
}

/** Tenants on Postgres; a duplicate id raises StoreConflictError. */
export function createPostgresTenants(sql: Pg): TenantRepo {
  return {
    async create(id, now) {
      try {
        await sql`INSERT INTO tenants (id, created_at) VALUES (${id}, ${now})`;
      } catch (err) {
        throw asConflict(err, `tenant ${id} already exists`);
      }
      return { id, createdAt: now };
    },
    async get(id) {
      const [r] = await sql<{ id: string; created_at: number }[]>`SELECT id, created_at FROM tenants WHERE id = ${id}`;
      return r ? { id: r.id, createdAt: r.created_at } : null;
    },
    async list() {
      const rows = await sql<{ id: string; created_at: number }[]>`SELECT id, created_at FROM tenants ORDER BY id`;
      return rows.map((r) => ({ id: r.id, createdAt: r.created_at }));
    },
  };
}

/** OAuth clients on Postgres; list values are stored as JSON text, like the SQLite adapter. */
export function createPostgresClients(sql: Pg): ClientRepo {
  return {
    async create(c) {
      const row = {
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
      };
      try {
        await sql`INSERT INTO clients ${sql(row)}`;
      } catch (err) {
        throw asConflict(err, `client ${c.clientId} already exists`);
      }
    },
    async get(clientId) {
      const [r] = await sql<ClientRow[]>`SELECT * FROM clients WHERE client_id = ${clientId}`;
      return r ? toClient(r) : null;
    },
    async list(tenant) {
      const rows = await sql<ClientRow[]>`SELECT * FROM clients WHERE tenant = ${tenant} ORDER BY created_at, client_id`;
      return rows.map(toClient);
    },
  };
}

interface KeyRow {
  kid: string;
  alg: string;
  private_jwk: string;
  public_jwk: string;
  created_at: number;
  retired_at: number | null;
}

/** Signing keys on Postgres, shared by every process using the database. */
export function createPostgresKeys(sql: Pg): KeyRepo {
  return {
    async list(publishedSince) {
      const rows = await sql<KeyRow[]>`
        SELECT * FROM signing_keys WHERE retired_at IS NULL OR retired_at >= ${publishedSince}
        ORDER BY created_at DESC, kid DESC`;
      return rows.map(
        (r): SigningKey => ({
          kid: r.kid,
          alg: r.alg,
          privateJwk: JSON.parse(r.private_jwk),
          publicJwk: JSON.parse(r.public_jwk),
          createdAt: r.created_at,
          retiredAt: r.retired_at,
        }),
      );
    },
    async add(k) {
      try {
        await sql`
          INSERT INTO signing_keys (kid, alg, private_jwk, public_jwk, created_at, retired_at)
          VALUES (${k.kid}, ${k.alg}, ${JSON.stringify(k.privateJwk)}, ${JSON.stringify(k.publicJwk)}, ${k.createdAt}, ${k.retiredAt})`;
      } catch (err) {
        throw asConflict(err, `signing key ${k.kid} already exists`);
      }
    },
    async retire(kids, at) {
      await sql`UPDATE signing_keys SET retired_at = ${at} WHERE retired_at IS NULL AND kid = ANY(${kids}::text[])`;
    },
  };
}
