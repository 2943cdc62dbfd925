/**
 * A registered client's lifecycle after `createClient`: change, disable, enable, delete, rotate its secret
 * (Keycloak's and Medplum's admin functions). Every change that cuts access records a revocation (src/auth/revocation.ts)
 * that every `serve` process on the database applies within REVOCATION_POLL_MS, and the token endpoint refuses a
 * disabled client within CLIENT_CACHE_TTL_MS (src/auth/client-cache.ts).
 */
import type { Clock } from '../clock.ts';
import type { Client, Revocation, Store } from '../store/types.ts';
import { AdminError, checkClient } from './admin.ts';
import { PRINCIPAL_REVOCATION_MARGIN_MS } from './revocation.ts';
import { scopesNotImplied } from './scopes.ts';
import { randomToken, sha256Hex } from './secrets.ts';
import { MAX_TOKEN_TTL } from './tokens.ts';

/** The longest grace period a rotated secret may keep working (seconds): a week. */
export const MAX_SECRET_GRACE = 7 * 86400;

/** What `cinder client update` may change; what is left out stays as it is. */
export interface ClientChanges {
  name?: string;
  grants?: string[];
  scopes?: string[];
  redirectUris?: string[];
  /** A JWK Set to register (replaces a JWK Set URL). */
  jwks?: Client['jwks'];
  /** A JWK Set URL to register (replaces an inline JWK Set). */
  jwksUrl?: string;
  /** null: every attribute again. */
  readAttributes?: string[] | null;
  /** null: the server's default lifetime again. */
  accessTokenTtl?: number | null;
}

/** Whether a client is active, disabled or deleted (`cinder client list|show`). */
export function clientStatus(c: Client): 'active' | 'disabled' | 'deleted' {
  return c.deletedAt !== null ? 'deleted' : c.disabled ? 'disabled' : 'active';
}

/** The client `clientId` names; a deleted one only when `deleted` allows it (show). */
export async function findClient(store: Store, clientId: string, deleted = false): Promise<Client> {
  const client = await store.clients.get(clientId);
  if (!client || (client.deletedAt !== null && !deleted)) throw new AdminError(`no client '${clientId}'${client ? ' (it was deleted)' : ''}`);
  return client;
}

/**
 * A revocation of every token of the client (`client`: access and refresh tokens) or of its access tokens only
 * (`client-access`), recorded now; it lasts as long as the longest access token it may cover.
 */
export function clientRevocation(kind: 'client' | 'client-access', clientId: string, now: number): Revocation {
  return { kind, value: clientId, revokedAt: now, expiresAt: now + MAX_TOKEN_TTL * 1000 + PRINCIPAL_REVOCATION_MARGIN_MS };
}

/**
 * Whether `after` takes away any scope `before` granted: a resource scope `after` no longer implies by meaning, or
 * another one removed. By meaning as a refresh is held to the registration (stillRegistered: scopesNotImplied), so
 * a token issued under `before` carries nothing `after` does not imply exactly when this says false: a filter's
 * pairs reordered, repeated or percent-encoded otherwise (`?category=a&status=final` -> `?status=final&category=a`),
 * `.read` written `.rs`, or a filter dropped or with fewer pairs narrows nothing; fewer permissions, another
 * filter or one with more pairs, or a context or type taken away does (and, as for a refresh, a filter dropped
 * whose pairs read other resources, linkingPairs: revoking then is only cautious).
 */
export function scopesNarrowed(before: string[], after: string[]): boolean {
  return scopesNotImplied(before, after, false).length > 0;
}

/** A public key as registered: the members that make it that key. */
const keyOf = (k: Record<string, unknown>) => JSON.stringify(['kty', 'crv', 'x', 'y', 'n', 'e', 'kid'].map((m) => k[m] ?? null));

/**
 * Whether `after` no longer registers a key `before` did: a key left out of the JWK Set (a leaked private key),
 * or a JWK Set URL replaced or dropped (its keys are unknown here). Adding a key removes none.
 */
export function keysRemoved(before: Client, after: Client): boolean {
  if (before.jwksUrl !== null && before.jwksUrl !== after.jwksUrl) return true;
  const kept = new Set((after.jwks?.keys ?? []).map((k) => keyOf(k as unknown as Record<string, unknown>)));
  return (before.jwks?.keys ?? []).some((k) => !kept.has(keyOf(k as unknown as Record<string, unknown>)));
}

/**
 * Changes a client's registration, checked as `createClient` checks a new one. Narrowing its scopes, or taking a
 * key out of its JWK Set (keysRemoved: the private key leaked, as rotate-secret for a secret), also revokes every
 * access token issued to it so far (they may carry a scope it no longer has, or were had with the leaked key);
 * its refresh tokens stay, and a refresh never yields more than the scopes it now holds (stillRegistered).
 */
