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
import { PG_ADMIN_URL } from '../helpers/stores.ts';

let admin: postgres.Sql | undefined;
const reachable = await (async () => {
  const probe = postgres(PG_ADMIN_URL, { max: 1, connect_timeout: 5, onnotice: () => undefined });
  try {
    await probe`SELECT 1`;
    admin = probe;
    return true;
  } catch {
    await probe.end({ timeout: 1 });
    return false;
  }
})();
if (!reachable && process.env.CI === 'true') throw new Error(`PostgreSQL unreachable at ${PG_ADMIN_URL} under CI=true`);
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
      const started = performance.now();
      const err = await Promise.race([sql`SELECT 1`.then(() => null, (e: unknown) => e), Bun.sleep(10_000).then(() => 'still waiting')]);
      const waited = performance.now() - started;
      expect((err as { code?: string } | null)?.code).toBe('CONNECTION_CLOSED');
      expect(isPostgresOutage(err)).toBe(true);
      // Not for ever: the last attempt begins within connect_timeout of the first failure.
      expect(waited).toBeLessThan(5000);
      // One connection, about a second of attempts each at least 25 ms after the last (thousands before).
      expect(proxy.opened).toBeGreaterThan(2);
      expect(proxy.opened).toBeLessThan(40);
      proxy.shed(false);
      expect([...(await sql`SELECT 2 AS two`)]).toEqual([{ two: 2 }]);
    } finally {
      await sql.end({ timeout: 1 });
      proxy.stop();
    }
  }, 30_000);

  test('sessions closed as they fetch the array types, after the server said it was ready: rejected within about connect_timeout too', async () => {
    const proxy = await startPgFaultProxy(Number(target.port || 5432));
    const sql = connect(viaProxy(proxy.port), { max: 2 });
    try {
      proxy.shed(true, 'typcategory');
      const err = await Promise.race([sql`SELECT 1`.then(() => null, (e: unknown) => e), Bun.sleep(10_000).then(() => 'still waiting')]);
      expect((err as { code?: string } | null)?.code).toBe('CONNECTION_CLOSED');
      expect(proxy.shedCount).toBeGreaterThan(1);
      expect(proxy.opened).toBeLessThan(40);
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
