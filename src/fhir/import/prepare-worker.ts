/// <reference lib="webworker" />
/**
 * Entry of the import preparation Worker thread: reads an NDJSON input and prepares its resources
 * (prepareNdjson), so that the importing thread only writes. Chunks go out packed (packVersions);
 * at most `credits` chunks (set per input) are unacknowledged at a time, which bounds the memory
 * between the threads.
 * Listed as an entry point of `bun build --compile` so the binary carries it.
 */
import { prepareNdjson, type LineIssue } from './ndjson.ts';
import { packVersions, type PackedVersions } from './packing.ts';

export type ToPrepareWorker = { type: 'file'; blob: Blob; credits: number } | { type: 'ack' };
export type FromPrepareWorker =
  | { type: 'chunk'; packed: PackedVersions; issues: LineIssue[]; bytes: number }
  | { type: 'end' }
  | { type: 'error'; message: string };

declare const self: Worker;

let credits = 0;
let wake: (() => void) | undefined;

function post(msg: FromPrepareWorker, transfer: Transferable[] = []): void {
  self.postMessage(msg, transfer);
}

async function prepareFile(blob: Blob, ahead: number): Promise<void> {
  credits = ahead;
  try {
    for await (const chunk of prepareNdjson(blob)) {
      while (credits === 0) await new Promise<void>((resolve) => (wake = resolve));
      credits--;
      const packed = packVersions(chunk.versions);
      post({ type: 'chunk', packed, issues: chunk.issues, bytes: chunk.bytes }, [packed.ends.buffer, packed.shape.buffer]);
    }
    post({ type: 'end' });
  } catch (err) {
    post({ type: 'error', message: (err as Error).message });
  }
}

self.onmessage = (event: MessageEvent<ToPrepareWorker>) => {
  const msg = event.data;
  if (msg.type === 'file') {
    void prepareFile(msg.blob, msg.credits);
  } else {
    credits++;
    wake?.();
    wake = undefined;
  }
};
