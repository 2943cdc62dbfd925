/**
 * An `$import` job that wrote much refreshes the planner's statistics before it reads as completed, as `cinder import`
 * and a reindex do: PostgreSQL's tables are analysed (autovacuum off here, as where it has not come round yet), so the
 * client's next searches are planned by what it wrote. One that wrote little (fewer than 50 resources and a tenth of
 * what the statistics counted) leaves them alone and pays nothing for them. On both databases (SQLite keeps no
 * planner statistics: its measured type sizes are forgotten, which the job's completion alone shows here).
 */
import { afterAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { storeTargets, type StoreDatabase } from '../helpers/stores.ts';

const TABLES = ['resources', 'resource_history', 'search_keys', 'search_index', 'search_string', 'search_range', 'search_composite', 'search_text', 'compartments'];
const ndjson = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => JSON.stringify({ resourceType: 'Patient', id: `${prefix}${i}`, gender: i % 2 ? 'male' : 'female' })).join('\n') + '\n';

const server = Bun.serve({
  port: 0, hostname: '127.0.0.1',
  fetch: (req) => {
    const m = /^\/(\w+)-(\d+)\.ndjson$/.exec(new URL(req.url).pathname);
    return m ? new Response(ndjson(Number(m[2]), m[1]!)) : new Response('not found', { status: 404 });
  },
});
const targets = await storeTargets({ main: false });
afterAll(async () => {
  server.stop(true);
  for (const t of targets) await t.cleanup();
}, 60_000);

/** The searched tables of `db` that have planner statistics (PostgreSQL). */
async function analysed(db: StoreDatabase): Promise<string[]> {
  const conn = postgres(db.url, { max: 1, onnotice: () => undefined });
  try {
    const rows = await conn<{ t: string }[]>`SELECT DISTINCT tablename AS t FROM pg_stats WHERE schemaname = current_schema() AND tablename IN ${conn(TABLES)} ORDER BY 1`;
    return rows.map((r) => r.t);
  } finally {
    await conn.end();
  }
}

/** Runs an `$import` of `n` Patients (ids `prefix0`...) to its end; its status body. */
async function imported(t: TestApp, n: number, prefix: string): Promise<{ output: { count: number }[] }> {
  const token = await t.token();
  const input = { name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: `http://127.0.0.1:${server.port}/${prefix}-${n}.ndjson` }] };
  const kick = await t.request(`${t.fhir()}/$import`, fhirInit(token, 'POST', { resourceType: 'Parameters', parameter: [input] }));
  expect(kick.status).toBe(202);
  expect(await t.app.imports.runOnce()).toBe(1);
  const done = await t.request(kick.headers.get('content-location')!, fhirInit(token));
  expect(done.status).toBe(200);
  return (await done.json()) as { output: { count: number }[] };
}

for (const target of targets) {
  describe(`$import and the planner statistics (${target.kind})`, () => {
    /** An app on a fresh database whose searched tables autovacuum leaves alone (PostgreSQL). */
    const app = async () => {
      const db = await target.migrated();
      if (target.kind === 'postgres') {
        const conn = postgres(db.url, { max: 1, onnotice: () => undefined });
        for (const table of TABLES) await conn.unsafe(`ALTER TABLE ${table} SET (autovacuum_enabled = off)`);
        await conn.end();
      }
      const t = await createTestApp({ store: db.open(), env: { CINDER_IMPORT_ALLOW_PRIVATE: 'true' } });
      return { db, t };
    };

    test('an import that wrote much is analysed before it reads as completed', async () => {
      const { db, t } = await app();
      try {
        if (target.kind === 'postgres') expect(await analysed(db)).toEqual([]);
        expect((await imported(t, 300, 'big')).output[0]!.count).toBe(300);
        if (target.kind === 'postgres') expect(await analysed(db)).toEqual(expect.arrayContaining(['compartments', 'resources', 'search_index']));
        const found = await t.request(`${t.fhir()}/Patient?gender=male&_summary=count`, fhirInit(await t.token()));
        expect(((await found.json()) as { total: number }).total).toBe(150);
      } finally {
        await t.app.imports.stop();
        await t.close();
      }
    }, 120_000);

    test('an import that wrote little leaves the statistics alone', async () => {
      const { db, t } = await app();
      try {
        expect((await imported(t, 20, 'small')).output[0]!.count).toBe(20);
        if (target.kind === 'postgres') expect(await analysed(db)).toEqual([]);
      } finally {
        await t.app.imports.stop();
        await t.close();
      }
    }, 120_000);
  });
}
