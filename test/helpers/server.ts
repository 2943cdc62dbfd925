import { createApp, type App } from '../../src/app.ts';
import { createKeyRing } from '../../src/auth/keys.ts';
import { MAX_TOKEN_TTL } from '../../src/auth/tokens.ts';
import { loadConfig } from '../../src/config.ts';
import { silentLogger } from '../../src/log.ts';
import type { Store } from '../../src/store/types.ts';
import type { TestClock } from './app.ts';

/** Real time, movable forward (for tests against real clients that check time themselves). */
export function liveClock(): TestClock {
  let offset = 0;
  return { now: () => Date.now() + offset, advance: (ms) => void (offset += ms), set: (ms) => void (offset = ms - Date.now()) };
}

export interface StartOptions {
  store: Store;
  clock?: TestClock;
  env?: Record<string, string>;
}

/**
 * A Cinder app listening on 127.0.0.1 on a free port (Bun.serve, port 0), its base URL the real address.
 * The store is migrated but owned by the caller. Several can share one database, like processes.
 */
export async function startCinder(o: StartOptions) {
  let app: App | null = null;
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch: (req, srv) => (app ? app.fetch(req, srv) : new Response('starting', { status: 503 })),
  });
  const url = `http://127.0.0.1:${server.port}`;
  const clock = o.clock ?? liveClock();
  await o.store.migrate();
  const config = loadConfig({ CINDER_BASE_URL: url, CINDER_DATA_DIR: '/tmp/cinder-unused', CINDER_LOG_LEVEL: 'silent', ...o.env });
  const keys = createKeyRing(o.store, clock, MAX_TOKEN_TTL);
  await keys.init();
  app = createApp({ config, store: o.store, keys, clock, log: silentLogger });
  return {
    url, server, app, config, keys, clock, store: o.store,
    fhir: (tenant: string) => `${url}/tenants/${tenant}/fhir/R4`,
    stop: () => server.stop(true),
  };
}

export type Cinder = Awaited<ReturnType<typeof startCinder>>;
