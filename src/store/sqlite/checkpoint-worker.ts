/// <reference lib="webworker" />
/**
 * Entry of the SQLite checkpoint Worker thread: copies committed WAL frames into the database file
 * (PASSIVE checkpoints, on its own connection) while the writer connection goes on writing, so a bulk
 * writer does not wait for the copy and its fsyncs. Listed as an entry point of `bun build --compile`.
 */
import { openDatabase } from './db.ts';

/** `checkpoint` requests are numbered; `done` tells the number of the last request the finished checkpoint covered. */
export type ToCheckpointWorker = { type: 'open'; path: string } | { type: 'checkpoint'; request: number } | { type: 'close' };
export type FromCheckpointWorker = { type: 'done'; request: number } | { type: 'closed' };

declare const self: Worker;

let db: ReturnType<typeof openDatabase> | undefined;
let latest = 0;
let running = false;

/** Checkpoints until a round started after the latest request (requests during a round coalesce into one more). */
async function checkpoint(): Promise<void> {
  running = true;
  let covered = -1;
  while (db && covered < latest) {
    covered = latest;
    try {
      db.exec('PRAGMA wal_checkpoint(PASSIVE)');
    } catch {
      // Busy or failing: the writer's own automatic checkpoints still bound the WAL.
    }
    self.postMessage({ type: 'done', request: covered } satisfies FromCheckpointWorker);
    // Lets further requests (or close) in between rounds.
    await Promise.resolve();
  }
  running = false;
}

self.onmessage = (event: MessageEvent<ToCheckpointWorker>) => {
  const msg = event.data;
  if (msg.type === 'open') {
    db = openDatabase(msg.path);
  } else if (msg.type === 'checkpoint') {
    latest = msg.request;
    if (!running) void checkpoint();
  } else {
    db?.close();
    db = undefined;
    self.postMessage({ type: 'closed' } satisfies FromCheckpointWorker);
  }
};
