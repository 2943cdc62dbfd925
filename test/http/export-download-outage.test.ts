/**
 * An export file kept in PostgreSQL (CINDER_EXPORT_STORAGE=postgres) whose download loses its database connection. The
 * file's chunks are read by the response's stream, outside the store's guard: the driver's error reached the client as a
 * 200 whose body broke off, and the circuit breaker never heard of it (the next requests queued behind the driver's
 * reconnection instead of answering 503 at once). Now the first chunk is read before the answer is chosen, so a
 * connection lost there answers 503 with Retry-After as every other outage does, and a loss anywhere in the stream opens
 * the circuit; once the database answers again the same download succeeds. The sessions are ended by a proxy in front
 * of the database (test/helpers/pg-fault-proxy.ts) as `pg_terminate_backend` ends them.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { createPostgresStore } from '../../src/store/postgres/index.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { finish, kickOff, observation, patient, put } from '../helpers/export.ts';
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

/** Waits (a bounded number of probes) for the circuit to close again. */
async function closed(app: TestApp): Promise<number> {
  for (let i = 0; i < 100 && app.store.stats().unavailable === 1; i++) await Bun.sleep(100);
  return app.store.stats().unavailable;
}

describe.skipIf(!pg)('an export file download whose PostgreSQL connection drops', () => {
  test('answers 503 with Retry-After and opens the circuit; the download succeeds once the database answers', async () => {
    const db = await pg!.migrated();
    const url = new URL(db.url);
    proxy = await startPgFaultProxy(Number(url.port || 5432));
    url.port = String(proxy.port);
    const proxied = `${url.href}${url.search ? '&' : '?'}connect_timeout=2`;
    t = await createTestApp({
      store: createPostgresStore(proxied, { max: 3, probeIntervalMs: 100 }),
      env: { CINDER_DATABASE_URL: proxied, CINDER_EXPORT_STORAGE: 'postgres' },
    });
    const token = await t.token();
    await put(t, patient('p1'));
    for (let i = 0; i < 5; i++) await put(t, observation(`o${i}`, 'p1'));
    const manifest = await finish(t, token, await kickOff(t, token, '/$export?_type=Observation'));
    const file = manifest.output[0]!.url;

    // The session reading the file's chunks is ended as its statement is sent.
    proxy.terminateOn('cinder', 'export_file_chunks');
    const lost = await t.request(file, fhirInit(token));
    const body = await lost.text().catch(() => '(the body broke off)');
    expect(proxy.terminated).toBe(1);
    expect(lost.status).toBe(503);
    expect(lost.headers.get('retry-after')).toMatch(/^\d+$/);
    const outcome = JSON.parse(body) as { resourceType: string; issue: { code: string }[] };
    expect(outcome.resourceType).toBe('OperationOutcome');
    expect(outcome.issue[0]!.code).toBe('transient');
    // The loss counted as the store's other outages do: the circuit opened, then closed by its probe.
    expect(t.store.stats().unavailable).toBe(1);
    expect(await closed(t)).toBe(0);

    const again = await t.request(file, fhirInit(token));
    expect(again.status).toBe(200);
    const lines = (await again.text()).trim().split('\n').map((l) => JSON.parse(l) as { id: string });
    expect(lines.map((r) => r.id).sort()).toEqual(['o0', 'o1', 'o2', 'o3', 'o4']);
  }, 60_000);
});
