import { INDEX_MODEL, reindex, type Rebuilding } from '../fhir/reindex.ts';
import { createApp } from '../app.ts';
import { startExportServices } from '../export/services.ts';
import { baseUrlIsDefault, CONFIG_KEYS, configEnv, defaultBaseUrlAdvice, flagName, fhirBaseOf, type Config } from '../config.ts';
import { createMetrics } from '../http/metrics.ts';
import { background, type Logger } from '../log.ts';
import { watchStatistics, type StatisticsWatch } from '../store/statistics-watch.ts';
import type { Store } from '../store/types.ts';
import { bootstrap } from './bootstrap.ts';
import { installCrashPolicy } from './crash-policy.ts';
import type { Command, Options } from './command.ts';
import { openContext } from './context.ts';
import { postgresTarget, RESOLVED } from '../store/postgres/url-options.ts';
import { SIBLING_ENV, startSiblings, type Siblings } from './siblings.ts';

/** What a server of this release says when the search index follows a newer release's model. */
function newerIndexWarning(model: number): string {
  return (
    `the search index follows model ${model}, newer than this release's ${INDEX_MODEL}: a newer Cinder rebuilt it. This process ` +
    'serves as it is, as during a rolling upgrade, but indexes what it writes by its own model: once every process runs ' +
    'the newer release, run `cinder reindex` of that release to rebuild those rows'
  );
}

const options: Options = Object.fromEntries(CONFIG_KEYS.map((k) => [flagName(k).slice(2), { type: 'string' as const }]));

function camel(flag: string): string {
  return flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
}

/**
 * `cinder serve`: migrate, bootstrap an empty database, listen, drain on SIGTERM. With
 * CINDER_PROCESSES above 1 this first process starts the others (src/cli/siblings.ts): they share the
 * port and the database, and only the first runs migrations, the first-start bootstrap, the export
 * workers and the periodic clean-ups.
 */
