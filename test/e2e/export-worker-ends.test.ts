/**
 * An export worker thread that ends without an error (the runtime ending it, process.exit in it: Bun's Worker
 * then emits `close` alone) is noticed by the pool: its job is handed back and a new thread runs it, with one
 * thread as with many. Unnoticed, its slot stayed busy for good (with one thread no export ran again) and its
 * job stayed in-progress. The threads are the pool's own, started from the real worker entry; the test only
 * ends one from outside, through Worker.terminate() on the instance it sees constructed.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { systemClock } from '../../src/clock.ts';
import { createExportPool } from '../../src/export/pool.ts';
import { runSettings } from '../../src/export/runner.ts';
import { createBatchWriter, DEFAULT_BATCH_LIMITS } from '../../src/fhir/import/batches.ts';
import { silentLogger } from '../../src/log.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { kickOff, observation, type Manifest } from '../helpers/export.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

/** Each export thread constructed in this process, handed to `onThread` as it is made. */
let onThread: (w: Worker) => void = () => undefined;
/** What the pool tells its threads, seen before they get it; `false` keeps the message from the thread. */
let onMessage: (w: Worker, message: { type: string }) => boolean = () => true;
const threads: Worker[] = [];
const RealWorker = globalThis.Worker;
beforeAll(() => {
  globalThis.Worker = class extends RealWorker {
    constructor(url: string | URL, options?: WorkerOptions) {
      super(url, options);
      if (String(url).endsWith('export/worker.ts')) {
        threads.push(this);
        onThread(this);
      }
    }
    override postMessage(message: unknown, options?: unknown): void {
      if (onMessage(this, message as { type: string })) super.postMessage(message, options as StructuredSerializeOptions);
    }
  } as typeof Worker;
});
afterAll(() => {
  globalThis.Worker = RealWorker;
});

const COUNT = 40;

async function setUp(target: (typeof targets)[number], settleMs = 0) {
  const db = await target.migrated();
  const t = await createTestApp({ store: db.open() });
  const writer = createBatchWriter({ store: t.store, clock: t.clock }, 't1', DEFAULT_BATCH_LIMITS, () => undefined);
  for (let i = 0; i < COUNT; i++) await writer.addPrepared([writer.prepare(observation(`o${i}`, `p${i % 5}`))]);
  await writer.drain();
  t.clock.advance(60_000);
  const newPool = (settle: number) => createExportPool({
    size: 1,
    init: {
      ...runSettings(t.config), settleMs: settle, databaseUrl: target.kind === 'sqlite' ? 'sqlite:' + db.url : db.url,
      exportStorage: t.config.exportStorage, env: {}, logLevel: 'silent',
    },
    store: t.store, clock: systemClock, log: silentLogger, pollMs: 50,
  });
  return { t, pool: newPool(settleMs), newPool };
}

/**
 * A settle time that keeps a job in its thread until it is stopped: its transactionTime (the test clock's,
 * in January 2026) plus this is far past the real time the thread waits for.
 */
const FOREVER = 3 * 365 * 86_400_000;

/** Waits until the pool has handed `jobId` to its thread to run. */
async function awaitRun(ran: () => boolean): Promise<void> {
  for (let i = 0; i < 3000 && !ran(); i++) await Bun.sleep(10);
  if (!ran()) throw new Error('the job never reached its thread');
  // The thread takes the job and waits in its settle loop.
  await Bun.sleep(200);
}

/** Waits for the job to complete; returns its attempts and the lines of its manifest's files. */
async function completed(t: TestApp, token: string, statusUrl: string): Promise<{ attempts: number; lines: number }> {
  const id = statusUrl.split('/').pop()!;
  for (let i = 0; i < 1500; i++) {
    const job = (await t.store.exports.jobs.get('t1', id))!;
    if (job.state === 'completed') {
      const manifest = (await (await t.request(statusUrl, fhirInit(token))).json()) as Manifest;
      return { attempts: job.attempts, lines: manifest.output.reduce((n, o) => n + o.count, 0) };
    }
    await Bun.sleep(10);
  }
  const job = (await t.store.exports.jobs.get('t1', id))!;
  throw new Error(`the job never completed: ${job.state}, attempts ${job.attempts}`);
}

