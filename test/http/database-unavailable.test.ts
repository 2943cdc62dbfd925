/**
 * SQLite that cannot serve a request for now (another process holds the write lock past the busy
 * timeout; a full disk): 503 with Retry-After and an OperationOutcome `transient`, never 500, and
 * nothing half-written. The PostgreSQL outage runs for real in test/e2e/postgres-outage.test.ts.
 */
import { Database } from 'bun:sqlite';
import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isSqliteOutage, openDatabase } from '../../src/store/sqlite/db.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { isPostgresOutage } from '../../src/store/postgres/db.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';

let t: TestApp;
let token: string;
let path: string;
beforeEach(async () => {
  path = join(mkdtempSync(join(tmpdir(), 'cinder-busy-')), 'cinder.db');
  t = await createTestApp({ store: createSqliteStore(path, { busyTimeoutMs: 100 }) });
  token = await t.token();
});
afterEach(() => t.close());

/** Another process's write transaction, held until release(). */
function holdWriteLock(): { release(): void } {
  const other = openDatabase(path, 0);
  other.exec('BEGIN IMMEDIATE');
  return {
    release() {
      other.exec('ROLLBACK');
      other.close();
    },
  };
}

async function expectUnavailable(res: Response) {
  expect(res.status).toBe(503);
  expect(res.headers.get('retry-after')).toBe('2');
  const body = (await res.json()) as { resourceType: string; issue: { code: string }[] };
  expect(body.resourceType).toBe('OperationOutcome');
  expect(body.issue[0]!.code).toBe('transient');
}

describe('SQLite locked past the busy timeout', () => {
  test('a create answers 503 transient; reads go on; after the lock is gone the same write succeeds', async () => {
    const lock = holdWriteLock();
    try {
      await expectUnavailable(await t.request(`${t.fhir()}/Patient/p1`, fhirInit(token, 'PUT', { resourceType: 'Patient', id: 'p1' })));
      expect((await t.request(`${t.fhir()}/Patient/p1`, fhirInit(token))).status).toBe(404);
      expect((await t.request('/healthz')).status).toBe(200);
    } finally {
      lock.release();
    }
    expect((await t.request(`${t.fhir()}/Patient/p1`, fhirInit(token, 'PUT', { resourceType: 'Patient', id: 'p1' }))).status).toBe(201);
    expect((await t.request(`${t.fhir()}/Patient/p1`, fhirInit(token))).status).toBe(200);
  });

  test('a transaction Bundle answers 503 and writes none of its entries', async () => {
    const bundle = {
      resourceType: 'Bundle', type: 'transaction',
      entry: ['a', 'b', 'c'].map((id) => ({ resource: { resourceType: 'Patient', id }, request: { method: 'PUT', url: `Patient/${id}` } })),
    };
    const lock = holdWriteLock();
    try {
      await expectUnavailable(await t.request(t.fhir(), fhirInit(token, 'POST', bundle)));
    } finally {
      lock.release();
    }
    for (const id of ['a', 'b', 'c']) expect((await t.request(`${t.fhir()}/Patient/${id}`, fhirInit(token))).status).toBe(404);
    expect((await t.request(t.fhir(), fhirInit(token, 'POST', bundle))).status).toBe(200);
  });

  test('a batch Bundle answers 200: the entries before the failure as usual, that one and those after it 503', async () => {
    expect((await t.request(`${t.fhir()}/Patient/keep`, fhirInit(token, 'PUT', { resourceType: 'Patient', id: 'keep' }))).status).toBe(201);
    const bundle = {
      resourceType: 'Bundle', type: 'batch',
      entry: [
        { request: { method: 'GET', url: 'Patient/keep' } },
        { resource: { resourceType: 'Patient', id: 'b1' }, request: { method: 'PUT', url: 'Patient/b1' } },
        { request: { method: 'GET', url: 'Patient/keep' } },
      ],
    };
    const lock = holdWriteLock();
    let res: Response;
    try {
      res = await t.request(t.fhir(), fhirInit(token, 'POST', bundle));
    } finally {
      lock.release();
    }
    expect(res.status).toBe(200);
    const body = (await res.json()) as { type: string; entry: { response: { status: string; outcome?: { issue: { code: string }[] } } }[] };
    expect(body.type).toBe('batch-response');
    expect(body.entry.map((e) => e.response.status.slice(0, 3))).toEqual(['200', '503', '503']);
    for (const e of body.entry.slice(1)) expect(e.response.outcome!.issue[0]!.code).toBe('transient');
    expect((await t.request(`${t.fhir()}/Patient/b1`, fhirInit(token))).status).toBe(404);
  });

  test('an export kick-off (a job row written) answers 503 too', async () => {
    const lock = holdWriteLock();
    try {
      await expectUnavailable(await t.request(`${t.fhir()}/$export`, fhirInit(token)));
    } finally {
      lock.release();
    }
    expect((await t.request(`${t.fhir()}/$export`, fhirInit(token))).status).toBe(202);
  });
});

describe('what counts as unavailable', () => {
  test("SQLite's own busy and full-disk errors do; a constraint error does not", () => {
    const db = new Database(':memory:');
    db.exec('CREATE TABLE t (x TEXT PRIMARY KEY)');
    db.exec('PRAGMA max_page_count = 2');
    const full = (() => {
      try {
        for (let i = 0; i < 1000; i++) db.query('INSERT INTO t VALUES (?)').run('x'.repeat(500) + i);
      } catch (err) {
        return err;
      }
      return undefined;
    })();
    expect((full as { code: string }).code).toBe('SQLITE_FULL');
    expect(isSqliteOutage(full)).toBe(true);
    db.exec('PRAGMA max_page_count = 1000000');
    db.query('INSERT INTO t VALUES (?)').run('dup');
    let unique: unknown;
    try {
      db.query('INSERT INTO t VALUES (?)').run('dup');
    } catch (err) {
      unique = err;
    }
    expect(isSqliteOutage(unique)).toBe(false);
    for (const code of ['SQLITE_BUSY', 'SQLITE_IOERR_WRITE', 'SQLITE_CANTOPEN']) expect(isSqliteOutage({ code })).toBe(true);
    db.close();
  });

  test('PostgreSQL: lost connections and shutdown states do; a syntax error does not', () => {
    // As postgres.js rejects a statement: the statement on the error (its socket's errors), or the code as errno (its own).
    const ofStatement = (code: string) => Object.defineProperty({ code, errno: -104 }, 'query', { value: 'SELECT 1' });
    for (const code of ['ECONNREFUSED', 'ECONNRESET', 'EPIPE']) expect(isPostgresOutage(ofStatement(code))).toBe(true);
    for (const code of ['CONNECT_TIMEOUT', 'CONNECTION_CLOSED']) expect(isPostgresOutage({ code, errno: code })).toBe(true);
    // The same codes on another client's error (a fetch's, an S3 request's) are not the database's.
    for (const code of ['ECONNREFUSED', 'ECONNRESET']) expect(isPostgresOutage(Object.assign(new TypeError(code), { code, errno: 0 }))).toBe(false);
    expect(isPostgresOutage(new Error('plain'))).toBe(false);
    expect(isPostgresOutage({ code: '42601' })).toBe(false);
  });
});
