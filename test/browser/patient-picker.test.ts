/**
 * The SMART standalone-launch patient picker in headless Chromium. A browser app on another origin,
 * written with `fhirclient` (SMART's JavaScript client), launches with `launch/patient` as a public
 * client with PKCE; a Practitioner signs in on Cinder's login page, searches the picker by name, chooses
 * a patient and continues; the app gets that patient from the token response and its patient/ scopes
 * read that patient's compartment alone. A second run, with JavaScript disabled, drives the picker's
 * paging and cancel: the pages need no script (their CSP forbids any).
 */
import { afterAll, beforeAll, expect } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { appAssets, appPage, readyScript, browserAvailable, browserTest, cspViolations, launchChromium } from '../helpers/browser.ts';
import { createClient, createTenant } from '../../src/auth/admin.ts';
import { PICKER_PAGE_SIZE } from '../../src/auth/patient-picker.ts';
import { s256 } from '../../src/auth/pkce.ts';
import { randomToken } from '../../src/auth/secrets.ts';
import { createUser } from '../../src/auth/users.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { startCinder, type Cinder } from '../helpers/server.ts';

const test = browserTest;

const SCOPE = 'openid fhirUser launch/patient patient/Patient.rs patient/Observation.rs';

const dir = mkdtempSync(join(tmpdir(), 'cinder-picker-'));
const store = createSqliteStore(join(dir, 'cinder.db'));
let cinder: Cinder;
let site: ReturnType<typeof Bun.serve>;
let browser: Browser;
let clientId: string;
let appOrigin: string;

const html = (body: string) => appPage('Chart app', body);

/**
 * The app: `launch.html` starts the standalone launch; `app.html`, the redirect URI, completes it and
 * leaves what it read in `window.result` (or `window.failure`). `callback.html` is a plain page for the
 * run without JavaScript, which reads the code from the address itself.
 */
function appPages(iss: () => string): (req: Request) => Response {
  return (req) => {
    const path = new URL(req.url).pathname;
    const asset = appAssets(path);
    if (asset) return asset;
    if (path === '/callback.html') return html('<p>Back in the app</p>');
    if (path === '/launch.html') {
      return html(`<script src="/fhir-client.js"></script><script>
        FHIR.oauth2.authorize({ iss: ${JSON.stringify(iss())}, clientId: ${JSON.stringify(clientId)}, redirectUri: 'app.html', pkceMode: 'required', scope: ${JSON.stringify(SCOPE)} });
      </script>`);
    }
    if (path === '/app.html') {
      return html(readyScript(`
          const patient = await client.patient.read();
          const observations = await client.request('Observation');
          let otherPatients;
          try {
            await client.request('Observation/obs-ann');
            otherPatients = 'read';
          } catch (err) {
            otherPatients = err.status || String(err);
          }
          return {
            patientId: client.patient.id, patientName: patient.name[0].given[0] + ' ' + patient.name[0].family,
            tokenPatient: client.state.tokenResponse.patient, scope: client.state.tokenResponse.scope,
            observationIds: observations.entry.map((e) => e.resource.id), otherPatients,
          };
      `));
    }
    return new Response('not found', { status: 404 });
  };
}

