/**
 * The postgres.js patch (patches/) on a pool whose sessions are closed during start-up (a proxy shedding
 * them, test/helpers/pg-fault-proxy.ts): the query waiting for a connection is rejected as a lost
 * connection once start-ups have failed for `connect_timeout`, and a pool ended meanwhile makes no
 * attempt after its end (a connection waiting out its backoff would otherwise open a session later,
 * which nothing would ever close). The delays themselves: reconnectBackoff in src/store/postgres/db.ts.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { connect, isPostgresOutage, reconnectBackoff } from '../../src/store/postgres/db.ts';
import { startPgFaultProxy } from '../helpers/pg-fault-proxy.ts';
import { adminConnection, PG_ADMIN_URL } from '../helpers/stores.ts';

let admin: postgres.Sql | undefined;
admin = (await adminConnection()) ?? undefined;
const reachable = admin !== undefined;
afterAll(() => admin?.end());

describe('reconnectBackoff', () => {
  test('doubles from 50 ms up to half a second, each delay drawn between half its step and the step', () => {
    expect(reconnectBackoff(0, () => 0)).toBeCloseTo(0.025);
    expect(reconnectBackoff(0, () => 1)).toBeCloseTo(0.05);
    expect(reconnectBackoff(2, () => 0.5)).toBeCloseTo(0.15);
    for (const attempt of [4, 5, 20, 1000]) {
      expect(reconnectBackoff(attempt, () => 0)).toBeCloseTo(0.25);
      expect(reconnectBackoff(attempt, () => 1)).toBeCloseTo(0.5);
    }
  });
});

describe.skipIf(!reachable)('a postgres.js pool whose sessions are closed during start-up', () => {
  const target = new URL(PG_ADMIN_URL);
  const viaProxy = (port: number) => `postgres://${target.username}@127.0.0.1:${port}${target.pathname}?connect_timeout=1`;

  test('the waiting query is rejected as a lost connection within about connect_timeout, after attempts spaced by the backoff', async () => {
    const proxy = await startPgFaultProxy(Number(target.port || 5432));
    const sql = connect(viaProxy(proxy.port), { max: 2 });
    try {
      proxy.shed(true);
      // Not for ever: rejected, not 'still waiting' after 10 s. The work, not the time (bench/postgres-start-failures.ts
      // times it): one connection, about a second of attempts each at least 25 ms after the last (thousands before),
      // the last beginning within connect_timeout of the first failure.
      const err = await Promise.race([sql`SELECT 1`.then(() => null, (e: unknown) => e), Bun.sleep(10_000).then(() => 'still waiting')]);
      expect((err as { code?: string } | null)?.code).toBe('CONNECTION_CLOSED');
      expect(isPostgresOutage(err)).toBe(true);
      expect(proxy.opened).toBeGreaterThan(2);
      expect(proxy.opened).toBeLessThan(40);
      proxy.shed(false);
      expect([...(await sql`SELECT 2 AS two`)]).toEqual([{ two: 2 }]);
    } finally {
      await sql.end({ timeout: 1 });
      proxy.stop();
    }
  }, 30_000);

  test('sessions closed at their first statement, right after the server said it was ready: the statement is rejected as a lost connection, not retried', async () => {
    // The pool sends nothing of its own after start-up (the array types are declared, not fetched: array-types.ts),
    // so a session closed there loses the caller's statement, which may have run: it is rejected, once.
    const proxy = await startPgFaultProxy(Number(target.port || 5432));
    const sql = connect(viaProxy(proxy.port), { max: 2 });
    try {
      proxy.shed(true, 'SELECT 1');
      const err = await Promise.race([sql`SELECT 1`.then(() => null, (e: unknown) => e), Bun.sleep(10_000).then(() => 'still waiting')]);
      expect((err as { code?: string } | null)?.code).toBe('CONNECTION_CLOSED');
      expect(isPostgresOutage(err)).toBe(true);
      expect(proxy.shedCount).toBe(1);
      proxy.shed(false);
      expect([...(await sql`SELECT 2 AS two`)]).toEqual([{ two: 2 }]);
    } finally {
      await sql.end({ timeout: 1 });
      proxy.stop();
    }
  }, 30_000);

  test('a start-up closed once, longer than connect_timeout after the pool last failed, is tried again: a past failing period is over', async () => {
    const proxy = await startPgFaultProxy(Number(target.port || 5432));
    const sql = connect(viaProxy(proxy.port), { max: 2 });
    try {
      proxy.shed(true);
      const err = await sql`SELECT 1`.then(() => null, (e: unknown) => e);
      expect((err as { code?: string } | null)?.code).toBe('CONNECTION_CLOSED');
      proxy.shed(false);
      // No start-up of the pool fails (none is made) for longer than connect_timeout; then one session is shed.
      await Bun.sleep(1500);
      proxy.shedNext(1);
      const shedBefore = proxy.shedCount;
      const rows = await Promise.race([sql`SELECT 2 AS two`.then((r) => [...r], (e: unknown) => e), Bun.sleep(10_000).then(() => 'still waiting')]);
      expect(rows).toEqual([{ two: 2 }]);
      expect(proxy.shedCount).toBe(shedBefore + 1);
    } finally {
      await sql.end({ timeout: 1 });
      proxy.stop();
    }
  }, 30_000);

  test('a list of hosts that all refuse: the query is rejected within about connect_timeout, not tried again for ever; a host that answers is still reached', async () => {
    const refusing = () => {
      const l = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
      const port = l.port;
      l.stop(true);
      return port;
    };
    const [a, b] = [refusing(), refusing()];
    const hosts = (x: number, y: number) => `postgres://${target.username}@127.0.0.1:${x},127.0.0.1:${y}${target.pathname}?connect_timeout=1`;
    const sql = connect(hosts(a, b), { max: 2 });
    const failover = connect(hosts(a, Number(target.port || 5432)), { max: 2 });
    try {
      // Rejected, not 'still waiting' after 10 s: not tried again for ever (bench/postgres-start-failures.ts times it).
      const err = await Promise.race([sql`SELECT 1`.then(() => null, (e: unknown) => e), Bun.sleep(10_000).then(() => 'still waiting')]);
      expect((err as { code?: string } | null)?.code).toBe('ECONNREFUSED');
      expect(isPostgresOutage(err)).toBe(true);
      // The first host refuses, the second answers: the query runs there, at once.
      const rows = await Promise.race([failover`SELECT 2 AS two`.then((r) => [...r], (e: unknown) => e), Bun.sleep(10_000).then(() => 'still waiting')]);
      expect(rows).toEqual([{ two: 2 }]);
    } finally {
      await Promise.all([sql.end({ timeout: 0 }), failover.end({ timeout: 1 })]);
    }
  }, 30_000);

  test('a list of hosts whose start-ups have failed for connect_timeout: a query still tries the hosts after the one that refuses', async () => {
    const l = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
    const refusing = l.port;
    l.stop(true);
    const proxy = await startPgFaultProxy(Number(target.port || 5432));
    const sql = connect(`postgres://${target.username}@127.0.0.1:${refusing},127.0.0.1:${proxy.port}${target.pathname}?connect_timeout=1`, { max: 1 });
    try {
      proxy.shed(true);
      const err = await sql`SELECT 1`.then(() => null, (e: unknown) => e);
      expect(isPostgresOutage(err)).toBe(true);
      // The failing period goes on (the last failure just now): the next query meets the refusing host
      // first, then the one that lets sessions through again.
      proxy.shed(false);
      const rows = await Promise.race([sql`SELECT 2 AS two`.then((r) => [...r], (e: unknown) => e), Bun.sleep(10_000).then(() => 'still waiting')]);
      expect(rows).toEqual([{ two: 2 }]);
    } finally {
      await sql.end({ timeout: 1 });
      proxy.stop();
    }
  }, 30_000);

  test('a pool ended while a connection waits out its backoff makes no attempt after its end', async () => {
    const proxy = await startPgFaultProxy(Number(target.port || 5432));
    const sql = connect(viaProxy(proxy.port), { max: 2 });
    try {
      proxy.shed(true);
      const waiting = sql`SELECT 1`.then(() => null, (e: unknown) => e);
      await Bun.sleep(400);
      await sql.end({ timeout: 0 });
      expect(await waiting).not.toBeNull();
      const attempts = proxy.opened;
      proxy.shed(false);
      await Bun.sleep(1000);
      expect(proxy.opened).toBe(attempts);
    } finally {
      proxy.stop();
    }
  }, 30_000);
});
