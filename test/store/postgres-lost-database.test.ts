/**
 * A running server whose PostgreSQL database can no longer be connected to for a reason other than the network:
 * the database dropped or renamed (invalid_catalog_name), and in the same way a password rotated or a role
 * dropped (class 28, which trust authentication here cannot produce). Requests answered 500 `exception` one
 * after another; they answer 503 `transient` with Retry-After, `/readyz` 503, and the server serves again by
 * itself once the database is back, as for an outage of the network.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { createPostgresStore } from '../../src/store/postgres/index.ts';
import { isPostgresOutage } from '../../src/store/postgres/db.ts';
import { createTestApp, fhirInit } from '../helpers/app.ts';
import { adminConnection, storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
const pg = targets.find((t) => t.kind === 'postgres');
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

/** Renames database `from` (ending its sessions; the app's pool may open one again meanwhile: tried again). */
async function rename(admin: postgres.Sql, from: string, to: string): Promise<void> {
  for (let i = 0; ; i++) {
    await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ${from} AND pid <> pg_backend_pid()`;
    try {
      await admin.unsafe(`ALTER DATABASE "${from}" RENAME TO "${to}"`);
      return;
    } catch (err) {
      if (i >= 20) throw err;
      await Bun.sleep(20);
    }
  }
}

describe.skipIf(!pg)('PostgreSQL database gone while the server runs', () => {
  test('requests answer 503 transient, never 500; served again once the database is back', async () => {
    const db = await pg!.migrated();
    const name = new URL(db.url).pathname.slice(1);
    const admin = (await adminConnection())!;
    const t = await createTestApp({ store: createPostgresStore(db.url, { max: 4, probeIntervalMs: 100 }) });
    try {
      const token = await t.token();
      const read = () => t.request(`${t.fhir()}/Patient?_count=1`, fhirInit(token));
      expect((await read()).status).toBe(200);
      // Renamed away (as dropped, and given back below): its sessions are ended, and new ones are refused (3D000).
      await rename(admin, name, `${name}_away`);
      // Past the first errors of the ended sessions, and several probes of the circuit.
      await Bun.sleep(600);
      for (let i = 0; i < 3; i++) {
        const res = await read();
        expect(res.status).toBe(503);
        expect(res.headers.get('retry-after')).toBe('2');
        expect(((await res.json()) as { issue: { code: string }[] }).issue[0]!.code).toBe('transient');
      }
      expect((await t.request('/readyz')).status).toBe(503);
      await rename(admin, `${name}_away`, name);
      let status = 0;
      for (let i = 0; i < 100 && status !== 200; i++) {
        status = (await read()).status;
        if (status !== 200) await Bun.sleep(100);
      }
      expect(status).toBe(200);
    } finally {
      await t.close();
      // Given back when an assertion failed while it was away, so that the file's clean-up drops it.
      if ((await admin`SELECT 1 FROM pg_database WHERE datname = ${`${name}_away`}`).length) await rename(admin, `${name}_away`, name);
      await admin.end();
    }
  }, 30_000);

  test('the states that refuse a new session are outages; a syntax error is not', () => {
    const error = (code: string) => Object.assign(Object.create(postgres.PostgresError.prototype), { code });
    for (const code of ['28000', '28P01', '3D000']) expect([code, isPostgresOutage(error(code))]).toEqual([code, true]);
    expect(isPostgresOutage(error('42601'))).toBe(false);
  });
});
