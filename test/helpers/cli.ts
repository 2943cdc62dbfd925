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
 * Runs `cinder` commands in-process against a fresh data directory (SQLite), with captured output.
 * `store()` opens the same database for assertions.
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
      return { code, stdout, stderr };
    },
    store: () => createSqliteStore(join(env.CINDER_DATA_DIR, 'cinder.db')),
    close: () => rmSync(dir, { recursive: true, force: true }),
  };
}
