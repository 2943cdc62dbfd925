/**
 * postgres.js 3.4.9 takes every listener off the socket of a connection that closed. Should that socket
 * still report an error (a late `read ECONNRESET` from node:net), nothing would listen: an EventEmitter
 * throws an unheard 'error', here from an I/O callback, so it would be an uncaught exception, which ends
 * `cinder serve` (exit 70, src/cli/crash-policy.ts). The patch (patches/) leaves a listener on the
 * dropped socket that ignores it. (The late error is emitted by hand: real ones depend on timing.)
 */
import { afterAll, describe, expect, test } from 'bun:test';
import net from 'node:net';
import postgres from 'postgres';
import { PG_ADMIN_URL } from '../helpers/stores.ts';

const target = new URL(PG_ADMIN_URL);
const reachable = await new Promise<boolean>((resolve) => {
  const probe = net.connect(Number(target.port || 5432), target.hostname);
  probe.once('connect', () => (probe.destroy(), resolve(true)));
  probe.once('error', () => resolve(false));
});
if (!reachable && process.env.CI === 'true') throw new Error(`PostgreSQL unreachable at ${PG_ADMIN_URL} under CI=true`);

const sockets: net.Socket[] = [];
// `socket` (a function giving the connection's socket) is a postgres.js option its types leave out.
const options = {
  max: 1,
  onnotice: () => undefined,
  // The driver's own kind of socket, kept here so that the test can close it and speak for it.
  socket: () => new Promise<net.Socket>((resolve, reject) => {
    const s = net.connect(Number(target.port || 5432), target.hostname);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
    sockets.push(s);
  }),
};
const sql = postgres(PG_ADMIN_URL, options as postgres.Options<Record<string, never>>);
afterAll(() => sql.end({ timeout: 5 }));

describe.skipIf(!reachable)('a socket postgres.js has dropped', () => {
  test('an error it reports after its close is handled on it, not thrown; the next query runs on a new connection', async () => {
    expect([...(await sql`SELECT 1 AS one`)]).toEqual([{ one: 1 }]);
    const dropped = sockets[0]!;
    const closed = new Promise((resolve) => dropped.once('close', resolve));
    dropped.destroy();
    await closed;
    await Bun.sleep(10);
    const late = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', syscall: 'read' });
    expect(() => dropped.emit('error', late)).not.toThrow();
    expect([...(await sql`SELECT 2 AS two`)]).toEqual([{ two: 2 }]);
    expect(sockets.length).toBe(2);
  });
});
