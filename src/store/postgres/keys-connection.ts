import type { Pg } from './db.ts';

/** Milliseconds the search key connection may go without answering while it has statements (PostgresStoreOptions.keyDeadlineMs). */
export const KEY_DEADLINE_MS = 10_000;

/**
 * The connection that creates search keys (createPostgresKeys), with a deadline as a safety net. Its
 * statements are a few small reads and inserts, each committed at once and never waiting for a lock
 * longer than another such insert, so a connection that has statements and answers none of them for
 * `deadlineMs` (10 s) is stuck, not at work: every write meeting a new key would wait behind it,
 * holding its transaction open. The deadline is the connection's, not each statement's: it runs while
 * any statement is unanswered and starts again at each answer, so statements queued behind a long one
 * (a bulk import's first batch meets thousands of new keys) are not counted from the time they were
 * queued. Past it the connection is closed (its statements fail as a lost connection: the writes
 * answer 503) and the next statement opens a new one. The driver defect that could leave it stuck is
 * fixed (patches/, ARCHITECTURE.md): this only bounds what a defect not yet known would cost.
 */
export interface KeysConnection {
  /** Runs `statement` on the connection, which is replaced if it answers nothing past the deadline. */
  run<T>(statement: (sql: Pg) => PromiseLike<T>): Promise<T>;
  /** Closes the connection (for the store's close). */
  close(): Promise<void>;
}

/** One connection with its statements not yet answered, and the deadline that runs while there are any. */
interface Session {
  sql: Pg;
  unanswered: number;
  deadline?: ReturnType<typeof setTimeout>;
}

export function createKeysConnection(open: () => Pg, deadlineMs = KEY_DEADLINE_MS): KeysConnection {
  const session = (): Session => ({ sql: open(), unanswered: 0 });
  let current = session();
  /** (Re)starts `s`'s deadline: past it, `s` is ended and the next statement opens a new session. */
  const watch = (s: Session) => {
    clearTimeout(s.deadline);
    s.deadline = setTimeout(() => {
      if (current === s) current = session();
      // Ends its session and rejects every statement on it or queued for it (CONNECTION_DESTROYED).
      s.sql.end({ timeout: 0 }).catch(() => undefined);
    }, deadlineMs);
  };
  return {
    async run(statement) {
      const s = current;
      if (s.unanswered++ === 0) watch(s);
      try {
        return await statement(s.sql);
      } finally {
        // An answer, an error included, shows the connection at work: the deadline starts again.
        if (--s.unanswered === 0) clearTimeout(s.deadline);
        else watch(s);
      }
    },
    close: () => {
      clearTimeout(current.deadline);
      return current.sql.end({ timeout: 5 });
    },
  };
}
