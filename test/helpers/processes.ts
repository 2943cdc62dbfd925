import { afterAll } from 'bun:test';
import type { Subprocess } from 'bun';
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dir, '../..');
const BIN = join(ROOT, 'dist/cinder');

/** How `cinder` is run in the e2e tests: from source, and as the built executable when it exists. */
export function cinderCommands(): [string, string[]][] {
  const commands: [string, string[]][] = [['from source', [process.execPath, join(ROOT, 'src/main.ts')]]];
  if (existsSync(BIN)) commands.push(['dist/cinder', [BIN]]);
  return commands;
}

/**
 * What an e2e test file leaves behind, cleaned up after it (call at the top of the file): the processes
 * given to `killAfter` are killed, `targets`' databases dropped, the directories of `tempDir` removed.
 */
export function cleanupAfterFile(targets: { cleanup(): Promise<unknown> }[] = []) {
  const procs: Subprocess[] = [];
  const dirs: string[] = [];
  afterAll(async () => {
    for (const p of procs) p.kill('SIGKILL');
    await Promise.all(targets.map((t) => t.cleanup()));
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }, 60_000);
  return {
    /** A new directory under the system's temporary one, its name starting with `prefix`. */
    tempDir(prefix: string): string {
      const dir = mkdtempSync(join(tmpdir(), prefix));
      dirs.push(dir);
      return dir;
    },
    /** Kills `proc` with SIGKILL after the file, should a test leave it running. */
    killAfter(...more: Subprocess[]): void {
      procs.push(...more);
    },
  };
}

/**
 * The environment of a `cinder serve` at http://127.0.0.1:`port` working in `dir` (HOME, and the data
 * directory `dir`/data), logging errors only; `extra` adds or overrides variables.
 */
export function serveEnv(dir: string, port: number, extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '', HOME: dir, CINDER_PORT: String(port), CINDER_HOST: '127.0.0.1', CINDER_BASE_URL: `http://127.0.0.1:${port}`,
    CINDER_DATA_DIR: join(dir, 'data'), CINDER_LOG_LEVEL: 'error', ...extra,
  };
}

/** Starts `command serve` in `dir` with `env`; its stdout is piped (the banner: readBanner). */
export function spawnServe(command: string[], dir: string, env: Record<string, string>, stderr: 'inherit' | 'pipe' = 'inherit') {
  return Bun.spawn([...command, 'serve'], { env, cwd: dir, stdin: 'ignore', stdout: 'pipe', stderr });
}

/**
 * What `cinder serve` prints on its first start, read from its stdout through the `token URL:` line (the
 * rest of the stream is left unread), and the bootstrap client it names (undefined when it names none).
 */
export async function readBanner(stdout: ReadableStream<Uint8Array>): Promise<{ text: string; clientId?: string; secret?: string }> {
  const reader = stdout.getReader();
  let text = '';
  while (!text.includes('token URL:')) {
    const chunk = await reader.read();
    if (chunk.done) break;
    text += new TextDecoder().decode(chunk.value);
  }
  reader.releaseLock();
  return { text, clientId: /client_id:\s+(\S+)/.exec(text)?.[1], secret: /client_secret:\s+(\S+)/.exec(text)?.[1] };
}

/** Inodes of the TCP sockets listening on `port` (IPv4 and IPv6), from /proc/net. */
function listeningInodes(port: number): Set<string> {
  const inodes = new Set<string>();
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // local_address is ADDR:PORT; st 0A is LISTEN; the inode is the tenth field.
      if (f.length > 9 && f[1]!.endsWith(`:${hex}`) && f[3] === '0A') inodes.add(f[9]!);
    }
  }
  return inodes;
}

/** The parent process id of `pid` (/proc/<pid>/stat), or undefined when it is gone. */
function parentOf(pid: number): number | undefined {
  try {
    // The fields after the command name (in parentheses, which may hold spaces): state, then ppid.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

/**
 * Process ids of the servers listening on `port`, one per listening socket (Linux /proc; the processes
 * must be this user's). A socket held by several processes is counted once, for the one that is not the
 * child of another holder: a process starting a child (a server spawning its sibling) has a moment
 * between fork and exec when the child holds a copy of every descriptor of its parent, the listening
 * socket included, without listening itself. Counted as a server, it made the processes test see two
 * servers, then one (the child had exec'd, closing the copy, and not bound its own socket yet).
 */
export function listeningPids(port: number): number[] {
  const holders = new Map<string, Set<number>>();
  for (const [inode, pid] of socketHolders(listeningInodes(port))) holders.set(inode, (holders.get(inode) ?? new Set()).add(pid));
  const pids = new Set<number>();
  for (const set of holders.values()) {
    for (const pid of set) if (!set.has(parentOf(pid) ?? -1)) pids.add(pid);
  }
  return [...pids].sort((a, b) => a - b);
}

/** Each (socket inode, process id) where the process holds one of `inodes`. */
function socketHolders(inodes: Set<string>): [string, number][] {
  const found: [string, number][] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${entry}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      let target = '';
      try {
        target = readlinkSync(`/proc/${entry}/fd/${fd}`);
      } catch {
        continue;
      }
      const m = /^socket:\[(\d+)\]$/.exec(target);
      if (m && inodes.has(m[1]!)) found.push([m[1]!, Number(entry)]);
    }
  }
  return found;
}

/** True while a process with this id exists (and is not a zombie). */
export function alive(pid: number): boolean {
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}

/** Polls `check` every 100 ms until it returns true or `ms` pass. */
export async function eventually(check: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (check()) return true;
    if (Date.now() > deadline) return false;
    await Bun.sleep(100);
  }
}