export const serveCommand: Command = {
  name: 'serve',
  summary: 'Run the Cinder server (the default command)',
  usage: `cinder serve [${CONFIG_KEYS.map((k) => flagName(k) + ' <value>').join('] [')}]\n\nEach flag overrides its CINDER_* environment variable (see README).`,
  options,
  async run(args, io) {
    const flags: Record<string, string> = {};
    for (const [k, v] of Object.entries(args.values)) if (typeof v === 'string') flags[camel(k)] = v;
    const sibling = io.env[SIBLING_ENV] !== undefined;
    // A sibling's settings come from the first process, which has migrated the database already.
    const { config, log, store, keys, clock } = await openContext(io, flags, !sibling, true, true);
    // The siblings get the first process's base URL as CINDER_BASE_URL: only the first warns.
    if (!sibling && baseUrlIsDefault(io.env, flags)) log.warn(defaultBaseUrlAdvice(config.baseUrl), { baseUrl: config.baseUrl });
    await keys.init();
    // A database holding index rows of an older model is reindexed beside the server, which answers
    // meanwhile: only searches reading rows not yet rebuilt wait (503, src/fhir/reindex.ts gatedStore).
    let rebuilding: Rebuilding | undefined;
    if (!sibling) {
      const { model } = await store.resources.indexing.state();
      if (model < INDEX_MODEL) rebuilding = { from: model, examined: 0 };
      // A newer Cinder rebuilt the index (a rolling upgrade): this process goes on writing rows of its own model.
      else if (model > INDEX_MODEL) log.warn(newerIndexWarning(model), { indexModel: model, releaseIndexModel: INDEX_MODEL });
    }
    const first = sibling ? null : await bootstrap(store, clock);
    let draining = false;
    const stopReindex = new AbortController();
    const reindexed = Promise.withResolvers<void>();
    const metrics = createMetrics();
    // An error no caller received is logged (and an uncaught exception ends the process): src/cli/crash-policy.ts.
    // It stays until the process exits, the drain included.
    installCrashPolicy({ proc: process, log, metrics, exit: (code) => process.exit(code) });
    // Export workers search outside the server's gate: they begin once the index is rebuilt.
    const exports = startExportServices({ config, store, clock, log, env: io.env, background: !sibling, after: reindexed.promise });
    const app = createApp({
      config, store, keys, clock, log, metrics, isDraining: () => draining, exportSink: exports.sink, rebuilding: () => rebuilding,
    });
    // Every process delivers Subscription notifications; leases keep two from sending one (src/fhir/subscriptions/delivery.ts).
    app.subscriptions.start(config.subscriptionPollMs);
    // `$import` jobs, claimed with a lease as export jobs are; a sibling server process runs none (as it runs no export workers).
    if (!sibling) app.imports.start();
    const shared = sibling || config.processes > 1;
    const server = listen(() => Bun.serve({
      port: config.port, hostname: config.host, maxRequestBodySize: config.maxBodyBytes + 1024, reusePort: shared,
      // A Subscription websocket's handshake is upgraded (and answered by Bun); any other request is the app's.
      fetch: (req, srv) => (app.upgrade(req, srv) ? undefined : app.fetch(req, srv)), websocket: app.websocket,
    }), config);
    // Expired codes, refresh tokens, assertion jtis, revocations and login counters go every ten minutes.
    const purge = sibling ? undefined : setInterval(() => {
      store.oauth.purgeExpired(clock.now()).catch((err: unknown) => log.warn('purging expired OAuth state failed', { err }));
    }, 10 * 60_000);
    purge?.unref();
    // The siblings bind the port this process got (it may have asked for port 0), once the index is
    // rebuilt (they do not gate their searches).
    let siblings: Siblings | null = null;
    // Planner statistics missing or outgrown (a database loaded with autovacuum off, or filled by writes
    // since) are gathered in the background, once the start-up reindex (which gathers them) is done.
    let statistics: StatisticsWatch | undefined;
    background(log, 'watching planner statistics failed', reindexed.promise.then(() => {
      if (!draining && !sibling) statistics = watchStatistics(store, log);
    }));
    // Every tenant's active Subscriptions compiled once the index is rebuilt, and what that finds written: one its topic now
    // refuses (an older release let its filter through, or the topic changed) reads `error` saying why, the others untouched.
    background(log, 'judging the active subscriptions at start failed', reindexed.promise.then(() => (draining || sibling ? undefined : app.settleSubscriptions())));
    background(log, 'starting the other server processes failed', reindexed.promise.then(() => {
      if (draining || sibling || config.processes <= 1) return;
      siblings = startSiblings({ count: config.processes - 1, env: { ...io.env, ...configEnv(config), CINDER_PORT: String(server.port) }, log });
    }));
    const fhirBase = fhirBaseOf(config.baseUrl, 'default');
    if (first) {
      io.stdout(
        `Cinder initialised ${initialised(config)}.\nAdmin client for tenant 'default' (shown once, keep it safe):\n` +
          `  client_id:     ${first.clientId}\n  client_secret: ${first.clientSecret}\n  FHIR base:     ${fhirBase}\n` +
          `  token URL:     ${config.baseUrl}/oauth2/token\n`,
      );
    }
    log.info('listening', {
      url: `http://${config.host}:${server.port}`, baseUrl: config.baseUrl, database: store.kind,
      ...(sibling ? { sibling: io.env[SIBLING_ENV] } : { processes: config.processes }),
    });
    let reindexing = Promise.resolve();
    if (!rebuilding) reindexed.resolve();
    else {
      reindexing = rebuildBeside(store, rebuilding, log, stopReindex.signal, (tenant) => fhirBaseOf(config.baseUrl, tenant)).then((done) => {
        if (done) rebuilding = undefined;
        reindexed.resolve();
      });
    }
    return await new Promise<number>((resolve) => {
      const stop = async (signal: string) => {
        if (draining) return;
        draining = true;
        clearInterval(purge);
        stopReindex.abort();
        log.info('draining', { signal });
        // Export workers hand their jobs back at once while HTTP requests drain, here and in the siblings.
        // A reindex stops after its batch; the next start resumes it.
        // Each step's failure is logged and the next still runs: a drain during an outage still ends.
        const waiting = new Set<string>();
        const step = (what: string, p: Promise<unknown> | undefined) => {
          if (!p) return undefined;
          waiting.add(what);
          return p.then(() => void waiting.delete(what), (err: unknown) => {
            waiting.delete(what);
            log.error(`draining: ${what} failed`, { err });
          });
        };
        const drained = (async () => {
          await Promise.all([
            step('stopping the HTTP server', server.stop(false)), step('stopping the export workers', exports.stop()), step('stopping the other processes', siblings?.stop()),
            step('stopping the reindex', reindexing), step('stopping Subscription delivery', app.subscriptions.stop()),
            step('handing $import jobs back', app.imports.stop()), step('stopping the statistics checks', statistics?.stop()),
          ]);
          // The AuditEvents of the requests just drained are written before the database is closed.
          await step('writing the last AuditEvents', app.audit?.close());
          await step('closing the database', store.close());
        })();
        // Work that never ends (a request or a delivery round waiting for a database that stopped
        // answering) must not hold the process: past the deadline the connections left are closed and
        // the process exits with status 1 once the remaining steps end, or DRAIN_GRACE_MS later.
        let timer: ReturnType<typeof setTimeout> | undefined;
        const late = new Promise<true>((r) => (timer = setTimeout(() => r(true), config.drainTimeout * 1000)));
        if (await Promise.race([drained.then(() => false), late])) {
          log.error('draining: not finished in time; closing the connections left and exiting with status 1', { drainTimeoutSeconds: config.drainTimeout, waitingFor: [...waiting] });
          void server.stop(true).catch(() => undefined);
          await Promise.race([drained, Bun.sleep(DRAIN_GRACE_MS)]);
          resolve(1);
          return;
        }
        clearTimeout(timer);
        log.info('stopped');
        resolve(0);
      };
      process.once('SIGTERM', () => void stop('SIGTERM'));
      process.once('SIGINT', () => void stop('SIGINT'));
      // A sibling's stdin is a pipe from the first process: its end means that process is gone.
      if (sibling) void io.stdin().then(() => stop('first process exited'), () => stop('first process exited'));
    });
  },
};

