import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { Logger } from '../log.ts';
import type { Store } from '../store/types.ts';
import { scheduleExportGc } from './gc.ts';
import { createExportPool } from './pool.ts';
import { runSettings } from './runner.ts';
import { openSink, type ExportSink } from './sink.ts';

/** The S3_* / AWS_* variables, the only ones export storage reads (handed to workers as data). */
export function storageEnv(env: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => /^(S3|AWS)_/.test(e[0]) && e[1] !== undefined));
}

/**
 * What `cinder serve` runs for bulk export beside the HTTP API: the storage, a pool of
 * CINDER_EXPORT_WORKERS worker threads, and the garbage collection of expired files.
 */
export function startExportServices(o: {
  config: Config; store: Store; clock: Clock; log: Logger; env: Record<string, string | undefined>;
  /** false: only the sink (for serving downloads); no worker pool, no clean-up (a sibling server process). */
  background?: boolean;
  /**
   * The background work begins once this settles: the reindex `serve` runs at start (an export's
   * `_typeFilter` is a search, and a worker's searches bypass the server's gate, src/fhir/reindex.ts).
   */
  after?: Promise<unknown>;
}) {
  const background = o.background !== false;
  const env = storageEnv(o.env);
  const sink: ExportSink = openSink(o.config.exportStorage, env, o.store);
  const log = o.log.child({ component: 'export' });
  const pool = createExportPool({
    size: o.config.exportWorkers,
    init: { ...runSettings(o.config), databaseUrl: o.config.databaseUrl, exportStorage: o.config.exportStorage, env, logLevel: o.config.logLevel },
    store: o.store, clock: o.clock, log,
  });
  let gc = { stop() {} };
  let stopped = false;
  const begin = () => {
    if (stopped) return;
    if (o.config.exportWorkers > 0) pool.start();
    gc = scheduleExportGc({ store: o.store, sink, clock: o.clock, log, retentionMs: o.config.exportFileTtl * 1000 });
  };
  if (background) {
    if (o.after) o.after.then(begin, begin);
    else begin();
  }
  return {
    sink,
    /** Stops collecting and hands running jobs back (another process, or this one after restart, resumes them). */
    async stop(): Promise<void> {
      stopped = true;
      gc.stop();
      await pool.stop();
    },
  };
}
