/**
 * The import spool: where `$import` inputs are downloaded while they are imported (fetch-input.ts), up to
 * CINDER_IMPORT_MAX_INPUT_BYTES per running job. It is `<CINDER_DATA_DIR>/import-spool`, not the system's
 * temporary directory, which in a container is often memory (tmpfs) or small. Each import runner (one per
 * process) has a directory of its own in it, `<host>-<pid>-<token>`, readable by the server's user only, so that
 * the processes of a host sharing the data directory (CINDER_PROCESSES, several containers on one volume) each
 * know which leftovers are theirs to remove: as a runner prepares its directory, and every SWEEP_MS after, it
 * removes those of the runners on its host whose process has ended (a crash, a kill), whatever jobs they held.
 *
 * A pid alone cannot tell that: containers with pid namespaces of their own that share a volume and a host name
 * (host networking, a `hostname:` set in a compose file) each see none of the others' pids, and each server is often
 * pid 1 in its container. So a live runner touches its directory every HEARTBEAT_MS, and a directory is an ended
 * runner's only when its pid says so and it has not been touched for STALE_MS: a neighbour's live directory, with
 * the download it is importing, is never taken for a leftover.
 */
import { hostname } from 'node:os';
import { chmod, mkdir, readdir, rm, stat, utimes } from 'node:fs/promises';
import { basename, join } from 'node:path';

export const SPOOL_DIR = 'import-spool';
/** How often a live runner touches its directory (its modification time). */
export const HEARTBEAT_MS = 60_000;
/** How long a runner's directory must be untouched before it may be taken for an ended runner's. */
export const STALE_MS = 5 * HEARTBEAT_MS;
/** How often a runner looks again for ended runners' directories (one that ended just before it started is kept till then). */
export const SWEEP_MS = 10 * 60_000;

/**
 * The runners' directories made by this process that are still in use (a leftover of this pid is from an earlier
 * process). Process-wide on purpose, unlike the app's state: the directories are named by the pid, which every app
 * of one process (tests run several) shares, so no app may take another's live directory for a dead run's.
 */
const ours = new Set<string>();

/** The directories of `ours` with their paths, touched every HEARTBEAT_MS while the process lives. */
const live = new Map<string, string>();
let heartbeat: ReturnType<typeof setInterval> | undefined;

function beat(): void {
  const now = new Date();
  for (const [name, path] of live) {
    // A directory gone (its data directory removed, as tests do) is no longer kept alive.
    utimes(path, now, now).catch(() => live.delete(name));
  }
  if (live.size === 0) {
    clearInterval(heartbeat);
    heartbeat = undefined;
  }
}

function keepAlive(name: string, path: string): void {
  live.set(name, path);
  heartbeat ??= setInterval(beat, HEARTBEAT_MS);
  heartbeat.unref?.();
}

/** This host's name as a directory name's first part (no `-`, which separates the parts). */
const host = () => hostname().replace(/[^A-Za-z0-9.]/g, '_') || 'host';

function alive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: a process of another user holds the pid: not known to be ended, kept.
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/**
 * Whether `name`, a directory in the spool, may be a runner of this host that has ended (its pid no longer runs, or is
 * this process's and the directory not one it made); its heartbeat decides (stale).
 */
function endedPid(name: string): boolean {
  const m = /^(.+)-(\d+)-([A-Za-z0-9]+)$/.exec(name);
  if (!m || m[1] !== host()) return false;
  const pid = Number(m[2]);
  return pid === process.pid ? !ours.has(name) : !alive(pid);
}

/** Whether the directory at `path` has not been touched for STALE_MS (one removed meanwhile: not to be removed again). */
async function stale(path: string): Promise<boolean> {
  const s = await stat(path).catch(() => null);
  return s !== null && Date.now() - s.mtimeMs >= STALE_MS;
}

/** Removes the directories in the spool `root` of this host's ended runners (endedPid, and stale); returns how many. */
export async function sweepSpool(root: string): Promise<number> {
  let removed = 0;
  for (const entry of await readdir(root, { withFileTypes: true })) {
    if (!entry.isDirectory() || !endedPid(entry.name)) continue;
    const path = join(root, entry.name);
    if (!(await stale(path))) continue;
    await rm(path, { recursive: true, force: true });
    removed++;
  }
  return removed;
}

export interface Spool {
  /** The spool itself (`<dataDir>/import-spool`): every runner's directory is in it. */
  root: string;
  /** This runner's own directory, where its downloads go. */
  dir: string;
  /** How many directories of ended runners were removed as it was prepared. */
  removed: number;
}

/**
 * Prepares a runner's spool directory under `dataDir` (created if need be, mode 0700 as the spool itself) after
 * removing the directories of this host's ended runners (sweepSpool), and keeps it touched (HEARTBEAT_MS).
 */
export async function openSpool(dataDir: string): Promise<Spool> {
  const root = join(dataDir, SPOOL_DIR);
  await mkdir(root, { recursive: true, mode: 0o700 });
  // A spool made by hand, or by an older release, may be open to others: the inputs it holds are PHI.
  await chmod(root, 0o700);
  const removed = await sweepSpool(root);
  const name = `${host()}-${process.pid}-${crypto.randomUUID().slice(0, 8)}`;
  const dir = join(root, name);
  await mkdir(dir, { mode: 0o700 });
  ours.add(name);
  keepAlive(name, dir);
  // Kept for the process's life (empty between inputs: each download is removed once imported); a runner of this
  // host removes it once this process has ended and its heartbeat is STALE_MS old.
  return { root, dir, removed };
}

/**
 * Makes a runner's directory `dir` (Spool.dir) again after it was removed while its runner lives (an operator freeing
 * disk, a neighbour of an older release taking it for an ended runner's), mode 0700 as openSpool made it, and keeps it
 * touched again (its heartbeat stopped when it went).
 */
export async function remakeSpoolDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  keepAlive(basename(dir), dir);
}

/**
 * Whether the spool `root` (Spool.root) answers: a directory that can be looked at. One that cannot (a failing or
 * unmounted disk, a network file system away) is an outage a job waits for; a full or read-only one answers, and a
 * download it failed is the attempt's.
 */
export async function spoolReachable(root: string): Promise<boolean> {
  try {
    return (await stat(root)).isDirectory();
  } catch {
    return false;
  }
}
