/**
 * The public base URL's default, `http://localhost:<port>`, is rarely what clients use: `cinder serve`
 * warns at start when CINDER_BASE_URL is not set, saying what to set, and `cinder tenant create`, which
 * cannot know a server's address or port, says its `fhir_base` comes from CINDER_BASE_URL.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../helpers/export-e2e.ts';
import { createCliEnv } from '../helpers/cli.ts';

const ROOT = new URL('../..', import.meta.url).pathname;
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** Starts `bun src/main.ts serve` on a free port, returns its log lines up to `listening`, and stops it. */
async function startupLog(env: Record<string, string>): Promise<Record<string, unknown>[]> {
  const dir = mkdtempSync(join(tmpdir(), 'cinder-base-url-'));
  dirs.push(dir);
  const port = freePort();
  const proc = Bun.spawn([process.execPath, 'src/main.ts', 'serve'], {
    cwd: ROOT, stdin: 'ignore', stdout: 'ignore', stderr: 'pipe',
    env: { PATH: process.env.PATH ?? '', HOME: dir, CINDER_DATA_DIR: join(dir, 'data'), CINDER_PORT: String(port), CINDER_HOST: '127.0.0.1', CINDER_EXPORT_WORKERS: '0', ...env },
  });
  const lines: Record<string, unknown>[] = [];
  let text = '';
  try {
    for await (const chunk of proc.stderr) {
      text += new TextDecoder().decode(chunk);
      const done = text.slice(0, text.lastIndexOf('\n') + 1).split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
      if (done.some((l) => l.msg === 'listening')) {
        lines.push(...done);
        break;
      }
    }
  } finally {
    proc.kill('SIGTERM');
    await proc.exited;
  }
  return lines;
}

describe('cinder serve', () => {
  test('without CINDER_BASE_URL: a warning naming the default and what to set', async () => {
    const lines = await startupLog({});
    const port = new URL(lines.find((l) => l.msg === 'listening')!.url as string).port;
    const warning = lines.find((l) => l.level === 'warn' && String(l.msg).startsWith('CINDER_BASE_URL is not set'));
    expect(warning).toBeDefined();
    expect(warning!.baseUrl).toBe(`http://localhost:${port}`);
    expect(warning!.msg).toContain(`the default http://localhost:${port}`);
    expect(warning!.msg).toContain('set CINDER_BASE_URL (or --base-url) to the URL clients use');
    expect(warning!.msg).toContain("aud is not this client's FHIR base URL");
  }, 30_000);

  test('with CINDER_BASE_URL (even a localhost one): no warning', async () => {
    const lines = await startupLog({ CINDER_BASE_URL: 'http://localhost:8080' });
    expect(lines.find((l) => l.msg === 'listening')).toMatchObject({ baseUrl: 'http://localhost:8080' });
    expect(lines.filter((l) => l.level === 'warn')).toEqual([]);
  }, 30_000);
});

describe('cinder serve on a port it cannot bind', () => {
  test('exits 1 with one line naming the host, the port and their settings', async () => {
    const taken = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response('taken') });
    const dir = mkdtempSync(join(tmpdir(), 'cinder-listen-'));
    dirs.push(dir);
    try {
      const proc = Bun.spawn([process.execPath, 'src/main.ts', 'serve'], {
        cwd: ROOT, stdin: 'ignore', stdout: 'ignore', stderr: 'pipe',
        env: { PATH: process.env.PATH ?? '', HOME: dir, CINDER_DATA_DIR: join(dir, 'data'), CINDER_PORT: String(taken.port), CINDER_HOST: '127.0.0.1', CINDER_BASE_URL: 'http://localhost:1', CINDER_EXPORT_WORKERS: '0', CINDER_LOG_LEVEL: 'error' },
      });
      const [code, stderr] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
      expect(code).toBe(1);
      expect(stderr).toContain(`cinder: cannot listen on 127.0.0.1:${taken.port} (CINDER_HOST, CINDER_PORT): the port is taken, or the host is not an address of this machine`);
      expect(stderr).not.toContain('    at ');
    } finally {
      taken.stop(true);
    }
  }, 30_000);
});

describe('cinder tenant create', () => {
  test('fhir_base is CINDER_BASE_URL\'s; without it, a note on stderr says it is the default, not the server\'s', async () => {
    const cli = createCliEnv({ CINDER_PORT: '9090' });
    try {
      const r = await cli.run(['tenant', 'create', 'acme']);
      expect(r.code).toBe(0);
      expect(r.stdout).toBe('tenant: acme\nfhir_base: http://localhost:9090/tenants/acme/fhir/R4\n');
      expect(r.stderr).toContain('fhir_base is built from CINDER_BASE_URL, which is not set here');
      expect(r.stderr).toContain('set CINDER_BASE_URL as the server has it');
      const json = await cli.run(['tenant', 'create', 'beta', '--json']);
      expect(JSON.parse(json.stdout)).toEqual({ tenant: 'beta', fhir_base: 'http://localhost:9090/tenants/beta/fhir/R4' });
      expect(json.stderr).toContain('CINDER_BASE_URL');
    } finally {
      cli.close();
    }
    const set = createCliEnv({ CINDER_BASE_URL: 'https://fhir.example.org/cinder' });
    try {
      const r = await set.run(['tenant', 'create', 'acme']);
      expect(r.stdout).toContain('fhir_base: https://fhir.example.org/cinder/tenants/acme/fhir/R4');
      expect(r.stderr).toBe('');
    } finally {
      set.close();
    }
  });

  test('without CINDER_PORT the default\'s port is PORT\'s, as serve\'s is, and the note says so', async () => {
    const cli = createCliEnv({ PORT: '9091' });
    try {
      const r = await cli.run(['tenant', 'create', 'acme']);
      expect(r.stdout).toBe('tenant: acme\nfhir_base: http://localhost:9091/tenants/acme/fhir/R4\n');
      expect(r.stderr).toContain("so it is the default http://localhost:9091 (its port is CINDER_PORT's, else PORT's, else 8080, not a running server's)");
    } finally {
      cli.close();
    }
  });

  test('--help says where fhir_base comes from', async () => {
    const cli = createCliEnv();
    try {
      const r = await cli.run(['tenant', 'create', '--help']);
      expect(r.stdout + r.stderr).toContain('built from CINDER_BASE_URL');
    } finally {
      cli.close();
    }
  });
});