/** After the drain deadline (CINDER_DRAIN_TIMEOUT), how long the steps left may still take before the process exits. */
const DRAIN_GRACE_MS = 5_000;

/** Resources per reindex batch beside a server: its transaction's writes hold the event loop (2,000 about 4 × as long). */
const SERVING_BATCH = 500;
/** The longest stretch of a reindex's indexing work before the server's waiting requests run. */
const SLICE_MS = 5;
/** Wait before a reindex that failed (a database outage) starts again from where it stopped. */
const RETRY_MS = 10_000;

/**
 * Runs the start-up reindex while the server answers, updating `progress` (what /readyz reports), logging
 * every 5 s, and trying again after a failure until it is done (true) or `signal` stops it (false).
 */
async function rebuildBeside(store: Store, progress: Rebuilding, log: Logger, signal: AbortSignal, fhirBase: (tenant: string) => string): Promise<boolean> {
  log.info('rebuilding search index beside the server', { fromModel: progress.from, toModel: INDEX_MODEL });
  let logged = performance.now();
  let before = 0;
  while (!signal.aborted) {
    try {
      const result = await reindex(store, {
        batch: SERVING_BATCH, signal, fhirBase, pause: { everyMs: SLICE_MS, wait: () => new Promise((resolve) => setImmediate(resolve)) },
        onProgress: ({ done, rebuilt }) => {
          progress.examined = before + done;
          if (performance.now() - logged < 5000) return;
          logged = performance.now();
          log.info('reindexing search index', { examined: progress.examined, rebuilt });
        },
      });
      if (result.stopped) return false;
      log.info('search index rebuilt', { resources: result.rebuilt, examined: before + result.done });
      return true;
    } catch (err) {
      if (signal.aborted) return false;
      before = progress.examined;
      log.warn('reindexing failed; it resumes where it stopped', { err, retryInMs: RETRY_MS });
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, RETRY_MS);
        signal.addEventListener('abort', () => { clearTimeout(timer); resolve(); }, { once: true });
      });
    }
  }
  return false;
}

/** Where the first start put its data: the SQLite data directory, or the PostgreSQL database (no credentials). */
export function initialised(config: Config): string {
  if (!/^postgres(ql)?:\/\//i.test(config.databaseUrl)) return config.dataDir;
  const { database, hosts } = postgresTarget(config.databaseUrl, RESOLVED);
  return `the PostgreSQL database ${database} at ${hosts}`;
}

/**
 * Binds the server, or fails naming the settings at stake: Bun's own message ("Is port 8080 in use?")
 * is the same whether the port is taken or CINDER_HOST is no address of this machine.
 */
function listen<S>(bind: () => S, config: Config): S {
  try {
    return bind();
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new Error(`cannot listen on ${config.host}:${config.port} (CINDER_HOST, CINDER_PORT): the port is taken, or the host is not an address of this machine (${why})`, { cause: err });
  }
}
