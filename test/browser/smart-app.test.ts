/**
 * A browser SMART app on another origin, as app developers write one: the `fhirclient` library in a
 * page served from a second port runs a standalone launch with PKCE as a public client in Chromium,
 * signs in on Cinder's login page, then reads, searches, creates and patches through `fhirclient`.
 * Every FHIR call is a cross-origin request with a bearer token, so each passes a CORS preflight;
 * Cinder runs with CINDER_CORS_ORIGINS naming only the app's origin.
 */
import { afterAll, beforeAll, expect } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { appAssets, appPage, readyScript, browserAvailable, browserTest, launchChromium } from '../helpers/browser.ts';
import { createClient, createTenant } from '../../src/auth/admin.ts';
import { createUser } from '../../src/auth/users.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { startCinder, type Cinder } from '../helpers/server.ts';

const test = browserTest;


const dir = mkdtempSync(join(tmpdir(), 'cinder-smart-app-'));
const store = createSqliteStore(join(dir, 'cinder.db'));
let cinder: Cinder;
let site: ReturnType<typeof Bun.serve>;
let browser: Browser;
let clientId: string;
let adminToken: string;

const html = (body: string) => appPage('Weight app', body);

/**
 * The app's two pages: `launch.html` starts the standalone launch; `app.html`, the redirect URI,
 * completes it and does the app's work, leaving what it saw in `window.result` (or `window.failure`).
 */
function appPages(iss: () => string): (req: Request) => Response {
  return (req) => {
    const path = new URL(req.url).pathname;
    const asset = appAssets(path);
    if (asset) return asset;
    if (path === '/launch.html') {
      return html(`<script src="/fhir-client.js"></script><script>
        FHIR.oauth2.authorize({
          iss: ${JSON.stringify(iss())}, clientId: ${JSON.stringify(clientId)}, redirectUri: 'app.html', pkceMode: 'required',
          scope: 'openid fhirUser launch/patient patient/Patient.rs patient/Observation.cruds',
        });
      </script>`);
    }
    if (path === '/app.html') {
      return html(readyScript(`
          const patient = await client.patient.read();
          const created = await client.create({
            resourceType: 'Observation', status: 'preliminary', code: { text: 'Body weight' },
            subject: { reference: 'Patient/' + client.patient.id }, valueQuantity: { value: 72.5, unit: 'kg', system: 'http://unitsofmeasure.org', code: 'kg' },
          });
          const search = await client.request('Observation?subject=Patient/' + client.patient.id);
          const patched = await client.request({
            url: 'Observation/' + created.id, method: 'PATCH',
            headers: { 'Content-Type': 'application/json-patch+json', 'If-Match': 'W/"' + created.meta.versionId + '"' },
            body: JSON.stringify([{ op: 'replace', path: '/status', value: 'final' }, { op: 'replace', path: '/valueQuantity/value', value: 73 }]),
          });
          return {
            origin: location.origin, patientId: client.patient.id, patientName: patient.name[0].family,
            created: { id: created.id, versionId: created.meta.versionId },
            searchTotal: search.total, searchIds: search.entry.map((e) => e.resource.id),
            patched: { status: patched.status, value: patched.valueQuantity.value, versionId: patched.meta.versionId },
          };
      `));
    }
    return new Response('not found', { status: 404 });
  };
}

