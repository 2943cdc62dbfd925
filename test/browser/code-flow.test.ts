/**
 * The whole authorization code flow with PKCE through the real login page in headless Chromium
 * (JavaScript disabled: the page must work without it), ending with a verified id_token.
 */
import { afterAll, beforeAll, expect } from 'bun:test';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { browserAvailable, browserTest, cspViolations, launchChromium } from '../helpers/browser.ts';
import { createClient, createTenant } from '../../src/auth/admin.ts';
import { s256 } from '../../src/auth/pkce.ts';
import { randomToken } from '../../src/auth/secrets.ts';
import { createUser } from '../../src/auth/users.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { startCinder, type Cinder } from '../helpers/server.ts';

const test = browserTest;

const dir = mkdtempSync(join(tmpdir(), 'cinder-browser-'));
const store = createSqliteStore(join(dir, 'cinder.db'));
let cinder: Cinder;
let app: ReturnType<typeof Bun.serve>;
let browser: Browser;
let clientId: string;
let redirectUri: string;

beforeAll(async () => {
  if (!browserAvailable) return;
  cinder = await startCinder({ store });
  app = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response('<!doctype html><title>App</title><p>Back in the app</p>', { headers: { 'Content-Type': 'text/html' } }) });
  redirectUri = `http://127.0.0.1:${app.port}/callback`;
  await createTenant(store, cinder.clock, 'clinic');
  const c = await createClient(store, cinder.clock, {
    tenant: 'clinic', name: 'Browser App', grants: ['authorization_code'], scopes: ['patient/*.read'], redirectUris: [redirectUri], secret: false,
  });
  clientId = c.client.clientId;
  await createUser(store, cinder.clock, {
    tenant: 'clinic', username: 'dave', password: 'dave password 1', name: 'Dave Patient', email: 'dave@example.org', emailVerified: true, fhirUser: 'Patient/dave-1',
  });
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  cinder?.stop();
  app?.stop(true);
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

test('code flow with PKCE through the login page in Chromium, without JavaScript, ends with a verified id_token', async () => {
  const context = await browser.newContext({ javaScriptEnabled: false });
  const page = await context.newPage();
  const violations = cspViolations(page);
  const verifier = randomToken(48);
  const state = randomToken(16);
  const nonce = randomToken(16);
  const authorize = new URL(`${cinder.url}/oauth2/authorize`);
  authorize.search = new URLSearchParams({
    response_type: 'code', client_id: clientId, redirect_uri: redirectUri, scope: 'openid profile email fhirUser launch/patient patient/*.read',
    aud: `${cinder.url}/tenants/clinic/fhir/R4`, state, nonce, code_challenge: s256(verifier), code_challenge_method: 'S256',
  }).toString();

  await page.goto(authorize.toString());
  expect(await page.title()).toBe('Sign in · Cinder');
  expect(await page.getByText('Browser App').count()).toBeGreaterThan(0);

  await page.getByLabel('Username').fill('dave');
  await page.getByLabel('Password').fill('not the password');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForLoadState();
  expect(await page.getByRole('alert').textContent()).toContain('not correct');
  expect(await page.getByLabel('Username').inputValue()).toBe('dave');

  await page.getByLabel('Password').fill('dave password 1');
  await Promise.all([page.waitForURL((u) => u.href.startsWith(redirectUri)), page.getByRole('button', { name: 'Sign in' }).click()]);
  const back = new URL(page.url());
  expect(back.searchParams.get('state')).toBe(state);
  expect(back.searchParams.get('iss')).toBe(cinder.url);
  const code = back.searchParams.get('code')!;
  expect(code).toMatch(/^[A-Za-z0-9_-]{43}$/);
  expect(violations).toEqual([]);
  await context.close();

  const res = await fetch(`${cinder.url}/oauth2/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: redirectUri, client_id: clientId, code_verifier: verifier }),
  });
  expect(res.status).toBe(200);
  const tokens = (await res.json()) as { access_token: string; id_token: string; patient: string; scope: string; refresh_token?: string };
  expect(tokens.patient).toBe('dave-1');
  expect(tokens.refresh_token).toBeUndefined();
  const jwks = createRemoteJWKSet(new URL(`${cinder.url}/oauth2/jwks`));
  const { payload } = await jwtVerify(tokens.id_token, jwks, { issuer: cinder.url, audience: clientId, algorithms: ['RS256'] });
  expect(payload.nonce).toBe(nonce);
  expect(payload).toMatchObject({ name: 'Dave Patient', email: 'dave@example.org', fhirUser: `${cinder.fhir('clinic')}/Patient/dave-1` });
  const fhir = await fetch(`${cinder.fhir('clinic')}/Observation`, { headers: { Authorization: `Bearer ${tokens.access_token}` } });
  expect(fhir.status).toBe(200);
}, 60_000);
