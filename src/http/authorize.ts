import { Hono, type Context } from 'hono';
import {
  AuthorizePageError, AuthorizeRedirectError, redirectWith, refuseMalformedRequest, validateAuthorizationRequest, type AuthorizationRequest,
} from '../auth/authorize.ts';
import type { AuthDeps } from '../auth/deps.ts';
import { DEVICE_COOKIE, DEVICE_COOKIE_MAX_AGE } from '../auth/device-cookie.ts';
import { errorPage, loginPage } from '../auth/login-page.ts';
import { LoginTicketError } from '../auth/login-ticket.ts';
import { signIn } from '../auth/login.ts';
import { pickerStep, type AuthorizeStep, type PickerInput } from '../auth/picker-flow.ts';
import { pickerPage } from '../auth/picker-page.ts';
import { rateLimitKey } from '../auth/rate-limit.ts';
import { randomToken } from '../auth/secrets.ts';
import { basePathOf, bodyLimits } from '../config.ts';
import { FhirError } from '../errors.ts';
import { splitQuery, strictQuery } from '../fhir/query-encoding.ts';
import { formCharsetNote, readFormBody } from './body.ts';
import { clientIp } from './client-ip.ts';
import { cookieValue, formTarget, htmlHeaders, sameToken, seeOther } from './html.ts';

const CSRF_COOKIE = 'cinder_csrf';

/** Per-app rendering context of the login routes. */
interface LoginContext {
  deps: AuthDeps;
  https: boolean;
  origin: string;
  /** The path the browser sees the authorize endpoint at: the base URL's path and `/oauth2/authorize`. */
  cookiePath: string;
  trustProxy: boolean;
}

function html(l: LoginContext, body: string, status: number, formAction = "'none'", extra: Record<string, string> = {}): Response {
  return new Response(body, { status, headers: { ...htmlHeaders(l.https, formAction), ...extra } });
}

/**
 * The CSRF cookie (double-submit: an HttpOnly SameSite=Strict cookie and a hidden field) holding `csrf`,
 * sent back only to the authorize endpoint, at the path the browser sees (below a base URL's path).
 */
function csrfCookie(l: LoginContext, csrf: string): Record<string, string> {
  return { 'Set-Cookie': `${CSRF_COOKIE}=${csrf}; Path=${l.cookiePath}; HttpOnly; SameSite=Strict; Max-Age=1800${l.https ? '; Secure' : ''}` };
}

/** The login form with a fresh CSRF token. */
function showLogin(l: LoginContext, req: AuthorizationRequest, status: number, error?: string, username?: string): Response {
  const csrf = randomToken(32);
  const body = loginPage({ clientName: req.client.name, scopes: req.scopes, params: req.params, csrfToken: csrf, error, username: username ?? req.loginHint ?? undefined });
  return html(l, body, status, `'self' ${formTarget(req.redirectUri)}`, csrfCookie(l, csrf));
}

/**
 * The device cookie (src/auth/device-cookie.ts) a browser gets when a user signs in with it: sent back only with the
 * sign-in form (SameSite=Strict, the authorize endpoint's path), never readable by a script.
 */
function deviceCookie(l: LoginContext, value: string): string {
  return `${DEVICE_COOKIE}=${value}; Path=${l.cookiePath}; HttpOnly; SameSite=Strict; Max-Age=${DEVICE_COOKIE_MAX_AGE}${l.https ? '; Secure' : ''}`;
}

/**
 * Where a sign-in or picker step leads: the client's redirect URI with a code, the patient picker, or the sign-in page again.
 * The picker is shown with a fresh CSRF token after sign-in, then keeps the one its form carries.
 */
