import type { Database } from 'bun:sqlite';
import { tryBeginImmediate, type createMutex } from './db.ts';

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

export interface TextMover {
  /** `n` rows were committed to recent or stale. */
  noted(n: number): void;
}

/**
 * Moves recent and stale rows into FTS5 (see above), through the writer connection's queue. A move
 * that finds the database busy is tried again after `moveAfterMs`, and one that fails (the database
 * gone) is left for the next; the rows stay searchable where they are.
 */
export function createTextMover(writer: Database, serial: ReturnType<typeof createMutex>, options: TextMoverOptions = {}): TextMover {
  const moveAt = options.moveAt ?? 1000;
  const moveAfterMs = options.moveAfterMs ?? 1000;
  let waiting = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let queued = false;

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
        writer.exec('DELETE FROM search_text WHERE rowid IN (SELECT res FROM search_text_stale)');
        writer.exec('DELETE FROM search_text_stale');
        writer.exec('INSERT INTO search_text (rowid, narrative, content, scope) SELECT res, narrative, content, scope FROM search_text_recent');
        writer.exec('DELETE FROM search_text_recent');
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
