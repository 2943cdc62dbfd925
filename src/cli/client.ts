import { readFileSync } from 'node:fs';
import { createClient } from '../auth/admin.ts';
import { AdminError } from '../auth/admin.ts';
import { clientStatus, deleteClient, disableClient, enableClient, findClient, MAX_SECRET_GRACE, rotateClientSecret, updateClient, type ClientChanges } from '../auth/client-lifecycle.ts';
import { MAX_ACTIVE } from '../fhir/subscriptions/activation.ts';
import { deletedError, reconcileClientSubscriptions, turnOffClientSubscriptions, type Registration } from '../fhir/subscriptions/client-authority.ts';
import { ownerPatient, ownerScopes } from '../fhir/subscriptions/owner.ts';
import { stillRegistered } from '../auth/issue.ts';
import { accessFromScopes } from '../auth/scopes.ts';
import { turnOffUserSubscriptions } from '../fhir/subscriptions/user-authority.ts';
import type { Client } from '../store/types.ts';
import { cliFhirDeps } from './fhir-deps.ts';
import { decodeUtf8, NotUtf8Error } from '../fhir/utf8.ts';
import { UsageError, type CliIO, type Command, type Options, type ParsedArgs } from './command.ts';
import { auditChange, isoTime, openContext, printData, revocationClock, tenantListCommand, withStore } from './context.ts';

function list(v: unknown): string[] | undefined {
  return Array.isArray(v) ? (v as string[]) : undefined;
}

function readJwks(file: string) {
  let parsed: unknown;
  try {
    parsed = JSON.parse(decodeUtf8(readFileSync(file)));
  } catch (err) {
    throw new UsageError(`--jwks-file ${file}: ${err instanceof NotUtf8Error ? 'not valid UTF-8: ' : ''}${(err as Error).message}`);
  }
  const jwks = parsed as { keys?: unknown };
  if (!Array.isArray(jwks.keys)) throw new UsageError(`--jwks-file ${file}: not a JWK Set (no "keys" array)`);
  return jwks as { keys: Record<string, unknown>[] };
}

/** The registration flags `client create` and `client update` share. */
const REGISTRATION_OPTIONS: Options = {
  name: { type: 'string' },
  grant: { type: 'string', multiple: true },
  scope: { type: 'string', multiple: true },
  'redirect-uri': { type: 'string', multiple: true },
  'jwks-url': { type: 'string' },
  'jwks-file': { type: 'string' },
  'read-attribute': { type: 'string', multiple: true },
  'access-token-ttl': { type: 'string' },
  json: { type: 'boolean' },
};

/**
 * `--read-attribute`: undefined when not given; null when given empty (`--read-attribute ''`: every attribute
 * again, the default), as `user update` reads an empty value as clearing an attribute.
 */
function readAttributes(v: unknown): string[] | null | undefined {
  const given = list(v);
  if (given === undefined || !given.includes('')) return given;
  if (given.length > 1) throw new UsageError("--read-attribute '' (every attribute) cannot be given with attributes");
  return null;
}

/** `--access-token-ttl`: undefined when not given; null when given empty (the server's lifetime again, the default). */
function accessTokenTtl(v: unknown): number | null | undefined {
  if (typeof v !== 'string') return undefined;
  if (v === '') return null;
  const ttl = Number(v);
  if (!(Number.isInteger(ttl) && ttl >= 30 && ttl <= 86400)) throw new UsageError("--access-token-ttl takes 30-86400 seconds ('' for the server's default)");
  return ttl;
}

