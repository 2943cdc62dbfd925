/** Structured JSON logger: one line per event on stderr (stdout stays for command output). */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';
export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
  /** Whether `level` is logged, so hot paths can skip building fields nobody reads. */
  enabled(level: Exclude<LogLevel, 'silent'>): boolean;
}

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 99 };

export function createLogger(
  level: LogLevel = 'info',
  base: LogFields = {},
  write: (line: string) => void = (line) => process.stderr.write(line + '\n'),
): Logger {
  const min = RANK[level];
  const emit = (lvl: Exclude<LogLevel, 'silent'>, msg: string, fields?: LogFields) => {
    if (RANK[lvl] < min) return;
    const entry: LogFields = { time: new Date().toISOString(), level: lvl, msg, ...base, ...fields };
    const err = entry.err;
    if (err instanceof Error) entry.err = { name: err.name, message: err.message, stack: err.stack };
    write(JSON.stringify(entry));
  };
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    child: (fields) => createLogger(level, { ...base, ...fields }, write),
    enabled: (lvl) => RANK[lvl] >= min,
  };
}

export const silentLogger: Logger = createLogger('silent');

/**
 * Lets `task` (a promise nobody awaits: a timer's tick, a loop's round, a fire-and-forget write) run with
 * its failure logged as `what` instead of becoming an unhandled rejection (src/cli/crash-policy.ts).
 */
export function background(log: Logger, what: string, task: Promise<unknown>, fields?: LogFields): void {
  task.catch((err: unknown) => log.error(what, { ...fields, err }));
}
