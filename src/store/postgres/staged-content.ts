import type { Writable } from 'node:stream';
import type { VersionToWrite } from '../types.ts';
import { BINARY_HEADER, BINARY_TRAILER, openCopy, type OpenCopy } from './copy.ts';
import type { PgTx } from './db.ts';
import { pieces, turn, utf8Length } from './text-pieces.ts';

/**
 * Stored texts of at least this many characters go to the server before their statement, in pieces (stageContents):
 * sent as a parameter, a 50 MiB Binary's 67 Mi characters were escaped into the statement's `text[]`, measured, copied
 * and joined into one message in one synchronous stretch (0.2-0.5 s without a turn of the event loop).
 */
export const STAGED_CHARS = 1 << 20;

/** The transaction's table of staged texts (PostgreSQL "CREATE TABLE", TEMPORARY, ON COMMIT DROP): gone with the transaction. */
const TABLE_NAME = 'cinder_staged_content';
export const STAGED_TABLE = `pg_temp.${TABLE_NAME}`;

/** The staged texts of one statement: each large version's key in STAGED_TABLE, 0 for a text sent in the statement. */
export type Staged = (v: VersionToWrite) => number;

/** Writes `b` to the COPY stream, waiting while it asks to (or for the COPY's failure). */
async function send(copy: OpenCopy, b: Buffer): Promise<void> {
  if (!copy.stream.write(b)) await Promise.race([new Promise((resolve) => copy.stream.once('drain', resolve)), copy.done]);
}

/**
 * Sends the texts of `vs` of STAGED_CHARS characters or more into STAGED_TABLE with `COPY ... FROM STDIN (FORMAT binary)`,
 * a piece at a time with a turn of the event loop between two pieces (text-pieces.ts; their UTF-8 length first, by the same pieces), and
 * answers each one's key there; the statement that writes them reads them from the table (stagedText), so none is escaped
 * into it. Versions with no such text: nothing is sent, and undefined (the statement as it always was). `next` numbers
 * keys within the transaction.
 */
export async function stageContents(tx: PgTx, vs: readonly VersionToWrite[], next: () => number): Promise<Staged | undefined> {
  const large = vs.filter((v) => v.content.length >= STAGED_CHARS);
  if (!large.length) return undefined;
  // Static DDL, no values; a second large write of the transaction finds the table made (IF NOT EXISTS: a notice, ignored).
  await tx.unsafe(`CREATE TEMPORARY TABLE IF NOT EXISTS ${TABLE_NAME} (key int PRIMARY KEY, content text NOT NULL) ON COMMIT DROP`);
  const keys = new Map<VersionToWrite, number>();
  const copy = await openCopy(tx, `${STAGED_TABLE} (key, content)`, 'binary');
  try {
    await send(copy, BINARY_HEADER);
    for (const v of large) {
      const bytes = await utf8Length(v.content);
      const key = next();
      const head = Buffer.allocUnsafe(14);
      head.writeInt16BE(2, 0);
      head.writeInt32BE(4, 2);
      head.writeInt32BE(key, 6);
      head.writeInt32BE(bytes, 10);
      await send(copy, head);
      for (const [at, end] of pieces(v.content)) {
        await send(copy, Buffer.from(v.content.slice(at, end), 'utf8'));
        await turn();
      }
      keys.set(v, key);
    }
    copy.stream.end(BINARY_TRAILER);
    await copy.done;
  } catch (err) {
    // postgres.js ends a destroyed COPY with CopyFail: the server drops what it had of it.
    (copy.stream as Writable).destroy(err instanceof Error ? err : new Error(String(err)));
    await copy.done.catch(() => undefined);
    throw err;
  }
  return (v) => keys.get(v) ?? 0;
}