/** The registration flags given, as changes (what is not given is left out), checked as `client create` checks them. */
function registrationFlags(v: ParsedArgs['values']): ClientChanges {
  if (v['jwks-url'] && v['jwks-file']) throw new UsageError('--jwks-url and --jwks-file exclude each other');
  const jwksUrl = typeof v['jwks-url'] === 'string' ? v['jwks-url'] : undefined;
  if (jwksUrl !== undefined && !/^https?:\/\//.test(jwksUrl)) throw new UsageError('--jwks-url must be an http(s) URL');
  const changes: ClientChanges = {
    name: typeof v.name === 'string' ? v.name : undefined, grants: list(v.grant), scopes: list(v.scope)?.flatMap((s) => s.split(' ').filter(Boolean)),
    redirectUris: list(v['redirect-uri']), jwksUrl, jwks: typeof v['jwks-file'] === 'string' ? readJwks(v['jwks-file']) : undefined,
    readAttributes: readAttributes(v['read-attribute']), accessTokenTtl: accessTokenTtl(v['access-token-ttl']),
  };
  return Object.fromEntries(Object.entries(changes).filter(([, x]) => x !== undefined)) as ClientChanges;
}

/** A client as `client show` and `client list` print it (never a secret or its digest). */
function clientView(c: Client): Record<string, unknown> {
  const auth = c.secretHash !== null ? 'client_secret_basic' : c.jwks !== null || c.jwksUrl !== null ? 'private_key_jwt' : 'none';
  return {
    client_id: c.clientId, tenant: c.tenant, name: c.name, status: clientStatus(c), grants: c.grants, scopes: c.scopes,
    redirect_uris: c.redirectUris.length ? c.redirectUris : undefined, token_endpoint_auth_method: auth, jwks_url: c.jwksUrl ?? undefined, jwks_keys: c.jwks?.keys.length,
    read_attributes: c.readAttributes ?? undefined, access_token_ttl: c.accessTokenTtl ?? undefined, created_at: isoTime(c.createdAt),
    previous_secret_until: isoTime(c.previousSecretUntil), deleted_at: isoTime(c.deletedAt),
  };
}

/** The one positional `<client_id>` of a lifecycle command. */
function clientIdOf(args: ParsedArgs): string {
  const [id, extra] = args.positionals;
  if (!id || extra) throw new UsageError('expected exactly one client_id');
  return id;
}

/** `cinder client create`: registers a client; prints client_id and (once) client_secret. */
export const clientCreateCommand: Command = {
  name: 'client create',
  summary: 'Register an OAuth client in a tenant',
  usage:
    'cinder client create --tenant <id> [--name <n>] [--grant <type>]... [--scope <s>]... [--redirect-uri <uri>]...\n' +
    '                     [--no-secret] [--jwks-url <url> | --jwks-file <file>] [--read-attribute <a>]...\n' +
    '                     [--access-token-ttl <seconds>] [--json]\n\n' +
    'Grant types: client_credentials (default), authorization_code, refresh_token.\n' +
    '--scope introspect makes the client a resource server: /oauth2/introspect tells it about every access token of\n' +
    'its tenant (a client without it is told about its own tokens only).\n' +
    'A --no-secret client without keys (public) may not have refresh_token (RFC 9700 2.2.2).',
  options: { tenant: { type: 'string' }, 'no-secret': { type: 'boolean' }, ...REGISTRATION_OPTIONS },
  async run(args, io) {
    const v = args.values;
    if (typeof v.tenant !== 'string') throw new UsageError('--tenant is required');
    const r = registrationFlags(v);
    const ctx = await openContext(io);
    const { store, clock } = ctx;
    try {
      const { client, clientSecret } = await createClient(store, clock, {
        ...r, tenant: v.tenant, secret: v['no-secret'] ? false : undefined, jwksUrl: r.jwksUrl ?? null, jwks: r.jwks ?? null,
        readAttributes: r.readAttributes ?? null, accessTokenTtl: r.accessTokenTtl ?? null,
      });
      await auditChange(ctx, io, 'client create', client.tenant, { kind: 'client', id: client.clientId });
      printData(io, !!v.json, {
        client_id: client.clientId, client_secret: clientSecret ?? undefined, tenant: client.tenant, grants: client.grants, scopes: client.scopes,
      });
      return 0;
    } catch (err) {
      if (err instanceof AdminError) throw new UsageError(err.message);
      throw err;
    } finally {
      await store.close();
    }
  },
};

/** `cinder client list --tenant <id>`: the tenant's clients, deleted ones included (with their status). */
export const clientListCommand = tenantListCommand({
  name: 'client list',
  summary: "List a tenant's OAuth clients",
  columns: ['client_id', 'status', 'grants', 'name'],
  list: async (store, tenant) => (await store.clients.list(tenant)).map(clientView),
});

/** `cinder client show <client_id>`: one client's registration (a deleted one too). */
export const clientShowCommand: Command = {
  name: 'client show',
  summary: "Show an OAuth client's registration",
  usage: 'cinder client show <client_id> [--json]',
  options: { json: { type: 'boolean' } },
  allowPositionals: true,
  dashedPositionals: true,
  async run(args, io) {
    const id = clientIdOf(args);
    return withStore(io, async ({ store }) => {
      printData(io, !!args.values.json, clientView(await findClient(store, id, true)));
      return 0;
    });
  },
};

/** `cinder client update <client_id>`: changes a registration; each list flag replaces the registered list. */
export const clientUpdateCommand: Command = {
  name: 'client update',
  summary: "Change an OAuth client's registration",
  usage:
    'cinder client update <client_id> [--name <n>] [--grant <type>]... [--scope <s>]... [--redirect-uri <uri>]...\n' +
    '                     [--jwks-url <url> | --jwks-file <file>] [--read-attribute <a>]... [--access-token-ttl <seconds>] [--json]\n\n' +
    'Each flag given replaces what is registered (every --scope together is the new list); the others stay.\n' +
    "An empty value resets a setting to its default: --read-attribute '' (every attribute), --access-token-ttl ''\n" +
    "(the server's lifetime for the grant).\n" +
    'The result is checked as `client create` checks a new client. Narrowing the scopes revokes every access\n' +
    'token the client holds (it obtains new ones); its refresh tokens stay, and refresh never yields more\n' +
    'than the scopes it now has. Its Subscriptions reach only what it still has: one that may no longer search what\n' +
    'it selects is paused (status error, saying why; subscriptions_paused), and set back to the status it had once the\n' +
    'scopes allow it again (subscriptions_resumed), unless its tenant has 1,000 active Subscriptions already: then it\n' +
    'is set off, its error naming that bound (subscriptions_off, and said on stderr). Its running $import jobs\n' +
    'stop writing any type it may no longer import (each such input ends with a forbidden error in the status).',
  options: REGISTRATION_OPTIONS,
  allowPositionals: true,
  dashedPositionals: true,
  async run(args, io) {
    const id = clientIdOf(args);
    const changes = registrationFlags(args.values);
    if (Object.keys(changes).length === 0) throw new UsageError('nothing to change: give at least one flag');
    return withStore(io, async (ctx) => {
      const { client, tokensRevoked } = await updateClient(ctx.store, await revocationClock(ctx), id, changes);
      await auditChange(ctx, io, 'client update', client.tenant, { kind: 'client', id });
      // Its own Subscriptions show what the scopes now allow: paused when they may no longer search what they select, set back when they may again.
      const subscriptions = changes.scopes === undefined ? {} : await reconciled(ctx, io, 'client update', client, registration(client));
      printData(io, !!args.values.json, { ...clientView(client), access_tokens_revoked: tokensRevoked, ...subscriptions });
      return 0;
    });
  },
};

type Context = Awaited<ReturnType<typeof openContext>>;

/** The FHIR layer the server's status writes of `client`'s tenant go through. */
const fhirOf = (ctx: Context, client: Client) => () => cliFhirDeps(ctx.config, ctx.store, ctx.clock, client.tenant);

/**
 * Turns off the Subscriptions `client` activated on its users' authority (user-authority.ts): its disable revoked every
 * sign-in with it, and they rested on those (its delete turns off every one of its Subscriptions: turnOffClientSubscriptions). Their ids.
 */
function usersSubscriptionsOff(ctx: Context, client: Client): Promise<string[]> {
  const why = `turned off: the app it was activated with was disabled, which revoked the sign-in on whose authority it was activated; the app activates it again (status requested) with a token of a new sign-in`;
  return turnOffUserSubscriptions(ctx.store, ctx.clock, fhirOf(ctx, client), client.tenant, { clientId: client.clientId }, why);
}

/**
 * What `client`'s registration allows its own Subscriptions (client-authority.ts): whether it is disabled, and
 * each owner's recorded scopes held to those it still has registered, as a refresh and the servers' matching hold them.
 */
function registration(client: Client): Registration {
  return {
    disabled: client.disabled,
    access: async (owner) => accessFromScopes(stillRegistered(client, ownerScopes(owner)), client.clientId, ownerPatient(owner) ?? undefined),
    recorded: async (owner, scopes) => accessFromScopes(scopes, client.clientId, ownerPatient(owner) ?? undefined),
  };
}

/**
 * Brings `client`'s own Subscriptions in line with `reg` (pauses, resumes); their ids as the commands print them. Those
 * not set back for the tenant's bound of activated Subscriptions (set `off` instead) are listed as subscriptions_off,
 * and said on stderr: the command did not do all it was asked.
 */
async function reconciled(ctx: Context, io: CliIO, command: string, client: Client, reg: Registration): Promise<{ subscriptions_paused: string[]; subscriptions_resumed: string[]; subscriptions_off: string[] }> {
  const { paused, resumed, off } = await reconcileClientSubscriptions(ctx.store, ctx.clock, fhirOf(ctx, client), client.tenant, client.clientId, reg);
  if (off.length > 0) {
    io.stderr(
      `cinder ${command}: ${off.length} paused Subscription${off.length === 1 ? ' was' : 's were'} set off, not back to active: tenant ${client.tenant} ` +
        `has ${MAX_ACTIVE} active Subscriptions, the most Cinder matches (${off.join(', ')}); set others off, then activate ${off.length === 1 ? 'it' : 'them'} again (status requested)\n`,
    );
  }
  return { subscriptions_paused: paused, subscriptions_resumed: resumed, subscriptions_off: off };
}

/** What a lifecycle command does to the client's Subscriptions (client-authority.ts, user-authority.ts): lists of ids by name. */
type SubscriptionSteps = (ctx: Context, client: Client, io: CliIO) => Promise<Record<string, string[]>>;

/**
 * A lifecycle command on one client: `change` changes it, and its status is printed, with what `after` (run on the
 * client changed) did to its Subscriptions.
 */
function lifecycleCommand(
  name: string, summary: string, notes: string, change: (ctx: Context, id: string) => Promise<Client>, steps: { after?: SubscriptionSteps } = {},
): Command {
  return {
    name: `client ${name}`,
    summary,
    usage: `cinder client ${name} <client_id> [--json]\n\n${notes}`,
    options: { json: { type: 'boolean' } },
    allowPositionals: true,
    dashedPositionals: true,
    async run(args, io) {
      const id = clientIdOf(args);
      return withStore(io, async (ctx) => {
        const c = await change(ctx, id);
        // Recorded before the Subscriptions are written: a failure there leaves the change audited (run it again to retry).
        await auditChange(ctx, io, `client ${name}`, c.tenant, { kind: 'client', id });
        const after = steps.after ? await steps.after(ctx, c, io) : {};
        printData(io, !!args.values.json, { client_id: c.clientId, tenant: c.tenant, status: clientStatus(c), ...after });
        return 0;
      });
    },
  };
}

/** `cinder client disable <client_id>`. */
export const clientDisableCommand = lifecycleCommand(
  'disable', 'Disable an OAuth client and revoke its tokens',
  'The token endpoint refuses the client (invalid_client) and every access and refresh token it holds is revoked:\n' +
    'every server on the database refuses them within 5 seconds. The Subscriptions it activated with its own\n' +
    'tokens (client credentials) are paused: status error, `error` saying why (listed as subscriptions_paused), and\n' +
    'they notify nothing; those it activated with a token of a user sign-in are turned off (status off, listed as\n' +
    'subscriptions_off), as the sign-ins are revoked. `cinder client enable` lets it obtain new tokens and sets its\n' +
    "paused Subscriptions back to the status they had; the revoked tokens stay revoked, and its users' Subscriptions\n" +
    'stay off until it activates them again with a token of a new sign-in.',
  async (ctx, id) => disableClient(ctx.store, await revocationClock(ctx), id),
  {
    after: async (ctx, c, io) => ({
      subscriptions_paused: (await reconciled(ctx, io, 'client disable', c, registration(c))).subscriptions_paused,
      subscriptions_off: await usersSubscriptionsOff(ctx, c),
    }),
  },
);

/** `cinder client enable <client_id>`. */
export const clientEnableCommand = lifecycleCommand(
  'enable', 'Enable a disabled OAuth client',
  'The client may obtain tokens again (within 5 seconds on every server), and the Subscriptions its disable paused\n' +
    'are set back to the status they had (listed as subscriptions_resumed) and notify again; one written meanwhile\n' +
    "keeps what was written. The tenant's active Subscriptions stay within the 1,000 Cinder matches: those past it\n" +
    'are set off instead, their error naming that bound (listed as subscriptions_off, and said on stderr), in id\n' +
    "order. Tokens revoked when it was disabled stay revoked, and its users' Subscriptions turned off then stay off.",
  ({ store }, id) => enableClient(store, id),
  {
    // After the enable: set back before it, one would be found active with its client still disabled by a write in
    // between, and paused again by that server (silenced.ts). Paused until then, none is matched before it reads as
    // resumed. One its scopes no longer allow says so instead (subscriptions_paused).
    after: async (ctx, c, io) => reconciled(ctx, io, 'client enable', c, registration(c)),
  },
);

/** `cinder client delete <client_id>`. */
export const clientDeleteCommand = lifecycleCommand(
  'delete', 'Delete an OAuth client for good (its tokens revoked)',
  'As `client disable`, for good: its secret and keys are forgotten and it cannot be enabled again, and every\n' +
    'Subscription it activated (with its own tokens or its users\' sign-ins) that is not off already, whether active,\n' +
    'requested, paused or in error, is turned off (status off, `error` naming the deletion; listed as\n' +
    'subscriptions_off). The record stays (`client show`, `client list`) for the audit trail, and its client_id is\n' +
    'never reused.',
  async (ctx, id) => deleteClient(ctx.store, await revocationClock(ctx), id),
  {
    after: async (ctx, c) => ({ subscriptions_off: await turnOffClientSubscriptions(ctx.store, ctx.clock, fhirOf(ctx, c), c.tenant, c.clientId, deletedError(c.clientId)) }),
  },
);

/** `cinder client rotate-secret <client_id> [--grace <seconds>]`: prints the new secret once. */
export const clientRotateSecretCommand: Command = {
  name: 'client rotate-secret',
  summary: "Issue an OAuth client a new secret",
  usage:
    'cinder client rotate-secret <client_id> [--grace <seconds>] [--json]\n\n' +
    'Prints the new client_secret once. Without --grace (a leaked secret) the old secret stops at once and every\n' +
    'access token the client holds is revoked. With --grace (a planned rotation, at most ' + MAX_SECRET_GRACE + ' seconds) the old\n' +
    'secret keeps working until the grace period ends, and issued tokens stay. Refresh tokens stay either way:\n' +
    'refreshing needs the client secret, so they work with the new one only (and the old one during a grace period).',
  options: { grace: { type: 'string' }, json: { type: 'boolean' } },
  allowPositionals: true,
  dashedPositionals: true,
  async run(args, io) {
    const id = clientIdOf(args);
    const graceText = args.values.grace;
    const grace = typeof graceText === 'string' ? Number(graceText) : 0;
    if (!(Number.isInteger(grace) && grace >= 0 && grace <= MAX_SECRET_GRACE)) throw new UsageError(`--grace takes 0-${MAX_SECRET_GRACE} seconds`);
    return withStore(io, async (ctx) => {
      const { client, clientSecret } = await rotateClientSecret(ctx.store, await revocationClock(ctx), id, grace);
      await auditChange(ctx, io, 'client rotate-secret', client.tenant, { kind: 'client', id });
      printData(io, !!args.values.json, {
        client_id: client.clientId, client_secret: clientSecret, previous_secret_until: isoTime(client.previousSecretUntil),
      });
      return 0;
    });
  },
};
