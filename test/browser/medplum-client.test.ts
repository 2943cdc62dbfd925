/**
 * Medplum's client (`MedplumClient`, the ES module build of `@medplum/core`) in a page on another
 * origin, calling Cinder cross-origin with a bearer token. By default it sends every request with
 * `credentials: 'include'` and an `X-Medplum: extended` header, which Medplum's own server allows
 * (`Access-Control-Allow-Credentials`, and the header); Cinder allows neither (its API takes bearer
 * tokens, never cookies, and X-Medplum is no FHIR header), so the browser blocks those requests. With
 * `extendedMode: false` and a `fetch` that omits credentials the app reads and writes as any other.
 */
import { afterAll, beforeAll, expect } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { createClient, createTenant } from '../../src/auth/admin.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { appPage, browserAvailable, browserTest, launchChromium } from '../helpers/browser.ts';
import { startCinder, type Cinder } from '../helpers/server.ts';

const test = browserTest;
const MEDPLUM_CORE = readFileSync(join(import.meta.dir, '../../node_modules/@medplum/core/dist/esm/index.mjs'));

const dir = mkdtempSync(join(tmpdir(), 'cinder-medplum-app-'));
const store = createSqliteStore(join(dir, 'cinder.db'));
let cinder: Cinder;
let site: ReturnType<typeof Bun.serve>;
let browser: Browser;
let token: string;

/**
 * The app's page: the same work (create a Patient, search it, read it) with three clients, each result
 * (or its error) left in `window.result`.
 */
function appPages(): (req: Request) => Response {
  return (req) => {
    const path = new URL(req.url).pathname;
    if (path === '/favicon.ico') return new Response(null, { status: 204 });
    if (path === '/medplum-core.mjs') return new Response(MEDPLUM_CORE, { headers: { 'Content-Type': 'text/javascript' } });
    return appPage('Medplum app', `<script type="module">
      import { MedplumClient } from '/medplum-core.mjs';
      const omitCredentials = (url, init) => fetch(url, { ...init, credentials: 'omit' });
      async function work(options) {
        const medplum = new MedplumClient({ baseUrl: ${JSON.stringify(`${cinder.url}/`)}, fhirUrlPath: 'tenants/t1/fhir/R4', cacheTime: 0, maxRetries: 0, ...options });
        medplum.setAccessToken(${JSON.stringify(token)});
        try {
          const created = await medplum.createResource({ resourceType: 'Patient', name: [{ family: 'Browser' }] });
          const found = await medplum.searchResources('Patient', { _id: created.id });
          const read = await medplum.readResource('Patient', created.id);
          return { created: created.id, found: found.map((p) => p.id), read: read.name[0].family };
        } catch (err) {
          return { error: String(err) };
        }
      }
      window.result = {
        defaults: await work({}),
        noExtendedHeader: await work({ extendedMode: false }),
        noCredentials: await work({ fetch: omitCredentials }),
        both: await work({ extendedMode: false, fetch: omitCredentials }),
      };
    </script>`);
  };
}

beforeAll(async () => {
  if (!browserAvailable) return;
  site = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: appPages() });
  cinder = await startCinder({ store });
  await createTenant(store, cinder.clock, 't1');
  const admin = await createClient(store, cinder.clock, { tenant: 't1', name: 'admin', scopes: ['system/*.*'] });
  const res = await fetch(`${cinder.url}/oauth2/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: 'Basic ' + btoa(`${admin.client.clientId}:${admin.clientSecret}`) },
    body: 'grant_type=client_credentials',
  });
  token = ((await res.json()) as { access_token: string }).access_token;
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  cinder?.stop();
  site?.stop(true);
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

test('MedplumClient in Chromium from another origin: blocked by CORS as configured by default, working without credentials and X-Medplum', async () => {
  const page = await browser.newPage();
  const corsErrors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error' && m.text().includes('CORS policy')) corsErrors.push(m.text());
  });
  await page.goto(`http://127.0.0.1:${site.port}/`);
  await page.waitForFunction(() => (window as unknown as { result?: unknown }).result !== undefined, undefined, { timeout: 20_000 });
  const result = await page.evaluate(() => (window as unknown as { result: Record<string, Record<string, unknown>> }).result);

  // Each default alone is enough for the browser to refuse the request before Cinder answers it.
  for (const blocked of ['defaults', 'noExtendedHeader', 'noCredentials']) expect(result[blocked]).toEqual({ error: 'TypeError: Failed to fetch' });
  expect(corsErrors.some((e) => e.includes("credentials mode is 'include'"))).toBe(true);
  expect(corsErrors.some((e) => e.includes('x-medplum is not allowed'))).toBe(true);
  expect(result.both).toEqual({ created: expect.any(String), found: [result.both!.created], read: 'Browser' });
  await page.close();
}, 60_000);
