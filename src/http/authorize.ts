import { Hono, type Context } from 'hono';
import { timingSafeEqual } from 'node:crypto';
import {
  AuthorizePageError, AuthorizeRedirectError, redirectWith, validateAuthorizationRequest, type AuthorizationRequest,
} from '../auth/authorize.ts';
import type { AuthDeps } from '../auth/deps.ts';
import { errorPage, loginPage, STYLE_HASH } from '../auth/login-page.ts';
import { signIn } from '../auth/login.ts';
import { randomToken } from '../auth/secrets.ts';
import { readLimited } from './body.ts';
import { clientIp } from './client-ip.ts';

const CSRF_COOKIE = 'cinder_csrf';
const FORM_LIMIT = 32 * 1024;

/** `form-action` source for a redirect URI: Chromium applies form-action to the redirect after the POST. */
function formTarget(redirectUri: string): string {
  const u = new URL(redirectUri);
  return u.protocol === 'http:' || u.protocol === 'https:' ? u.origin : u.protocol;
}

/** Security headers of every HTML response (CSP without inline script or unhashed style). */
function htmlHeaders(https: boolean, formAction: string): Record<string, string> {
  const h: Record<string, string> = {
    'Content-Type': 'text/html; charset=utf-8',
    'Content-Security-Policy': `default-src 'none'; style-src ${STYLE_HASH}; form-action ${formAction}; frame-ancestors 'none'; base-uri 'none'`,
    'X-Frame-Options': 'DENY',
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    'Cross-Origin-Opener-Policy': 'same-origin',
    'Cross-Origin-Resource-Policy': 'same-origin',
    'Permissions-Policy': 'camera=(), microphone=(), geolocation=(), interest-cohort=()',
    'Cache-Control': 'no-store',
    Pragma: 'no-cache',
  };
  if (https) h['Strict-Transport-Security'] = 'max-age=31536000';
  return h;
}

function cookieValue(c: Context, name: string): string | null {
  for (const part of (c.req.header('cookie') ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return v.join('=');
  }
  return null;
}

function sameToken(a: string | null, b: string | null): boolean {
  if (!a || !b || a.length !== b.length) return false;
  return timingSafeEqual(Buffer.from(a), Buffer.from(b));
}

/** The login page and its sign-in handling at `/oauth2/authorize` (RFC 6749 4.1.1-4.1.2, OIDC Core 3.1.2). */
export function authorizeRoutes(deps: AuthDeps): Hono {
  const app = new Hono();
  const https = deps.config.baseUrl.startsWith('https:');
  const origin = new URL(deps.config.baseUrl).origin;
  const trustProxy = deps.config.trustProxy === 'on';

  const html = (body: string, status: number, formAction = "'none'", extra: Record<string, string> = {}) =>
    new Response(body, { status, headers: { ...htmlHeaders(https, formAction), ...extra } });

  function showLogin(req: AuthorizationRequest, status: number, error?: string, username?: string): Response {
    const csrf = randomToken(32);
    const cookie = `${CSRF_COOKIE}=${csrf}; Path=/oauth2/authorize; HttpOnly; SameSite=Strict; Max-Age=1800${https ? '; Secure' : ''}`;
    const body = loginPage({ clientName: req.client.name, scopes: req.scopes, params: req.params, csrfToken: csrf, error, username: username ?? req.loginHint ?? undefined });
    return html(body, status, `'self' ${formTarget(req.redirectUri)}`, { 'Set-Cookie': cookie });
  }

  function redirect(location: string): Response {
    return new Response(null, { status: 303, headers: { Location: location, 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer' } });
  }

  /** Turns validation errors into an error page (never a redirect) or an RFC 6749 4.1.2.1 error redirect. */
  async function guarded(c: Context, fn: () => Promise<Response>): Promise<Response> {
    const ip = clientIp(c, trustProxy);
    const hit = deps.limits.loginIp.hit(ip);
    if (!hit.ok) return html(errorPage('Too many requests', 'Please wait a moment and try again.'), 429, "'none'", { 'Retry-After': String(hit.retryAfter) });
    try {
      return await fn();
    } catch (err) {
      if (err instanceof AuthorizePageError) return html(errorPage('Sign-in request not valid', err.message), 400);
      if (err instanceof AuthorizeRedirectError) {
        return redirect(redirectWith(err.redirectUri, { error: err.error, error_description: err.description, state: err.state, iss: deps.config.baseUrl }));
      }
      throw err;
    }
  }

  async function submit(c: Context, form: URLSearchParams): Promise<Response> {
    // With Referrer-Policy no-referrer, browsers send `Origin: null` on the form POST; the CSRF token decides.
    const from = c.req.header('origin');
    const sameOrigin = from === undefined || from === 'null' || from === origin;
    if (!sameOrigin || !sameToken(cookieValue(c, CSRF_COOKIE), form.get('csrf_token'))) {
      return html(errorPage('Sign-in form expired', 'Go back to the application and start signing in again.'), 403);
    }
    const req = await validateAuthorizationRequest(deps, form);
    if (form.get('action') === 'cancel') {
      return redirect(redirectWith(req.redirectUri, { error: 'access_denied', error_description: 'the user cancelled sign-in', state: req.state, iss: deps.config.baseUrl }));
    }
    const username = form.get('username') ?? '';
    const result = await signIn(deps, req, username, form.get('password') ?? '', clientIp(c, trustProxy));
    if (result.ok) return redirect(result.redirect);
    if (result.reason === 'throttled') {
      const minutes = Math.ceil(result.retryAfter / 60);
      const res = showLogin(req, 429, `Too many failed sign-in attempts. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`, username);
      res.headers.set('Retry-After', String(result.retryAfter));
      return res;
    }
    return showLogin(req, 200, 'The username or password is not correct.', username);
  }

  app.get('/oauth2/authorize', (c) => guarded(c, async () => showLogin(await validateAuthorizationRequest(deps, new URL(c.req.url).searchParams), 200)));
  app.post('/oauth2/authorize', (c) =>
    guarded(c, async () => {
      const type = (c.req.header('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
      if (type !== 'application/x-www-form-urlencoded') throw new AuthorizePageError('The sign-in form must be posted as application/x-www-form-urlencoded.');
      const form = new URLSearchParams(await readLimited(c.req.raw, FORM_LIMIT).catch((err: unknown) => {
        throw new AuthorizePageError('The sign-in form is too large.', { cause: err });
      }));
      // OIDC Core 3.1.2.1: an authorization request may itself be POSTed; only a form with credentials signs in.
      if (!form.has('csrf_token')) return showLogin(await validateAuthorizationRequest(deps, form), 200);
      return submit(c, form);
    }));
  return app;
}
