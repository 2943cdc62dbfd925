/**
 * Cinder behind a reverse proxy at a path, in headless Chromium, as an interoperability probe met it: a
 * small proxy forwards `/cinder/*` to Cinder without the prefix, and `CINDER_BASE_URL` is the proxy's
 * `/cinder`. A `fhirclient` app on a third origin launches from the FHIR base below the path; a
 * Practitioner signs in on the login page the browser sees at `/cinder/oauth2/authorize` (its CSRF
 * cookie must come back there), chooses a patient in the picker (its `patient/` scopes without
 * `launch/patient` ask for one), and the app reads that patient's data, every call through the proxy.
 */
import { afterAll, beforeAll, expect } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { appAssets, appPage, readyScript, browserAvailable, browserTest, cspViolations, launchChromium } from '../helpers/browser.ts';
import { createClient, createTenant } from '../../src/auth/admin.ts';
import { createUser } from '../../src/auth/users.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { startCinder, type Cinder } from '../helpers/server.ts';

const test = browserTest;

// The probe's scopes: patient/ without launch/patient, which Cinder infers (the picker asks all the same).
const SCOPE = 'openid fhirUser patient/*.rs';
const PREFIX = '/cinder';

const dir = mkdtempSync(join(tmpdir(), 'cinder-prefix-'));
const store = createSqliteStore(join(dir, 'cinder.db'));
let cinder: Cinder;
let proxy: ReturnType<typeof Bun.serve>;
let site: ReturnType<typeof Bun.serve>;
let browser: Browser;
let clientId: string;
/** The public base URL: the proxy's origin and `/cinder`. */
let publicBase: string;
const forwarded: string[] = [];

const html = (body: string) => appPage('Chart app', body);

/** The reverse proxy: `/cinder/x` to Cinder's `/x`, method, headers and body as sent; anything else 404. */
async function forward(req: Request): Promise<Response> {
  const url = new URL(req.url);
  if (!url.pathname.startsWith(`${PREFIX}/`)) return new Response('not behind this proxy', { status: 404 });
  forwarded.push(`${req.method} ${url.pathname}`);
  const headers = new Headers(req.headers);
  headers.delete('host');
  headers.set('accept-encoding', 'identity');
  const body = req.method === 'GET' || req.method === 'HEAD' ? undefined : await req.arrayBuffer();
  const res = await fetch(`${cinder.url}${url.pathname.slice(PREFIX.length)}${url.search}`, { method: req.method, headers, body, redirect: 'manual' });
  return new Response(res.body, { status: res.status, headers: res.headers });
}

function appPages(): (req: Request) => Response {
  return (req) => {
    const path = new URL(req.url).pathname;
    const asset = appAssets(path);
    if (asset) return asset;
    if (path === '/launch.html') {
      return html(`<script src="/fhir-client.js"></script><script>
        FHIR.oauth2.authorize({ iss: ${JSON.stringify(`${publicBase}/tenants/clinic/fhir/R4`)}, clientId: ${JSON.stringify(clientId)}, redirectUri: 'app.html', pkceMode: 'required', scope: ${JSON.stringify(SCOPE)} });
      </script>`);
    }
    if (path === '/app.html') {
      return html(readyScript(`
          const patient = await client.patient.read();
          const observations = await client.request('Observation');
          return {
            patientId: client.patient.id, patientName: patient.name[0].family, tokenPatient: client.state.tokenResponse.patient,
            scope: client.state.tokenResponse.scope, observationIds: observations.entry.map((e) => e.resource.id),
            selfLink: observations.link[0].url,
          };
      `));
    }
    return new Response('not found', { status: 404 });
  };
}