export async function updateClient(store: Store, clock: Clock, clientId: string, changes: ClientChanges): Promise<{ client: Client; tokensRevoked: boolean }> {
  const before = await findClient(store, clientId);
  const after: Client = { ...before };
  if (changes.name !== undefined) after.name = changes.name;
  if (changes.grants !== undefined) after.grants = changes.grants;
  if (changes.scopes !== undefined) after.scopes = changes.scopes;
  if (changes.redirectUris !== undefined) after.redirectUris = changes.redirectUris;
  if (changes.jwks !== undefined && changes.jwksUrl !== undefined) throw new AdminError('register either a JWK Set or a JWK Set URL, not both');
  if (changes.jwks !== undefined) Object.assign(after, { jwks: changes.jwks, jwksUrl: null });
  if (changes.jwksUrl !== undefined) Object.assign(after, { jwks: null, jwksUrl: changes.jwksUrl });
  if (changes.readAttributes !== undefined) after.readAttributes = changes.readAttributes;
  if (changes.accessTokenTtl !== undefined) after.accessTokenTtl = changes.accessTokenTtl;
  checkClient(after);
  const revoke = scopesNarrowed(before.scopes, after.scopes) || keysRemoved(before, after);
  await store.clients.update(after);
  if (revoke) await store.oauth.revoke(clientRevocation('client-access', clientId, clock.now()));
  return { client: after, tokensRevoked: revoke };
}

/**
 * Revokes every token of `client` (as written already: a disabled client is issued nothing from here on), refresh
 * tokens and so every sign-in with it included, and keeps the revocation's time, as the store recorded it, with it
 * (Client.tokensRevokedAt), for the Subscriptions it activated on those sign-ins (src/fhir/subscriptions/owner.ts).
 */
async function revokeClientTokens(store: Store, client: Client, now: number): Promise<Client> {
  const recorded = await store.oauth.revoke(clientRevocation('client', client.clientId, now));
  // Its number with it (never an earlier revocation's beside this one's time).
  const { tokensRevokedSeq: _earlier, ...rest } = client;
  const after: Client = { ...rest, tokensRevokedAt: recorded.revokedAt, ...(recorded.seq !== undefined && { tokensRevokedSeq: recorded.seq }) };
  await store.clients.update(after);
  return after;
}

/**
 * Disables a client: the token endpoint, revocation and introspection refuse it, every token it was issued
 * (access and refresh) is revoked, and its Subscriptions notify nothing. Enabling it again lets it obtain new
 * tokens (those revoked stay revoked) and its own Subscriptions notify again; those it activated on its users'
 * sign-ins, revoked with its tokens, do not. Idempotent (disabling again revokes what was issued meanwhile).
 */
export async function disableClient(store: Store, clock: Clock, clientId: string): Promise<Client> {
  const client = { ...(await findClient(store, clientId)), disabled: true };
  await store.clients.update(client);
  return revokeClientTokens(store, client, clock.now());
}

/** Enables a disabled client (not a deleted one). */
export async function enableClient(store: Store, clientId: string): Promise<Client> {
  const client = { ...(await findClient(store, clientId)), disabled: false };
  await store.clients.update(client);
  return client;
}

/**
 * Deletes a client, softly: it is disabled for good (as disableClient, its tokens revoked), its secrets and keys
 * are forgotten, and the row stays so that the audit trail and export jobs still name it; its id is never reused.
 */
export async function deleteClient(store: Store, clock: Clock, clientId: string): Promise<Client> {
  const now = clock.now();
  const client: Client = {
    ...(await findClient(store, clientId)), disabled: true, deletedAt: now, secretHash: null, previousSecretHash: null, previousSecretUntil: null,
    jwks: null, jwksUrl: null,
  };
  await store.clients.update(client);
  return revokeClientTokens(store, client, now);
}

/**
 * Issues a client a new secret, returned once. With `graceSeconds` 0 (the default: a leaked secret) the old one
 * stops at once and every access token issued so far is revoked; with a grace period (a planned rotation) the
 * old secret keeps working until it ends and issued tokens stay. Refresh tokens stay either way: refreshing
 * needs the client's secret, so they are only of use with the new one.
 */
export async function rotateClientSecret(store: Store, clock: Clock, clientId: string, graceSeconds = 0): Promise<{ client: Client; clientSecret: string }> {
  if (!(Number.isInteger(graceSeconds) && graceSeconds >= 0 && graceSeconds <= MAX_SECRET_GRACE)) {
    throw new AdminError(`the grace period takes 0-${MAX_SECRET_GRACE} seconds`);
  }
  const before = await findClient(store, clientId);
  if (before.secretHash === null) throw new AdminError(`client '${clientId}' has no secret (it is public, or authenticates with its keys)`);
  const now = clock.now();
  const secret = randomToken(32);
  const client: Client = {
    ...before, secretHash: sha256Hex(secret),
    previousSecretHash: graceSeconds > 0 ? before.secretHash : null, previousSecretUntil: graceSeconds > 0 ? now + graceSeconds * 1000 : null,
  };
  await store.clients.update(client);
  if (graceSeconds === 0) await store.oauth.revoke(clientRevocation('client-access', clientId, now));
  return { client, clientSecret: secret };
}
