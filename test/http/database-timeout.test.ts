/**
 * A statement PostgreSQL cancels (an operator's `statement_timeout`, here 300 ms, reached while another
 * session holds a table's lock): 503 with an OperationOutcome `timeout` on the FHIR API and
 * `temporarily_unavailable` at the token endpoint, never 500; nothing half-written; and, the database
 * being up, no outage: the next request is served at once.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { createClient } from '../../src/auth/admin.ts';
import { isPostgresOutage, isPostgresTimeout } from '../../src/store/postgres/db.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { PG_ADMIN_URL, storeTargets } from '../helpers/stores.ts';

const targets = (await storeTargets({ main: false })).filter((t) => t.kind === 'postgres');
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe('PostgreSQL cancels a statement past its statement_timeout', () => {
    let t: TestApp;
    let token: string;
    let other: postgres.Sql;

    beforeAll(async () => {
      const db = await target.fresh();
      const admin = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => {} });
      await admin.unsafe(`ALTER DATABASE "${new URL(db.url).pathname.slice(1)}" SET statement_timeout = '300ms'`);
      await admin.end();
      const store = db.open();
      await store.migrate();
      t = await createTestApp({ store });
      token = await t.token();
      other = postgres(db.url, { max: 1, onnotice: () => {} });
    });
    afterAll(async () => {
      await other.end();
      await t.close();
    });
    beforeEach(async () => {
      expect((await t.request(`${t.fhir()}/Patient/keep`, fhirInit(token, 'PUT', { resourceType: 'Patient', id: 'keep' }))).status).toBeLessThan(300);
    });

    /** Runs `during` while another session holds an exclusive lock on `table`. */
    async function whileLocked(table: string, during: () => Promise<void>): Promise<void> {
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      let locked!: () => void;
      const isLocked = new Promise<void>((r) => (locked = r));
      const holder = other.begin(async (tx) => {
        await tx.unsafe(`SET LOCAL statement_timeout = 0; LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
        locked();
        await released;
      });
      await isLocked;
      try {
        await during();
      } finally {
        release();
        await holder;
      }
    }

    async function expectTimeout(res: Response) {
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBeNull();
      const body = (await res.json()) as { resourceType: string; issue: { code: string; diagnostics: string }[] };
      expect(body.resourceType).toBe('OperationOutcome');
      expect(body.issue[0]!.code).toBe('timeout');
      expect(body.issue[0]!.diagnostics).toContain('time limit');
    }

    test('a read, a search and a write answer 503 timeout; nothing is written; the next request is served at once', async () => {
      await whileLocked('resources', async () => {
        await expectTimeout(await t.request(`${t.fhir()}/Patient/keep`, fhirInit(token)));
        await expectTimeout(await t.request(`${t.fhir()}/Patient?_id=keep`, fhirInit(token)));
        await expectTimeout(await t.request(`${t.fhir()}/Patient/new`, fhirInit(token, 'PUT', { resourceType: 'Patient', id: 'new' })));
      });
      // No outage was signalled: served at once, and the cancelled write left nothing.
      expect((await t.request(`${t.fhir()}/Patient/keep`, fhirInit(token))).status).toBe(200);
      expect((await t.request(`${t.fhir()}/Patient/new`, fhirInit(token))).status).toBe(404);
      expect((await t.request('/readyz')).status).toBe(200);
    });

    test('a batch Bundle answers 200, its entries 503 timeout from the first that meets the limit', async () => {
      const bundle = {
        resourceType: 'Bundle', type: 'batch',
        entry: [
          { resource: { resourceType: 'Patient', id: 'in-batch' }, request: { method: 'PUT', url: 'Patient/in-batch' } },
          { request: { method: 'GET', url: 'Patient/keep' } },
        ],
      };
      let res!: Response;
      await whileLocked('resources', async () => {
        res = await t.request(t.fhir(), fhirInit(token, 'POST', bundle));
      });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { entry: { response: { status: string; outcome?: { issue: { code: string }[] } } }[] };
      expect(body.entry.map((e) => [e.response.status.slice(0, 3), e.response.outcome?.issue[0]?.code])).toEqual([['503', 'timeout'], ['503', 'timeout']]);
      expect((await t.request(`${t.fhir()}/Patient/in-batch`, fhirInit(token))).status).toBe(404);
    });

    test('the token endpoint answers 503 temporarily_unavailable', async () => {
      // A client the server has not looked up yet: not in its cache of clients.
      const fresh = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.read'] });
      await whileLocked('clients', async () => {
        const res = await t.request('/oauth2/token', {
          method: 'POST',
          headers: { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: `Basic ${btoa(`${fresh.client.clientId}:${fresh.clientSecret}`)}` },
          body: new URLSearchParams({ grant_type: 'client_credentials' }),
        });
        expect(res.status).toBe(503);
        expect(((await res.json()) as { error: string }).error).toBe('temporarily_unavailable');
      });
      expect((await t.token(undefined, fresh.client.clientId, fresh.clientSecret!)).length).toBeGreaterThan(0);
    });

    test('a cancelled statement is a timeout, not an outage', async () => {
      const err = await other`SELECT pg_sleep(1)`.catch((e: unknown) => e);
      expect(isPostgresTimeout(err)).toBe(true);
      expect(isPostgresOutage(err)).toBe(false);
      expect(isPostgresTimeout(await other`SELEC 1`.catch((e: unknown) => e))).toBe(false);
    });
  });
}
