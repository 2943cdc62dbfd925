/**
 * The search key connection's deadline (src/store/postgres/keys-connection.ts) on a real PostgreSQL:
 * it is the connection's, running while a statement is unanswered and starting again at each answer.
 * Statements queued behind a long one are not counted from the time they were queued; a connection
 * that answers nothing past the deadline is ended, and the next statement runs on a new one.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { connectForKeys, type Pg } from '../../src/store/postgres/db.ts';
import { createKeysConnection } from '../../src/store/postgres/keys-connection.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = (await storeTargets()).filter((t) => t.kind === 'postgres');
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const DEADLINE_MS = 2_000;
/** A statement that takes `seconds` and answers the backend's pid. */
const sleep = (seconds: number) => (sql: Pg) =>
  sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid FROM pg_sleep(${seconds})`.then((rows) => rows[0]!.pid);

for (const target of targets) {
  describe('the search key connection on PostgreSQL', () => {
    test('statements queued behind each other, each well within the deadline, all answer on one session though together they take longer', async () => {
      const keys = createKeysConnection(() => connectForKeys(target.url), DEADLINE_MS);
      try {
        // Three statements of 1.2 s on the one connection: the last is answered 3.6 s after it was
        // queued, past the 2 s deadline, but never 2 s after an answer.
        const pids = await Promise.all([keys.run(sleep(1.2)), keys.run(sleep(1.2)), keys.run(sleep(1.2))]);
        expect(new Set(pids).size).toBe(1);
        expect(await keys.run(sleep(0))).toBe(pids[0]!);
      } finally {
        await keys.close();
      }
    }, 30_000);

    test('a connection answering nothing past the deadline is ended: its statements fail, and the next one runs on a new session', async () => {
      const keys = createKeysConnection(() => connectForKeys(target.url), DEADLINE_MS);
      try {
        const first = await keys.run(sleep(0));
        const stuck = keys.run(sleep(6)).then(() => 'answered', (e: Error) => e);
        const queued = keys.run(sleep(0)).then(() => 'answered', (e: Error) => e);
        for (const outcome of await Promise.all([stuck, queued])) {
          expect(outcome).toBeInstanceOf(Error);
          expect((outcome as Error & { code?: string }).code).toBe('CONNECTION_DESTROYED');
        }
        const next = await keys.run(sleep(0));
        expect(next).not.toBe(first);
      } finally {
        await keys.close();
      }
    }, 30_000);
  });
}
