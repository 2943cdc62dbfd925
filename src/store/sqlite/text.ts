import type { Database } from 'bun:sqlite';
import { tryBeginImmediate, type createMutex } from './db.ts';
import { createPacer, UNPACED, type Pacer } from './pacer.ts';

/**
 * Full-text words on SQLite. FTS5 writes a segment and rewrites its structure record on every
 * transaction that touches it: about 0.2 ms for a transaction of one row (four times the cost of the
 * rest of a create), against 2 ms for a thousand rows. So the words of small transactions go to
 * `search_text_recent` (a plain table, searched by LIKE on its space-separated words), and the
 * resources they change or delete are listed in `search_text_stale` (their FTS5 rows no longer count)
 * instead of being deleted from FTS5 one by one. The mover below brings both into FTS5 in one
 * transaction once `moveAt` rows wait (1,000), or `moveAfterMs` after the first (1 s). Bulk writes (an
 * import's batches, a reindex, BULK_TEXT_ROWS new resources or more at once) write FTS5 directly. A resource's words are always in exactly one place that counts: its
 * recent row if it has one, else its FTS5 row unless it is stale.
 */

/** A write of at least this many new resources' words goes to FTS5 directly. */
export const BULK_TEXT_ROWS = 64;

/**
 * The `index_state` row that marks the FTS5 index's merge as due: a reindex writes with FTS5's eager
 * merging of deleted rows off (writer.ts replaceIndex), and `mergeText` runs one `optimize` after it.
 */
export const TEXT_MERGE_DUE = 'text_merge_due';

/**
 * Merges the FTS5 index into one segment, dropping the rows deleted meanwhile, when a reindex marked it
 * due (TEXT_MERGE_DUE); nothing otherwise. `write` runs its callback on the writer in a transaction.
 */
export async function mergeText(reader: Database, writer: Database, write: (fn: () => void) => Promise<void>): Promise<void> {
  const due = reader.query<{ value: number }, []>(`SELECT value FROM index_state WHERE name = '${TEXT_MERGE_DUE}'`).get();
  if (!due) return;
  await write(() => {
    writer.exec("INSERT INTO search_text (search_text) VALUES ('optimize')");
    writer.exec(`DELETE FROM index_state WHERE name = '${TEXT_MERGE_DUE}'`);
  });
}

export interface TextMoverOptions {
  /** Rows waiting (recent and stale) that trigger a move at once. */
  moveAt?: number;
  /** The longest a row waits for its move, in ms. */
  moveAfterMs?: number;
}

/**
 * Rows moved per statement. A move after a large import batch has tens of thousands (each updated resource's
 * FTS5 row is stale): as four statements over all of them it held the thread 120-260 ms per statement. Cut
 * into statements of this many rows (by `res`, the tables' primary key) with the pacer between them, the event
 * loop turns every slice, as during any paced write.
 */
export const MOVE_CHUNK_ROWS = 500;

export interface TextMover {
  /** `n` rows were committed to recent or stale. */
  noted(n: number): void;
}

/**
 * Moves recent and stale rows into FTS5 (see above), through the writer connection's queue, in one transaction
 * of statements of MOVE_CHUNK_ROWS rows, letting the event loop turn between them once a slice of `sliceMs` is
 * spent (pacer.ts; Infinity, for a writer that reads share, never: it must not be read mid-transaction). A move
 * that finds the database busy is tried again after `moveAfterMs`, and one that fails (the database gone) is
 * left for the next; the rows stay searchable where they are.
 */
export function createTextMover(writer: Database, serial: ReturnType<typeof createMutex>, options: TextMoverOptions = {}, sliceMs = Infinity): TextMover {
  const moveAt = options.moveAt ?? 1000;
  const moveAfterMs = options.moveAfterMs ?? 1000;
  let waiting = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let queued = false;
  // Prepared at the first move (a store opened before the migration that creates the tables has none yet).
  let sql: ReturnType<typeof statements> | undefined;
  function statements() {
    const last = (table: string) => writer.query<{ res: number }, [number]>(`SELECT res FROM ${table} ORDER BY res LIMIT 1 OFFSET ?`);
    return {
      lastStale: last('search_text_stale'),
      lastRecent: last('search_text_recent'),
      dropStale: writer.query<never, [number]>('DELETE FROM search_text WHERE rowid IN (SELECT res FROM search_text_stale WHERE res <= ?)'),
      clearStale: writer.query<never, [number]>('DELETE FROM search_text_stale WHERE res <= ?'),
      addRecent: writer.query<never, [number]>('INSERT INTO search_text (rowid, narrative, content, scope) SELECT res, narrative, content, scope FROM search_text_recent WHERE res <= ?'),
      clearRecent: writer.query<never, [number]>('DELETE FROM search_text_recent WHERE res <= ?'),
    };
  }

  /**
   * Runs `chunk` with the bound of each MOVE_CHUNK_ROWS rows of `last`'s table in turn (the rest at the end), pacing
   * between them.
   */
  async function inChunks(pacer: Pacer, last: { get(offset: number): { res: number } | null }, chunk: (upTo: number) => void): Promise<void> {
    for (;;) {
      const bound = last.get(MOVE_CHUNK_ROWS - 1)?.res;
      chunk(bound ?? Number.MAX_SAFE_INTEGER);
      if (bound === undefined) return;
      const turn = pacer.pace();
      if (turn) await turn;
    }
  }

  function move(): void {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (queued) return;
    queued = true;
    void serial(async () => {
      queued = false;
      try {
        // The lock is taken only if free at once (waiting for it in SQLite's busy handler would block
        // the thread); busy, the move is tried again after moveAfterMs, the rows searchable where they are.
        if (!tryBeginImmediate(writer)) return later();
        sql ??= statements();
        const q = sql;
        const pacer = Number.isFinite(sliceMs) ? createPacer(sliceMs) : UNPACED;
        // Every stale FTS5 row goes before any recent row comes in: a resource in both has its new words under
        // the same rowid as its old ones.
        await inChunks(pacer, q.lastStale, (upTo) => {
          q.dropStale.run(upTo);
          q.clearStale.run(upTo);
        });
        await inChunks(pacer, q.lastRecent, (upTo) => {
          q.addRecent.run(upTo);
          q.clearRecent.run(upTo);
        });
        writer.exec('COMMIT');
        waiting = 0;
      } catch {
        try {
          if (writer.inTransaction) writer.exec('ROLLBACK');
        } catch {
          // The connection is closed or the transaction already ended.
        }
      }
    });
  }

  function later(): void {
    if (timer) return;
    timer = setTimeout(move, moveAfterMs);
    timer.unref?.();
  }

  function noted(n: number): void {
    if (n <= 0) return;
    waiting += n;
    if (waiting >= moveAt) move();
    else later();
  }

  // Rows another process (an import that ended) left behind are moved too.
  try {
    const left = writer.query<{ n: number }, []>('SELECT EXISTS (SELECT 1 FROM search_text_recent) OR EXISTS (SELECT 1 FROM search_text_stale) AS n').get();
    if (left?.n) noted(1);
  } catch {
    // Before the migration that creates the tables: nothing to move.
  }
  return { noted };
}
