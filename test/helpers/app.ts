import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApp } from '../../src/app.ts';
import { createClient, createTenant } from '../../src/auth/admin.ts';
import { createKeyRing, type SigningAlg } from '../../src/auth/keys.ts';
import { randomToken } from '../../src/auth/secrets.ts';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import type { ExportSink } from '../../src/export/sink.ts';
import type { Rebuilding } from '../../src/fhir/reindex.ts';
import type { ResolveHost } from '../../src/fhir/subscriptions/endpoint.ts';
import { MAX_TOKEN_TTL } from '../../src/auth/tokens.ts';
import type { Clock } from '../../src/clock.ts';
import { loadConfig, type Config } from '../../src/config.ts';
import { silentLogger, type Logger } from '../../src/log.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import type { Store } from '../../src/store/types.ts';
import type { CoreBundle } from '../../src/terminology/core/core-bundle.ts';
import { testCoreBundle } from './terminology-service.ts';
import { migratedSqliteFile } from './stores.ts';

export const BASE = 'http://cinder.test';

/** One key pair per algorithm for this test process, generated when first asked for. */
const keyPairs = new Map<SigningAlg, Promise<{ privateJwk: JWK; publicJwk: JWK }>>();

/**
 * Gives a store without signing keys the active ES256 and RS256 keys KeyRing.init() would make, each under a
 * kid of its own but on a key pair this process generated once: generating an RSA key took about 100 ms of
 * every test app. A token of one app is still refused by another (its kid is unknown there). Tests of key
 * generation and rotation go through KeyRing itself: rotation in test/http/oauth-endpoints.test.ts and
 * test/unit/cli-auth.test.ts, generation wherever the CLI or the binary starts on a new database.
 */
async function seedKeys(store: Store, now: number): Promise<void> {
  if ((await store.keys.list(0)).length > 0) return;
  for (const alg of ['ES256', 'RS256'] as const) {
    let pair = keyPairs.get(alg);
    if (!pair) {
      pair = generateKeyPair(alg, { extractable: true }).then(async (k) => ({ privateJwk: await exportJWK(k.privateKey), publicJwk: await exportJWK(k.publicKey) }));
      keyPairs.set(alg, pair);
    }
    const { privateJwk, publicJwk } = await pair;
    const kid = randomToken(12);
    await store.keys.add({ kid, alg, privateJwk: { ...privateJwk, kid, alg }, publicJwk: { ...publicJwk, kid, alg, use: 'sig' }, createdAt: now, retiredAt: null });
  }
}

export type TestClock = Clock & { advance(ms: number): void; set(ms: number): void };

/** A clock tests can move. */
export function testClock(start = Date.parse('2026-01-15T10:00:00Z')): TestClock {
  let now = start;
  return { now: () => now, advance: (ms) => void (now += ms), set: (ms) => void (now = ms) };
}

export interface TestAppOptions {
  store?: Store;
  clock?: TestClock;
  env?: Record<string, string>;
  /** Bulk export storage (default: a directory in the test's data dir). */
  exportSink?: ExportSink;
  /** Where the app logs (silent by default): a test reads what the operator is told. */
  log?: Logger;
  /** fetch for outgoing requests (clients' JWK Set URLs). */
  fetch?: typeof fetch;
  /** The FHIR R4 core bundles (default: one shared by every test app of the process). */
  core?: CoreBundle;
  /** A reindex running beside the app (AppDeps.rebuilding). */
  rebuilding?: () => Rebuilding | undefined;
  /** How Subscription endpoints' hosts resolve (AppDeps.resolveHost). */
  resolveHost?: ResolveHost;
  /** How long an `$import` job waits for an unreachable export storage or spool (AppDeps.importStorageWaitMs). */
  importStorageWaitMs?: number;
  /** How long an export kick-off waits before reading a Group's members (AppDeps.exportSettleMs); 0 unless given, as runExports runs jobs. */
  exportSettleMs?: number;
}

