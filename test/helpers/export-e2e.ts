import type { Subprocess } from 'bun';
import { createClient, createTenant } from '../../src/auth/admin.ts';
import { systemClock } from '../../src/clock.ts';
import { createBatchWriter, DEFAULT_BATCH_LIMITS } from '../../src/fhir/import/batches.ts';
import type { Store } from '../../src/store/types.ts';

const ROOT = new URL('../..', import.meta.url).pathname;

/** A free TCP port on 127.0.0.1. */
export function freePort(): number {
  const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response() });
  const port = server.port!;
  server.stop(true);
  return port;
}

/** Tenant `t1`, a client_credentials client with system scopes, and `count` Observations of 10 patients. */
export async function seed(store: Store, count: number) {
  await createTenant(store, systemClock, 't1');
  const { client, clientSecret } = await createClient(store, systemClock, { tenant: 't1', scopes: ['system/*.read'] });
  const clock = { now: () => systemClock.now() - 60_000 };
  const writer = createBatchWriter({ store, clock }, 't1', DEFAULT_BATCH_LIMITS, () => undefined);
  for (let i = 0; i < count; i++) {
    const id = `obs-${String(i).padStart(7, '0')}`;
    await writer.addPrepared([writer.prepare({
      resourceType: 'Observation', id, status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '8867-4', display: 'Heart rate' }] },
      subject: { reference: `Patient/p${i % 10}` }, valueQuantity: { value: i % 200, unit: '/min' },
    })]);
  }
  await writer.drain();
  return { clientId: client.clientId, secret: clientSecret! };
}

export interface Server {
  proc: Subprocess;
  base: string;
  log: () => string;
}

/**
 * Starts `bun src/main.ts serve` with `env` and waits until /healthz answers. Processes that share a
 * database share one public base URL (`baseUrl`, default this process's own), as behind a load balancer.
 * `prelude`, shell commands run before the server in its shell (resource limits: `ulimit -f`), starts it through `sh`.
 * `wrap`, a command the server runs under (`unshare --pid ...`: a container's pid namespace of its own).
 */
export async function startServer(env: Record<string, string>, port: number, baseUrl = `http://127.0.0.1:${port}`, prelude?: string, wrap: string[] = []): Promise<Server> {
  const command = [...wrap, ...(prelude === undefined ? ['bun', 'src/main.ts', 'serve'] : ['sh', '-c', `${prelude}; exec bun src/main.ts serve`])];
  const proc = Bun.spawn(command, {
    cwd: ROOT, env: { ...process.env, ...env, CINDER_PORT: String(port), CINDER_HOST: '127.0.0.1', CINDER_BASE_URL: baseUrl },
    stdout: 'pipe', stderr: 'pipe',
  });
  let text = '';
  void (async () => {
    for await (const chunk of proc.stderr as ReadableStream<Uint8Array>) text += new TextDecoder().decode(chunk);
  })();
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 200; i++) {
    if (proc.exitCode !== null) throw new Error(`server exited: ${text}`);
    try {
      if ((await fetch(`${base}/healthz`)).ok) return { proc, base, log: () => text };
    } catch {
      // not up yet
    }
    await Bun.sleep(50);
  }
  proc.kill('SIGKILL');
  throw new Error(`server did not start: ${text}`);
}

export async function clientToken(base: string, clientId: string, secret: string): Promise<string> {
  const res = await fetch(`${base}/oauth2/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: 'Basic ' + btoa(`${clientId}:${secret}`) },
    body: 'grant_type=client_credentials',
  });
  if (!res.ok) throw new Error(`token: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { access_token: string }).access_token;
}

/** Polls the status URL until 200 (or fails after `timeoutMs`); returns the manifest. */
export async function awaitManifest(statusUrl: string, token: string, timeoutMs = 60_000) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const res = await fetch(statusUrl, { headers: { Authorization: `Bearer ${token}` } });
    if (res.status === 200) return (await res.json()) as { output: { type: string; url: string; count: number }[] };
    if (res.status !== 202) throw new Error(`status ${res.status}: ${await res.text()}`);
    await Bun.sleep(100);
  }
  throw new Error('export did not finish in time');
}

/** Downloads every output file; returns all lines. */
export async function downloadLines(manifest: { output: { url: string }[] }, token: string): Promise<string[]> {
  const lines: string[] = [];
  for (const o of manifest.output) {
    const res = await fetch(o.url, { headers: { Authorization: `Bearer ${token}` } });
    if (!res.ok) throw new Error(`download ${res.status}`);
    lines.push(...(await res.text()).split('\n').filter(Boolean));
  }
  return lines;
}
