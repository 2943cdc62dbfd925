/** Starts `cinder serve` (from source) as a child process for HTTP benchmarks. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A running `cinder serve`: its URLs, data directory and database. */
export interface ServerProcess {
  base: string;
  /** FHIR base of the bootstrap tenant `default`. */
  fhir: string;
  dataDir: string;
  databaseUrl: string;
  pid: number;
  stop(): Promise<void>;
}

/** A server on a fresh database, with the admin client from its first-start banner. */
export interface BenchServer extends ServerProcess {
  clientId: string;
  clientSecret: string;
}

export async function freePort(): Promise<number> {
  const probe = Bun.serve({ port: 0, fetch: () => new Response() });
  const port = probe.port as number;
  await probe.stop(true);
  return port;
}

/**
 * Spawns the server: a fresh data directory, `env.CINDER_DATABASE_URL` (or this process's
 * CINDER_DATABASE_URL / DATABASE_URL, else a SQLite file in the data directory), rate limits off,
 * warn-level logs. BENCH_BUN_FLAGS adds flags to the server's `bun` (e.g. `--cpu-prof`).
 */
async function spawnServer(env: Record<string, string>, stdout: 'pipe' | 'ignore') {
  const dataDir = mkdtempSync(join(tmpdir(), 'cinder-bench-'));
  const databaseUrl = env.CINDER_DATABASE_URL ?? process.env.CINDER_DATABASE_URL ?? process.env.DATABASE_URL ?? `sqlite:${join(dataDir, 'cinder.db')}`;
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const flags = process.env.BENCH_BUN_FLAGS?.split(' ').filter(Boolean) ?? [];
  const child = Bun.spawn(['bun', ...flags, join(import.meta.dir, '../../src/main.ts'), 'serve'], {
    env: {
      ...process.env, CINDER_PORT: String(port), CINDER_HOST: '127.0.0.1', CINDER_BASE_URL: base, CINDER_DATA_DIR: dataDir,
      CINDER_DATABASE_URL: databaseUrl, CINDER_RATE_LIMITS: 'off', CINDER_LOG_LEVEL: 'warn', ...env,
    },
    stdout,
    stderr: 'inherit',
  });
  const server: ServerProcess = {
    base, dataDir, databaseUrl, pid: child.pid,
    fhir: `${base}/tenants/default/fhir/R4`,
    async stop() {
      child.kill('SIGTERM');
      await child.exited;
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return { child, server };
}

async function waitReady(s: ServerProcess): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await fetch(`${s.base}/healthz`).then((r) => r.ok, () => false)) return;
    await Bun.sleep(50);
  }
  await s.stop();
  throw new Error('cinder serve did not become ready');
}

/**
 * `cinder serve` on a database that may already be set up (no first-start banner is awaited): the
 * caller registers its own tenant and clients through `databaseUrl`. Resolves once /healthz answers.
 */
export async function launchServer(env: Record<string, string> = {}): Promise<ServerProcess> {
  const { server } = await spawnServer(env, 'ignore');
  await waitReady(server);
  return server;
}

/** `cinder serve` on a fresh database; the admin credentials come from the first-start banner. */
export async function startServer(env: Record<string, string> = {}): Promise<BenchServer> {
  const { child, server } = await spawnServer(env, 'pipe');
  let banner = '';
  const reader = (child.stdout as ReadableStream<Uint8Array>).getReader();
  while (!/client_secret:\s+\S+/.test(banner)) {
    const { done, value } = await reader.read();
    if (done) throw new Error(`cinder serve exited before printing its credentials:\n${banner}`);
    banner += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  const field = (name: string) => new RegExp(`${name}:\\s+(\\S+)`).exec(banner)?.[1] ?? '';
  await waitReady(server);
  return { ...server, clientId: field('client_id'), clientSecret: field('client_secret') };
}

/** A client_credentials access token for the server's admin client. */
export async function adminToken(s: BenchServer, scope?: string): Promise<string> {
  const body = new URLSearchParams({ grant_type: 'client_credentials' });
  if (scope) body.set('scope', scope);
  const res = await fetch(`${s.base}/oauth2/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: `Basic ${btoa(`${s.clientId}:${s.clientSecret}`)}` },
    body,
  });
  if (!res.ok) throw new Error(`token: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { access_token: string }).access_token;
}
