/**
 * A `cinder serve` process (from source) on a throwaway PostgreSQL cluster (test/helpers/pg-cluster.ts)
 * whose server is killed (`pg_ctl -m immediate stop`) while the process is busy: writers, a rest-hook and
 * a websocket Subscription being delivered, AuditEvents being flushed, the periodic loops running. The
 * process must live through it (Bun ends a process on an unhandled rejection), answer reads 503 while the
 * database is gone, and answer them 200 again once it is back, without a restart.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { clientToken, freePort } from '../helpers/export-e2e.ts';
import { createPgCluster, postgresBinDir, type PgCluster } from '../helpers/pg-cluster.ts';
import { cinderCommands, cleanupAfterFile, readBanner, serveEnv, spawnServe } from '../helpers/processes.ts';

const bin = postgresBinDir();
if (!bin && process.env.CI === 'true') throw new Error('PostgreSQL binaries (/usr/lib/postgresql/*/bin) are missing under CI=true');

let cluster: PgCluster | undefined;
afterAll(() => cluster?.remove(), 30_000);
const { tempDir } = cleanupAfterFile();

/** fetch that gives up after 10 s: a request the server never answers fails the test instead of hanging it. */
const fetchT = (url: string, init: RequestInit = {}) => fetch(url, { ...init, signal: AbortSignal.timeout(10_000) });

describe.skipIf(!bin)('cinder serve on PostgreSQL killed mid-work', () => {
  test('the process lives through it: reads answer 503, then 200 again without a restart', async () => {
    cluster = await createPgCluster(bin!);
    await cluster.start();
    const admin = postgres(cluster.url, { max: 1, onnotice: () => undefined });
    await admin`CREATE DATABASE cinder`;
    await admin.end();
    let hooks = 0;
    const receiver = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => (hooks++, new Response(null, { status: 204 })) });
    const dir = tempDir('cinder-outage-serve-');
    const port = freePort();
    const base = `http://127.0.0.1:${port}`;
    const env = serveEnv(dir, port, {
      CINDER_DATABASE_URL: cluster.url.replace(/\/postgres$/, '/cinder'), CINDER_LOG_LEVEL: 'warn',
      CINDER_RATE_LIMITS: 'off', CINDER_AUDIT: 'on', CINDER_AUDIT_FLUSH_MS: '20', CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true', CINDER_SUBSCRIPTION_POLL_MS: '20',
    });
    const server = spawnServe(cinderCommands()[0]![1], dir, env, 'pipe');
    // Read as it comes: an unread pipe would fill and block the server's writes to it.
    const log = new Response(server.stderr).text();
    let socket: WebSocket | undefined;
    let stop = false;
    try {
      const { clientId, secret } = await readBanner(server.stdout);
      const token = await clientToken(base, clientId!, secret!);
      const fhir = `${base}/tenants/default/fhir/R4`;
      const auth = { Authorization: `Bearer ${token}` };
      const post = (type: string, body: unknown) =>
        fetchT(`${fhir}/${type}`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/fhir+json' }, body: JSON.stringify(body) });
      const criteria = 'Patient?gender=other';
      for (const channel of [{ type: 'rest-hook', endpoint: `http://127.0.0.1:${receiver.port}/hook` }, { type: 'websocket' }]) {
        expect((await post('Subscription', { resourceType: 'Subscription', status: 'requested', reason: 'outage', criteria, channel })).status).toBe(201);
      }
      const found = (await (await fetchT(`${fhir}/Subscription?type=websocket`, { headers: auth })).json()) as { entry: { resource: { id: string } }[] };
      socket = new WebSocket(`${fhir.replace('http', 'ws')}/websocket`);
      const pings: string[] = [];
      const bound = Promise.withResolvers<void>();
      socket.onmessage = (e) => (String(e.data).startsWith('bound') ? bound.resolve() : pings.push(String(e.data)));
      const closed = Promise.withResolvers<number>();
      socket.onclose = (e) => closed.resolve(e.code);
      await new Promise<void>((resolve) => (socket!.onopen = () => resolve()));
      socket.send(`bind ${found.entry[0]!.resource.id}`);
      await bound.promise;

      const unanswered: string[] = [];
      // Writers (each notifying both Subscriptions and audited) keep the process busy throughout.
      const writers = Array.from({ length: 4 }, async () => {
        while (!stop) {
          const answer = await post('Patient', { resourceType: 'Patient', gender: 'other' }).catch((err: unknown) => String(err));
          if (typeof answer === 'string') unanswered.push(answer);
          else await answer.body?.cancel();
          await Bun.sleep(5);
        }
      });
      // Delivery works before the outage: both channels reached (within 10 s: a loaded machine is slow to start).
      await Bun.sleep(1500);
      for (let i = 0; i < 85 && (hooks === 0 || pings.length === 0); i++) await Bun.sleep(100);
      expect(hooks).toBeGreaterThan(0);
      expect(pings.length).toBeGreaterThan(0);

      await cluster.stopImmediate();
      await Bun.sleep(3000);
      expect(server.exitCode).toBeNull();
      const down = await fetchT(`${fhir}/Patient?_count=1`, { headers: auth });
      expect(down.status).toBe(503);
      expect((await fetchT(`${base}/healthz`)).status).toBe(200);

      // The writers go on while the database comes back: a write begun in that instant is answered too.
      await cluster.start();
      let recovered = 0;
      for (let i = 0; i < 100 && !recovered; i++) {
        await Bun.sleep(100);
        if ((await fetchT(`${fhir}/Patient?_count=1`, { headers: auth })).status === 200) recovered = i;
      }
      expect(recovered).toBeGreaterThan(0);
      await Bun.sleep(1000);
      // Every write was answered (503 while the database was gone).
      stop = true;
      await Promise.all(writers);
      expect(unanswered).toEqual([]);
      expect(server.exitCode).toBeNull();
      // Delivery resumed too: a write after the outage reaches the receiver.
      const before = hooks;
      expect((await post('Patient', { resourceType: 'Patient', gender: 'other' })).status).toBe(201);
      for (let i = 0; i < 100 && hooks === before; i++) await Bun.sleep(100);
      expect(hooks).toBeGreaterThan(before);

      // It still drains and stops on SIGTERM, though connections broke under queries; the open websocket,
      // which would hold the drain, is closed with 1001 (Going Away).
      server.kill('SIGTERM');
      expect(await Promise.race([server.exited, Bun.sleep(20_000).then(() => 'still running')])).toBe(0);
      expect(await closed.promise).toBe(1001);
      // Every error was received by its caller: none reached the process-level policy (src/cli/crash-policy.ts).
      const printedLog = await log;
      expect(printedLog).not.toContain('unhandled promise rejection');
      expect(printedLog).not.toContain('uncaught exception');
    } finally {
      stop = true;
      socket?.close();
      receiver.stop(true);
      if (server.exitCode === null) server.kill('SIGKILL');
      // What the server printed that is no log line (a crash's stack), for a failure's diagnosis.
      const printed = (await log).split('\n').filter((l) => l && !l.startsWith('{'));
      if (printed.length) console.log(printed.slice(0, 40).join('\n'));
    }
  }, 90_000);
});
