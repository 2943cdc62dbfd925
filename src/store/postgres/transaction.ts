import postgres from 'postgres';
import type { Pg, PgTx } from './db.ts';

/**
 * `sql.begin` without its hazard after a lost connection (postgres.js 3.4.9, upstream
 * porsager/postgres#1216, PR #1215; #1186 is its queued-query half). When the transaction's
 * connection closes, `begin` rejects but the callback goes on: its next statements, and the ROLLBACK
 * or COMMIT the driver sends when the callback settles, go straight to that connection object, which
 * now has no socket. The driver keeps them, and the first one takes the place of a statement of the
 * next session the pool opens on that object: that session's caller then waits for an answer that
 * never comes (a write begun as the database returned hung for good; a query parked as the new
 * session's first could even take another transaction's result, or commit it).
 *
 * Here the callback gets the transaction through a guard. The guard learns that the connection is
 * gone synchronously, from the driver rejecting one of its statements with a connection error (or
 * from `begin` settling, when no statement was under way); from then on it refuses the
 * transaction's statements before they reach the driver, settles those the driver queued and will
 * never send, answers the caller with the connection error (an outage: 503), and leaves the
 * callback's own promise pending, so the driver sends no ROLLBACK or COMMIT over the lost connection
 * (the server rolled the transaction back when the session ended). A healthy transaction pays three
 * closures per statement and a lookup in a Set: nothing next to a round trip.
 */
export function transaction<T>(sql: Pg, fn: (tx: PgTx) => T | Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const life = createLife(reject);
    sql
      .begin((raw) => guardedCallback(life, () => fn(guard(raw as PgTx, life))))
      .then(
        (value) => {
          life.end(new Error('the transaction is over'));
          resolve(value as T);
        },
        (err: unknown) => {
          life.end(err);
          reject(err);
        },
      );
  });
}

interface Life {
  /** Set once the connection is lost or the transaction ended: no statement may reach the driver. */
  lost: unknown;
  /** Statements handed to the driver and not settled yet. */
  pending: Set<DriverQuery>;
  /** The connection is gone: refuse, settle what is pending, answer the caller. */
  die(err: unknown): void;
  /** `begin` settled: later statements on this handle are refused. */
  end(err: unknown): void;
}

function createLife(rejectCaller: (err: unknown) => void): Life {
  const life: Life = {
    lost: undefined,
    pending: new Set(),
    die(err) {
      if (life.lost !== undefined) return;
      life.end(err);
      rejectCaller(err);
    },
    end(err) {
      if (life.lost !== undefined) return;
      life.lost = err;
      for (const q of [...life.pending]) q.reject(err);
    },
  };
  return life;
}

/**
 * Runs the callback; its outcome reaches `begin` (COMMIT or ROLLBACK) only while the connection is
 * there. After a loss it never settles: nothing references it then, and it is collected.
 */
function guardedCallback<T>(life: Life, run: () => T | Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const outcome = (() => {
      try {
        return Promise.resolve(run());
      } catch (err) {
        return Promise.reject(err);
      }
    })();
    outcome.then(
      (value) => {
        if (life.lost === undefined) resolve(value);
      },
      (err: unknown) => {
        if (life.lost === undefined) reject(err);
      },
    );
  });
}

/** The driver's Query, as far as the guard needs it (postgres.js src/query.js). */
interface DriverQuery {
  handler: ((q: DriverQuery) => void) & { debug?: unknown };
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

/** The transaction handle the callback gets: statements made from it (and its savepoints) are watched. */
function guard(raw: PgTx, life: Life): PgTx {
  return new Proxy(raw, {
    apply(target, self, args: unknown[]) {
      return watch(Reflect.apply(target, self, args), life);
    },
    get(target, prop, receiver) {
      if (prop === 'unsafe') return (...args: Parameters<PgTx['unsafe']>) => watch(target.unsafe(...args), life);
      if (prop === 'savepoint') return savepoint(target, life);
      return Reflect.get(target, prop, receiver);
    },
  });
}

function savepoint(raw: PgTx, life: Life): PgTx['savepoint'] {
  return ((fn: (sp: PgTx) => unknown) => {
    if (life.lost !== undefined) return Promise.reject(life.lost);
    // The driver's own SAVEPOINT statement is not watched: its connection error is noticed here,
    // before the caller resumes.
    return raw.savepoint((sp) => guardedCallback(life, () => fn(guard(sp as PgTx, life)))).catch((err: unknown) => {
      if (isConnectionLost(err)) life.die(err);
      throw err;
    });
  }) as PgTx['savepoint'];
}

/**
 * A statement (a Query) is refused once the connection is lost, when the driver would run it; one
 * the driver rejects with a connection error marks the loss at once. Identifiers and helpers
 * (`tx(rows, ...)`) pass as they are.
 */
function watch<Q>(made: Q, life: Life): Q {
  if (!(made instanceof Promise)) return made;
  const q = made as unknown as DriverQuery;
  const { handler, resolve, reject } = q;
  q.handler = Object.assign((x: DriverQuery) => {
    if (life.lost !== undefined) return x.reject(life.lost);
    life.pending.add(x);
    handler(x);
  }, { debug: handler.debug });
  q.resolve = (value) => {
    life.pending.delete(q);
    resolve(value);
  };
  q.reject = (err) => {
    life.pending.delete(q);
    if (isConnectionLost(err)) life.die(err);
    reject(err);
  };
  return made;
}

/** Driver and socket errors of a connection that is gone; a FATAL or PANIC error ends the session too. */
const LOST = new Set(['CONNECTION_CLOSED', 'CONNECTION_DESTROYED', 'CONNECTION_ENDED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT']);

function isConnectionLost(err: unknown): boolean {
  if (err instanceof postgres.PostgresError) return err.severity === 'FATAL' || err.severity === 'PANIC';
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && LOST.has(code);
}
