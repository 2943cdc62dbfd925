/**
 * `cinder serve`'s drain has a deadline (CINDER_DRAIN_TIMEOUT): work that never ends does not hold a
 * SIGTERM for good. Here a request and a Subscription delivery round wait for a PostgreSQL server that
 * was frozen (SIGSTOP: its connections stay open and nothing answers, as with a hung host; without the
 * deadline the round, and so the drain, waited for ever). Past the deadline the request's connection
 * is closed, an error line names what was still waited for and the process exits with status 1.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { freePort } from '../helpers/export-e2e.ts';
import { createPgCluster, postgresBinDir, type PgCluster } from '../helpers/pg-cluster.ts';
import { cinderCommands } from '../helpers/processes.ts';

const bin = postgresBinDir();
if (!bin && process.env.CI === 'true') throw new Error('PostgreSQL binaries (/usr/lib/postgresql/*/bin) are missing under CI=true');

let cluster: PgCluster | undefined;
const dirs: string[] = [];
afterAll(async () => {
  await cluster?.remove();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
}, 30_000);

describe.skipIf(!bin)('the drain deadline', () => {
  test('a request still waiting for the database at the deadline is cut and the process exits 1', async () => {
    cluster = await createPgCluster(bin!);
    await cluster.start();
    const admin = postgres(cluster.url, { max: 1, onnotice: () => undefined });
    await admin`CREATE DATABASE cinder`;
    await admin.end();
    const dir = mkdtempSync(join(tmpdir(), 'cinder-drain-'));
    dirs.push(dir);
    const port = freePort();
    const base = `http://127.0.0.1:${port}`;
    const env = {
      PATH: process.env.PATH ?? '', HOME: dir, CINDER_PORT: String(port), CINDER_HOST: '127.0.0.1', CINDER_BASE_URL: base,
      CINDER_DATA_DIR: join(dir, 'data'), CINDER_DATABASE_URL: cluster.url.replace(/\/postgres$/, '/cinder'), CINDER_LOG_LEVEL: 'info',
      CINDER_DRAIN_TIMEOUT: '1', CINDER_SUBSCRIPTION_POLL_MS: '20',
    };
    const server = Bun.spawn([...cinderCommands()[0]![1], 'serve'], { env, cwd: dir, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' });
    const log = new Response(server.stderr).text();
    const abort = new AbortController();
    try {
      const reader = server.stdout.getReader();
      let banner = '';
      while (!banner.includes('token URL:')) {
        const chunk = await reader.read();
        if (chunk.done) break;
        banner += new TextDecoder().decode(chunk.value);
      }
      const clientId = /client_id:\s+(\S+)/.exec(banner)![1]!;
      const secret = /client_secret:\s+(\S+)/.exec(banner)![1]!;
      const tokenRes = await fetch(`${base}/oauth2/token`, {
        method: 'POST',
        headers: { Authorization: 'Basic ' + btoa(`${clientId}:${secret}`), 'Content-Type': 'application/x-www-form-urlencoded' },
        body: 'grant_type=client_credentials',
      });
      const { access_token: token } = (await tokenRes.json()) as { access_token: string };
      const fhir = `${base}/tenants/default/fhir/R4`;
      expect((await fetch(`${fhir}/Patient?_count=1`, { headers: { Authorization: `Bearer ${token}` } })).status).toBe(200);

      cluster.freeze();
      const pending = fetch(`${fhir}/Patient?_count=1`, { headers: { Authorization: `Bearer ${token}` }, signal: abort.signal }).then(
        (r) => `answered ${r.status}`,
        (err: unknown) => `failed: ${String(err)}`,
      );
      await Bun.sleep(500);

      server.kill('SIGTERM');
      // Without the deadline the drain waits for the frozen database for ever.
      const exited = await Promise.race([server.exited, Bun.sleep(20_000).then(() => 'still running')]);
      expect(exited).toBe(1);
      // Its client saw the connection closed, with no answer.
      expect(await Promise.race([pending, Bun.sleep(2_000).then(() => 'pending')])).toStartWith('failed');
      type Line = { level: string; msg: string; signal?: string; drainTimeoutSeconds?: number; waitingFor?: string[] };
      const lines = (await log).split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Line);
      // The drain began on the signal, and ended at the deadline it names (CINDER_DRAIN_TIMEOUT), with the steps still waited for.
      const began = lines.findIndex((l) => l.msg === 'draining');
      const late = lines.findIndex((l) => l.msg.startsWith('draining: not finished in time'));
      expect(lines[began]?.signal).toBe('SIGTERM');
      expect(late).toBeGreaterThan(began);
      expect(lines[late]).toMatchObject({ level: 'error', drainTimeoutSeconds: 1 });
      expect(lines[late]?.waitingFor).toContain('stopping the HTTP server');
      expect(lines[late]?.waitingFor).toContain('stopping Subscription delivery');
      expect(lines.some((l) => l.msg === 'stopped')).toBe(false);
    } finally {
      abort.abort();
      cluster.thaw();
      if (server.exitCode === null) server.kill('SIGKILL');
    }
  }, 60_000);
});
