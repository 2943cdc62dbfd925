import type { UserRepo } from '../types.ts';
import { toUser, userRow } from '../rows/users.ts';
import type { UserRow } from '../rows/users.ts';
import { asConflict, type Pg } from './db.ts';

/** The number of the last revocation of a user's tokens committed, read with their record (rows/users.ts USER_COLUMNS). */
// With the number kept on the record (tokens_revoked_seq), which outlives its revocation row (rows/users.ts USER_COLUMNS).
const revocationSeq = (sql: Pg) =>
  sql`GREATEST((SELECT MAX(seq) FROM revocations WHERE kind = 'user' AND value = users.id), users.tokens_revoked_seq) AS revocation_seq`;

/** Users on Postgres; a username taken in the tenant raises StoreConflictError. */
export function createPostgresUsers(sql: Pg): UserRepo {
  return {
    async create(u) {
      try {
        await sql`INSERT INTO users ${sql(userRow(u))}`;
      } catch (err) {
        throw asConflict(err, `user ${u.username} already exists in tenant ${u.tenant}`);
      }
    },
    async get(tenant, id) {
      const [r] = await sql<UserRow[]>`SELECT users.*, ${revocationSeq(sql)} FROM users WHERE tenant = ${tenant} AND id = ${id}`;
      return r ? toUser(r) : null;
    },
    async getMany(tenant, ids) {
      if (!ids.length) return [];
      const rows = await sql<UserRow[]>`SELECT users.*, ${revocationSeq(sql)} FROM users WHERE tenant = ${tenant} AND id = ANY(${ids as string[]}::text[])`;
      return rows.map(toUser);
    },
    async byUsername(tenant, username) {
      const [r] = await sql<UserRow[]>`SELECT users.*, ${revocationSeq(sql)} FROM users WHERE tenant = ${tenant} AND username = ${username}`;
      return r ? toUser(r) : null;
    },
    async list(tenant) {
      const rows = await sql<UserRow[]>`SELECT * FROM users WHERE tenant = ${tenant} ORDER BY username`;
      return rows.map(toUser);
    },
    async update(u) {
      const { id, tenant, username: _username, created_at: _created, ...fields } = userRow(u);
      await sql`UPDATE users SET ${sql(fields)} WHERE tenant = ${tenant} AND id = ${id}`;
    },
  };
}
