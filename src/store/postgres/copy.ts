import { columnsOf, INDEX_TABLES, rowsOf } from '../index-tables.ts';
import type { KeyOf } from '../search-keys.ts';
import { scopedContent } from './write-sql.ts';
import type { VersionToWrite } from '../types.ts';
import type { Pg, PgTx } from './db.ts';
import { PIECE_CHARS, pieces, turn, utf8Length } from './text-pieces.ts';

/** COPY text format escapes (PostgreSQL COPY, "Text Format"): backslash and the row/column separators. */
const SPECIAL = /[\\\t\n\r]/;
const ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };

function field(s: string): string {
  return SPECIAL.test(s) ? s.replace(/[\\\t\n\r]/g, (c) => ESCAPES[c]!) : s;
}

/** Characters (text format) or bytes (binary format) per write to the COPY stream. */
const WRITE_SIZE = 1 << 16;

/** The pending COPY statement's failure, however postgres.js reports it. */
function copyFailure(query: object): Promise<never> {
  // postgres.js (3.4) resolves the statement with the stream once the server accepts the COPY. An error
  // the server raises after the client ended the stream reaches only the statement's `reject`, which
  // no longer settles anything, and the stream never finishes: hook it (test/store covers this path).
  const q = query as { reject: (err: unknown) => void };
  const failed = new Promise<never>((_, reject) => {
    const original = q.reject;
    q.reject = (err) => {
      original(err);
      reject(err);
    };
  });
  failed.catch(() => undefined);
  return failed;
}

export interface OpenCopy {
  stream: NodeJS.WritableStream;
  /** Settles when the server has the rows, or refused them. */
  done: Promise<void>;
}

