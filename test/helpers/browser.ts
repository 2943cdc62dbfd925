/**
 * Debian's Chromium for the browser tests, driven by playwright-core. Outside CI a machine without it
 * skips those tests with a notice; under CI=true they run (and fail loudly when it is missing).
 */
import { test as bunTest } from 'bun:test';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';

const CHROMIUM = '/usr/bin/chromium';

export const browserAvailable = existsSync(CHROMIUM) || process.env.CI === 'true';
if (!browserAvailable) console.warn(`NOTICE: ${CHROMIUM} is missing: skipping the browser tests (apt-get install chromium)`);

/** `test`, or `test.skip` when there is no browser to run it in. */
export const browserTest = browserAvailable ? bunTest : bunTest.skip;

const launch = () => chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });

/**
 * A headless Chromium with the flags this machine needs. A start that fails (Chromium exiting at once on
 * a machine busy with the rest of the suite) is tried once more, with the first error printed.
 */
export async function launchChromium(): Promise<Browser> {
  try {
    return await launch();
  } catch (err) {
    console.warn(`Chromium did not start, trying once more: ${err instanceof Error ? err.message : String(err)}`);
    return launch();
  }
}

/** Collects the Content Security Policy violations a page reports on its console. */
export function cspViolations(page: Page): string[] {
  const seen: string[] = [];
  page.on('console', (m) => {
    if (/Content Security Policy/i.test(m.text())) seen.push(m.text());
  });
  return seen;
}

const FHIR_CLIENT = readFileSync(join(import.meta.dir, '../../node_modules/fhirclient/build/fhir-client.min.js'));

/** A page of a test's SMART app: `<title>` and `body`. */
export const appPage = (title: string, body: string) =>
  new Response(`<!doctype html><meta charset="utf-8"><title>${title}</title>${body}`, { headers: { 'Content-Type': 'text/html; charset=utf-8' } });

/**
 * The body of a test's SMART app redirect page: fhirclient completes the authorization, then `work` (the
 * body of an async function of `client`) runs; what it returns is left in `window.result`, or its error in
 * `window.failure`, and `#status` says `done` or `failed`.
 */
export const readyScript = (work: string) => `<p id="status">working</p><script src="/fhir-client.js"></script><script>
  FHIR.oauth2.ready().then(async (client) => {${work}}).then((result) => {
    window.result = result;
    document.getElementById('status').textContent = 'done';
  }).catch((err) => {
    window.failure = String(err && err.stack || err);
    document.getElementById('status').textContent = 'failed';
  });
</script>`;

/**
 * What a test's SMART app site serves besides its own pages: the SMART JavaScript client (fhirclient)
 * at `/fhir-client.js`, and no favicon; undefined for any other path.
 */
export function appAssets(path: string): Response | undefined {
  if (path === '/favicon.ico') return new Response(null, { status: 204 });
  if (path === '/fhir-client.js') return new Response(FHIR_CLIENT, { headers: { 'Content-Type': 'text/javascript' } });
  return undefined;
}
