/**
 * The PostgreSQL store's circuit breaker opens for the database's own connection failures only. A store call runs its
 * caller's code too (a write's callback); a fetch in it failing with ECONNRESET or ECONNREFUSED (an endpoint, a sink,
 * a terminology server) carries the same codes as a lost database connection, and was taken for one: the circuit
 * opened, and every request answered 503 until the probe found the database again, though it had never gone. Now such
 * an error leaves the call as it is, and the database's own failures (its sessions closed by a proxy in front of it,
 * test/helpers/pg-fault-proxy.ts) still open the circuit.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { StoreUnavailableError } from '../../src/store/types.ts';
import { createPostgresStore } from '../../src/store/postgres/index.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { startPgFaultProxy, type PgFaultProxy } from '../helpers/pg-fault-proxy.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
const pg = targets.find((t) => t.kind === 'postgres');
let proxy: PgFaultProxy | undefined;
let t: TestApp | undefined;
afterAll(async () => {
  await t?.close();
  proxy?.stop();
  for (const target of targets) await target.cleanup();
});

/** What a fetch to a server that resets its connections, or to a port nothing listens on, rejects with. */
async function fetchFailures(): Promise<unknown[]> {
  const server = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { open: (s) => void s.terminate(), data() {} } });
  const failures: unknown[] = [];
  try {
    failures.push(await fetch(`http://127.0.0.1:${server.port}/hook`).then(() => undefined, (e: unknown) => e));
  } finally {
    server.stop(true);
  }
  failures.push(await fetch(`http://127.0.0.1:${server.port}/hook`).then(() => undefined, (e: unknown) => e));
  return failures;
}

describe.skipIf(!pg)('connection errors inside a PostgreSQL store call', () => {
  test("a fetch's ECONNRESET or ECONNREFUSED in a write's callback fails that call alone; the database's own closed sessions open the circuit", async () => {
    const db = await pg!.migrated();
    const url = new URL(db.url);
    proxy = await startPgFaultProxy(Number(url.port || 5432));
    url.port = String(proxy.port);
    t = await createTestApp({ store: createPostgresStore(`${url.href}${url.search ? '&' : '?'}connect_timeout=2`, { max: 3, probeIntervalMs: 100 }) });
    const token = await t.token();
    const put = (id: string) => t!.request(`${t!.fhir()}/Patient/${id}`, fhirInit(token, 'PUT', { resourceType: 'Patient', id }));
    expect((await put('p1')).status).toBe(201);

    const failures = await fetchFailures();
    expect(failures.map((e) => (e as { code?: string }).code)).toEqual(['ECONNRESET', 'ECONNREFUSED']);
    for (const failure of failures) {
      const thrown = await t.store.resources
        .write('t1', async () => {
          throw failure;
        })
        .then(() => undefined, (e: unknown) => e);
      // The fetch's own error, not "the database is unreachable".
      expect(thrown).toBe(failure);
      expect(t.store.stats().unavailable).toBe(0);
      expect((await t.request('/readyz')).status).toBe(200);
      expect((await put('p2')).status).toBeOneOf([200, 201]);
    }

    // The database's own failure: every session closed by the proxy, as by a pooler that cannot serve.
    proxy.shed(true);
    const down = await put('p3');
    expect(down.status).toBe(503);
    expect(t.store.stats().unavailable).toBe(1);
    expect(await t.store.tenants.get('t1').then(() => undefined, (e: unknown) => e)).toBeInstanceOf(StoreUnavailableError);
    proxy.shed(false);
    for (let i = 0; i < 100 && t.store.stats().unavailable === 1; i++) await Bun.sleep(100);
    expect((await put('p3')).status).toBe(201);
    expect((await t.request(`${t.fhir()}/Patient/p3`, fhirInit(token))).status).toBe(200);
  }, 60_000);
});
