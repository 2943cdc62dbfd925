import type { Context } from 'hono';
import { timingSafeEqual } from 'node:crypto';
import { STYLE_HASH } from '../auth/login-page.ts';

/** `form-action` source for a redirect URI: Chromium applies form-action to the redirect after a POST. */
export function formTarget(redirectUri: string): string {
  const u = new URL(redirectUri);
  return u.protocol === 'http:' || u.protocol === 'https:' ? u.origin : u.protocol;
}

/** Security headers of every HTML response: a CSP without script or unhashed style, no framing, no referrer. */
export function htmlHeaders(https: boolean, formAction: string): Record<string, string> {
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

/** A cookie's value from the request, or null. */
export function cookieValue(c: Context, name: string): string | null {
  for (const part of (c.req.header('cookie') ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return v.join('=');
  }
  return null;
}

/** Constant-time equality of two tokens (false when either is missing). */
export function sameToken(a: string | null, b: string | null): boolean {
  if (!a || !b || a.length !== b.length) return false;
  return timingSafeEqual(Buffer.from(a), Buffer.from(b));
}

/** A 303 redirect that is never cached and leaks no referrer. */
export function seeOther(location: string): Response {
  return new Response(null, { status: 303, headers: { Location: location, 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer' } });
}
