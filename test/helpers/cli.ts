import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CliIO } from '../../src/cli/command.ts';
import { runCli } from '../../src/cli/index.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { migratedSqliteFile } from './stores.ts';

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * stderr without the plain progress lines a long import or validation writes every five seconds off a
 * terminal (`import: 42%  500 imported, 0 failed, 99/s`: src/cli/progress.ts, tested in
 * cli-progress.test.ts): whether one is written depends on how fast the machine runs the command.
 */
export function withoutProgress(stderr: string): string {
  return stderr.replace(/^[a-z-]+: \d{1,3}% {2}[\d,]+ [a-z]+, [\d,]+ [a-z]+, [\d,]+\/s\n/gm, '');
}

/**
 * Runs `cinder` commands in-process against a fresh data directory (SQLite), with captured output.
 * `store()` opens the same database for assertions. Off a terminal, stderr is given withoutProgress.
 * The data directory holds a migrated database, as `cinder migrate` (or a server's first start) leaves it:
 * the other commands make none (src/cli/context.ts). `{ database: false }` leaves the directory empty; with
 * a CINDER_DATABASE_URL in `extraEnv` that database is the caller's to make (storeTargets' migrated()).
 */
export function createCliEnv(extraEnv: Record<string, string> = {}, opts: { database?: boolean } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'cinder-cli-'));
  const env = { CINDER_DATA_DIR: join(dir, 'data'), CINDER_LOG_LEVEL: 'silent', ...extraEnv };
  if (opts.database !== false && extraEnv.CINDER_DATABASE_URL === undefined) migratedSqliteFile(join(env.CINDER_DATA_DIR, 'cinder.db'));
  return {
    dir,
    env,
    async run(argv: string[], opts: { isTTY?: boolean; stdin?: string } = {}): Promise<CliRun> {
      let stdout = '';
      let stderr = '';
      const io: CliIO = {
        env,
        stdout: (t) => void (stdout += t),
        stderr: (t) => void (stderr += t),
        stdin: async () => opts.stdin ?? '',
        isTTY: opts.isTTY ?? false,
      };
      const code = await runCli(argv, io);
      return { code, stdout, stderr: opts.isTTY ? stderr : withoutProgress(stderr) };
    },
    store: () => createSqliteStore(join(env.CINDER_DATA_DIR, 'cinder.db')),
    close: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** Makes tenant t1 in the database at `url` (a migrated one) and imports one Patient, p1, through the CLI. */
export async function tenantWithOnePatient(url: string): Promise<void> {
  const cli = createCliEnv({ CINDER_DATABASE_URL: url, CINDER_BASE_URL: 'http://cinder.test' });
  try {
    if ((await cli.run(['tenant', 'create', 't1'])).code !== 0) throw new Error('tenant create t1 failed');
    const file = join(cli.dir, 'p.ndjson');
    await Bun.write(file, JSON.stringify({ resourceType: 'Patient', id: 'p1' }) + '\n');
    const imported = await cli.run(['import', '--tenant', 't1', file]);
    if (imported.code !== 0) throw new Error(`import of p1 failed: ${imported.stderr}`);
  } finally {
    cli.close();
  }
}
