import { AUTHORIZE_PARAMS, type AuthorizationRequest } from './authorize.ts';
import type { AuthDeps } from './deps.ts';
import { sha256Hex } from './secrets.ts';
import { signServerJws, verifyServerJws, type ServerJwsRefusal } from './server-jws.ts';

/** How long a user who signed in has to choose a patient (the picker's searches included). */
export const LOGIN_TICKET_TTL_S = 900;

/** The JWS `typ` of a login ticket (RFC 8725 3.11): never an access token (`at+jwt`), nor the reverse. */
const TYP = 'cinder-login+jwt';

/** Who signed in, for which authorization request, and when. */
export interface LoginTicket {
  tenant: string;
  userId: string;
  /** Epoch ms of the sign-in. */
  authTime: number;
  /** The number of the user's last revocation when they signed in (User.revocationSeq of the record checked). */
  authRevocationSeq?: number;
  /** The number of the last revocation of the client's tokens when the user signed in (Client.revocationSeq). */
  authClientRevocationSeq?: number;
}

/** A ticket that is missing, forged, expired, or issued for another request or user. */
export class LoginTicketError extends Error {
  override name = 'LoginTicketError';
}

/** The authorization request's parameters, digested: a ticket is good for the request it was issued for only. */
function requestDigest(req: AuthorizationRequest): string {
  return sha256Hex(JSON.stringify(AUTHORIZE_PARAMS.map((name) => req.params[name] ?? null)));
}

const KIND = { typ: TYP, ttl: LOGIN_TICKET_TTL_S };

/**
 * Signs the proof that `userId` signed in for `req`, carried by the patient picker's form between its
 * steps (src/auth/server-jws.ts: an ES256 JWS with the server's signing key, kept in the database, so any
 * process verifies it), valid LOGIN_TICKET_TTL_S. No state is stored: a ticket only lets its holder
 * finish this sign-in.
 */
export function signLoginTicket(deps: AuthDeps, req: AuthorizationRequest, t: LoginTicket): Promise<string> {
  return signServerJws(deps, KIND, {
    tenant: t.tenant, client_id: req.client.clientId, auth_ms: t.authTime, ...(t.authRevocationSeq !== undefined && { auth_rs: t.authRevocationSeq }),
    ...(t.authClientRevocationSeq !== undefined && { auth_crs: t.authClientRevocationSeq }), req: requestDigest(req),
  }, t.userId);
}

const REFUSALS: Record<ServerJwsRefusal, string> = {
  malformed: 'the sign-in ticket is malformed',
  'unknown-key': 'the sign-in ticket was not signed by this server',
  invalid: 'the sign-in ticket is invalid or has expired',
};

const verified = (deps: AuthDeps, ticket: string) =>
  verifyServerJws(deps, KIND, ticket, ['sub'], (why, cause) => new LoginTicketError(REFUSALS[why], { cause }));

/** Verifies a login ticket for `req` (same client, tenant and request parameters); throws LoginTicketError. */
export async function verifyLoginTicket(deps: AuthDeps, req: AuthorizationRequest, ticket: string | null): Promise<LoginTicket> {
  if (!ticket) throw new LoginTicketError('the sign-in ticket is missing');
  const p = await verified(deps, ticket);
  if (p.client_id !== req.client.clientId || p.tenant !== req.client.tenant || p.req !== requestDigest(req)) {
    throw new LoginTicketError('the sign-in ticket was issued for another authorization request');
  }
  if (typeof p.auth_ms !== 'number' || typeof p.sub !== 'string' || (p.auth_rs !== undefined && typeof p.auth_rs !== 'number') || (p.auth_crs !== undefined && typeof p.auth_crs !== 'number')) {
    throw new LoginTicketError('the sign-in ticket lacks its claims');
  }
  return {
    tenant: p.tenant, userId: p.sub, authTime: p.auth_ms, ...(typeof p.auth_rs === 'number' && { authRevocationSeq: p.auth_rs }),
    ...(typeof p.auth_crs === 'number' && { authClientRevocationSeq: p.auth_crs }),
  };
}
