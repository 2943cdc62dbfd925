/**
 * Introspection off the request thread. A full introspection of the FHIR schema is some 11 MB of JSON
 * and one to three seconds of CPU: computed where requests are served, a few varied introspection
 * queries would stall every other request of the process. So introspection-only queries go to one
 * Worker thread per process (introspection-worker.ts, holding its own copy of the schema), one at a
 * time, with a bounded queue: past it a 429 with `Retry-After`. Answers are kept (a few, bounded in
 * bytes) by the normalised document (graphql's `print(parse())`: whitespace, comments and commas do
 * not matter), the operation, the variables and the schema (system or a type's instance level), and the
 * same question asked while it is being answered waits for that answer.
 */
import type { DocumentNode } from 'graphql';
import { print } from 'graphql';
import { FhirError } from '../../errors.ts';
import { workerUrl } from '../../worker-url.ts';
import type { FromIntrospectionWorker, ToIntrospectionWorker } from './introspection-worker.ts';

/** The most introspection queries waiting for the thread (besides the one it answers); past it a 429. */
export const MAX_QUEUED_INTROSPECTIONS = 4;
/** The most answers kept, and the most characters of them. */
const KEPT_ANSWERS = 8;
const KEPT_CHARS = 64 * 1024 * 1024;
/** Seconds a refused client is told to wait: about one full introspection. */
const RETRY_AFTER = '3';

/** Bun's Worker: an unreferenced thread does not keep the process alive. */
type RefWorker = Worker & { ref(): void; unref(): void };

export interface IntrospectionJob {
  document: DocumentNode;
  variables?: Record<string, unknown> | undefined;
  operationName?: string | undefined;
  focusType?: string | undefined;
}

interface Waiting {
  message: ToIntrospectionWorker;
  resolve(text: string): void;
  reject(err: Error): void;
}

/** The process's introspection thread, its queue and its kept answers. */
export class IntrospectionRunner {
  private worker: RefWorker | undefined;
  private running: Waiting | undefined;
  private readonly queue: Waiting[] = [];
  private readonly inFlight = new Map<string, Promise<string>>();
  private readonly kept = new Map<string, string>();
  private keptChars = 0;
  private ids = 0;

  constructor(private readonly maxQueued = MAX_QUEUED_INTROSPECTIONS) {}

  /** The answer (GraphQL's `{data, errors}` as JSON text) to an introspection-only query, validated before. */
  answer(job: IntrospectionJob): Promise<string> {
    const query = print(job.document);
    const key = JSON.stringify([job.focusType ?? null, query, job.operationName ?? null, job.variables ?? null]);
    const kept = this.kept.get(key);
    if (kept !== undefined) {
      // Most recently used last: the first is the one to drop.
      this.kept.delete(key);
      this.kept.set(key, kept);
      return Promise.resolve(kept);
    }
    const pending = this.inFlight.get(key);
    if (pending) return pending;
    if (this.running && this.queue.length >= this.maxQueued) {
      return Promise.reject(new FhirError('too-many', `Too many introspection queries are being answered; retry in ${RETRY_AFTER} seconds (an answer already given is kept and served at once)`, { headers: { 'Retry-After': RETRY_AFTER } }));
    }
    const message: ToIntrospectionWorker = { id: ++this.ids, query, variables: job.variables, operationName: job.operationName, focusType: job.focusType };
    const promise = new Promise<string>((resolve, reject) => {
      this.queue.push({ message, resolve, reject });
      this.next();
    }).then((text) => {
      this.keep(key, text);
      return text;
    }).finally(() => this.inFlight.delete(key));
    this.inFlight.set(key, promise);
    return promise;
  }

  private keep(key: string, text: string): void {
    if (text.length > KEPT_CHARS) return;
    this.kept.set(key, text);
    this.keptChars += text.length;
    while (this.kept.size > KEPT_ANSWERS || this.keptChars > KEPT_CHARS) {
      const [first, value] = this.kept.entries().next().value!;
      this.kept.delete(first);
      this.keptChars -= value.length;
    }
  }

  private next(): void {
    if (this.running || !this.queue.length) return;
    const w = (this.worker ??= this.start());
    this.running = this.queue.shift()!;
    w.ref();
    w.postMessage(this.running.message);
  }

  private start(): RefWorker {
    const w = new Worker(workerUrl('fhir/graphql/introspection-worker.ts')) as RefWorker;
    w.addEventListener('message', (event: MessageEvent<FromIntrospectionWorker>) => {
      const msg = event.data;
      const done = this.running;
      if (!done || done.message.id !== msg.id) return;
      this.running = undefined;
      if ('text' in msg) done.resolve(msg.text);
      else done.reject(new Error(`introspection failed: ${msg.error}`));
      if (this.queue.length) this.next();
      else w.unref();
    });
    w.addEventListener('error', (event) => {
      // The thread is gone: fail what it was answering, start another for the rest.
      const done = this.running;
      this.running = undefined;
      w.terminate();
      if (this.worker === w) this.worker = undefined;
      done?.reject(new Error(`the introspection thread failed: ${(event as ErrorEvent).message}`));
      this.next();
    });
    return w;
  }
}

/** The one runner of the process (the schema is the same for every app, tenant and token). */
export const introspections = new IntrospectionRunner();
