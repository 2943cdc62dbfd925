import { readFileSync } from 'node:fs';
import { createClient } from '../auth/admin.ts';
import { AdminError } from '../auth/admin.ts';
import { UsageError, type Command } from './command.ts';
import { openContext, printData } from './context.ts';

function list(v: unknown): string[] | undefined {
  return Array.isArray(v) ? (v as string[]) : undefined;
}

function readJwks(file: string) {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new UsageError(`--jwks-file ${file}: ${(err as Error).message}`);
  }
  const jwks = parsed as { keys?: unknown };
  if (!Array.isArray(jwks.keys)) throw new UsageError(`--jwks-file ${file}: not a JWK Set (no "keys" array)`);
  return jwks as { keys: Record<string, unknown>[] };
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
    'A --no-secret client without keys (public) may not have refresh_token (RFC 9700 2.2.2).',
  options: {
    tenant: { type: 'string' },
    name: { type: 'string' },
    grant: { type: 'string', multiple: true },
    scope: { type: 'string', multiple: true },
    'redirect-uri': { type: 'string', multiple: true },
    'no-secret': { type: 'boolean' },
    'jwks-url': { type: 'string' },
    'jwks-file': { type: 'string' },
    'read-attribute': { type: 'string', multiple: true },
    'access-token-ttl': { type: 'string' },
    json: { type: 'boolean' },
  },
  async run(args, io) {
    const v = args.values;
    if (typeof v.tenant !== 'string') throw new UsageError('--tenant is required');
    if (v['jwks-url'] && v['jwks-file']) throw new UsageError('--jwks-url and --jwks-file exclude each other');
    const jwksUrl = typeof v['jwks-url'] === 'string' ? v['jwks-url'] : null;
    if (jwksUrl && !/^https?:\/\//.test(jwksUrl)) throw new UsageError('--jwks-url must be an http(s) URL');
    const ttl = typeof v['access-token-ttl'] === 'string' ? Number(v['access-token-ttl']) : null;
    if (ttl !== null && !(Number.isInteger(ttl) && ttl >= 30 && ttl <= 86400)) throw new UsageError('--access-token-ttl takes 30-86400 seconds');
    const scopes = list(v.scope)?.flatMap((s) => s.split(' ').filter(Boolean));
    const { store, clock } = await openContext(io);
    try {
      const { client, clientSecret } = await createClient(store, clock, {
        tenant: v.tenant, name: typeof v.name === 'string' ? v.name : undefined, grants: list(v.grant), scopes,
        redirectUris: list(v['redirect-uri']), secret: v['no-secret'] ? false : undefined, jwksUrl,
        jwks: typeof v['jwks-file'] === 'string' ? readJwks(v['jwks-file']) : null,
        readAttributes: list(v['read-attribute']) ?? null, accessTokenTtl: ttl,
      });
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
