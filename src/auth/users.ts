import type { Clock } from '../clock.ts';
import type { Store, User } from '../store/types.ts';
import { StoreConflictError } from '../store/types.ts';
import { AdminError } from './admin.ts';
import { randomToken } from './secrets.ts';

export const USERNAME = /^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$/;
const FHIR_USER = /^(?:https?:\/\/\S+\/)?(Patient|Practitioner|PractitionerRole|RelatedPerson|Person)\/[A-Za-z0-9\-.]{1,64}$/;
export const MIN_PASSWORD_LENGTH = 8;

export interface NewUserOptions {
  tenant: string;
  username: string;
  password: string;
  name?: string | null;
  email?: string | null;
  emailVerified?: boolean;
  phone?: string | null;
  phoneVerified?: boolean;
  address?: string | null;
  fhirUser?: string | null;
}

/** Argon2id parameters for user passwords (Bun.password; OWASP's minimum is 19 MiB, 2 iterations). */
const ARGON2 = { algorithm: 'argon2id', memoryCost: 19456, timeCost: 2 } as const;

/** The password rule (at creation and at each change). */
export function checkPassword(password: string): void {
  if (password.length < MIN_PASSWORD_LENGTH) throw new AdminError(`the password needs at least ${MIN_PASSWORD_LENGTH} characters`);
}

/** A password's argon2id hash. */
export function hashPassword(password: string): Promise<string> {
  return Bun.password.hash(password, ARGON2);
}

/** The rules of a user's attributes (at creation and at each change, `cinder user update`). */
export function checkUserAttributes(o: Pick<NewUserOptions, 'email' | 'phone' | 'fhirUser'>): void {
  if (o.email && !/^[^\s@]+@[^\s@]+$/.test(o.email)) throw new AdminError(`invalid email '${o.email}'`);
  if (o.phone && !/^\+?[0-9 ()-]{3,32}$/.test(o.phone)) throw new AdminError(`invalid phone number '${o.phone}'`);
  if (o.fhirUser && !FHIR_USER.test(o.fhirUser)) {
    throw new AdminError(`invalid fhirUser '${o.fhirUser}': a reference like Patient/123 or Practitioner/7`);
  }
}

function check(o: NewUserOptions): void {
  if (!USERNAME.test(o.username)) throw new AdminError(`invalid username '${o.username}': 1-128 of [A-Za-z0-9._@+-], starting with a letter or digit`);
  checkPassword(o.password);
  checkUserAttributes(o);
}

/** Creates a user who can sign in at `/oauth2/authorize`; the password is hashed with argon2id. */
export async function createUser(store: Store, clock: Clock, o: NewUserOptions): Promise<User> {
  if (!(await store.tenants.get(o.tenant))) throw new AdminError(`tenant '${o.tenant}' does not exist`);
  check(o);
  const user: User = {
    id: randomToken(12), tenant: o.tenant, username: o.username, passwordHash: await hashPassword(o.password),
    name: o.name ?? null, email: o.email ?? null, emailVerified: !!o.emailVerified, phone: o.phone ?? null,
    phoneVerified: !!o.phoneVerified, address: o.address ?? null, fhirUser: o.fhirUser ?? null, createdAt: clock.now(), disabled: false, deletedAt: null, tokensRevokedAt: null,
  };
  try {
    await store.users.create(user);
  } catch (err) {
    // A deleted user's username stays taken (UserRepo: never reused, so the audit trail names one person).
    if (err instanceof StoreConflictError) throw new AdminError(`user '${o.username}' already exists in tenant '${o.tenant}'`, { cause: err });
    throw err;
  }
  return user;
}

/** Hash of a random password nobody knows, verified against when the username is unknown. */
const DUMMY_HASH = '$argon2id$v=19$m=19456,t=2,p=1$RjA/0oTCEaSasZQQ2OEguAaItOsnn3WVm7n8eD5Evjw$WOtOVD2BfV5B/jKqbpk6Y9aH66IGs/Mr8PrHz3viJcA';

/**
 * Checks a username and password. An unknown, disabled or deleted user costs the same argon2id verification
 * as a known one, so response time does not reveal which usernames exist.
 */
export async function verifyUser(store: Store, tenant: string, username: string, password: string): Promise<User | null> {
  const found = USERNAME.test(username) ? await store.users.byUsername(tenant, username) : null;
  // A disabled or deleted user fails as an unknown one does, at the same cost (no sign that the account exists).
  const user = found && !found.disabled && found.passwordHash ? found : null;
  const ok = await Bun.password.verify(password, user?.passwordHash ?? DUMMY_HASH);
  return ok && user ? user : null;
}
