/**
 * How long a query waits on a postgres.js pool (with Cinder's patch, patches/) whose start-ups fail, before it is
 * rejected: the time test/store/postgres-startup-backoff.test.ts no longer asserts (it counts the attempts, and
 * bounds the wait by a race). Two cases, N rounds each (default 5), with `connect_timeout=1`:
 *
 * - sessions closed during start-up by a proxy (test/helpers/pg-fault-proxy.ts): ms until the rejection, and the
 *   sessions the proxy opened;
 * - two hosts that refuse connections: ms until the rejection.
 *
 *   bun bench/postgres-start-failures.ts [--rounds N]
 *
 * Needs the PostgreSQL of the tests (CINDER_TEST_PG or 127.0.0.1:5432, user postgres, db test).
 */
import { parseArgs } from 'node:util';
import { connect } from '../src/store/postgres/db.ts';
import { startPgFaultProxy } from '../test/helpers/pg-fault-proxy.ts';
import { PG_ADMIN_URL } from '../test/helpers/stores.ts';
import { median } from './lib/stats.ts';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '5' } } });
const ROUNDS = Number(values.rounds);
const target = new URL(PG_ADMIN_URL);
const url = (hosts: string) => `postgres://${target.username}@${hosts}${target.pathname}?connect_timeout=1`;

/** ms until `query` settles (rejected, as these are). */
async function waited(query: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await query().catch(() => undefined);
  return performance.now() - started;
}

const shed: number[] = [];
const opened: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  const proxy = await startPgFaultProxy(Number(target.port || 5432));
  const sql = connect(url(`127.0.0.1:${proxy.port}`), { max: 2 });
  proxy.shed(true);
  shed.push(await waited(() => sql`SELECT 1`));
  opened.push(proxy.opened);
  await sql.end({ timeout: 1 });
  proxy.stop();
}
console.log(`sessions closed during start-up: median ${median(shed).toFixed(0)} ms (${shed.map((x) => x.toFixed(0)).join(', ')}), sessions opened ${opened.join(', ')}`);

const refusing = () => {
  const l = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
  const port = l.port;
  l.stop(true);
  return port;
};
const refused: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  const sql = connect(url(`127.0.0.1:${refusing()},127.0.0.1:${refusing()}`), { max: 2 });
  refused.push(await waited(() => sql`SELECT 1`));
  await sql.end({ timeout: 0 });
}
console.log(`two hosts that refuse: median ${median(refused).toFixed(0)} ms (${refused.map((x) => x.toFixed(0)).join(', ')})`);
