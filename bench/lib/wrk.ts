/**
 * HTTP load with wrk (Debian package `wrk`): a native load generator takes far less of a 2-core
 * machine's CPU than a JavaScript one, so the server's figure is closer to what it can do.
 * Requests come from a list of bodies/paths cycled by a Lua script.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface WrkScenario {
  url: string;
  method?: 'GET' | 'POST' | 'PUT';
  headers?: Record<string, string>;
  /** Request bodies (or, for GET, paths relative to `url`'s origin) cycled in order; one fixed request when absent. */
  bodies?: string[];
  paths?: string[];
  connections: number;
  seconds: number;
  threads?: number;
}

export interface WrkResult {
  perSecond: number;
  p50ms: number;
  p99ms: number;
  requests: number;
  non2xx: number;
  errors: number;
}

export function hasWrk(): boolean {
  return Bun.which('wrk') !== null;
}

function luaString(s: string): string {
  return '"' + s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n') + '"';
}

function script(s: WrkScenario, dir: string): string {
  const lines = [`wrk.method = "${s.method ?? 'GET'}"`];
  for (const [k, v] of Object.entries(s.headers ?? {})) lines.push(`wrk.headers[${luaString(k)}] = ${luaString(v)}`);
  const list = s.bodies ?? s.paths;
  if (list) {
    const file = join(dir, 'items.txt');
    writeFileSync(file, list.join('\n') + '\n');
    lines.push(
      `local items = {}`,
      `for line in io.lines(${luaString(file)}) do items[#items + 1] = line end`,
      `local i = 0`,
      `request = function()`,
      `  i = i % #items + 1`,
      s.bodies ? `  return wrk.format(nil, nil, nil, items[i])` : `  return wrk.format(nil, items[i])`,
      `end`,
    );
  }
  lines.push(
    `done = function(summary, latency, requests)`,
    `  io.write(string.format("RESULT %d %d %d %f %f\\n", summary.requests,`,
    `    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,`,
    `    summary.duration, latency:percentile(50), latency:percentile(99)))`,
    `end`,
  );
  const path = join(dir, 'script.lua');
  writeFileSync(path, lines.join('\n'));
  return path;
}

/** Runs wrk against one scenario and parses its result line. */
export async function runWrk(s: WrkScenario): Promise<WrkResult> {
  const dir = mkdtempSync(join(tmpdir(), 'cinder-wrk-'));
  try {
    const args = ['wrk', `-t${s.threads ?? 1}`, `-c${s.connections}`, `-d${s.seconds}s`, '--timeout', '10s', '-s', script(s, dir), s.url];
    const p = Bun.spawn(args, { stdout: 'pipe', stderr: 'pipe' });
    const out = await new Response(p.stdout).text();
    await p.exited;
    const m = /RESULT (\d+) (\d+) (\d+) ([\d.]+) ([\d.]+)/.exec(out);
    if (!m) throw new Error(`wrk gave no result:\n${out}\n${await new Response(p.stderr).text()}`);
    const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0);
    const requests = Number(m[1]);
    const seconds = Number(m[3]) / 1e6;
    return { requests, perSecond: requests / seconds, errors: Number(m[2]), non2xx, p50ms: Number(m[4]) / 1000, p99ms: Number(m[5]) / 1000 };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
