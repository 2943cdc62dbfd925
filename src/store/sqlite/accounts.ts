import type { Database } from 'bun:sqlite';
import type { ClientRepo, KeyRepo, TenantRepo } from '../types.ts';
import { CLIENT_COLUMNS, clientRow, toClient, toSigningKey } from '../rows/accounts.ts';
import type { ClientRow, KeyRow } from '../rows/accounts.ts';
import { asConflict } from './db.ts';

export function createSqliteTenants(db: Database): TenantRepo {
  return {
    async create(id, now) {
      try {
        db.query('INSERT INTO tenants (id, created_at) VALUES (?, ?)').run(id, now);
      } catch (err) {
        throw asConflict(err, `tenant ${id} already exists`);
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
    async validationDebt(id) {
      return db.query<{ generation: number }, [string]>('SELECT generation FROM validation_debt WHERE tenant = ?').get(id)?.generation ?? null;
    },
    async markUnvalidated(id) {
      db.query('INSERT INTO validation_debt (tenant, generation) VALUES (?, 1) ON CONFLICT (tenant) DO UPDATE SET generation = generation + 1').run(id);
    },
    async clearValidationDebt(id, generation) {
      return db.query('DELETE FROM validation_debt WHERE tenant = ? AND generation = ?').run(id, generation).changes > 0;
    },
  };
}

export function createSqliteClients(db: Database): ClientRepo {
  return {
    async create(c) {
      try {
        db.query(
          `INSERT INTO clients (client_id, tenant, name, secret_hash, grants, scopes, redirect_uris, jwks, jwks_url,
             read_attributes, access_token_ttl, created_at, disabled, previous_secret_hash, previous_secret_until, deleted_at, tokens_revoked_at,
             tokens_revoked_seq)
           VALUES ($client_id, $tenant, $name, $secret_hash, $grants, $scopes, $redirect_uris, $jwks, $jwks_url,
             $read_attributes, $access_token_ttl, $created_at, $disabled, $previous_secret_hash, $previous_secret_until, $deleted_at, $tokens_revoked_at,
             $tokens_revoked_seq)`,
        ).run(clientRow(c));
      } catch (err) {
        throw asConflict(err, `client ${c.clientId} already exists`);
      }
    },
    async get(clientId) {
      const r = db.query<ClientRow, [string]>(`SELECT ${CLIENT_COLUMNS} FROM clients WHERE client_id = ?`).get(clientId);
      return r ? toClient(r) : null;
    },
    async getMany(clientIds) {
      if (!clientIds.length) return [];
      return db.query<ClientRow, [string]>(`SELECT ${CLIENT_COLUMNS} FROM clients WHERE client_id IN (SELECT value FROM json_each(?))`).all(JSON.stringify(clientIds)).map(toClient);
    },
    async list(tenant) {
      return db.query<ClientRow, [string]>('SELECT * FROM clients WHERE tenant = ? ORDER BY created_at, client_id').all(tenant).map(toClient);
    },
    async update(c) {
      db.query(
        `UPDATE clients SET name = $name, secret_hash = $secret_hash, grants = $grants, scopes = $scopes, redirect_uris = $redirect_uris,
           jwks = $jwks, jwks_url = $jwks_url, read_attributes = $read_attributes, access_token_ttl = $access_token_ttl, disabled = $disabled,
           previous_secret_hash = $previous_secret_hash, previous_secret_until = $previous_secret_until, deleted_at = $deleted_at,
           tokens_revoked_at = $tokens_revoked_at, tokens_revoked_seq = $tokens_revoked_seq
         WHERE client_id = $client_id`,
      ).run(clientRow(c));
    },
  };
}

export function createSqliteKeys(db: Database): KeyRepo {
  return {
    async list(publishedSince) {
      return db
        .query<KeyRow, [number]>(
          'SELECT * FROM signing_keys WHERE retired_at IS NULL OR retired_at >= ? ORDER BY created_at DESC, kid DESC',
        )
        .all(publishedSince)
        .map(toSigningKey);
    },
    async add(k) {
      try {
        db.query('INSERT INTO signing_keys (kid, alg, private_jwk, public_jwk, created_at, retired_at) VALUES (?, ?, ?, ?, ?, ?)').run(
          k.kid, k.alg, JSON.stringify(k.privateJwk), JSON.stringify(k.publicJwk), k.createdAt, k.retiredAt,
        );
      } catch (err) {
        throw asConflict(err, `signing key ${k.kid} already exists`);
      }
    },
    async retire(kids, at) {
      const q = db.query('UPDATE signing_keys SET retired_at = ?1 WHERE (retired_at IS NULL OR retired_at > ?1) AND kid = ?2');
      for (const kid of kids) q.run(at, kid);
    },
    async remove(kids) {
      const q = db.query('DELETE FROM signing_keys WHERE kid = ?');
      db.transaction(() => {
        for (const kid of kids) q.run(kid);
      })();
    },
  };
}
