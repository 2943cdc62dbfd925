/**
 * The import spool: where `$import` inputs are downloaded while they are imported (fetch-input.ts), up to
 * CINDER_IMPORT_MAX_INPUT_BYTES per running job. It is `<CINDER_DATA_DIR>/import-spool`, not the system's
 * temporary directory, which in a container is often memory (tmpfs) or small. Each import runner (one per
 * process) has a directory of its own in it, `<host>-<pid>-<token>`, readable by the server's user only, so that
 * the processes of a host sharing the data directory (CINDER_PROCESSES, several containers on one volume) each
 * know which leftovers are theirs to remove: as a runner prepares its directory it removes those of the
 * runners on its host whose process has ended (a crash, a kill), whatever jobs they held.
 */
import { hostname } from 'node:os';
import { chmod, mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';

export const SPOOL_DIR = 'import-spool';

/**
 * The runners' directories made by this process that are still in use (a leftover of this pid is from an earlier
 * process). Process-wide on purpose, unlike the app's state: the directories are named by the pid, which every app
 * of one process (tests run several) shares, so no app may take another's live directory for a dead run's.
 */
const ours = new Set<string>();

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

/** Whether `name`, a directory in the spool, belongs to a runner of this host that has ended. */
function ended(name: string): boolean {
  const m = /^(.+)-(\d+)-([A-Za-z0-9]+)$/.exec(name);
  if (!m || m[1] !== host()) return false;
  const pid = Number(m[2]);
  return pid === process.pid ? !ours.has(name) : !alive(pid);
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
 * removing the directories of this host's ended runners.
 */
export async function openSpool(dataDir: string): Promise<Spool> {
  const root = join(dataDir, SPOOL_DIR);
  await mkdir(root, { recursive: true, mode: 0o700 });
  // A spool made by hand, or by an older release, may be open to others: the inputs it holds are PHI.
  await chmod(root, 0o700);
  let removed = 0;
  for (const entry of await readdir(root, { withFileTypes: true })) {
    if (!entry.isDirectory() || !ended(entry.name)) continue;
    await rm(join(root, entry.name), { recursive: true, force: true });
    removed++;
  }
  const name = `${host()}-${process.pid}-${crypto.randomUUID().slice(0, 8)}`;
  const dir = join(root, name);
  await mkdir(dir, { mode: 0o700 });
  ours.add(name);
  // Kept for the process's life (empty between inputs: each download is removed once imported); the next
  // process on this host removes it.
  return { root, dir, removed };
}