function showStep(l: LoginContext, req: AuthorizationRequest, step: AuthorizeStep, csrf = randomToken(32)): Response {
  if (step.kind === 'redirect') return seeOther(step.location);
  if (step.kind === 'sign-in') {
    const res = showLogin(l, req, step.status, step.error, step.username);
    if (step.retryAfter) res.headers.set('Retry-After', step.retryAfter);
    return res;
  }
  const body = pickerPage({ clientName: req.client.name, params: req.params, csrfToken: csrf, view: step.view });
  const headers = { ...csrfCookie(l, csrf), ...(step.retryAfter ? { 'Retry-After': step.retryAfter } : {}) };
  return html(l, body, step.status, `'self' ${formTarget(req.redirectUri)}`, headers);
}

/** The picker form's fields (src/auth/picker-page.ts). */
function pickerInput(form: URLSearchParams): PickerInput {
  return {
    ticket: form.get('login_ticket'), action: form.get('action'), name: form.get('patient_name') ?? '', query: form.get('patient_query') ?? '',
    page: form.get('patient_page') || null, next: form.get('patient_next') || null, patient: form.get('patient') || null,
  };
}

/** Rate limit per IP, then errors as an error page (never a redirect) or an RFC 6749 4.1.2.1 error redirect. */
async function guarded(l: LoginContext, c: Context, fn: () => Promise<Response>): Promise<Response> {
  const hit = l.deps.limits.loginIp.hit(rateLimitKey(clientIp(c, l.trustProxy)));
  if (!hit.ok) return html(l, errorPage('Too many requests', 'Please wait a moment and try again.'), 429, "'none'", { 'Retry-After': String(hit.retryAfter) });
  try {
    return await fn();
  } catch (err) {
    if (err instanceof AuthorizePageError) return html(l, errorPage('Sign-in request not valid', err.message), 400);
    if (err instanceof LoginTicketError) {
      l.deps.log.info('patient picker: sign-in ticket refused', { reason: err.message });
      return html(l, errorPage('Sign-in expired', 'Your sign-in is no longer valid. Go back to the application and sign in again.'), 403);
    }
    if (err instanceof AuthorizeRedirectError) {
      return seeOther(redirectWith(err.redirectUri, { error: err.error, error_description: err.description, state: err.state, iss: l.deps.config.baseUrl }));
    }
    throw err;
  }
}

/** The sign-in and picker forms' submissions: CSRF, the request re-validated, then cancel, a picker step, or credentials. */
async function submit(l: LoginContext, c: Context, form: URLSearchParams): Promise<Response> {
  // With Referrer-Policy no-referrer, browsers send `Origin: null` on the form POST; the CSRF token decides.
  const from = c.req.header('origin');
  const sameOrigin = from === undefined || from === 'null' || from === l.origin;
  if (!sameOrigin || !sameToken(cookieValue(c, CSRF_COOKIE), form.get('csrf_token'))) {
    return html(l, errorPage('Sign-in form expired', 'Go back to the application and start signing in again.'), 403);
  }
  const req = await validateAuthorizationRequest(l.deps, form, 'sign-in');
  const iss = l.deps.config.baseUrl;
  const picking = form.has('login_ticket');
  if (form.get('action') === 'cancel') {
    const description = picking ? 'the user did not choose a patient' : 'the user cancelled sign-in';
    return seeOther(redirectWith(req.redirectUri, { error: 'access_denied', error_description: description, state: req.state, iss }));
  }
  if (picking) return showStep(l, req, await pickerStep(l.deps, req, pickerInput(form)), form.get('csrf_token')!);
  const username = form.get('username') ?? '';
  const result = await signIn(l.deps, req, username, form.get('password') ?? '', clientIp(c, l.trustProxy), cookieValue(c, DEVICE_COOKIE));
  if (result.ok) {
    const res = showStep(l, req, result.step);
    res.headers.append('Set-Cookie', deviceCookie(l, result.deviceCookie));
    return res;
  }
  if (result.reason === 'invalid') return showLogin(l, req, 200, 'The username or password is not correct.', username);
  const minutes = Math.ceil(result.retryAfter / 60);
  const res = showLogin(l, req, 429, `Too many failed sign-in attempts. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`, username);
  res.headers.set('Retry-After', String(result.retryAfter));
  return res;
}

