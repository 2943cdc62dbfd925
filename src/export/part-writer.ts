import type { ExportSink, SinkWriter } from './sink.ts';
import type { FileRecord } from './spec.ts';

/** NDJSON produced from one page: exported lines and deletion Bundles, and where the next page starts. */
export interface Chunk {
  output: Uint8Array;
  count: number;
  deleted: Uint8Array;
  deletedCount: number;
  /** Keyset position after this chunk; null after the last one. */
  next: number | string | null;
}

/** Where a step's files roll over: the finished files and the position the next file starts at. */
export interface Rollover {
  files: FileRecord[];
  after: number | string | null;
  part: number;
  deletedPart: number;
  done: boolean;
}

export interface PartWriterOptions {
  sink: ExportSink;
  /** The resource type of the step's output. */
  type: string;
  /** Storage key and download name of a part. */
  name: (kind: 'output' | 'deleted', part: number) => { key: string; name: string };
  maxBytes: number;
  part: number;
  deletedPart: number;
  /** Persists a rollover (the checkpoint); throws when the job may not go on. */
  onRollover: (r: Rollover) => Promise<void>;
}

interface OpenFile {
  writer: SinkWriter;
  record: FileRecord;
}

/**
 * A WritableStream of chunks into one NDJSON file per type (and one for its deletions), split once a
 * file reaches `maxBytes` at a page boundary. Each finished set of files is checkpointed with the
 * keyset position after it, so a resumed job restarts exactly there.
 */
export function partWriter(o: PartWriterOptions): WritableStream<Chunk> {
  let part = o.part;
  let deletedPart = o.deletedPart;
  let out: OpenFile | null = null;
  let del: OpenFile | null = null;
  const open = (kind: 'output' | 'deleted'): OpenFile => {
    const { key, name } = o.name(kind, kind === 'output' ? part++ : deletedPart++);
    const type = kind === 'output' ? o.type : 'Bundle';
    return { writer: o.sink.open(key), record: { kind, type, subject: o.type, name, key, count: 0, bytes: 0 } };
  };
  const append = async (file: OpenFile, bytes: Uint8Array, count: number) => {
    await file.writer.write(bytes);
    file.record.count += count;
    file.record.bytes += bytes.byteLength;
  };
  const finish = async (after: number | string | null, done: boolean) => {
    const files: FileRecord[] = [];
    for (const f of [out, del]) {
      if (!f) continue;
      await f.writer.close();
      files.push(f.record);
    }
    out = del = null;
    await o.onRollover({ files, after, part, deletedPart, done });
  };
  return new WritableStream<Chunk>(
    {
      async write(chunk) {
        if (chunk.count) await append((out ??= open('output')), chunk.output, chunk.count);
        if (chunk.deletedCount) await append((del ??= open('deleted')), chunk.deleted, chunk.deletedCount);
        const full = (out?.record.bytes ?? 0) >= o.maxBytes || (del?.record.bytes ?? 0) >= o.maxBytes;
        if (full && chunk.next !== null) await finish(chunk.next, false);
      },
      async close() {
        await finish(null, true);
      },
      async abort() {
        for (const f of [out, del]) if (f) await f.writer.abort().catch(() => undefined);
        out = del = null;
      },
    },
    new CountQueuingStrategy({ highWaterMark: 1 }),
  );
}