beforeAll(async () => {
  if (!browserAvailable) return;
  let iss = '';
  site = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: appPages(() => iss) });
  const appOrigin = `http://127.0.0.1:${site.port}`;
  cinder = await startCinder({ store, env: { CINDER_CORS_ORIGINS: appOrigin } });
  iss = cinder.fhir('clinic');
  await createTenant(store, cinder.clock, 'clinic');
  const app = await createClient(store, cinder.clock, {
    tenant: 'clinic', name: 'Weight app', grants: ['authorization_code'], secret: false,
    scopes: ['openid', 'fhirUser', 'launch/patient', 'patient/Patient.rs', 'patient/Observation.cruds'],
    redirectUris: [`${appOrigin}/app.html`],
  });
  clientId = app.client.clientId;
  await createUser(store, cinder.clock, { tenant: 'clinic', username: 'erin', password: 'erin password 1', name: 'Erin Patient', fhirUser: 'Patient/erin-1' });
  const admin = await createClient(store, cinder.clock, { tenant: 'clinic', name: 'admin', scopes: ['system/*.*'] });
  const res = await fetch(`${cinder.url}/oauth2/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: 'Basic ' + btoa(`${admin.client.clientId}:${admin.clientSecret}`) },
    body: 'grant_type=client_credentials',
  });
  adminToken = ((await res.json()) as { access_token: string }).access_token;
  const put = await fetch(`${iss}/Patient/erin-1`, {
    method: 'PUT',
    headers: { Authorization: `Bearer ${adminToken}`, 'Content-Type': 'application/fhir+json' },
    body: JSON.stringify({ resourceType: 'Patient', id: 'erin-1', name: [{ family: 'Example', given: ['Erin'] }] }),
  });
  expect(put.status).toBe(201);
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  cinder?.stop();
  site?.stop(true);
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

test('fhirclient in Chromium, from another origin: standalone launch with PKCE, then read, search, create and PATCH', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const cinderRequests: { method: string; url: string }[] = [];
  page.on('request', (r) => {
    if (r.url().startsWith(cinder.url)) cinderRequests.push({ method: r.method(), url: r.url() });
  });
  const consoleErrors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(`${m.text()} ${m.location().url}`);
  });

  await page.goto(`http://127.0.0.1:${site.port}/launch.html`);
  await page.waitForURL((u) => u.href.startsWith(`${cinder.url}/oauth2/authorize`));
  expect(new URL(page.url()).searchParams.get('code_challenge_method')).toBe('S256');
  expect(await page.getByText('Weight app').count()).toBeGreaterThan(0);
  await page.getByLabel('Username').fill('erin');
  await page.getByLabel('Password').fill('erin password 1');
  await Promise.all([page.waitForURL((u) => u.pathname === '/app.html'), page.getByRole('button', { name: 'Sign in' }).click()]);
  await page.waitForFunction(() => document.getElementById('status')?.textContent !== 'working', undefined, { timeout: 20_000 });

  const failure = await page.evaluate(() => (window as unknown as { failure?: string }).failure);
  expect({ failure, consoleErrors }).toEqual({ failure: undefined, consoleErrors: [] });
  const result = await page.evaluate(() => (window as unknown as { result: Record<string, any> }).result);
  expect(result.origin).not.toBe(cinder.url);
  expect(result).toMatchObject({
    patientId: 'erin-1', patientName: 'Example',
    created: { versionId: '1' },
    searchTotal: 1,
    patched: { status: 'final', value: 73, versionId: '2' },
  });
  expect(result.searchIds).toEqual([result.created.id]);
  // Every FHIR call went cross-origin (with a token, so each after a preflight CINDER_CORS_ORIGINS answered).
  expect(cinderRequests.filter((r) => r.url.startsWith(cinder.fhir('clinic'))).map((r) => r.method)).toEqual(
    expect.arrayContaining(['GET', 'POST', 'PATCH']),
  );
  await context.close();

  // What the app wrote is what the server holds: version 2 of the Observation, patched.
  const stored = await fetch(`${cinder.fhir('clinic')}/Observation/${result.created.id}/_history`, { headers: { Authorization: `Bearer ${adminToken}` } });
  const history = (await stored.json()) as { entry: { resource: { status: string; meta: { versionId: string } } }[] };
  expect(history.entry.map((e) => [e.resource.meta.versionId, e.resource.status])).toEqual([['2', 'final'], ['1', 'preliminary']]);
}, 60_000);
