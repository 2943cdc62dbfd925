/**
 * PostgreSQL sessions closed cleanly during their start-up, as a pooler or proxy in front of the database
 * does when it cannot serve (PgBouncer, RDS Proxy, Supavisor restarting or over their limits): a FIN
 * before the server's ReadyForQuery, no ErrorResponse (test/helpers/pg-fault-proxy.ts `shed`).
 * postgres.js 3.4.9 opened the next session at once, every connection of the pool in lockstep, and the
 * query waiting for the connection was never settled (upstream porsager/postgres#1193 and #1179): over
 * a thousand attempts a second, requests and /readyz hanging for as long as the proxy shed sessions, the
 * circuit breaker never told. The patch (patches/) backs the attempts off and rejects the waiting query
 * once the pool's start-ups have failed for `connect_timeout`: the request is answered 503.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { createPostgresStore } from '../../src/store/postgres/index.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { startPgFaultProxy, type PgFaultProxy } from '../helpers/pg-fault-proxy.ts';
import { adminConnection, PG_ADMIN_URL } from '../helpers/stores.ts';

/** The start-up budget (seconds) the store's URL gives: short, so that the test is. */
const CONNECT_TIMEOUT = 1;
/** Longer than any answer may take; a request still unanswered then is a hang. */
const HANG_MS = 10_000;
/**
 * Connection attempts the app may make in the seconds the proxy sheds here. Its nine connections (a
 * pool of 8 split 6 and 2, and the search key connection) each wait at least a quarter of a second
 * between attempts once the pool has failed a few times; before the patch there were thousands.
 */
const MAX_ATTEMPTS = 200;

let admin: postgres.Sql | undefined;
let proxy: PgFaultProxy;
let t: TestApp;
let token: string;
const database = `cinder_shed_${crypto.randomUUID().replaceAll('-', '').slice(0, 12)}`;
const unhandled: unknown[] = [];
const onUnhandled = (err: unknown) => void unhandled.push(err);

admin = (await adminConnection()) ?? undefined;
const reachable = admin !== undefined;

beforeAll(async () => {
  if (!admin) return;
  await admin`CREATE DATABASE ${admin(database)}`;
  const target = new URL(PG_ADMIN_URL);
  proxy = await startPgFaultProxy(Number(target.port || 5432));
  const url = `postgres://${target.username}@127.0.0.1:${proxy.port}/${database}?connect_timeout=${CONNECT_TIMEOUT}`;
  t = await createTestApp({ store: createPostgresStore(url, { max: 8 }), env: { CINDER_RATE_LIMITS: 'off' } });
  token = await t.token();
  process.on('unhandledRejection', onUnhandled);
});

afterAll(async () => {
  process.off('unhandledRejection', onUnhandled);
  proxy?.shed(false);
  await t?.close().catch(() => undefined);
  proxy?.stop();
  if (admin) await admin`DROP DATABASE IF EXISTS ${admin(database)} WITH (FORCE)`;
  await admin?.end();
});

/** The request's answer, or 'hang' when it takes longer than HANG_MS. */
async function answer(path: string, init?: RequestInit): Promise<Response | 'hang'> {
  return Promise.race([t.request(path, init), Bun.sleep(HANG_MS).then(() => 'hang' as const)]);
}

async function expectUnavailable(res: Response | 'hang') {
  expect(res).not.toBe('hang');
  const r = res as Response;
  expect(r.status).toBe(503);
  expect(r.headers.get('retry-after')).toBe('2');
  const body = (await r.json()) as { resourceType: string; issue: { code: string }[] };
  expect(body.resourceType).toBe('OperationOutcome');
  expect(body.issue[0]!.code).toBe('transient');
}

/** Sheds sessions from now on; waits for the sessions open to be dropped (no request is under way: nothing fails). */
async function startShedding() {
  proxy.shed(true);
  await Bun.sleep(200);
}

/** Lets sessions through again and waits until the store serves (each step's request answered or not). */
async function stopShedding(): Promise<number> {
  proxy.shed(false);
  let status = 0;
  for (let i = 0; i < 100 && status !== 200; i++) {
    await Bun.sleep(100);
    const res = await answer(`${t.fhir()}/Patient`, fhirInit(token));
    status = res === 'hang' ? 0 : res.status;
  }
  return status;
}

/** More reads than the pool has connections (some wait in the pool's queue), and a write. */
function requests(tag: string): Promise<Response | 'hang'>[] {
  const reads = Array.from({ length: 12 }, (_, n) => answer(`${t.fhir()}/Patient?name=${tag}${n}`, fhirInit(token)));
  const write = answer(`${t.fhir()}/Patient`, fhirInit(token, 'POST', { resourceType: 'Patient', identifier: [{ system: `urn:test:${tag}`, value: '1' }] }));
  return [...reads, write];
}

describe.skipIf(!reachable)('PostgreSQL sessions closed during start-up', () => {
  test('connection attempts back off while requests wait: a bounded number, not one after another', async () => {
    expect((await t.request(`${t.fhir()}/Patient`, fhirInit(token))).status).toBe(200);
    await startShedding();
    const before = proxy.opened;
    const pending = requests('rate');
    // The requests wait for their connections for about CONNECT_TIMEOUT; then (the circuit open) only the
    // store's probe tries to connect.
    await Bun.sleep(2500);
    const attempts = proxy.opened - before;
    expect(attempts).toBeGreaterThan(1);
    expect(attempts).toBeLessThan(MAX_ATTEMPTS);
    expect(proxy.shedCount).toBeGreaterThanOrEqual(attempts - 1);
    for (const res of await Promise.all(pending)) expect(res).not.toBe('hang');
    expect(await stopShedding()).toBe(200);
  }, 60_000);

  test('a request waiting for a connection is answered 503 with Retry-After, not left hanging; /readyz says so', async () => {
    await startShedding();
    const pending = requests('answered');
    const ready = answer('/readyz');
    for (const res of await Promise.all(pending)) await expectUnavailable(res);
    const readiness = await ready;
    expect(readiness).not.toBe('hang');
    expect((readiness as Response).status).toBe(503);
    expect((await t.request('/healthz')).status).toBe(200);
    // Later requests are answered at once (the circuit is open) for as long as sessions are shed.
    await expectUnavailable(await answer(`${t.fhir()}/Patient`, fhirInit(token)));
    expect(await stopShedding()).toBe(200);
  }, 60_000);

  test('once sessions are let through again the store serves by itself: reads, writes, /readyz', async () => {
    await startShedding();
    await expectUnavailable(await answer(`${t.fhir()}/Patient`, fhirInit(token)));
    expect(await stopShedding()).toBe(200);
    expect((await t.request('/readyz')).status).toBe(200);
    const created = await t.request(`${t.fhir()}/Patient`, fhirInit(token, 'POST', { resourceType: 'Patient', identifier: [{ system: 'urn:test:back', value: '1' }] }));
    expect(created.status).toBe(201);
    expect(unhandled).toEqual([]);
  }, 60_000);
});