/** The text of a form posted to the authorize endpoint (a sign-in or picker form, or an authorization request by POST). */
async function readLoginText(c: Context, limit: number): Promise<string> {
  const type = (c.req.header('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') throw new AuthorizePageError('The sign-in form must be posted as application/x-www-form-urlencoded.');
  try {
    return await readFormBody(c.req.raw, limit);
  } catch (err) {
    const tooLarge = !(err instanceof FhirError) || err.category === 'too-large';
    throw new AuthorizePageError(tooLarge ? 'The sign-in form is too large.' : `The sign-in form could not be read: ${err.message}`, { cause: err });
  }
}

/**
 * The parameters of an authorization request (a GET's query, a POST's form) or of a sign-in form, each well
 * percent-encoded: URLSearchParams would read a stray `%` as itself and bytes that are not UTF-8 as U+FFFD. One that is
 * not is refused (refuseMalformedRequest): `invalid_request` at the client's redirect URI when the client, the redirect
 * URI and the state are readable and good, else an error page; a sign-in form (one with a CSRF token, which a browser
 * posts from the login page) is an error page.
 */
async function authorizationParams(deps: AuthDeps, raw: string, contentType?: string): Promise<URLSearchParams> {
  let params: URLSearchParams;
  let malformed: string[];
  let message: string;
  try {
    params = strictQuery(raw);
    // No value holds U+0000 (src/http/errors.ts nulInUrl, which leaves this endpoint to answer it as its other errors).
    const nul = [...params].find(([k, v]) => k.includes('\0') || v.includes('\0'))?.[0];
    if (nul === undefined) return params;
    malformed = [...new Set([...params].filter(([k, v]) => k.includes('\0') || v.includes('\0')).map(([k]) => k))];
    params = new URLSearchParams([...params].filter(([k]) => !malformed.includes(k)));
    message = `The parameter '${nul}' holds U+0000, which no value may hold`;
  } catch (err) {
    ({ params, malformed } = splitQuery(raw));
    message = `${(err as Error).message}${formCharsetNote(contentType)}`;
  }
  if (params.has('csrf_token') || malformed.includes('csrf_token')) throw new AuthorizePageError(`The sign-in form could not be read: ${message}`);
  return refuseMalformedRequest(deps, params, malformed, message);
}

/** The query of a request URL (without its fragment). */
const queryOf = (url: string) => {
  const q = url.indexOf('?');
  return q < 0 ? '' : url.slice(q + 1).split('#', 1)[0]!;
};

/** The authorize endpoint's path. */
export const AUTHORIZE_PATH = '/oauth2/authorize';

/** The login page and its sign-in handling at `/oauth2/authorize` (RFC 6749 4.1.1-4.1.2, OIDC Core 3.1.2). */
export function authorizeRoutes(deps: AuthDeps): Hono {
  const app = new Hono();
  const l: LoginContext = {
    deps, https: deps.config.baseUrl.startsWith('https:'), origin: new URL(deps.config.baseUrl).origin,
    cookiePath: `${basePathOf(deps.config.baseUrl)}/oauth2/authorize`, trustProxy: deps.config.trustProxy === 'on',
  };
  app.get(AUTHORIZE_PATH, (c) =>
    guarded(l, c, async () => showLogin(l, await validateAuthorizationRequest(deps, await authorizationParams(deps, queryOf(c.req.url))), 200)));
  app.post(AUTHORIZE_PATH, (c) =>
    guarded(l, c, async () => {
      const form = await authorizationParams(deps, await readLoginText(c, bodyLimits(deps.config).form), c.req.header('content-type'));
      // OIDC Core 3.1.2.1: an authorization request may itself be POSTed; only a form with a CSRF token signs in.
      if (!form.has('csrf_token')) return showLogin(l, await validateAuthorizationRequest(deps, form), 200);
      return submit(l, c, form);
    }));
  return app;
}
