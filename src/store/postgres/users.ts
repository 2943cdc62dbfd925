import type { User, UserRepo } from '../types.ts';
import { asConflict, type Pg } from './db.ts';

interface UserRow {
  id: string;
  tenant: string;
  username: string;
  password_hash: string;
  name: string | null;
  email: string | null;
  email_verified: boolean;
  phone: string | null;
  phone_verified: boolean;
  address: string | null;
  fhir_user: string | null;
  created_at: number;
  disabled: boolean;
}

function toUser(r: UserRow): User {
  return {
    id: r.id, tenant: r.tenant, username: r.username, passwordHash: r.password_hash, name: r.name, email: r.email,
    emailVerified: r.email_verified, phone: r.phone, phoneVerified: r.phone_verified, address: r.address, fhirUser: r.fhir_user,
    createdAt: r.created_at, disabled: r.disabled,
  };
}

/** Users on Postgres; a username taken in the tenant raises StoreConflictError. */
export function createPostgresUsers(sql: Pg): UserRepo {
  return {
    async create(u) {
      const row: UserRow = {
        id: u.id, tenant: u.tenant, username: u.username, password_hash: u.passwordHash, name: u.name, email: u.email,
        email_verified: u.emailVerified, phone: u.phone, phone_verified: u.phoneVerified, address: u.address, fhir_user: u.fhirUser,
        created_at: u.createdAt, disabled: u.disabled,
      };
      try {
        await sql`INSERT INTO users ${sql(row)}`;
      } catch (err) {
        throw asConflict(err, `user ${u.username} already exists in tenant ${u.tenant}`);
      }
    },
    async get(tenant, id) {
      const [r] = await sql<UserRow[]>`SELECT * FROM users WHERE tenant = ${tenant} AND id = ${id}`;
      return r ? toUser(r) : null;
    },
    async byUsername(tenant, username) {
      const [r] = await sql<UserRow[]>`SELECT * FROM users WHERE tenant = ${tenant} AND username = ${username}`;
      return r ? toUser(r) : null;
    },
  };
}
