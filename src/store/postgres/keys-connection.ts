import type { Pg } from './db.ts';

/** Milliseconds a statement on the search key connection may go unanswered (PostgresStoreOptions.keyDeadlineMs). */
export const KEY_DEADLINE_MS = 10_000;

/**
 * The connection that creates search keys (createPostgresKeys), with a deadline on its statements as
 * a safety net. Its statements are a few small reads and inserts, each committed at once and never
 * waiting for a lock longer than another such insert, so one unanswered for `deadlineMs` (10 s) is a
 * connection stuck, not a statement at work: every write meeting a new key would wait behind it,
 * holding its transaction open. Past the deadline the connection is closed (its statements fail as a
 * lost connection: the writes answer 503) and the next statement opens a new one. The driver defect
 * that could leave it stuck is fixed (patches/, ARCHITECTURE.md): this only bounds what a defect
 * not yet known would cost.
 */
export interface KeysConnection {
  /** Runs `statement` on the connection, which is replaced if it goes unanswered past the deadline. */
  run<T>(statement: (sql: Pg) => PromiseLike<T>): Promise<T>;
  /** Closes the connection (for the store's close). */
  close(): Promise<void>;
}

export function createKeysConnection(open: () => Pg, deadlineMs = KEY_DEADLINE_MS): KeysConnection {
  let current = open();
  return {
    async run(statement) {
      const sql = current;
      const deadline = setTimeout(() => {
        if (current === sql) current = open();
        // Ends its session and rejects every statement on it or queued for it (CONNECTION_DESTROYED).
        sql.end({ timeout: 0 }).catch(() => undefined);
      }, deadlineMs);
      try {
        return await statement(sql);
      } finally {
        clearTimeout(deadline);
      }
    },
    close: () => current.end({ timeout: 5 }),
  };
}
