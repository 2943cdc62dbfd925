/// <reference lib="webworker" />
/**
 * Entry of an export Worker thread. It receives plain data only: its settings once, then claimed jobs
 * (ExportJob rows); it opens its own store connection and storage client, runs each job, and reports
 * the outcome. Listed as an entry point of `bun build --compile` so the binary carries it.
 */
import { systemClock } from '../clock.ts';
import { createLogger, type LogLevel } from '../log.ts';
import { openStore } from '../store/open.ts';
import type { ExportJob, Store } from '../store/types.ts';
import { runJob, type RunDeps, type RunSettings } from './run-job.ts';
import { openSink } from './sink.ts';

export interface WorkerInit extends RunSettings {
  databaseUrl: string;
  exportStorage: string;
  /** The S3_* / AWS_* variables of the process. */
  env: Record<string, string>;
  logLevel: LogLevel;
}

export type ToWorker = { type: 'init'; init: WorkerInit } | { type: 'run'; job: ExportJob; owner: string } | { type: 'stop' };
export type FromWorker = { type: 'ready' } | { type: 'done'; id: string; outcome: string } | { type: 'stopped' };

declare const self: Worker;

let deps: Omit<RunDeps, 'owner'> | undefined;
let store: Store | undefined;
let running: AbortController | undefined;
let stopping = false;

async function shutdown(): Promise<void> {
  await store?.close().catch(() => undefined);
  self.postMessage({ type: 'stopped' } satisfies FromWorker);
}

self.onmessage = async (event: MessageEvent<ToWorker>) => {
  const msg = event.data;
  if (msg.type === 'init') {
    const { databaseUrl, exportStorage, env, logLevel, ...settings } = msg.init;
    store = openStore(databaseUrl);
    deps = { ...settings, store, sink: openSink(exportStorage, env, store), clock: systemClock, log: createLogger(logLevel, { thread: 'export-worker' }) };
    self.postMessage({ type: 'ready' } satisfies FromWorker);
  } else if (msg.type === 'run') {
    running = new AbortController();
    const outcome = await runJob({ ...deps!, owner: msg.owner, signal: running.signal }, msg.job).catch((err: unknown) => {
      deps!.log.error('export job crashed', { err, job: msg.job.id });
      return 'crashed';
    });
    running = undefined;
    self.postMessage({ type: 'done', id: msg.job.id, outcome } satisfies FromWorker);
    if (stopping) await shutdown();
  } else if (msg.type === 'stop') {
    stopping = true;
    if (running) running.abort();
    else await shutdown();
  }
};
