import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dir, '../..');
const BIN = join(ROOT, 'dist/cinder');

/** How `cinder` is run in the e2e tests: from source, and as the built executable when it exists. */
export function cinderCommands(): [string, string[]][] {
  const commands: [string, string[]][] = [['from source', [process.execPath, join(ROOT, 'src/main.ts')]]];
  if (existsSync(BIN)) commands.push(['dist/cinder', [BIN]]);
  return commands;
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

/** Process ids with a socket listening on `port` (Linux /proc; the processes must be this user's). */
export function listeningPids(port: number): number[] {
  const inodes = listeningInodes(port);
  const pids: number[] = [];
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
      if (m && inodes.has(m[1]!)) {
        pids.push(Number(entry));
        break;
      }
    }
  }
  return pids.sort((a, b) => a - b);
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
