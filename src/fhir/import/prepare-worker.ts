/// <reference lib="webworker" />
/**
 * Entry of the import preparation Worker thread: reads NDJSON inputs, one after the other, and
 * prepares their resources (prepareNdjson), so that the importing thread only writes. Chunks go out
 * packed (packVersions); at most `credits` chunks are unacknowledged at a time, which bounds the
 * memory between the threads. Listed as an entry point of `bun build --compile`.
 */
import { prepareNdjson, type LineIssue, type UrnLine } from './ndjson.ts';
import { packVersions, type PackedVersions } from './packing.ts';
import type { ValidationLevel } from '../validation/validate.ts';
import type { Membership } from '../validation/profile/profile-check.ts';
import type { LineIds } from './line-ids.ts';
import { workerCheck, type LineCheck, type WorkerProfiles } from './profiles.ts';

export type ToPrepareWorker =
  | { type: 'init'; credits: number; validation: ValidationLevel; base?: string; profiles?: WorkerProfiles }
  /**
   * `resourceType`: the type every resource of the input must have (an `$import` input's), when given;
   * `ids`: the ids of its id-less lines (line-ids.ts), when it may be read again.
   */
  | { type: 'input'; input: number; blob: Blob; resourceType?: string; ids?: LineIds }
  | { type: 'ack' }
  /** The answer to a `membership` question: a verdict, or why there is none. */
  | { type: 'membership'; id: number; verdict?: Membership; error?: string };
export type FromPrepareWorker =
  | { type: 'chunk'; input: number; packed: PackedVersions; urns: UrnLine[]; issues: LineIssue[]; bytes: number }
  | { type: 'end'; input: number }
  | { type: 'error'; input: number; message: string }
  /** A profile's binding the base table cannot decide: is the coding in the value set, in the tenant's terminology? */
  | { type: 'membership'; id: number; url: string; coding: { system?: string; code: string } };

declare const self: Worker;

let credits = 0;
let validation: ValidationLevel = 'strict';
/** The tenant's FHIR base (FhirDeps.fhirBase). */
let base: string | undefined;
let wake: (() => void) | undefined;
/** Profile validation, when the import checks profiles (profiles.ts). */
let profiles: LineCheck | undefined;
const questions = new Map<number, { resolve(m: Membership): void; reject(err: Error): void }>();
let asked = 0;
const inputs: { input: number; blob: Blob; resourceType?: string; ids?: LineIds }[] = [];
let busy = false;

function ask(url: string, coding: { system?: string; code: string }): Promise<Membership> {
  const id = asked++;
  return new Promise((resolve, reject) => {
    questions.set(id, { resolve, reject });
    post({ type: 'membership', id, url, coding });
  });
}

function post(msg: FromPrepareWorker, transfer: Transferable[] = []): void {
  self.postMessage(msg, transfer);
}

async function prepare(input: number, blob: Blob, type: string | undefined, ids: LineIds | undefined): Promise<void> {
  try {
    for await (const chunk of prepareNdjson(blob, validation, base, profiles, type, ids)) {
      while (credits === 0) await new Promise<void>((resolve) => (wake = resolve));
      credits--;
      const packed = packVersions(chunk.versions);
      post({ type: 'chunk', input, packed, urns: chunk.urns, issues: chunk.issues, bytes: chunk.bytes }, [packed.ends.buffer, packed.numbers.buffer, packed.shape.buffer, packed.keyTables.buffer, packed.rowKeys.buffer, packed.lines.buffer]);
    }
    post({ type: 'end', input });
  } catch (err) {
    post({ type: 'error', input, message: (err as Error).message });
  }
}

/** Works through the queued inputs in order. */
async function drain(): Promise<void> {
  busy = true;
  for (let next = inputs.shift(); next; next = inputs.shift()) await prepare(next.input, next.blob, next.resourceType, next.ids);
  busy = false;
}

self.onmessage = (event: MessageEvent<ToPrepareWorker>) => {
  const msg = event.data;
  if (msg.type === 'init') {
    credits = msg.credits;
    validation = msg.validation;
    base = msg.base;
    if (msg.profiles) profiles = workerCheck(msg.profiles, ask);
  } else if (msg.type === 'input') {
    inputs.push(msg);
    if (!busy) void drain();
  } else if (msg.type === 'membership') {
    const q = questions.get(msg.id);
    questions.delete(msg.id);
    if (msg.verdict) q?.resolve(msg.verdict);
    else q?.reject(new Error(msg.error ?? 'the terminology gave no answer'));
  } else {
    credits++;
    wake?.();
    wake = undefined;
  }
};
