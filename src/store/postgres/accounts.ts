import type { ClientRepo, KeyRepo, TenantRepo } from '../types.ts';
import { clientRow, toClient, toSigningKey } from '../rows/accounts.ts';
import type { ClientRow, KeyRow } from '../rows/accounts.ts';
import { asConflict } from './db.ts';
import type { Pg } from './db.ts';

/** The number of the last revocation of a client's tokens committed, read with its record (rows/accounts.ts CLIENT_COLUMNS). */
const revocationSeq = (sql: Pg) =>
  sql`GREATEST((SELECT MAX(seq) FROM revocations WHERE kind IN ('client', 'client-access') AND value = clients.client_id), clients.tokens_revoked_seq) AS revocation_seq`;

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
    async validationDebt(id) {
      const [r] = await sql<{ generation: string }[]>`SELECT generation FROM validation_debt WHERE tenant = ${id}`;
      return r ? Number(r.generation) : null;
    },
    async markUnvalidated(id) {
      await sql`INSERT INTO validation_debt (tenant, generation) VALUES (${id}, 1)
        ON CONFLICT (tenant) DO UPDATE SET generation = validation_debt.generation + 1`;
    },
    async clearValidationDebt(id, generation) {
      const r = await sql`DELETE FROM validation_debt WHERE tenant = ${id} AND generation = ${generation}`;
      return r.count > 0;
    },
  };
}

/** OAuth clients on Postgres; list values are stored as JSON text, like the SQLite adapter. */
export function createPostgresClients(sql: Pg): ClientRepo {
  return {
    async create(c) {
      try {
        await sql`INSERT INTO clients ${sql(clientRow(c))}`;
      } catch (err) {
        throw asConflict(err, `client ${c.clientId} already exists`);
      }
    },
    async get(clientId) {
      const [r] = await sql<ClientRow[]>`SELECT clients.*, ${revocationSeq(sql)} FROM clients WHERE client_id = ${clientId}`;
      return r ? toClient(r) : null;
    },
    async getMany(clientIds) {
      if (!clientIds.length) return [];
      const rows = await sql<ClientRow[]>`SELECT clients.*, ${revocationSeq(sql)} FROM clients WHERE client_id = ANY(${clientIds as string[]}::text[])`;
      return rows.map(toClient);
    },
    async list(tenant) {
      const rows = await sql<ClientRow[]>`SELECT * FROM clients WHERE tenant = ${tenant} ORDER BY created_at, client_id`;
      return rows.map(toClient);
    },
    async update(c) {
      const { client_id, tenant: _tenant, created_at: _created, ...fields } = clientRow(c);
      await sql`UPDATE clients SET ${sql(fields)} WHERE client_id = ${client_id}`;
    },
  };
}

/** Signing keys on Postgres, shared by every process using the database. */
export function createPostgresKeys(sql: Pg): KeyRepo {
  return {
    async list(publishedSince) {
      const rows = await sql<KeyRow[]>`
        SELECT * FROM signing_keys WHERE retired_at IS NULL OR retired_at >= ${publishedSince}
        ORDER BY created_at DESC, kid DESC`;
      return rows.map(toSigningKey);
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
      await sql`UPDATE signing_keys SET retired_at = ${at} WHERE (retired_at IS NULL OR retired_at > ${at}) AND kid = ANY(${kids}::text[])`;
    },
    async remove(kids) {
      await sql`DELETE FROM signing_keys WHERE kid = ANY(${kids}::text[])`;
    },
  };
}
