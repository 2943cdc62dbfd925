/**
 * Drops test databases. Each DROP DATABASE waits for a checkpoint that starts after it asks
 * (pg_stat_bgwriter.checkpoints_req counts one per drop), which on a busy server took seconds apiece: drops
 * issued together are served by the same checkpoint (six took 4.8 s together against 12.2 s one after
 * another, beside a test run). A test file hands its databases to this module run as a process of its own
 * (dropInBackground), so that its worker goes on to the next file instead of waiting for the checkpoint.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import postgres from 'postgres';

export const PG_ADMIN_URL = process.env.CINDER_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** Drops the databases, several at once. */
export async function dropDatabases(names: string[]): Promise<void> {
  if (names.length === 0) return;
  const sql = postgres(PG_ADMIN_URL, { max: Math.min(names.length, 4), connect_timeout: 5, onnotice: () => undefined });
  try {
    await Promise.all(names.map((name) => sql`DROP DATABASE IF EXISTS ${sql(name)} WITH (FORCE)`));
  } finally {
    await sql.end();
  }
}

/** util-linux's setsid, which runs a program in a session of its own, forked (-f) from the one that started it. */
const SETSID = '/usr/bin/setsid';

/**
 * Drops the databases in a process of its own, not waited for (the test process may end first): its failure
 * is written to stderr and leaves the databases, as an interrupted run leaves them. Bun ends the processes
 * a test worker spawned when the worker goes on (a child of a worker of `bun test --parallel`, even one in a
 * session of its own, did not live past the file), so the dropper is started by setsid -f: a grandchild.
 * Without setsid the drops are waited for here.
 */
export async function dropInBackground(names: string[]): Promise<void> {
  if (names.length === 0) return;
  if (!existsSync(SETSID)) return dropDatabases(names);
  // Without the runner's worker id: a bun process given one takes itself for a test worker of --parallel.
  const { BUN_TEST_WORKER_ID: _, ...env } = process.env;
  const child = spawn(SETSID, ['-f', process.execPath, import.meta.path, ...names], { env, stdio: ['ignore', 'ignore', 'inherit'] });
  await new Promise<void>((resolve, reject) => child.once('exit', () => resolve()).once('error', reject));
}

if (import.meta.main) {
  await dropDatabases(process.argv.slice(2)).catch((err: unknown) => {
    console.error(`test databases not dropped (${process.argv.slice(2).join(', ')}): ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  });
}
