/**
 * A throwaway PostgreSQL cluster from the installed binaries (`/usr/lib/postgresql/<v>/bin`), for
 * tests that must stop and start the database. It lives in a temporary directory on a free port; run
 * as root, initdb and pg_ctl run as the `postgres` user (PostgreSQL refuses to run as root).
 * `remove()` kills the postmaster by its PID file, whatever state the test left it in.
 */
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ROOT = '/usr/lib/postgresql';

/** The bin directory of the newest installed PostgreSQL, or null. */
export function postgresBinDir(): string | null {
  if (!existsSync(ROOT)) return null;
  const versions = readdirSync(ROOT).filter((v) => existsSync(join(ROOT, v, 'bin', 'initdb'))).sort((a, b) => Number(b) - Number(a));
  return versions.length ? join(ROOT, versions[0]!, 'bin') : null;
}

function freePort(): number {
  const server = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
  const port = server.port;
  server.stop(true);
  return port;
}

function postgresUser(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const line = readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith('postgres:'));
  if (!line) throw new Error('running as root but there is no postgres user to run the cluster as');
  const f = line.split(':');
  return { uid: Number(f[2]), gid: Number(f[3]) };
}

export interface PgCluster {
  port: number;
  /** postgres://postgres@127.0.0.1:<port>/postgres */
  url: string;
  start(): Promise<void>;
  /** `pg_ctl -m immediate stop`: the server dies as in a crash; clients see their connections reset. */
  stopImmediate(): Promise<void>;
  /** SIGSTOP to the server and its backends: connections stay open and nothing answers (a frozen host). */
  freeze(): void;
  /** SIGCONT to the server and its backends. */
  thaw(): void;
  remove(): Promise<void>;
  /** Writes `name` in the data directory (owned by the server's user, readable by it alone): a key, certificate, pg_hba.conf. */
  writeDataFile(name: string, text: string): void;
  /** Appends settings to postgresql.conf, read at the next start or reload. */
  configure(lines: string[]): void;
  /** `pg_ctl reload`: pg_hba.conf and the reloadable settings read again. */
  reload(): Promise<void>;
}

/** The postmaster's PID (from its PID file) and its children's (from /proc), or [] when it is not running. */
function serverPids(data: string): number[] {
  const pidFile = join(data, 'postmaster.pid');
  if (!existsSync(pidFile)) return [];
  const postmaster = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  const children = readdirSync('/proc').filter((d) => /^\d+$/.test(d)).filter((d) => {
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster;
    } catch {
      return false;
    }
  });
  return [postmaster, ...children.map(Number)];
}

function signal(pids: number[], sig: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, sig);
    } catch {
      // gone meanwhile
    }
  }
}

/** initdb's a new cluster (not started). */
export async function createPgCluster(bin: string): Promise<PgCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'cinder-pg-'));
  const data = join(dir, 'data');
  const port = freePort();
  const owner = postgresUser();
  if (owner) chownSync(dir, owner.uid, owner.gid);
  const run = async (args: string[]) => {
    const cmd = owner ? ['runuser', '-u', 'postgres', '--', ...args] : args;
    const proc = Bun.spawn(cmd, { stdout: 'pipe', stderr: 'pipe', cwd: dir });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    if (code !== 0) throw new Error(`${args.join(' ')} exited with ${code}: ${out}${err}`);
  };
  await run([join(bin, 'initdb'), '-D', data, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8']);
  const pgCtl = join(bin, 'pg_ctl');
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50`;
  return {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    start: () => run([pgCtl, '-D', data, '-o', options, '-l', join(dir, 'server.log'), '-w', '-t', '30', 'start']),
    stopImmediate: () => run([pgCtl, '-D', data, '-m', 'immediate', '-w', 'stop']),
    writeDataFile(name, text) {
      const path = join(data, name);
      writeFileSync(path, text, { mode: 0o600 });
      if (owner) chownSync(path, owner.uid, owner.gid);
    },
    configure(lines) {
      const path = join(data, 'postgresql.conf');
      writeFileSync(path, `${readFileSync(path, 'utf8')}\n${lines.join('\n')}\n`);
    },
    reload: () => run([pgCtl, '-D', data, 'reload']),
    freeze: () => signal(serverPids(data), 'SIGSTOP'),
    thaw: () => signal(serverPids(data), 'SIGCONT'),
    async remove() {
      // Stopped backends would not notice their postmaster's death.
      signal(serverPids(data), 'SIGCONT');
      const pidFile = join(data, 'postmaster.pid');
      if (existsSync(pidFile)) {
        const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
        try {
          if (pid > 0) process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
