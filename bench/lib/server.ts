/** Starts `cinder serve` (from source) as a child process for HTTP benchmarks. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface BenchServer {
  base: string;
  fhir: string;
  clientId: string;
  clientSecret: string;
  dataDir: string;
  pid: number;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  const probe = Bun.serve({ port: 0, fetch: () => new Response() });
  const port = probe.port as number;
  await probe.stop(true);
  return port;
}

/**
 * A fresh data directory (or `env.CINDER_DATABASE_URL`), rate limits off, warn-level logs; the admin
 * credentials come from the first-start banner.
 */
export async function startServer(env: Record<string, string> = {}): Promise<BenchServer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'cinder-bench-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const flags = process.env.BENCH_BUN_FLAGS?.split(' ').filter(Boolean) ?? [];
  const child = Bun.spawn(['bun', ...flags, join(import.meta.dir, '../../src/main.ts'), 'serve'], {
    env: {
      ...process.env, CINDER_PORT: String(port), CINDER_HOST: '127.0.0.1', CINDER_BASE_URL: base, CINDER_DATA_DIR: dataDir,
      CINDER_RATE_LIMITS: 'off', CINDER_LOG_LEVEL: 'warn', ...env,
    },
    stdout: 'pipe',
    stderr: 'inherit',
  });
  let banner = '';
  const reader = child.stdout.getReader();
  while (!/client_secret:\s+\S+/.test(banner)) {
    const { done, value } = await reader.read();
    if (done) throw new Error(`cinder serve exited before printing its credentials:\n${banner}`);
    banner += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  const field = (name: string) => new RegExp(`${name}:\\s+(\\S+)`).exec(banner)?.[1] ?? '';
  for (let i = 0; i < 100 && !(await fetch(`${base}/healthz`).then((r) => r.ok, () => false)); i++) await Bun.sleep(50);
  return {
    base, dataDir, pid: child.pid,
    fhir: field('FHIR base'),
    clientId: field('client_id'),
    clientSecret: field('client_secret'),
    async stop() {
      child.kill('SIGTERM');
      await child.exited;
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
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
