import type { Logger } from '../log.ts';
import type { Store } from './types.ts';

/** How often a server checks the planner statistics of the searched tables (`cinder serve`). */
export const STATISTICS_CHECK_MS = 60_000;

export interface StatisticsWatch {
  /** Analyses the tables whose statistics are missing or outgrown now (at most one check at a time); the tables analysed. */
  check(): Promise<string[]>;
  /** Stops the checks, waiting for one under way. */
  stop(): Promise<void>;
}

/**
 * Keeps PostgreSQL's planner statistics of the searched tables current while a server runs
 * (`indexing.analyze({ onlyStale: true })`): at once, then every `everyMs`. A database filled by ordinary
 * writes has none until autovacuum analyses it, which never happens where autovacuum is off, and
 * without them its searches were planned for tables of a few rows (`Observation?patient=` took 240 ms
 * instead of 1 ms over 144,141 resources; docs/PERFORMANCE.md, fortieth session). A check costs one
 * catalogue query; the tables it analyses take the time of PostgreSQL's sample of each (30,000 rows at
 * most). SQLite keeps no statistics: it is checked once, at once (its `analyze` merges a full-text index
 * that a reindex or an import left to merge, which holds the write lock for as long as that takes).
 */
export function watchStatistics(store: Store, log: Logger, everyMs = STATISTICS_CHECK_MS): StatisticsWatch {
  let running: Promise<string[]> | undefined;
  let stopped = false;
  const check = () => {
    running ??= store.resources.indexing.analyze({ onlyStale: true }).then((tables) => {
      if (tables.length) log.info('planner statistics gathered', { tables });
      return tables;
    }).finally(() => (running = undefined));
    return running;
  };
  const run = () => {
    if (stopped || running) return;
    check().catch((err: unknown) => log.warn('gathering planner statistics failed', { err }));
  };
  const timer = store.kind === 'postgres' ? setInterval(run, everyMs) : undefined;
  timer?.unref();
  run();
  return {
    check,
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running?.catch(() => undefined);
    },
  };
}
