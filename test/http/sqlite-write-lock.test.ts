/**
 * Writes that find another process's write lock on a SQLite database (a `cinder import` beside
 * `cinder serve`, or CINDER_PROCESSES=2) wait for it without blocking the thread: the server goes on
 * answering reads, and the write lands once the lock is free. The other process is played by a
 * second connection of this thread, which can release its lock only if the thread is not blocked, as
 * SQLite's busy handler would block it (for the whole 10 s busy timeout). So no time is measured: a blocked
 * thread answers the reads only after the write has failed (SQLITE_BUSY, a 503), and the write never lands.
 */
import { afterEach, beforeEach, expect, test } from 'bun:test';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../../src/store/sqlite/db.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';

let t: TestApp;
let token: string;
let path: string;
beforeEach(async () => {
  path = join(mkdtempSync(join(tmpdir(), 'cinder-lock-')), 'cinder.db');
  t = await createTestApp({ store: createSqliteStore(path) });
  token = await t.token();
});
afterEach(() => t.close());

/** Another process's write transaction (it has written a row), committed by release(). */
function holdWriteLock(): { release(): void } {
  const other = openDatabase(path, 0);
  other.exec('BEGIN IMMEDIATE');
  other.query("INSERT INTO counters (name, value) VALUES ('other-process', 1)").run();
  return {
    release() {
      other.exec('COMMIT');
      other.close();
    },
  };
}

/** Settles with `p`, and tells meanwhile whether it has settled. */
function watch<T>(p: T | Promise<T>) {
  const w = { settled: false, done: Promise.resolve(p).finally(() => (w.settled = true)) };
  return w;
}

const patient = (id: string) => ({ resourceType: 'Patient', id, name: [{ family: id }] });

test('a FHIR write waits for the lock while reads, searches and the health check go on; then it lands', async () => {
  expect((await t.request(`${t.fhir()}/Patient/before`, fhirInit(token, 'PUT', patient('before')))).status).toBe(201);
  const lock = holdWriteLock();
  const put = watch(t.request(`${t.fhir()}/Patient/p1`, fhirInit(token, 'PUT', patient('p1'))));
  try {
    // Answered while the write waits: a thread blocked in the busy handler would answer them only after the write failed.
    expect((await t.request(`${t.fhir()}/Patient/before`, fhirInit(token))).status).toBe(200);
    const search = (await (await t.request(`${t.fhir()}/Patient?family=before`, fhirInit(token))).json()) as { total?: number; entry?: unknown[] };
    expect(search.entry).toHaveLength(1);
    expect((await t.request('/healthz')).status).toBe(200);
    expect(put.settled).toBe(false);
    // Still waiting after its retries (1 ms doubling to 25 ms): the lock is held.
    await Bun.sleep(100);
    expect(put.settled).toBe(false);
  } finally {
    lock.release();
  }
  expect((await put.done).status).toBe(201);
  expect((await t.request(`${t.fhir()}/Patient/p1`, fhirInit(token))).status).toBe(200);
});

test('a transaction Bundle and an export kick-off wait too, and land whole', async () => {
  const bundle = {
    resourceType: 'Bundle', type: 'transaction',
    entry: ['a', 'b'].map((id) => ({ resource: patient(id), request: { method: 'PUT', url: `Patient/${id}` } })),
  };
  const lock = holdWriteLock();
  const tx = watch(t.request(t.fhir(), fhirInit(token, 'POST', bundle)));
  const kickOff = watch(t.request(`${t.fhir()}/$export`, fhirInit(token)));
  try {
    // A read answered while both wait, which a thread blocked in the busy handler could give only after they failed.
    expect((await t.request(`${t.fhir()}/Patient/a`, fhirInit(token))).status).toBe(404);
    expect(tx.settled).toBe(false);
    expect(kickOff.settled).toBe(false);
    await Bun.sleep(100);
    expect(tx.settled).toBe(false);
    expect(kickOff.settled).toBe(false);
  } finally {
    lock.release();
  }
  expect((await tx.done).status).toBe(200);
  expect((await kickOff.done).status).toBe(202);
  for (const id of ['a', 'b']) expect((await t.request(`${t.fhir()}/Patient/${id}`, fhirInit(token))).status).toBe(200);
});

test('account and OAuth writes wait without blocking the thread', async () => {
  const lock = holdWriteLock();
  const created = watch(t.store.tenants.create('t2', 5));
  const code = watch(t.store.oauth.revoke({ kind: 'jti', value: 'j1', revokedAt: 1, expiresAt: 2 ** 40 }));
  try {
    // Reads go on while the writes wait: this app's first request reads its tenant, another's the client.
    expect((await t.request(`${t.fhir()}/metadata`)).status).toBe(200);
    expect(await t.store.clients.get(t.admin.client.clientId)).not.toBeNull();
    expect(created.settled).toBe(false);
    expect(code.settled).toBe(false);
    await Bun.sleep(100);
    expect(created.settled).toBe(false);
    expect(code.settled).toBe(false);
  } finally {
    lock.release();
  }
  await created.done;
  await code.done;
  expect(await t.store.tenants.get('t2')).toEqual({ id: 't2', createdAt: 5 });
  expect(await t.store.oauth.isRevoked({ jti: 'j1' })).toBe(true);
});

test('a read through the writer queue takes no lock: another process holding it does not hold the read up', async () => {
  const lock = holdWriteLock();
  try {
    // Answered while the lock is held, which it is until `finally`: a read that took it could only have failed
    // (SQLITE_BUSY after the busy timeout), never answered, so no time need be measured.
    expect(await t.store.tenants.get('t1')).not.toBeNull();
    expect(await t.store.clients.get(t.admin.client.clientId)).not.toBeNull();
  } finally {
    lock.release();
  }
});
