import type { Database } from 'bun:sqlite';
import type { Client, ClientRepo, KeyRepo, SigningKey, TenantRepo } from '../types.ts';
import { StoreConflictError } from '../types.ts';

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
  disabled: number;
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
    disabled: r.disabled === 1,
  };
}

function isUniqueViolation(err: unknown): boolean {
  return err instanceof Error && /UNIQUE constraint failed/.test(err.message);
}

export function createSqliteTenants(db: Database): TenantRepo {
  return {
    async create(id, now) {
      try {
        db.query('INSERT INTO tenants (id, created_at) VALUES (?, ?)').run(id, now);
      } catch (err) {
        if (isUniqueViolation(err)) throw new StoreConflictError(`tenant ${id} already exists`, { cause: err });
        throw err;
      }
      return { id, createdAt: now };
    },
    async get(id) {
      const r = db.query<{ id: string; created_at: number }, [string]>('SELECT id, created_at FROM tenants WHERE id = ?').get(id);
      return r ? { id: r.id, createdAt: r.created_at } : null;
    },
    async list() {
      return db
        .query<{ id: string; created_at: number }, []>('SELECT id, created_at FROM tenants ORDER BY id')
        .all()
        .map((r) => ({ id: r.id, createdAt: r.created_at }));
    },
  };
}

export function createSqliteClients(db: Database): ClientRepo {
  return {
    async create(c) {
      try {
        db.query(
          `INSERT INTO clients (client_id, tenant, name, secret_hash, grants, scopes, redirect_uris, jwks, jwks_url,
             read_attributes, access_token_ttl, created_at, disabled) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        ).run(
          c.clientId, c.tenant, c.name, c.secretHash, JSON.stringify(c.grants), JSON.stringify(c.scopes),
          JSON.stringify(c.redirectUris), c.jwks ? JSON.stringify(c.jwks) : null, c.jwksUrl,
          c.readAttributes ? JSON.stringify(c.readAttributes) : null, c.accessTokenTtl, c.createdAt, c.disabled ? 1 : 0,
        );
      } catch (err) {
        if (isUniqueViolation(err)) throw new StoreConflictError(`client ${c.clientId} already exists`, { cause: err });
        throw err;
      }
    },
    async get(clientId) {
      const r = db.query<ClientRow, [string]>('SELECT * FROM clients WHERE client_id = ?').get(clientId);
      return r ? toClient(r) : null;
    },
    async list(tenant) {
      return db.query<ClientRow, [string]>('SELECT * FROM clients WHERE tenant = ? ORDER BY created_at, client_id').all(tenant).map(toClient);
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

export function createSqliteKeys(db: Database): KeyRepo {
  return {
    async list(publishedSince) {
      return db
        .query<KeyRow, [number]>(
          'SELECT * FROM signing_keys WHERE retired_at IS NULL OR retired_at >= ? ORDER BY created_at DESC, kid DESC',
        )
        .all(publishedSince)
        .map(
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
        db.query('INSERT INTO signing_keys (kid, alg, private_jwk, public_jwk, created_at, retired_at) VALUES (?, ?, ?, ?, ?, ?)').run(
          k.kid, k.alg, JSON.stringify(k.privateJwk), JSON.stringify(k.publicJwk), k.createdAt, k.retiredAt,
        );
      } catch (err) {
        if (isUniqueViolation(err)) throw new StoreConflictError(`signing key ${k.kid} already exists`, { cause: err });
        throw err;
      }
    },
    async retire(kids, at) {
      const q = db.query('UPDATE signing_keys SET retired_at = ? WHERE retired_at IS NULL AND kid = ?');
      for (const kid of kids) q.run(at, kid);
    },
  };
}
