import type { AuthorizationRequest } from './authorize.ts';
import type { AuthDeps } from './deps.ts';
import { deviceOf, issueDeviceCookie } from './device-cookie.ts';
import { completeSignIn, type AuthorizeStep } from './picker-flow.ts';
import { verifyUser } from './users.ts';

export type SignInResult =
  /** `deviceCookie`: the value of the device cookie to give the browser (a new one at each sign-in). */
  | { ok: true; step: AuthorizeStep; deviceCookie: string }
  | { ok: false; reason: 'invalid' }
  | { ok: false; reason: 'throttled'; retryAfter: number };

/**
 * Signs a user of the client's tenant in for an authorization request and issues the code. Attempts are counted in
 * the database before the password is checked (per user and address, per user, per IP; or, from a browser holding
 * the user's device cookie `deviceCookie`, per device: createLoginThrottle), and stay counted when it is wrong; past
 * a limit, sign-in is refused without checking the password until the window ends. A signed-in user goes back to the
 * client with a code, or on to the patient picker (completeSignIn), and the browser gets a new device cookie.
 */
export async function signIn(
  deps: AuthDeps, req: AuthorizationRequest, username: string, password: string, ip: string, deviceCookie: string | null,
): Promise<SignInResult> {
  const tenant = req.client.tenant;
  const throttle = deps.limits.loginFailures;
  const from = { ip, device: await deviceOf(deps.deviceCookies, deviceCookie, tenant, username, deps.clock.now()) };
  const wait = await throttle.attempt(tenant, username, from);
  if (wait !== null) {
    deps.audit?.record(tenant, { kind: 'login', ok: false, detail: `${username} (throttled)`, requestor: { clientId: req.client.clientId, address: ip } });
    return { ok: false, reason: 'throttled', retryAfter: wait };
  }
  const user = await verifyUser(deps.store, tenant, username, password);
  if (!user) {
    deps.log.info('sign-in failed', { tenant, clientId: req.client.clientId, ip });
    deps.audit?.record(tenant, { kind: 'login', ok: false, detail: username, requestor: { clientId: req.client.clientId, address: ip } });
    return { ok: false, reason: 'invalid' };
  }
  deps.audit?.record(tenant, {
    kind: 'login', ok: true, detail: username, requestor: { clientId: req.client.clientId, address: ip, user: user.id, ...(user.fhirUser ? { fhirUser: user.fhirUser } : {}) },
  });
  await throttle.succeeded(tenant, username, from);
  const now = deps.clock.now();
  return { ok: true, step: await completeSignIn(deps, req, user, now), deviceCookie: await issueDeviceCookie(deps.deviceCookies, tenant, username, now) };
}