for (const target of targets) {
  test(`${target.kind}: a thread ended while running its job: the job is handed back (the attempt counted), a new thread completes it, and the next job runs`, async () => {
    const { t, pool } = await setUp(target);
    threads.length = 0;
    // The first thread is ended as soon as it is ready, when the pool hands it the job.
    onThread = (w) => {
      if (threads.length === 1) w.addEventListener('message', (e: MessageEvent<{ type: string }>) => e.data.type === 'ready' && w.terminate());
    };
    try {
      const token = await t.token();
      const statusUrl = await kickOff(t, token, '/$export?_type=Observation');
      pool.start();
      expect(await completed(t, token, statusUrl)).toEqual({ attempts: 2, lines: COUNT });
      expect(threads.length).toBe(2);
      // The one slot is free again: a later job runs on the pool's thread.
      const next = await kickOff(t, token, '/$export?_type=Observation');
      expect(await completed(t, token, next)).toEqual({ attempts: 1, lines: COUNT });
      // The job is complete in the database before its thread's `done` reaches the pool.
      for (let i = 0; i < 500 && pool.busy() > 0; i++) await Bun.sleep(10);
      expect(pool.busy()).toBe(0);
    } finally {
      onThread = () => undefined;
      await pool.stop();
      await t.close();
    }
  }, 60_000);

  test(`${target.kind}: a thread ended before it was ready never ran its job: handed back with the attempt refunded, and run by the next thread`, async () => {
    const { t, pool } = await setUp(target);
    threads.length = 0;
    onThread = (w) => {
      if (threads.length === 1) w.terminate();
    };
    try {
      const token = await t.token();
      const statusUrl = await kickOff(t, token, '/$export?_type=Observation');
      pool.start();
      expect(await completed(t, token, statusUrl)).toEqual({ attempts: 1, lines: COUNT });
      expect(threads.length).toBe(2);
    } finally {
      onThread = () => undefined;
      await pool.stop();
      await t.close();
    }
  }, 60_000);

  test(`${target.kind}: a thread that does not stop within stop()'s timeout is ended, and its job handed back with the attempt refunded once it has ended`, async () => {
    const { t, pool, newPool } = await setUp(target, FOREVER);
    let ran = false;
    // The thread never hears the stop: it goes on with its job until the pool ends it.
    onMessage = (_w, m) => (m.type === 'run' && (ran = true), m.type !== 'stop');
    try {
      const token = await t.token();
      const statusUrl = await kickOff(t, token, '/$export?_type=Observation');
      const id = statusUrl.split('/').pop()!;
      pool.start();
      await awaitRun(() => ran);
      await pool.stop(300);
      // Before: still in progress under the ended thread's lease, and its next claim counted a second attempt.
      const job = (await t.store.exports.jobs.get('t1', id))!;
      expect({ state: job.state, owner: job.leaseOwner, attempts: job.attempts }).toEqual({ state: 'accepted', owner: null, attempts: 0 });
      onMessage = () => true;
      const next = newPool(0);
      next.start();
      try {
        expect(await completed(t, token, statusUrl)).toEqual({ attempts: 1, lines: COUNT });
      } finally {
        await next.stop();
      }
    } finally {
      onMessage = () => true;
      await pool.stop();
      await t.close();
    }
  }, 60_000);

  test(`${target.kind}: a thread that ends on its own while the pool stops is charged nothing: its job is handed back with the attempt refunded`, async () => {
    const { t, pool } = await setUp(target, FOREVER);
    let ran = false;
    // Told to stop, the thread ends (from outside here, as a crash or process.exit in it would) before it hands its job back.
    onMessage = (w, m) => {
      if (m.type === 'run') ran = true;
      if (m.type !== 'stop') return true;
      setTimeout(() => w.terminate(), 50);
      return false;
    };
    try {
      const token = await t.token();
      const id = (await kickOff(t, token, '/$export?_type=Observation')).split('/').pop()!;
      pool.start();
      await awaitRun(() => ran);
      await pool.stop(5_000);
      // Before: released with the attempt counted, as a thread that ends while running its job is.
      const job = (await t.store.exports.jobs.get('t1', id))!;
      expect({ state: job.state, owner: job.leaseOwner, attempts: job.attempts }).toEqual({ state: 'accepted', owner: null, attempts: 0 });
    } finally {
      onMessage = () => true;
      await pool.stop();
      await t.close();
    }
  }, 60_000);
}
