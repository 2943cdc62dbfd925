import type { ExportFileRepo, ExportFileWriter } from '../types.ts';
import { copyFailure, field } from './copy.ts';
import type { Pg } from './db.ts';

/** Bytes per chunk row: a range read fetches only the chunks it overlaps. */
export const EXPORT_CHUNK_BYTES = 1 << 20;

interface OpenCopy {
  stream: NodeJS.WritableStream;
  done: Promise<void>;
}

/** Starts `COPY export_file_chunks FROM STDIN`; `done` settles when the server has the rows (or refused them). */
async function openCopy(sql: Pg): Promise<OpenCopy> {
  const query = sql.unsafe('COPY export_file_chunks (key, seq, data) FROM STDIN');
  const failed = copyFailure(query);
  const stream = await query.writable();
  const done = Promise.race([
    new Promise<void>((resolve, reject) => {
      stream.once('finish', resolve);
      stream.once('error', reject);
    }),
    failed,
  ]);
  done.catch(() => undefined);
  return { stream, done };
}

/**
 * Writes one file: its bytes are cut into EXPORT_CHUNK_BYTES rows streamed through one COPY (with
 * backpressure), which commits them together at close; the `export_files` row that makes the file
 * visible follows. An aborted or failed COPY leaves no row.
 */
function fileWriter(sql: Pg, key: string): ExportFileWriter {
  const keyField = field(key);
  let copy: Promise<OpenCopy> | undefined;
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let seq = 0;
  let size = 0;

  const start = async () => {
    await sql`DELETE FROM export_file_chunks WHERE key = ${key}`;
    await sql`DELETE FROM export_files WHERE key = ${key}`;
    return openCopy(sql);
  };

  async function emit(chunk: Buffer): Promise<void> {
    const c = await (copy ??= start());
    // bytea in COPY text format: \x and hex digits, the backslash escaped.
    const line = `${keyField}\t${seq++}\t\\\\x${chunk.toString('hex')}\n`;
    if (!c.stream.write(line)) await Promise.race([new Promise((resolve) => c.stream.once('drain', resolve)), c.done]);
  }

  async function drain(final: boolean): Promise<void> {
    while (pendingBytes >= EXPORT_CHUNK_BYTES || (final && pendingBytes > 0)) {
      const all = pending.length === 1 ? pending[0]! : Buffer.concat(pending);
      const take = Math.min(EXPORT_CHUNK_BYTES, all.byteLength);
      await emit(all.subarray(0, take));
      const rest = all.subarray(take);
      pending = rest.byteLength ? [rest] : [];
      pendingBytes = rest.byteLength;
    }
  }

  return {
    async write(bytes) {
      size += bytes.byteLength;
      pending.push(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
      pendingBytes += bytes.byteLength;
      await drain(false);
    },
    async close() {
      await drain(true);
      const c = await (copy ??= start());
      c.stream.end();
      await c.done;
      await sql`INSERT INTO export_files (key, size, chunk_bytes) VALUES (${key}, ${size}, ${EXPORT_CHUNK_BYTES})`;
    },
    async abort() {
      pending = [];
      if (!copy) return;
      const c = await copy.catch(() => null);
      if (!c) return;
      (c.stream as unknown as { destroy(err: Error): void }).destroy(new Error('export file aborted'));
      await c.done.catch(() => undefined);
    },
  };
}

/** Streams a file's chunks, one query per chunk as the reader pulls; only the chunks a range overlaps. */
function fileReader(sql: Pg, key: string, range?: { start: number; end: number }): ReadableStream<Uint8Array> {
  let seq = 0;
  let last = -1;
  let chunkBytes = EXPORT_CHUNK_BYTES;
  let start = 0;
  let end = -1;
  return new ReadableStream<Uint8Array>({
    async start() {
      const [file] = await sql<{ size: number; chunk_bytes: number }[]>`SELECT size, chunk_bytes FROM export_files WHERE key = ${key}`;
      if (!file) throw new Error(`no export file ${key}`);
      chunkBytes = file.chunk_bytes;
      start = range?.start ?? 0;
      end = Math.min(range?.end ?? file.size - 1, file.size - 1);
      seq = Math.floor(start / chunkBytes);
      last = end < start ? -1 : Math.floor(end / chunkBytes);
    },
    async pull(controller) {
      if (seq > last) return controller.close();
      const [row] = await sql<{ data: Buffer }[]>`SELECT data FROM export_file_chunks WHERE key = ${key} AND seq = ${seq}`;
      if (!row) return controller.error(new Error(`export file ${key} lost its chunk ${seq}`));
      const offset = seq * chunkBytes;
      const from = Math.max(0, start - offset);
      const to = Math.min(row.data.byteLength, end - offset + 1);
      controller.enqueue(new Uint8Array(row.data.buffer, row.data.byteOffset + from, to - from));
      seq++;
    },
  }, { highWaterMark: 1 });
}

/** The PostgreSQL export file storage (CINDER_EXPORT_STORAGE=postgres). */
export function createPostgresExportFiles(sql: Pg): ExportFileRepo {
  return {
    create: (key) => fileWriter(sql, key),
    async size(key) {
      const [row] = await sql<{ size: number }[]>`SELECT size FROM export_files WHERE key = ${key}`;
      return row ? row.size : null;
    },
    read: (key, range) => fileReader(sql, key, range),
    async removePrefix(prefix) {
      // Keys sort in C collation: every key under `prefix/` lies in [prefix/, prefix0), '0' following '/'.
      const low = `${prefix}/`;
      const high = `${prefix}0`;
      await sql`DELETE FROM export_files WHERE key >= ${low} AND key < ${high}`;
      await sql`DELETE FROM export_file_chunks WHERE key >= ${low} AND key < ${high}`;
    },
  };
}
