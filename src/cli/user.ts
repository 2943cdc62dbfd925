import { AdminError } from '../auth/admin.ts';
import { deleteUser, disableUser, enableUser, findUser, updateUser, userStatus, type UserChanges } from '../auth/user-lifecycle.ts';
import { createUser } from '../auth/users.ts';
import { turnOffUserSubscriptions } from '../fhir/subscriptions/user-authority.ts';
import type { User } from '../store/types.ts';
import { cliFhirDeps } from './fhir-deps.ts';
import { UsageError, type Command, type ParsedArgs } from './command.ts';
import { auditChange, isoTime, openContext, printData, revocationClock, tenantListCommand, withStore } from './context.ts';

function text(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

/** The password from standard input: the first line, without its line ending. */
async function readPassword(stdin: () => Promise<string>): Promise<string> {
  const input = await stdin();
  const password = input.split(/\r?\n/)[0] ?? '';
  if (!password) throw new UsageError('--password-stdin: no password on standard input');
  return password;
}

/** `cinder user create`: a user who signs in at /oauth2/authorize (password read from stdin, argon2id). */
export const userCreateCommand: Command = {
  name: 'user create',
  summary: 'Create a user who can sign in at /oauth2/authorize',
  usage:
    'cinder user create --tenant <id> --username <u> --password-stdin [--email <e>] [--email-verified]\n' +
    '                   [--name <n>] [--phone <p>] [--phone-verified] [--address <a>] [--fhir-user <ref>] [--json]\n\n' +
    'The password is the first line of standard input, e.g. `printf %s "$PW" | cinder user create ...`.\n' +
    '--fhir-user is a reference such as Patient/123 or Practitioner/7. A Patient, RelatedPerson or Person user\n' +
    'holds user/ scopes as patient/ ones (their own record, or the patients their record names); staff read\n' +
    'the tenant with them.',
  options: {
    tenant: { type: 'string' },
    username: { type: 'string' },
    'password-stdin': { type: 'boolean' },
    email: { type: 'string' },
    'email-verified': { type: 'boolean' },
    name: { type: 'string' },
    phone: { type: 'string' },
    'phone-verified': { type: 'boolean' },
    address: { type: 'string' },
    'fhir-user': { type: 'string' },
    json: { type: 'boolean' },
  },
  async run(args, io) {
    const v = args.values;
    if (typeof v.tenant !== 'string') throw new UsageError('--tenant is required');
    if (typeof v.username !== 'string') throw new UsageError('--username is required');
    if (!v['password-stdin']) throw new UsageError('--password-stdin is required (passwords are never taken as arguments)');
    const password = await readPassword(io.stdin);
    const ctx = await openContext(io);
    const { store, clock } = ctx;
    try {
      const user = await createUser(store, clock, {
        tenant: v.tenant, username: v.username, password, email: text(v.email), emailVerified: !!v['email-verified'], name: text(v.name),
        phone: text(v.phone), phoneVerified: !!v['phone-verified'], address: text(v.address), fhirUser: text(v['fhir-user']),
      });
      await auditChange(ctx, io, 'user create', user.tenant, { kind: 'user', id: user.id });
      printData(io, !!v.json, { user_id: user.id, tenant: user.tenant, username: user.username, fhir_user: user.fhirUser ?? undefined });
      return 0;
    } catch (err) {
      if (err instanceof AdminError) throw new UsageError(err.message);
      throw err;
    } finally {
      await store.close();
    }
  },
};

/** A user as `user show` and `user list` print them (never the password hash). */
function userView(u: User): Record<string, unknown> {
  return {
    user_id: u.id, tenant: u.tenant, username: u.username, status: userStatus(u), name: u.name ?? undefined, email: u.email ?? undefined,
    email_verified: u.email ? u.emailVerified : undefined, phone: u.phone ?? undefined, phone_verified: u.phone ? u.phoneVerified : undefined,
    address: u.address ?? undefined, fhir_user: u.fhirUser ?? undefined, created_at: isoTime(u.createdAt), deleted_at: isoTime(u.deletedAt),
  };
}

/** `--tenant` and the one positional `<username|user_id>` of a user lifecycle command. */
function userOf(args: ParsedArgs): { tenant: string; who: string } {
  const tenant = args.values.tenant;
  if (typeof tenant !== 'string') throw new UsageError('--tenant is required');
  const [who, extra] = args.positionals;
  if (!who || extra) throw new UsageError('expected exactly one username (or user_id)');
  return { tenant, who };
}

/** `cinder user list --tenant <id>`: the tenant's users, deleted ones included (with their status). */
export const userListCommand = tenantListCommand({
  name: 'user list',
  summary: "List a tenant's users",
  columns: ['username', 'user_id', 'status', 'fhir_user'],
  list: async (store, tenant) => (await store.users.list(tenant)).map(userView),
});

/** `cinder user show --tenant <id> <username|user_id>`. */
export const userShowCommand: Command = {
  name: 'user show',
  summary: "Show a user's attributes",
  usage: 'cinder user show --tenant <id> <username|user_id> [--json]',
  options: { tenant: { type: 'string' }, json: { type: 'boolean' } },
  allowPositionals: true,
  dashedPositionals: true,
  async run(args, io) {
    const { tenant, who } = userOf(args);
    return withStore(io, async ({ store }) => {
      printData(io, !!args.values.json, userView(await findUser(store, tenant, who, true)));
      return 0;
    });
  },
};

/** An attribute flag: undefined when not given, null when given empty (the attribute is cleared). */
function attribute(v: unknown): string | null | undefined {
  return typeof v === 'string' ? v || null : undefined;
}

/** The verification flag of an attribute: set by --X-verified / --X-unverified, else unverified when the attribute changes. */
function verified(v: ParsedArgs['values'], name: 'email' | 'phone'): boolean | undefined {
  if (v[`${name}-verified`] && v[`${name}-unverified`]) throw new UsageError(`--${name}-verified and --${name}-unverified exclude each other`);
  if (v[`${name}-verified`]) return true;
  if (v[`${name}-unverified`] || typeof v[name] === 'string') return false;
  return undefined;
}

/** `cinder user update --tenant <id> <username|user_id>`: changes attributes or the password. */
export const userUpdateCommand: Command = {
  name: 'user update',
  summary: "Change a user's attributes or password",
  usage:
    'cinder user update --tenant <id> <username|user_id> [--email <e>] [--email-verified | --email-unverified] [--name <n>]\n' +
    '                   [--phone <p>] [--phone-verified | --phone-unverified] [--address <a>] [--fhir-user <ref>]\n' +
    '                   [--password-stdin] [--json]\n\n' +
    'An empty value clears an attribute (--email \'\'); a new email or phone is unverified unless --email-verified\n' +
    '(--phone-verified) is given. --password-stdin reads the new password from the first line of standard input.\n' +
    'A new password or fhirUser revokes every token of the user (they sign in again) and turns off the Subscriptions\n' +
    'their apps activated on their authority (listed as subscriptions_off), as `cinder user disable` does.',
  options: {
    tenant: { type: 'string' }, email: { type: 'string' }, 'email-verified': { type: 'boolean' }, 'email-unverified': { type: 'boolean' },
    name: { type: 'string' }, phone: { type: 'string' }, 'phone-verified': { type: 'boolean' }, 'phone-unverified': { type: 'boolean' },
    address: { type: 'string' }, 'fhir-user': { type: 'string' }, 'password-stdin': { type: 'boolean' }, json: { type: 'boolean' },
  },
  allowPositionals: true,
  dashedPositionals: true,
  async run(args, io) {
    const { tenant, who } = userOf(args);
    const v = args.values;
    const changes: UserChanges = {
      email: attribute(v.email), emailVerified: verified(v, 'email'), name: attribute(v.name), phone: attribute(v.phone),
      phoneVerified: verified(v, 'phone'), address: attribute(v.address), fhirUser: attribute(v['fhir-user']),
      password: v['password-stdin'] ? await readPassword(io.stdin) : undefined,
    };
    if (Object.values(changes).every((x) => x === undefined)) throw new UsageError('nothing to change: give at least one flag');
    return withStore(io, async (ctx) => {
      const { user, tokensRevoked } = await updateUser(ctx.store, await revocationClock(ctx), tenant, who, changes);
      // Recorded before the Subscriptions are turned off: a failure there leaves the change audited (run it again to retry).
      await auditChange(ctx, io, 'user update', tenant, { kind: 'user', id: user.id });
      const off = tokensRevoked ? await subscriptionsOff(ctx, user, changes.password !== undefined ? 'was given a new password' : 'was given another fhirUser') : [];
      printData(io, !!v.json, { ...userView(user), tokens_revoked: tokensRevoked, subscriptions_off: off });
      return 0;
    });
  },
};

type Context = Awaited<ReturnType<typeof openContext>>;

/**
 * Turns off the Subscriptions activated on `user`'s authority, now gone because they `what` (user-authority.ts);
 * their ids.
 */
function subscriptionsOff(ctx: Context, user: User, what: string): Promise<string[]> {
  const why = `turned off: the user on whose authority it was activated ${what}; an app activates it again (status requested) with a token of a new sign-in`;
  return turnOffUserSubscriptions(ctx.store, ctx.clock, () => cliFhirDeps(ctx.config, ctx.store, ctx.clock, user.tenant), user.tenant, { userId: user.id }, why);
}

/**
 * A lifecycle command on one user: `change` changes them, and their status is printed, with the Subscriptions turned
 * off when `cut` names how they lost their authority.
 */
function lifecycleCommand(name: string, summary: string, notes: string, change: (ctx: Context, tenant: string, who: string) => Promise<User>, cut?: string): Command {
  return {
    name: `user ${name}`,
    summary,
    usage: `cinder user ${name} --tenant <id> <username|user_id> [--json]\n\n${notes}`,
    options: { tenant: { type: 'string' }, json: { type: 'boolean' } },
    allowPositionals: true,
    dashedPositionals: true,
    async run(args, io) {
      const { tenant, who } = userOf(args);
      return withStore(io, async (ctx) => {
        const u = await change(ctx, tenant, who);
        await auditChange(ctx, io, `user ${name}`, tenant, { kind: 'user', id: u.id });
        const off = cut === undefined ? undefined : await subscriptionsOff(ctx, u, cut);
        printData(io, !!args.values.json, { user_id: u.id, tenant: u.tenant, username: u.username, status: userStatus(u), ...(off && { subscriptions_off: off }) });
        return 0;
      });
    },
  };
}

/** `cinder user disable`. */
export const userDisableCommand = lifecycleCommand(
  'disable', 'Disable a user and revoke their tokens',
  'The user cannot sign in (the login page answers as for a wrong password), and every access and refresh token\n' +
    'of theirs is revoked: every server on the database refuses them within 5 seconds. The Subscriptions their apps\n' +
    'activated on their authority are turned off (status off, `error` saying why; listed as subscriptions_off) and\n' +
    'notify nothing more. `cinder user enable` lets them sign in again; the revoked tokens stay revoked and the\n' +
    'Subscriptions stay off until an app activates them again with a token of a new sign-in.',
  async (ctx, tenant, who) => disableUser(ctx.store, await revocationClock(ctx), tenant, who),
  'was disabled',
);

/** `cinder user enable`. */
export const userEnableCommand = lifecycleCommand(
  'enable', 'Enable a disabled user',
  'The user may sign in again; tokens revoked when they were disabled stay revoked, and the Subscriptions turned off\n' +
    'then stay off until an app activates them again.',
  ({ store }, tenant, who) => enableUser(store, tenant, who),
);

/** `cinder user delete`. */
export const userDeleteCommand = lifecycleCommand(
  'delete', 'Delete a user for good (their tokens revoked)',
  'As `user disable`, for good: the password is forgotten and the user cannot be enabled again. The record stays\n' +
    '(`user show`, `user list`) for the audit trail; the user_id and the username are never reused.',
  async (ctx, tenant, who) => deleteUser(ctx.store, await revocationClock(ctx), tenant, who),
  'was deleted',
);
