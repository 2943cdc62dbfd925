import type { Database } from 'bun:sqlite';
import type { User, UserRepo } from '../types.ts';
import { StoreConflictError } from '../types.ts';

interface UserRow {
  id: string;
  tenant: string;
  username: string;
  password_hash: string;
  name: string | null;
  email: string | null;
  email_verified: number;
  phone: string | null;
  phone_verified: number;
  address: string | null;
  fhir_user: string | null;
  created_at: number;
  disabled: number;
}

function toUser(r: UserRow): User {
  return {
    id: r.id, tenant: r.tenant, username: r.username, passwordHash: r.password_hash, name: r.name, email: r.email,
    emailVerified: r.email_verified === 1, phone: r.phone, phoneVerified: r.phone_verified === 1, address: r.address,
    fhirUser: r.fhir_user, createdAt: r.created_at, disabled: r.disabled === 1,
  };
}

/** Users on SQLite; a username taken in the tenant raises StoreConflictError. */
export function createSqliteUsers(db: Database): UserRepo {
  return {
    async create(u) {
      try {
        db.query(
          `INSERT INTO users (id, tenant, username, password_hash, name, email, email_verified, phone, phone_verified,
             address, fhir_user, created_at, disabled) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        ).run(
          u.id, u.tenant, u.username, u.passwordHash, u.name, u.email, u.emailVerified ? 1 : 0, u.phone, u.phoneVerified ? 1 : 0,
          u.address, u.fhirUser, u.createdAt, u.disabled ? 1 : 0,
        );
      } catch (err) {
        if (err instanceof Error && /UNIQUE constraint failed/.test(err.message)) {
          throw new StoreConflictError(`user ${u.username} already exists in tenant ${u.tenant}`, { cause: err });
        }
        throw err;
      }
    },
    async get(tenant, id) {
      const r = db.query<UserRow, [string, string]>('SELECT * FROM users WHERE tenant = ? AND id = ?').get(tenant, id);
      return r ? toUser(r) : null;
    },
    async byUsername(tenant, username) {
      const r = db.query<UserRow, [string, string]>('SELECT * FROM users WHERE tenant = ? AND username = ?').get(tenant, username);
      return r ? toUser(r) : null;
    },
  };
}
