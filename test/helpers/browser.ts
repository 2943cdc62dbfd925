/**
 * Debian's Chromium for the browser tests, driven by playwright-core. Outside CI a machine without it
 * skips those tests with a notice; under CI=true they run (and fail loudly when it is missing).
 */
import { test as bunTest } from 'bun:test';
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

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
