import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CliIO } from '../../src/cli/command.ts';
import { runCli } from '../../src/cli/index.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';

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
 */
export function createCliEnv(extraEnv: Record<string, string> = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'cinder-cli-'));
  const env = { CINDER_DATA_DIR: join(dir, 'data'), CINDER_LOG_LEVEL: 'silent', ...extraEnv };
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