async function adminPut(token: string, resource: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${cinder.fhir('clinic')}/${resource.resourceType}/${resource.id}`, {
    method: 'PUT', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' }, body: JSON.stringify(resource),
  });
  expect(res.status).toBe(201);
}

beforeAll(async () => {
  if (!browserAvailable) return;
  let iss = '';
  site = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: appPages(() => iss) });
  appOrigin = `http://127.0.0.1:${site.port}`;
  cinder = await startCinder({ store, env: { CINDER_CORS_ORIGINS: appOrigin } });
  iss = cinder.fhir('clinic');
  await createTenant(store, cinder.clock, 'clinic');
  const app = await createClient(store, cinder.clock, {
    tenant: 'clinic', name: 'Chart app', grants: ['authorization_code'], secret: false,
    scopes: ['openid', 'fhirUser', 'launch/patient', 'patient/Patient.rs', 'patient/Observation.rs'],
    redirectUris: [`${appOrigin}/app.html`, `${appOrigin}/callback.html`],
  });
  clientId = app.client.clientId;
  await createUser(store, cinder.clock, { tenant: 'clinic', username: 'pat', password: 'pat password 1', name: 'Dr Pat Practitioner', fhirUser: 'Practitioner/pr-1' });
  const admin = await createClient(store, cinder.clock, { tenant: 'clinic', name: 'admin', scopes: ['system/*.*'] });
  const res = await fetch(`${cinder.url}/oauth2/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: 'Basic ' + btoa(`${admin.client.clientId}:${admin.clientSecret}`) },
    body: 'grant_type=client_credentials',
  });
  const token = ((await res.json()) as { access_token: string }).access_token;
  for (const [id, family, given] of [['ann', 'Smith', 'Ann'], ['bob', 'Smith', 'Bob'], ['cat', 'Jones', 'Cat']]) {
    await adminPut(token, { resourceType: 'Patient', id, name: [{ family, given: [given] }] });
    await adminPut(token, { resourceType: 'Observation', id: `obs-${id}`, status: 'final', code: { text: 'Body weight' }, subject: { reference: `Patient/${id}` } });
  }
  for (let i = 1; i <= PICKER_PAGE_SIZE + 2; i++) {
    await adminPut(token, { resourceType: 'Patient', id: `many-${i}`, name: [{ family: 'Many', given: [`M${String(i).padStart(2, '0')}`] }] });
  }
  browser = await launchChromium();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  cinder?.stop();
  site?.stop(true);
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

async function signInAsPractitioner(page: Page): Promise<void> {
  expect(await page.title()).toBe('Sign in · Cinder');
  await page.getByLabel('Username').fill('pat');
  await page.getByLabel('Password').fill('pat password 1');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForLoadState();
  expect(await page.title()).toBe('Choose a patient · Cinder');
}

test('fhirclient from another origin: a Practitioner signs in, searches the picker, chooses a patient; the app reads that patient alone', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const violations = cspViolations(page);
  await page.goto(`${appOrigin}/launch.html`);
  await page.waitForURL((u) => u.href.startsWith(`${cinder.url}/oauth2/authorize`));
  expect(new URL(page.url()).searchParams.get('scope')).toBe(SCOPE);
  await signInAsPractitioner(page);
  expect(await page.getByText('Signed in as Dr Pat Practitioner.').count()).toBe(1);

  await page.getByLabel('Patient name').fill('smith');
  await page.getByRole('button', { name: 'Search' }).click();
  await page.waitForLoadState();
  const radios = page.getByRole('radio');
  expect(await radios.count()).toBe(2);
  expect(await page.getByRole('group', { name: 'Patients matching “smith”' }).count()).toBe(1);
  await page.getByRole('radio', { name: /^Smith, Bob/ }).check();
  await Promise.all([page.waitForURL((u) => u.pathname === '/app.html'), page.getByRole('button', { name: 'Continue' }).click()]);
  await page.waitForFunction(() => document.getElementById('status')?.textContent !== 'working', undefined, { timeout: 20_000 });

  const failure = await page.evaluate(() => (window as unknown as { failure?: string }).failure);
  expect(failure).toBeUndefined();
  const result = await page.evaluate(() => (window as unknown as { result: Record<string, unknown> }).result);
  expect(result).toEqual({
    patientId: 'bob', patientName: 'Bob Smith', tokenPatient: 'bob', scope: SCOPE, observationIds: ['obs-bob'], otherPatients: 403,
  });
  expect(violations).toEqual([]);
  await context.close();
}, 60_000);

test('without JavaScript: the picker pages on, a pick ends with the patient in the token response, and Cancel is access_denied', async () => {
  const context = await browser.newContext({ javaScriptEnabled: false });
  const page = await context.newPage();
  const violations = cspViolations(page);
  const redirectUri = `${appOrigin}/callback.html`;
  const verifier = randomToken(48);
  const authorize = (state: string) => `${cinder.url}/oauth2/authorize?${new URLSearchParams({
    response_type: 'code', client_id: clientId, redirect_uri: redirectUri, scope: SCOPE, aud: cinder.fhir('clinic'), state, code_challenge: s256(verifier), code_challenge_method: 'S256',
  })}`;

  await page.goto(authorize('s-1'));
  await signInAsPractitioner(page);
  await page.getByLabel('Patient name').fill('many');
  await page.getByLabel('Patient name').press('Enter');
  await page.waitForLoadState();
  expect(await page.getByRole('radio').count()).toBe(PICKER_PAGE_SIZE);
  await page.getByRole('button', { name: 'More patients' }).click();
  await page.waitForLoadState();
  expect(await page.getByRole('radio').count()).toBe(2);
  expect(await page.getByRole('button', { name: 'More patients' }).count()).toBe(0);
  await page.getByRole('radio', { name: /^Many, M22/ }).check();
  // Enter on the chosen patient continues with it (the search box's Enter searches: a form of its own).
  await Promise.all([page.waitForURL((u) => u.href.startsWith(redirectUri)), page.getByRole('radio', { name: /^Many, M22/ }).press('Enter')]);
  const back = new URL(page.url());
  expect(back.searchParams.get('state')).toBe('s-1');
  const res = await fetch(`${cinder.url}/oauth2/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'authorization_code', code: back.searchParams.get('code')!, redirect_uri: redirectUri, client_id: clientId, code_verifier: verifier }),
  });
  expect(res.status).toBe(200);
  expect(((await res.json()) as { patient?: string }).patient).toBe('many-22');

  await page.goto(authorize('s-2'));
  await signInAsPractitioner(page);
  await Promise.all([page.waitForURL((u) => u.href.startsWith(redirectUri)), page.getByRole('button', { name: 'Cancel' }).click()]);
  const cancelled = new URL(page.url()).searchParams;
  expect([cancelled.get('error'), cancelled.get('state'), cancelled.get('code')]).toEqual(['access_denied', 's-2', null]);
  expect(violations).toEqual([]);
  await context.close();
}, 60_000);