/** Starts `COPY <target> FROM STDIN` (a static target, no values) on a pool or in a transaction. */
export async function openCopy(sql: Pg | PgTx, target: string, format: 'text' | 'binary' = 'text'): Promise<OpenCopy> {
  const query = sql.unsafe(`COPY ${target} FROM STDIN${format === 'binary' ? ' (FORMAT binary)' : ''}`);
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

/** Streams `rows` (COPY text lines, each ending in a newline, made as they are sent) into `COPY <target> FROM STDIN`. */
async function copyRows(tx: PgTx, target: string, rows: Iterable<string>): Promise<void> {
  const lines = rows[Symbol.iterator]();
  let next = lines.next();
  if (next.done) return;
  const { stream, done } = await openCopy(tx, target);
  // Lines are joined once per write: appending them one by one would build a rope that the write
  // then has to flatten.
  let part: string[] = [];
  let chars = 0;
  for (; !next.done; next = lines.next()) {
    part.push(next.value);
    chars += next.value.length;
    if (chars < WRITE_SIZE) continue;
    if (!stream.write(part.join(''))) await Promise.race([new Promise((resolve) => stream.once('drain', resolve)), done]);
    part = [];
    chars = 0;
  }
  stream.end(part.join(''));
  await done;
}

/** A row number per version: the pk and seq the rows are written with. */
export interface Numbered {
  v: VersionToWrite;
  pk: number;
  seq: number;
}

/**
 * COPY's binary format (PostgreSQL "COPY", Binary Format): the signature, no flags, no header
 * extension; each row a field count and its fields, each a length and the value in the type's binary
 * form (big-endian integers and IEEE doubles, text as UTF-8); -1 as the trailer.
 */
export const BINARY_HEADER = Buffer.concat([Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'), Buffer.alloc(8)]);
export const BINARY_TRAILER = Buffer.from([0xff, 0xff]);
const TWO_32 = 2 ** 32;

/**
 * Rows in COPY's binary format, encoded straight into buffers of WRITE_SIZE bytes and sent as each
 * fills: no value becomes text (numbers), is escaped or is joined into a line first, and the server
 * parses no numbers.
 */
class BinaryRows {
  private buf = Buffer.allocUnsafe(WRITE_SIZE);
  private at = 0;
  private full: Buffer[] = [];

  constructor(private readonly copy: OpenCopy) {
    this.bytes(BINARY_HEADER);
  }

  /** Starts a row of `fields` fields. */
  row(fields: number): void {
    this.room(2);
    this.at = this.buf.writeInt16BE(fields, this.at);
  }

  int4(n: number): void {
    this.field(4);
    this.at = this.buf.writeInt32BE(n, this.at);
  }

  /** A bigint: any integer a double holds exactly (|n| < 2^53), negative ones in two's complement. */
  int8(n: number): void {
    this.field(8);
    const high = Math.floor(n / TWO_32);
    this.at = this.buf.writeInt32BE(high, this.at);
    this.at = this.buf.writeUInt32BE(n - high * TWO_32, this.at);
  }

  /** A double; -0 as 0, as the other writers store it (they send numbers as text, and `String(-0)` is '0'). */
  float8(n: number): void {
    this.field(8);
    this.at = this.buf.writeDoubleBE(n === 0 ? 0 : n, this.at);
  }

  bool(b: boolean): void {
    this.field(1);
    this.buf[this.at++] = b ? 1 : 0;
  }

  text(s: string): void {
    // A UTF-16 unit takes at most 3 bytes of UTF-8 (a surrogate pair 4 for two units).
    this.room(4 + 3 * s.length);
    const n = this.buf.write(s, this.at + 4, 'utf8');
    this.buf.writeInt32BE(n, this.at);
    this.at += 4 + n;
  }

  /**
   * A text that may be large (a stored resource's): one of PIECE_CHARS characters or more is measured, then encoded
   * and sent a piece at a time, the event loop let turn between two (text-pieces.ts), where `text()` would encode it
   * whole in one synchronous stretch into one buffer of three bytes a character (a 50 MiB Binary's 67 Mi characters).
   */
  pacedText(s: string): void | Promise<void> {
    if (s.length < PIECE_CHARS) return this.text(s);
    return this.largeText(s);
  }

  private async largeText(s: string): Promise<void> {
    const bytes = await utf8Length(s);
    this.room(4);
    this.at = this.buf.writeInt32BE(bytes, this.at);
    for (const [at, end] of pieces(s)) {
      // The filled part of the buffer, then the piece: a fresh buffer after them, the sent ones left to the stream.
      this.full.push(this.buf.subarray(0, this.at), Buffer.from(s.slice(at, end), 'utf8'));
      this.buf = Buffer.allocUnsafe(WRITE_SIZE);
      this.at = 0;
      await this.flush();
      await turn();
    }
  }

  /** Sends the buffers filled so far, waiting while the stream asks to. */
  async flush(): Promise<void> {
    const { stream, done } = this.copy;
    for (const b of this.full.splice(0)) {
      if (!stream.write(b)) await Promise.race([new Promise((resolve) => stream.once('drain', resolve)), done]);
    }
  }

  /** Ends the COPY and waits for the server to have the rows. */
  async end(): Promise<void> {
    this.bytes(BINARY_TRAILER);
    this.full.push(this.buf.subarray(0, this.at));
    await this.flush();
    this.copy.stream.end();
    await this.copy.done;
  }

  /** Whether filled buffers wait to be sent. */
  get ready(): boolean {
    return this.full.length > 0;
  }

  private bytes(b: Buffer): void {
    this.room(b.byteLength);
    this.at += b.copy(this.buf, this.at);
  }

  /** Starts a field of `bytes` bytes: its length, with room for the value after it. */
  private field(bytes: number): void {
    this.room(4 + bytes);
    this.at = this.buf.writeInt32BE(bytes, this.at);
  }

  /** Makes room for `n` more bytes, the filled buffer set aside for sending. */
  private room(n: number): void {
    if (this.at + n <= this.buf.byteLength) return;
    if (this.at > 0) this.full.push(this.buf.subarray(0, this.at));
    this.buf = Buffer.allocUnsafe(Math.max(WRITE_SIZE, n));
    this.at = 0;
  }
}

/**
 * Streams `rows` into `COPY <target> FROM STDIN (FORMAT binary)`, each encoded by `encode` (a promise while it sends a
 * large text in pieces, BinaryRows.pacedText); nothing for none.
 */
async function copyBinary<T>(tx: PgTx, target: string, rows: Iterable<T>, encode: (w: BinaryRows, row: T) => void | Promise<void>): Promise<void> {
  let w: BinaryRows | undefined;
  for (const row of rows) {
    w ??= new BinaryRows(await openCopy(tx, target, 'binary'));
    const pending = encode(w, row);
    if (pending !== undefined) await pending;
    if (w.ready) await w.flush();
  }
  await w?.end();
}

/** Each index entry of `rows`' versions of `table`, with its version's row. */
function* entries<E>(rows: Numbered[], table: (v: VersionToWrite) => E[]): Generator<[Numbered, E]> {
  for (const r of rows) for (const e of table(r.v)) yield [r, e];
}

/**
 * Writes first versions with COPY: the resources rows with the given pk and seq, then their index
 * and compartment rows (`keyOf` gives each index row its key, already committed), in the binary
 * format but for the words (tsvector has no simple binary form). A resource that exists fails the
 * whole COPY (unique violation), so callers run this in a savepoint and fall back to an INSERT that
 * skips existing rows.
 */
export async function copyVersions(tx: PgTx, tenant: string, rows: Numbered[], keyOf: KeyOf): Promise<void> {
  const live = rows.filter((r) => !r.v.deleted);
  // The stored text last, as the one field that may be sent in pieces.
  await copyBinary(tx, 'resources (pk, tenant, type, id, version_id, last_updated, deleted, seq, method, content)', rows, (w, { v, pk, seq }) => {
    w.row(10);
    w.int8(pk);
    w.text(tenant);
    w.text(v.type);
    w.text(v.id);
    w.int4(v.versionId);
    w.int8(v.lastUpdated);
    w.bool(v.deleted);
    w.int8(seq);
    w.text(v.method);
    return w.pacedText(v.content);
  });
  for (const spec of INDEX_TABLES) {
    const columns = columnsOf(spec);
    await copyBinary(tx, `${spec.table} (res, k, ${columns.join(', ')})`, entries(live, (v) => rowsOf(v.index, spec)), (w, [{ v, pk }, e]) => {
      w.row(2 + columns.length);
      w.int8(pk);
      w.int4(keyOf(spec, v.type, e));
      for (const c of spec.text) w.text((e[c] as string | undefined) ?? '');
      for (const c of spec.num) w.float8(e[c] as number);
    });
  }
  await copyRows(tx, 'search_text (res, narrative, content)', lines(live, ({ v, pk }) =>
    v.index.text ? [`${pk}\t${field(v.index.text.narrative)}\t${field(scopedContent(tenant, v))}\n`] : [],
  ));
  await copyBinary(tx, 'compartments (res, tenant, type, patient)', entries(live, (v) => v.compartments), (w, [{ v, pk }, patient]) => {
    w.row(4);
    w.int8(pk);
    w.text(tenant);
    w.text(v.type);
    w.text(patient);
  });
}

function* lines(rows: Numbered[], of: (r: Numbered) => string[]): Generator<string> {
  for (const r of rows) yield* of(r);
}

/** `n` fresh values of the resources' pk sequence and of resource_seq, in one round trip. */
export async function reserveNumbers(tx: PgTx, n: number): Promise<{ pk: number; seq: number }[]> {
  // resources_pk_seq: the sequence behind resources.pk (BIGSERIAL) in migration 1.
  return tx<{ pk: number; seq: number }[]>`
    SELECT nextval('resources_pk_seq') AS pk, nextval('resource_seq') AS seq FROM generate_series(1, ${n})`;
}
