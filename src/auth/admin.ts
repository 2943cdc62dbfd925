import type { Clock } from '../clock.ts';
import type { Client, Store } from '../store/types.ts';
import { StoreConflictError } from '../store/types.ts';
import { USER_ATTRIBUTES } from './claims.ts';
import { redirectUriProblem } from './redirect-uris.ts';
import { resourceScopeProblem } from './scopes.ts';
import { randomToken, sha256Hex } from './secrets.ts';
import { MAX_TOKEN_TTL } from './tokens.ts';

export const TENANT_ID = /^[a-z0-9][a-z0-9-]{0,62}$/;

export class AdminError extends Error {
  override name = 'AdminError';
}

/** Creates a tenant (the interface's "project"). */
export async function createTenant(store: Store, clock: Clock, id: string) {
  if (!TENANT_ID.test(id)) throw new AdminError(`invalid tenant id '${id}': use 1-63 of [a-z0-9-], starting with a letter or digit`);
  try {
    return await store.tenants.create(id, clock.now());
  } catch (err) {
    if (err instanceof StoreConflictError) throw new AdminError(`tenant '${id}' already exists`, { cause: err });
    throw err;
  }
}

export interface NewClientOptions {
  tenant: string;
  name?: string;
  grants?: string[];
  scopes?: string[];
  redirectUris?: string[];
  secret?: boolean;
  jwks?: Client['jwks'];
  jwksUrl?: string | null;
  readAttributes?: string[] | null;
  accessTokenTtl?: number | null;
}

export const GRANT_TYPES = ['client_credentials', 'authorization_code', 'refresh_token'] as const;

/** A registered JWK Set holds public asymmetric keys only (SMART Backend Services 'client-confidential-asymmetric'). */
function checkJwks(jwks: Client['jwks']): void {
  if (!jwks) return;
  for (const k of jwks.keys) {
    if (k.kty !== 'RSA' && k.kty !== 'EC' && k.kty !== 'OKP') throw new AdminError(`JWK Set: key type '${String(k.kty)}' is not an asymmetric public key`);
    if ('d' in k || 'p' in k) throw new AdminError('JWK Set: holds a private key; register the public keys only');
  }
}

/** The rules every registration keeps, at creation and at each change (`cinder client update`). */
export function checkClient(c: Client): void {
  if (c.grants.length === 0) throw new AdminError('a client needs at least one grant type');
  for (const g of c.grants) if (!(GRANT_TYPES as readonly string[]).includes(g)) throw new AdminError(`unknown grant type '${g}'`);
  for (const uri of c.redirectUris) {
    const problem = redirectUriProblem(uri);
    if (problem !== null) throw new AdminError(`invalid redirect URI '${uri}': ${problem}`);
  }
  for (const scope of c.scopes) {
    // Scopes travel space-delimited (RFC 6749 3.3): one holding a space would come back as several, none of them it.
    if (/\s/.test(scope) || scope === '') throw new AdminError(`invalid scope '${scope}': a scope holds no whitespace (percent-encode a filter's spaces as %20)`);
    const problem = resourceScopeProblem(scope);
    if (problem !== null) throw new AdminError(`invalid scope '${scope}': ${problem}`);
  }
  for (const a of c.readAttributes ?? []) {
    if (!USER_ATTRIBUTES.includes(a)) throw new AdminError(`unknown user attribute '${a}': one of ${USER_ATTRIBUTES.join(', ')}`);
  }
  if (c.jwksUrl && !/^https?:\/\/[^\s]+$/.test(c.jwksUrl)) throw new AdminError(`invalid JWK Set URL '${c.jwksUrl}'`);
  if (c.jwks && c.jwksUrl) throw new AdminError('register either a JWK Set or a JWK Set URL, not both');
  checkJwks(c.jwks);
  if (c.accessTokenTtl !== null && !(Number.isInteger(c.accessTokenTtl) && c.accessTokenTtl >= 30 && c.accessTokenTtl <= MAX_TOKEN_TTL)) {
    throw new AdminError(`the access token lifetime takes 30-${MAX_TOKEN_TTL} seconds`);
  }
  if (c.grants.includes('authorization_code') && !c.redirectUris.length) throw new AdminError('authorization_code clients need --redirect-uri');
  const hasKeys = !!c.jwks || !!c.jwksUrl;
  if (c.grants.includes('client_credentials') && !c.secretHash && !hasKeys) {
    throw new AdminError('client_credentials clients need a secret or a JWK Set');
  }
  if (c.grants.includes('refresh_token') && !c.secretHash && !hasKeys) {
    throw new AdminError(
      'a public client (--no-secret without --jwks-url or --jwks-file) may not have the refresh_token grant: RFC 9700 2.2.2 requires ' +
        "a public client's refresh tokens to be rotated or sender-constrained, and Cinder's are neither; leave out --grant refresh_token " +
        '(the app signs the user in again when its access token expires), or give the client a secret or keys',
    );
  }
}

/** Registers a client; the secret (when one is issued) is returned once and stored only as a SHA-256 digest. */
export async function createClient(store: Store, clock: Clock, o: NewClientOptions) {
  if (!(await store.tenants.get(o.tenant))) throw new AdminError(`tenant '${o.tenant}' does not exist`);
  const hasKeys = !!o.jwks || !!o.jwksUrl;
  const secret = (o.secret ?? !hasKeys) ? randomToken(32) : null;
  const clientId = randomToken(16);
  const client: Client = {
    tenant: o.tenant, clientId, name: o.name ?? clientId, secretHash: secret ? sha256Hex(secret) : null,
    grants: o.grants?.length ? o.grants : ['client_credentials'], scopes: o.scopes ?? [], redirectUris: o.redirectUris ?? [],
    jwks: o.jwks ?? null, jwksUrl: o.jwksUrl ?? null, readAttributes: o.readAttributes ?? null, accessTokenTtl: o.accessTokenTtl ?? null,
    createdAt: clock.now(), disabled: false, previousSecretHash: null, previousSecretUntil: null, deletedAt: null, tokensRevokedAt: null,
  };
  checkClient(client);
  await store.clients.create(client);
  return { client, clientSecret: secret };
}
