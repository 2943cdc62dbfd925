/**
 * The batch commands run with mimalloc's purging of freed memory off. Bun allocates through mimalloc,
 * which by default gives freed pages back to the system 10 ms after they are freed (MIMALLOC_PURGE_DELAY);
 * a batch command frees and allocates again at such a rate that the page faults and `madvise` calls took
 * about half of its system time: `cinder import` of 100,000 resources 0.77 × the time on SQLite and
 * 0.84 × on PostgreSQL with purging off, `reindex` about 0.85 × (docs/PERFORMANCE.md). The option is
 * read when the process starts, so such a command executes itself again with it set, once (the
 * variable set is what stops a second time). `serve` keeps the default: a server gives memory back.
 * A MIMALLOC_PURGE_DELAY the user sets is kept.
 */
const BATCH_COMMANDS = new Set(['import', 'reindex', 'export', 'validate']);
export const PURGE_DELAY = 'MIMALLOC_PURGE_DELAY';

export interface Reexec {
  path: string;
  args: string[];
  env: Record<string, string | undefined>;
}

/**
 * The execve that gives this process the batch allocator setting, or undefined when it has it or needs
 * none. `argv` is process.argv: the runtime and the script, then the command's words; a compiled binary
 * (whose script is inside it, `/$bunfs/...`) is executed with the command's words alone.
 */
export function allocatorReexec(argv: readonly string[], execArgv: readonly string[], env: Record<string, string | undefined>, execPath: string): Reexec | undefined {
  const [, script, command] = argv;
  if (script === undefined || command === undefined || !BATCH_COMMANDS.has(command)) return undefined;
  if (env[PURGE_DELAY] !== undefined) return undefined;
  const words = argv.slice(2);
  const args = script.startsWith('/$bunfs/') ? [execPath, ...words] : [execPath, ...execArgv, script, ...words];
  return { path: execPath, args, env: { ...env, [PURGE_DELAY]: '-1' } };
}