beforeAll(async () => {
  if (!browserAvailable) return;
  proxy = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: forward });
  publicBase = `http://127.0.0.1:${proxy.port}${PREFIX}`;
  site = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: appPages() });
  const appOrigin = `http://127.0.0.1:${site.port}`;
  cinder = await startCinder({ store, env: { CINDER_BASE_URL: publicBase, CINDER_CORS_ORIGINS: appOrigin } });
  await createTenant(store, cinder.clock, 'clinic');
  const app = await createClient(store, cinder.clock, {
    tenant: 'clinic', name: 'Chart app', grants: ['authorization_code'], secret: false,
    scopes: ['openid', 'fhirUser', 'patient/*.rs'], redirectUris: [`${appOrigin}/app.html`],
  });
  clientId = app.client.clientId;
  await createUser(store, cinder.clock, { tenant: 'clinic', username: 'pat', password: 'pat password 1', name: 'Dr Pat', fhirUser: 'Practitioner/pr-1' });
  const admin = await createClient(store, cinder.clock, { tenant: 'clinic', name: 'admin', scopes: ['system/*.*'] });
  const res = await fetch(`${publicBase}/oauth2/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: 'Basic ' + btoa(`${admin.client.clientId}:${admin.clientSecret}`) },
    body: 'grant_type=client_credentials',
  });
  const token = ((await res.json()) as { access_token: string }).access_token;
  for (const r of [
    { resourceType: 'Patient', id: 'ann', name: [{ family: 'Smith', given: ['Ann'] }] },
    { resourceType: 'Patient', id: 'bob', name: [{ family: 'Jones', given: ['Bob'] }] },
    { resourceType: 'Observation', id: 'obs-ann', status: 'final', code: { text: 'Body weight' }, subject: { reference: 'Patient/ann' } },
    { resourceType: 'Observation', id: 'obs-bob', status: 'final', code: { text: 'Body weight' }, subject: { reference: 'Patient/bob' } },
  ]) {
    const put = await fetch(`${publicBase}/tenants/clinic/fhir/R4/${r.resourceType}/${r.id}`, {
      method: 'PUT', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' }, body: JSON.stringify(r),
    });
    expect(put.status).toBe(201);
  }
  browser = await launchChromium();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  cinder?.stop();
  proxy?.stop(true);
  site?.stop(true);
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

test('behind a proxy at /cinder: fhirclient launches, a Practitioner signs in and picks a patient, the app reads that patient', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const violations = cspViolations(page);
  await page.goto(`http://127.0.0.1:${site.port}/launch.html`);
  await page.waitForURL((u) => u.href.startsWith(`${publicBase}/oauth2/authorize?`));
  expect(await page.title()).toBe('Sign in · Cinder');
  const [cookie] = await context.cookies(`${publicBase}/oauth2/authorize`);
  expect(cookie).toMatchObject({ name: 'cinder_csrf', path: `${PREFIX}/oauth2/authorize`, httpOnly: true, sameSite: 'Strict' });

  await page.getByLabel('Username').fill('pat');
  await page.getByLabel('Password').fill('pat password 1');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForLoadState();
  expect(await page.title()).toBe('Choose a patient · Cinder');
  expect(new URL(page.url()).pathname).toBe(`${PREFIX}/oauth2/authorize`);
  await page.getByRole('radio', { name: /^Jones, Bob/ }).check();
  await Promise.all([page.waitForURL((u) => u.pathname === '/app.html'), page.getByRole('button', { name: 'Continue' }).click()]);
  await page.waitForFunction(() => document.getElementById('status')?.textContent !== 'working', undefined, { timeout: 20_000 });

  expect(await page.evaluate(() => (window as unknown as { failure?: string }).failure)).toBeUndefined();
  const result = await page.evaluate(() => (window as unknown as { result: Record<string, unknown> }).result);
  expect(result).toMatchObject({ patientId: 'bob', patientName: 'Jones', tokenPatient: 'bob', scope: SCOPE, observationIds: ['obs-bob'] });
  expect(result.selfLink as string).toStartWith(`${publicBase}/tenants/clinic/fhir/R4/Observation`);
  // Everything went through the proxy: the discovery document, both sign-in steps, the token, the reads.
  for (const path of ['/tenants/clinic/fhir/R4/.well-known/smart-configuration', '/oauth2/authorize', '/oauth2/token', '/tenants/clinic/fhir/R4/Observation']) {
    expect(forwarded.filter((f) => f.endsWith(` ${PREFIX}${path}`))).not.toEqual([]);
  }
  expect(forwarded.filter((f) => f === `POST ${PREFIX}/oauth2/authorize`).length).toBe(2);
  expect(violations).toEqual([]);
  await context.close();
}, 60_000);
