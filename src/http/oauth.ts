import { Hono } from 'hono';
import type { AuthDeps } from '../auth/deps.ts';
import { handleTokenRequest } from '../auth/token-endpoint.ts';
import { OAuthError } from '../errors.ts';
import { readLimited } from './body.ts';

const NO_STORE = { 'Cache-Control': 'no-store', Pragma: 'no-cache' };
const FORM_LIMIT = 64 * 1024;

/** Reads an `application/x-www-form-urlencoded` body (RFC 6749 3.2), as the token endpoint requires. */
export async function readForm(req: Request): Promise<URLSearchParams> {
  const type = (req.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') {
    throw new OAuthError('invalid_request', 'the body must be application/x-www-form-urlencoded');
  }
  let text: string;
  try {
    text = await readLimited(req, FORM_LIMIT);
  } catch (err) {
    throw new OAuthError('invalid_request', 'the request body is too large', 400, {}, { cause: err });
  }
  return new URLSearchParams(text);
}

/** The authorization server's HTTP routes (global, not per tenant). */
export function oauthRoutes(deps: AuthDeps): Hono {
  const app = new Hono();
  app.post('/oauth2/token', async (c) => {
    const form = await readForm(c.req.raw);
    const body = await handleTokenRequest(deps, { form, authorization: c.req.header('authorization') });
    return new Response(JSON.stringify(body), { status: 200, headers: { 'Content-Type': 'application/json;charset=UTF-8', ...NO_STORE } });
  });
  app.all('/oauth2/token', () => {
    throw new OAuthError('invalid_request', 'the token endpoint accepts POST only', 405, { Allow: 'POST' });
  });
  app.get('/oauth2/jwks', async (c) => c.json(await deps.keys.jwks(), 200, { 'Cache-Control': 'public, max-age=300' }));
  return app;
}
