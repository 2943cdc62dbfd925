/**
 * A SMART EHR launch in headless Chromium. The clinic's front-end (here, the test) mints a `launch` at
 * `POST /oauth2/launch` for a patient and an encounter, and opens the app's launch page with
 * `?iss=<fhir base>&launch=<value>`, as an EHR does; the app, written with `fhirclient` on another origin
 * as a public client with PKCE, calls `FHIR.oauth2.authorize` with the `launch` scope; a Practitioner
 * signs in on Cinder's login page (no picker follows); the app gets the launched patient and encounter,
 * the further resource the EHR put in context (`fhirContext`) and the EHR's `need_patient_banner` from the
 * token response and reads them, its patient/ scopes bound to that patient.
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

const dir = mkdtempSync(join(tmpdir(), 'cinder-ehr-launch-'));
const store = createSqliteStore(join(dir, 'cinder.db'));
let cinder: Cinder;
let site: ReturnType<typeof Bun.serve>;
let browser: Browser;
let clientId: string;
let adminToken: string;

const html = (body: string) => appPage('Encounter app', body);

/**
 * The app: `launch.html`, its launch URL, starts the authorization with what the EHR put in its address
 * (fhirclient reads `iss` and `launch` there); `app.html`, the redirect URI, completes it and leaves what
 * it read in `window.result` (or `window.failure`).
 */
function appPages(req: Request): Response {
  const path = new URL(req.url).pathname;
  const asset = appAssets(path);
  if (asset) return asset;
  if (path === '/launch.html') {
    return html(`<script src="/fhir-client.js"></script><script>
      FHIR.oauth2.authorize({ clientId: ${JSON.stringify(clientId)}, redirectUri: 'app.html', pkceMode: 'required', scope: 'launch openid fhirUser patient/*.rs' });
    </script>`);
  }
  if (path === '/app.html') {
    return html(readyScript(`
        const patient = await client.patient.read();
        const encounter = await client.encounter.read();
        const observations = await client.request('Observation');
        const context = client.state.tokenResponse.fhirContext;
        const focus = await client.request(context[0].reference);
        let otherPatient;
        try {
          await client.request('Patient/pat-2');
          otherPatient = 'read';
        } catch (err) {
          otherPatient = err.status || String(err);
        }
        return {
          patientId: client.patient.id, patientName: patient.name[0].family, encounterId: client.encounter.id,
          encounterStatus: encounter.status, tokenPatient: client.state.tokenResponse.patient,
          tokenEncounter: client.state.tokenResponse.encounter, scope: client.state.tokenResponse.scope,
          observationIds: observations.entry.map((e) => e.resource.id), otherPatient,
          fhirContext: context, focusId: focus.id, needPatientBanner: client.state.tokenResponse.need_patient_banner,
        };
    `));
  }
  return new Response('not found', { status: 404 });
}

/** A FHIR write with the admin token. */
async function put(resource: { resourceType: string; id: string } & Record<string, unknown>): Promise<void> {
  const res = await fetch(`${cinder.fhir('clinic')}/${resource.resourceType}/${resource.id}`, {
    method: 'PUT', headers: { Authorization: `Bearer ${adminToken}`, 'Content-Type': 'application/fhir+json' }, body: JSON.stringify(resource),
  });
  expect(res.status).toBe(201);
}

