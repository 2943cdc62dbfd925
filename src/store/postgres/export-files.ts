import type { ExportFileRepo, ExportFileWriter } from '../types.ts';
import { BINARY_HEADER, BINARY_TRAILER, openCopy, type OpenCopy } from './copy.ts';
import type { Pg } from './db.ts';

/** Bytes after which a chunk ends at the next line end: a range read fetches only the chunks it overlaps. */
export const EXPORT_CHUNK_BYTES = 1 << 18;
/** Chunks fetched per query when reading (about 1 MiB). */
const CHUNKS_PER_READ = 4;

const NEWLINE = 0x0a;

/**
 * Everything of a (key, start, data) row before the data's bytes, in COPY's binary format (copy.ts): a
 * text field is its UTF-8 bytes as they are, so a chunk goes to the server without being decoded,
 * escaped or copied to a string.
 */
function rowHead(key: Buffer, start: number, dataBytes: number): Buffer {
  const head = Buffer.allocUnsafe(2 + 4 + key.byteLength + 4 + 8 + 4);
  let at = head.writeInt16BE(3, 0);
  at = head.writeInt32BE(key.byteLength, at);
  at += key.copy(head, at);
  at = head.writeInt32BE(8, at);
  at = head.writeBigInt64BE(BigInt(start), at);
  head.writeInt32BE(dataBytes, at);
  return head;
}

/**
 * Writes one file: its bytes are cut into chunks of whole lines (a cut after a newline never splits a
 * UTF-8 character, so each chunk is valid text), streamed through one COPY with backpressure, which
 * commits them together at close; the `export_files` row that makes the file visible follows. An
 * aborted or failed COPY leaves no row.
 */
function fileWriter(sql: Pg, key: string): ExportFileWriter {
  const keyBytes = Buffer.from(key, 'utf8');
  let copy: Promise<OpenCopy> | undefined;
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let size = 0;
  let written = 0;

  const start = async () => {
    await sql`DELETE FROM export_file_chunks WHERE key = ${key}`;
    await sql`DELETE FROM export_files WHERE key = ${key}`;
    const c = await openCopy(sql, 'export_file_chunks (key, start, data)', 'binary');
    c.stream.write(BINARY_HEADER);
    return c;
  };

  /** Sends one chunk made of `pieces` (written as they are, never joined into a new buffer). */
  async function emit(pieces: Buffer[], bytes: number): Promise<void> {
    const c = await (copy ??= start());
    let ready = c.stream.write(rowHead(keyBytes, written, bytes));
    for (const piece of pieces) ready = c.stream.write(piece);
    written += bytes;
    if (!ready) await Promise.race([new Promise((resolve) => c.stream.once('drain', resolve)), c.done]);
  }

  /** Where the next chunk ends: just after the first newline at or past EXPORT_CHUNK_BYTES - 1 bytes. */
  function nextCut(): { piece: number; at: number } | null {
    let offset = 0;
    for (let i = 0; i < pending.length; i++) {
      const piece = pending[i]!;
      const from = Math.max(0, EXPORT_CHUNK_BYTES - 1 - offset);
      if (from < piece.byteLength) {
        const nl = piece.indexOf(NEWLINE, from);
        if (nl >= 0) return { piece: i, at: nl + 1 };
      }
      offset += piece.byteLength;
    }
    return null;
  }

  async function drain(final: boolean): Promise<void> {
    while (pendingBytes >= EXPORT_CHUNK_BYTES) {
      // A line longer than a chunk and not ended yet waits for its end (or for close).
      const cut = nextCut();
      if (!cut) break;
      const last = pending[cut.piece]!;
      const pieces = [...pending.slice(0, cut.piece), last.subarray(0, cut.at)];
      const bytes = pieces.reduce((n, p) => n + p.byteLength, 0);
      const rest = last.subarray(cut.at);
      pending = [...(rest.byteLength ? [rest] : []), ...pending.slice(cut.piece + 1)];
      pendingBytes -= bytes;
      await emit(pieces, bytes);
    }
    if (final && pendingBytes > 0) {
      const pieces = pending;
      const bytes = pendingBytes;
      pending = [];
      pendingBytes = 0;
      await emit(pieces, bytes);
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
      c.stream.end(BINARY_TRAILER);
      await c.done;
      await sql`INSERT INTO export_files (key, size) VALUES (${key}, ${size})`;
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

/**
 * Streams a file's chunks as the reader pulls, a few per query, as raw bytes (no decoding); a range
 * starts at the chunk holding its first byte and stops after the one holding its last.
 */
function fileReader(sql: Pg, key: string, range?: { start: number; end: number }): ReadableStream<Uint8Array> {
  let next = 0;
  let from = 0;
  let to = -1;
  return new ReadableStream<Uint8Array>({
    async start() {
      const [file] = await sql<{ size: number }[]>`SELECT size FROM export_files WHERE key = ${key}`;
      if (!file) throw new Error(`no export file ${key}`);
      from = range?.start ?? 0;
      to = Math.min(range?.end ?? file.size - 1, file.size - 1);
      const [first] = await sql<{ start: number }[]>`
        SELECT start FROM export_file_chunks WHERE key = ${key} AND start <= ${from} ORDER BY start DESC LIMIT 1`;
      next = first ? first.start : to + 1;
    },
    async pull(controller) {
      if (next > to) return controller.close();
      const rows = await sql`
        SELECT start, data FROM export_file_chunks WHERE key = ${key} AND start >= ${next} AND start <= ${to}
        ORDER BY start LIMIT ${CHUNKS_PER_READ}`.raw();
      if (!rows.length) return controller.error(new Error(`export file ${key} lost its chunk at ${next}`));
      for (const row of rows) {
        if (Number((row[0] as Buffer).toString()) !== next) return controller.error(new Error(`export file ${key} lost its chunk at ${next}`));
        const data = row[1] as Buffer;
        const begin = Math.max(0, from - next);
        const end = Math.min(data.byteLength, to - next + 1);
        controller.enqueue(new Uint8Array(data.buffer, data.byteOffset + begin, end - begin));
        next += data.byteLength;
      }
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
