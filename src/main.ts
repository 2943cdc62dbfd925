#!/usr/bin/env bun
/** Entry point: parses argv and dispatches to src/cli/*. The only place that starts Bun.serve (via `serve`). */
import { allocatorReexec } from './cli/allocator.ts';

// A batch command runs again at once with its allocator setting (src/cli/allocator.ts), before the
// commands' modules are loaded; Linux only.
const again = process.platform === 'linux' ? allocatorReexec(process.argv, process.execArgv, process.env, process.execPath) : undefined;
if (again) process.execve?.(again.path, again.args, again.env);
const { runCli } = await import('./cli/index.ts');
const { stdinText } = await import('./cli/command.ts');

const code = await runCli(process.argv.slice(2), {
  env: process.env,
  stdout: (t) => process.stdout.write(t),
  stderr: (t) => process.stderr.write(t),
  stdin: async () => stdinText(await Bun.stdin.bytes()),
  isTTY: !!process.stderr.isTTY,
}).catch((err: unknown) => {
  process.stderr.write(`cinder: ${err instanceof Error ? err.message : String(err)}\n`);
  return 1;
});
process.exit(code);