beforeAll(async () => {
  if (!browserAvailable) return;
  site = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: appPages });
  const appOrigin = `http://127.0.0.1:${site.port}`;
  cinder = await startCinder({ store, env: { CINDER_CORS_ORIGINS: appOrigin } });
  await createTenant(store, cinder.clock, 'clinic');
  const app = await createClient(store, cinder.clock, {
    tenant: 'clinic', name: 'Encounter app', grants: ['authorization_code'], secret: false,
    scopes: ['openid', 'fhirUser', 'patient/*.rs'], redirectUris: [`${appOrigin}/app.html`],
  });
  clientId = app.client.clientId;
  await createUser(store, cinder.clock, { tenant: 'clinic', username: 'drew', password: 'drew password 1', name: 'Dr Drew', fhirUser: 'Practitioner/drew-1' });
  const admin = await createClient(store, cinder.clock, { tenant: 'clinic', name: 'EHR back end', scopes: ['system/*.*'] });
  const res = await fetch(`${cinder.url}/oauth2/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: 'Basic ' + btoa(`${admin.client.clientId}:${admin.clientSecret}`) },
    body: 'grant_type=client_credentials',
  });
  adminToken = ((await res.json()) as { access_token: string }).access_token;
  await put({ resourceType: 'Patient', id: 'pat-1', name: [{ family: 'Launched', given: ['Lena'] }] });
  await put({ resourceType: 'Patient', id: 'pat-2', name: [{ family: 'Other', given: ['Otto'] }] });
  await put({ resourceType: 'Encounter', id: 'enc-1', status: 'in-progress', class: { code: 'AMB' }, subject: { reference: 'Patient/pat-1' } });
  await put({ resourceType: 'Observation', id: 'obs-1', status: 'final', code: { text: 'Pulse' }, subject: { reference: 'Patient/pat-1' } });
  await put({ resourceType: 'Observation', id: 'obs-2', status: 'final', code: { text: 'Pulse' }, subject: { reference: 'Patient/pat-2' } });
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  cinder?.stop();
  site?.stop(true);
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

test('fhirclient in Chromium: an EHR launch with patient, encounter and fhirContext, a sign-in without the picker, the launched patient read', async () => {
  const minted = await fetch(`${cinder.url}/oauth2/launch`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${adminToken}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({
      patient: 'pat-1', encounter: 'enc-1', client_id: clientId, need_patient_banner: false,
      fhirContext: [{ reference: 'Observation/obs-1', role: 'https://example.org/role/focus' }],
    }),
  });
  expect(minted.status).toBe(201);
  const { launch } = (await minted.json()) as { launch: string };

  const context = await browser.newContext();
  const page = await context.newPage();
  const consoleErrors: string[] = [];
  page.on('console', (m) => {
    // The app's read of another patient is refused on purpose (403), which Chromium reports.
    if (m.type() === 'error' && !m.location().url.endsWith('/Patient/pat-2')) consoleErrors.push(`${m.text()} ${m.location().url}`);
  });
  const launchUrl = new URL(`http://127.0.0.1:${site.port}/launch.html`);
  launchUrl.searchParams.set('iss', cinder.fhir('clinic'));
  launchUrl.searchParams.set('launch', launch);
  await page.goto(launchUrl.href);
  await page.waitForURL((u) => u.href.startsWith(`${cinder.url}/oauth2/authorize`));
  const authorize = new URL(page.url()).searchParams;
  expect(authorize.get('launch')).toBe(launch);
  expect(authorize.get('aud')).toBe(cinder.fhir('clinic'));
  expect(authorize.get('scope')!.split(' ')).toContain('launch');
  await page.getByLabel('Username').fill('drew');
  await page.getByLabel('Password').fill('drew password 1');
  // Straight back to the app: the launch chose the patient.
  await Promise.all([page.waitForURL((u) => u.pathname === '/app.html'), page.getByRole('button', { name: 'Sign in' }).click()]);
  await page.waitForFunction(() => document.getElementById('status')?.textContent !== 'working', undefined, { timeout: 20_000 });

  const failure = await page.evaluate(() => (window as unknown as { failure?: string }).failure);
  expect({ failure, consoleErrors }).toEqual({ failure: undefined, consoleErrors: [] });
  const result = await page.evaluate(() => (window as unknown as { result: Record<string, unknown> }).result);
  expect(result).toEqual({
    patientId: 'pat-1', patientName: 'Launched', encounterId: 'enc-1', encounterStatus: 'in-progress',
    tokenPatient: 'pat-1', tokenEncounter: 'enc-1', scope: 'launch openid fhirUser patient/*.rs',
    observationIds: ['obs-1'], otherPatient: 403,
    fhirContext: [{ reference: 'Observation/obs-1', role: 'https://example.org/role/focus' }], focusId: 'obs-1', needPatientBanner: false,
  });
  await context.close();
}, 60_000);