/**
 * An in-process Cinder on a fresh SQLite file (or the given store), with tenant `t1` (made unless the store
 * holds it) and an admin client of its own. `request()` goes through `app.request()`; `token()` gets a client_credentials token.
 */
export async function createTestApp(opts: TestAppOptions = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'cinder-test-'));
  const store = opts.store ?? createSqliteStore(migratedSqliteFile(join(dir, 'cinder.db')));
  await store.migrate();
  const clock = opts.clock ?? testClock();
  const config: Config = loadConfig({ CINDER_BASE_URL: BASE, CINDER_DATA_DIR: dir, ...opts.env });
  await seedKeys(store, clock.now());
  const keys = createKeyRing(store, clock, MAX_TOKEN_TTL);
  await keys.init();
  const app = createApp({ config, store, keys, clock, log: opts.log ?? silentLogger, fetch: opts.fetch, core: opts.core ?? testCoreBundle(), rebuilding: opts.rebuilding, ...(opts.exportSink ? { exportSink: opts.exportSink } : {}), ...(opts.resolveHost ? { resolveHost: opts.resolveHost } : {}), ...(opts.importStorageWaitMs === undefined ? {} : { importStorageWaitMs: opts.importStorageWaitMs }), exportSettleMs: opts.exportSettleMs ?? 0 });
  // A second app on a database another app made (as a second process would be) shares its tenant.
  if (!(await store.tenants.get('t1'))) await createTenant(store, clock, 't1');
  const admin = await createClient(store, clock, { tenant: 't1', name: 'admin', scopes: ['system/*.*'] });

  const request = (path: string, init: RequestInit = {}) => app.request(path.startsWith('http') ? path : BASE + path, init);

  /** client_credentials token for `clientId`/`secret` (the admin client by default). */
  async function token(scope?: string, clientId = admin.client.clientId, secret = admin.clientSecret!): Promise<string> {
    const form = new URLSearchParams({ grant_type: 'client_credentials' });
    if (scope) form.set('scope', scope);
    const res = await request('/oauth2/token', {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: 'Basic ' + btoa(`${clientId}:${secret}`) },
      body: form,
    });
    if (res.status !== 200) throw new Error(`token request failed: ${res.status} ${await res.text()}`);
    return ((await res.json()) as { access_token: string }).access_token;
  }

  /** Creates a client in `tenant` with these scopes and returns a token for it. */
  async function tokenFor(tenant: string, scopes: string[], scope?: string): Promise<string> {
    if (!(await store.tenants.get(tenant))) await createTenant(store, clock, tenant);
    const c = await createClient(store, clock, { tenant, scopes });
    return token(scope, c.client.clientId, c.clientSecret!);
  }

  return {
    app, store, clock, config, keys, admin, request, token, tokenFor, dir,
    fhir: (tenant = 't1') => `${BASE}/tenants/${tenant}/fhir/R4`,
    async close() {
      await app.audit?.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export type TestApp = Awaited<ReturnType<typeof createTestApp>>;

/** JSON request init with a bearer token. */
export function fhirInit(token: string, method = 'GET', body?: unknown, headers: Record<string, string> = {}): RequestInit {
  const init: RequestInit = { method, headers: { Authorization: `Bearer ${token}`, ...headers } };
  if (body !== undefined) {
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
    (init.headers as Record<string, string>)['Content-Type'] ??= 'application/fhir+json';
  }
  return init;
}

/**
 * Another server on `t`'s database, as a second process of CINDER_PROCESSES runs it: its own store
 * (connections, caches, in-process guards) from `open`, the signing keys it reads from the database,
 * `t`'s configuration and clock. Returns its `app.request`.
 */
export async function secondServer(t: TestApp, open: () => Store): Promise<(path: string, init: RequestInit) => Promise<Response>> {
  const store = open();
  const keys = createKeyRing(store, t.clock, MAX_TOKEN_TTL);
  await keys.init();
  const app = createApp({ config: t.config, store, keys, clock: t.clock, log: silentLogger, core: testCoreBundle(), exportSettleMs: 0 });
  return async (path, init) => app.request(path, init);
}
