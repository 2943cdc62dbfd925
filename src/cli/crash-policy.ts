/**
 * What a `serve` process does with an error no caller received (Bun, as Node since 15, ends the process on
 * an unhandled rejection by default). Every background task handles its own errors (ARCHITECTURE.md,
 * "Background work and process-level errors"), so one reaching here is a defect, logged loudly and counted:
 * - an unhandled rejection is logged with its error and the process goes on: the rejection ended only the
 *   chain that dropped it, and its cause is most often an outage the store reports anyway; ending every
 *   request in flight (and, with CINDER_PROCESSES, restarting in a loop while the database is gone) would
 *   turn one lost error into an outage of the whole server;
 * - an uncaught exception (a throw out of a timer or event callback) may have left that callback's state
 *   half-updated: it is logged and the process exits with status 70 (EX_SOFTWARE) at once, for its
 *   supervisor to start it again (the first process for a sibling, src/cli/siblings.ts; systemd, Docker or
 *   Kubernetes for the first process, whose siblings stop as their stdin pipe closes).
 */
import type { Metrics } from '../http/metrics.ts';
import type { Logger } from '../log.ts';

/** The exit status after an uncaught exception: sysexits.h EX_SOFTWARE (an internal software error). */
export const CRASH_EXIT_CODE = 70;

/** The part of `process` the policy needs (injected in tests). */
export interface ProcessEvents {
  on(event: 'unhandledRejection', listener: (reason: unknown) => void): unknown;
  on(event: 'uncaughtException', listener: (err: Error) => void): unknown;
  off(event: 'unhandledRejection', listener: (reason: unknown) => void): unknown;
  off(event: 'uncaughtException', listener: (err: Error) => void): unknown;
}

export interface CrashPolicy {
  readonly counts: Readonly<{ rejection: number; exception: number }>;
  /** Takes the handlers off again. */
  uninstall(): void;
}

/**
 * Installs the policy on `proc` (the process): logs through `log`, counts in `metrics`
 * (`cinder_unhandled_errors_total{kind}`), and calls `exit` after an uncaught exception.
 */
export function installCrashPolicy(o: { proc: ProcessEvents; log: Logger; metrics?: Metrics; exit: (code: number) => void }): CrashPolicy {
  const counts = { rejection: 0, exception: 0 };
  o.metrics?.counter('cinder_unhandled_errors_total', 'Errors no caller handled since the process started, by kind (rejection: logged, the process goes on; exception: the process exits).', () => ({
    'kind=rejection': counts.rejection,
    'kind=exception': counts.exception,
  }));
  const onRejection = (reason: unknown) => {
    counts.rejection++;
    o.log.error('unhandled promise rejection (a defect: every background task handles its own errors); the process goes on', { err: reason });
  };
  const onException = (err: Error) => {
    counts.exception++;
    o.log.error('uncaught exception; exiting for the supervisor to restart the process', { err, exitCode: CRASH_EXIT_CODE });
    o.exit(CRASH_EXIT_CODE);
  };
  o.proc.on('unhandledRejection', onRejection);
  o.proc.on('uncaughtException', onException);
  return {
    counts,
    uninstall() {
      o.proc.off('unhandledRejection', onRejection);
      o.proc.off('uncaughtException', onException);
    },
  };
}
