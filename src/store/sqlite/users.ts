import type { Database } from 'bun:sqlite';
import type { UserRepo } from '../types.ts';
import { USER_COLUMNS, toUser, userRow } from '../rows/users.ts';
import type { UserRow } from '../rows/users.ts';
import { asConflict } from './db.ts';

/** Users on SQLite; a username taken in the tenant raises StoreConflictError. */
export function createSqliteUsers(db: Database): UserRepo {
  return {
    async create(u) {
      try {
        db.query(
          `INSERT INTO users (id, tenant, username, password_hash, name, email, email_verified, phone, phone_verified,
             address, fhir_user, created_at, disabled, deleted_at, tokens_revoked_at, tokens_revoked_seq)
           VALUES ($id, $tenant, $username, $password_hash, $name, $email, $email_verified, $phone, $phone_verified,
             $address, $fhir_user, $created_at, $disabled, $deleted_at, $tokens_revoked_at, $tokens_revoked_seq)`,
        ).run(userRow(u));
      } catch (err) {
        throw asConflict(err, `user ${u.username} already exists in tenant ${u.tenant}`);
      }
    },
    async get(tenant, id) {
      const r = db.query<UserRow, [string, string]>(`SELECT ${USER_COLUMNS} FROM users WHERE tenant = ? AND id = ?`).get(tenant, id);
      return r ? toUser(r) : null;
    },
    async getMany(tenant, ids) {
      if (!ids.length) return [];
      return db.query<UserRow, [string, string]>(`SELECT ${USER_COLUMNS} FROM users WHERE tenant = ? AND id IN (SELECT value FROM json_each(?))`).all(tenant, JSON.stringify(ids)).map(toUser);
    },
    async byUsername(tenant, username) {
      const r = db.query<UserRow, [string, string]>(`SELECT ${USER_COLUMNS} FROM users WHERE tenant = ? AND username = ?`).get(tenant, username);
      return r ? toUser(r) : null;
    },
    async list(tenant) {
      return db.query<UserRow, [string]>('SELECT * FROM users WHERE tenant = ? ORDER BY username').all(tenant).map(toUser);
    },
    async update(u) {
      db.query(
        `UPDATE users SET password_hash = $password_hash, name = $name, email = $email, email_verified = $email_verified, phone = $phone,
           phone_verified = $phone_verified, address = $address, fhir_user = $fhir_user, disabled = $disabled, deleted_at = $deleted_at,
           tokens_revoked_at = $tokens_revoked_at, tokens_revoked_seq = $tokens_revoked_seq
         WHERE tenant = $tenant AND id = $id`,
      ).run(userRow(u));
    },
  };
}
