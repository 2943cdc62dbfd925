/**
 * A `cinder serve` process (from source) whose PostgreSQL sessions are closed cleanly during their
 * start-up (test/helpers/pg-fault-proxy.ts `shed`), as a pooler or proxy in front of the database does
 * when it cannot serve. Before the patch (patches/) the process reconnected without pause, over a
 * thousand times a second, and its requests waited for as long as the proxy shed sessions. It must
 * answer them 503 with Retry-After, make a bounded number of attempts, log the outage, and serve again
 * once sessions are let through, without a restart. postgres-startup-shed.test.ts has the same in process.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { clientToken, freePort } from '../helpers/export-e2e.ts';
import { startPgFaultProxy, type PgFaultProxy } from '../helpers/pg-fault-proxy.ts';
import { cinderCommands, cleanupAfterFile, readBanner, serveEnv, spawnServe } from '../helpers/processes.ts';
import { adminConnection, PG_ADMIN_URL } from '../helpers/stores.ts';

/** Attempts the process may make in the shedding seconds here (about 40 are seen; thousands before). */
const MAX_ATTEMPTS = 200;

let admin: postgres.Sql | undefined;
let proxy: PgFaultProxy | undefined;
const database = `cinder_shed_${crypto.randomUUID().replaceAll('-', '').slice(0, 12)}`;

admin = (await adminConnection()) ?? undefined;
const reachable = admin !== undefined;

const { tempDir, killAfter } = cleanupAfterFile();
afterAll(async () => {
  proxy?.stop();
  if (admin) await admin`DROP DATABASE IF EXISTS ${admin(database)} WITH (FORCE)`;
  await admin?.end();
}, 30_000);

/** fetch that gives up after 10 s: a request the server never answers fails the test instead of hanging it. */
const fetchT = (url: string, init: RequestInit = {}) => fetch(url, { ...init, signal: AbortSignal.timeout(10_000) });

describe.skipIf(!reachable)('cinder serve behind a proxy that closes sessions during start-up', () => {
  test('requests answer 503 with Retry-After, attempts stay few, and it serves again by itself', async () => {
    await admin!`CREATE DATABASE ${admin!(database)}`;
    const target = new URL(PG_ADMIN_URL);
    proxy = await startPgFaultProxy(Number(target.port || 5432));
    const dir = tempDir('cinder-shed-serve-');
    const port = freePort();
    const base = `http://127.0.0.1:${port}`;
    const env = serveEnv(dir, port, {
      CINDER_DATABASE_URL: `postgres://${target.username}@127.0.0.1:${proxy.port}/${database}?connect_timeout=1`,
      CINDER_LOG_LEVEL: 'info', CINDER_RATE_LIMITS: 'off',
    });
    const server = spawnServe(cinderCommands()[0]![1], dir, env, 'pipe');
    killAfter(server);
    const log = new Response(server.stderr).text();
    try {
      const { clientId, secret } = await readBanner(server.stdout);
      const token = await clientToken(base, clientId!, secret!);
      const fhir = `${base}/tenants/default/fhir/R4`;
      const auth = { Authorization: `Bearer ${token}` };
      expect((await fetchT(`${fhir}/Patient?_count=1`, { headers: auth })).status).toBe(200);

      proxy.shed(true);
      await Bun.sleep(200);
      const before = proxy.opened;
      const answers = await Promise.all(Array.from({ length: 6 }, (_, n) => fetchT(`${fhir}/Patient?name=shed${n}`, { headers: auth })));
      for (const res of answers) {
        expect(res.status).toBe(503);
        expect(res.headers.get('retry-after')).toBe('2');
        expect(((await res.json()) as { issue: { code: string }[] }).issue[0]!.code).toBe('transient');
      }
      expect((await fetchT(`${base}/readyz`)).status).toBe(503);
      expect((await fetchT(`${base}/healthz`)).status).toBe(200);
      await Bun.sleep(1500);
      const attempts = proxy.opened - before;
      expect(attempts).toBeGreaterThan(1);
      expect(attempts).toBeLessThan(MAX_ATTEMPTS);
      expect(server.exitCode).toBeNull();

      proxy.shed(false);
      let recovered = false;
      for (let i = 0; i < 100 && !recovered; i++) {
        await Bun.sleep(100);
        recovered = (await fetchT(`${fhir}/Patient?_count=1`, { headers: auth })).status === 200;
      }
      expect(recovered).toBe(true);
      expect((await fetchT(`${base}/readyz`)).status).toBe(200);

      server.kill('SIGTERM');
      expect(await Promise.race([server.exited, Bun.sleep(20_000).then(() => 'still running')])).toBe(0);
      const printedLog = await log;
      expect(printedLog).toContain('database unreachable');
      expect(printedLog).toContain('database reachable again');
      expect(printedLog).not.toContain('unhandled promise rejection');
      expect(printedLog).not.toContain('uncaught exception');
    } finally {
      proxy.shed(false);
      if (server.exitCode === null) server.kill('SIGKILL');
    }
  }, 90_000);
});
