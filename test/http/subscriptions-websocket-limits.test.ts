/**
 * The limits of the Subscription websocket (`{fhir_base}/websocket`, src/fhir/subscriptions/sockets.ts):
 * at most CINDER_WEBSOCKET_MAX_CONNECTIONS sockets per process (beyond: closed with 1013, Try Again Later)
 * and CINDER_WEBSOCKET_MAX_PER_CLIENT per tenant and IP address (beyond: closed with 1008), counted in
 * /metrics; a closed socket frees its place. A real server (Bun.serve on port 0), as `cinder serve` runs it.
 * The limits are the process's own state: no store is involved beyond opening the app.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';

interface Opened {
  ws: WebSocket;
  /** The close event's code and reason, once the server closed it. */
  closed: Promise<{ code: number; reason: string }>;
}

/** Opens a websocket and waits until it is open; a socket the server refuses is closed right after. */
async function open(url: string, headers?: Record<string, string>): Promise<Opened> {
  const ws = headers ? new WebSocket(url, { headers } as unknown as string[]) : new WebSocket(url);
  const closed = new Promise<{ code: number; reason: string }>((resolve) => (ws.onclose = (e) => resolve({ code: e.code, reason: e.reason })));
  await new Promise<void>((resolve, reject) => {
    ws.onopen = () => resolve();
    ws.onerror = () => reject(new Error('websocket failed'));
  });
  return { ws, closed };
}

/** Whether the server leaves the socket open: it answers a message (a refused socket is closed at once). */
async function answered(o: Opened): Promise<boolean> {
  const answer = new Promise<boolean>((resolve) => {
    o.ws.onmessage = () => resolve(true);
    void o.closed.then(() => resolve(false));
  });
  if (o.ws.readyState === WebSocket.OPEN) o.ws.send('hello');
  return answer;
}

async function metric(t: TestApp, line: string): Promise<string | undefined> {
  return (await (await t.request('/metrics')).text()).split('\n').find((l) => l.startsWith(line));
}

describe('subscription websocket limits', () => {
  let t: TestApp;
  let server: ReturnType<typeof Bun.serve>;
  const url = (tenant: string) => `ws://127.0.0.1:${server.port}/tenants/${tenant}/fhir/R4/websocket`;
  const sockets: Opened[] = [];
  const track = (o: Opened) => (sockets.push(o), o);

  beforeAll(async () => {
    t = await createTestApp({ env: { CINDER_WEBSOCKET_MAX_CONNECTIONS: '3', CINDER_WEBSOCKET_MAX_PER_CLIENT: '2', CINDER_TRUST_PROXY: 'on' } });
    const app = t.app;
    server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: (req, srv) => (app.upgrade(req, srv) ? undefined : app.fetch(req, srv)), websocket: app.websocket });
  });
  afterAll(async () => {
    for (const s of sockets) s.ws.close();
    server?.stop(true);
    await t?.close();
  });

  test('per tenant and address: the third socket is closed with 1008; another tenant or address has its own count', async () => {
    const a = track(await open(url('t1')));
    const b = track(await open(url('t1')));
    expect(await answered(a)).toBe(true);
    expect(await answered(b)).toBe(true);
    const c = track(await open(url('t1')));
    expect(await c.closed).toEqual({ code: 1008, reason: 'at most 2 websockets of one tenant from one address' });
    expect(await metric(t, 'cinder_subscription_websockets_refused_total{limit="client"}')).toBe('cinder_subscription_websockets_refused_total{limit="client"} 1');

    // Another tenant from the same address is counted apart (CINDER_TRUST_PROXY=on: X-Forwarded-For names the address).
    const d = track(await open(url('t2'), { 'X-Forwarded-For': '203.0.113.7' }));
    expect(await answered(d)).toBe(true);
    expect(await metric(t, 'cinder_subscription_websockets ')).toBe('cinder_subscription_websockets 3');
  });

  test('per process: a socket beyond CINDER_WEBSOCKET_MAX_CONNECTIONS is closed with 1013; a closed socket frees its place', async () => {
    const e = track(await open(url('t3'), { 'X-Forwarded-For': '198.51.100.1' }));
    expect(await e.closed).toEqual({ code: 1013, reason: 'this server process holds its most websockets (3); try again later' });
    expect(await metric(t, 'cinder_subscription_websockets_refused_total{limit="process"}')).toBe('cinder_subscription_websockets_refused_total{limit="process"} 1');

    const first = sockets[0]!;
    first.ws.close();
    await first.closed;
    // The client's close event may come before the server's close handler has run: wait for the server to count the
    // socket gone (however long a busy machine takes; the test's timeout bounds it), then its place is free.
    while ((await metric(t, 'cinder_subscription_websockets ')) !== 'cinder_subscription_websockets 2') await Bun.sleep(10);
    const f = track(await open(url('t1')));
    expect(await answered(f)).toBe(true);
    expect(await metric(t, 'cinder_subscription_websockets ')).toBe('cinder_subscription_websockets 3');
  });
});

/** A masked client frame (RFC 6455 5.2) of `opcode` (1 text, 2 binary) holding `payload` (under 126 bytes). */
function clientFrame(opcode: number, payload: Uint8Array): Uint8Array {
  const mask = [0x12, 0x34, 0x56, 0x78];
  return new Uint8Array([0x80 | opcode, 0x80 | payload.length, ...mask, ...payload.map((b, i) => b ^ mask[i % 4]!)]);
}

/**
 * Sends one frame on a websocket opened by hand (the WebSocket client sends no text frame that is not UTF-8) and gives
 * the first frame the server answers with: a close frame's code and reason.
 */
async function closeAnswering(port: number, frame: Uint8Array): Promise<{ code: number; reason: string }> {
  let got = Buffer.alloc(0);
  const answered = Promise.withResolvers<Buffer>();
  const socket = await Bun.connect({
    hostname: '127.0.0.1', port,
    socket: {
      data: (_s, d) => {
        got = Buffer.concat([got, d]);
        const body = got.indexOf('\r\n\r\n');
        if (body >= 0 && got.length >= body + 6 && got.length >= body + 6 + (got[body + 5]! & 0x7f)) answered.resolve(got.subarray(body + 4));
      },
      close: () => answered.resolve(Buffer.alloc(2)),
    },
  });
  socket.write('GET /tenants/t1/fhir/R4/websocket HTTP/1.1\r\nHost: cinder.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n');
  socket.write(frame);
  const frames = await answered.promise;
  socket.end();
  expect(frames[0]).toBe(0x88);
  return { code: frames.readUInt16BE(2), reason: frames.subarray(4, 2 + frames[1]!).toString('utf8') };
}

// RFC 6455 8.1: a text message that is not UTF-8 fails the connection (1007); a binary one holding the same bytes is
// refused alike, never read with U+FFFD in place of its bad byte.
describe('subscription websocket messages that are not UTF-8', () => {
  let t: TestApp;
  let server: ReturnType<typeof Bun.serve>;
  beforeAll(async () => {
    t = await createTestApp();
    const app = t.app;
    server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: (req, srv) => (app.upgrade(req, srv) ? undefined : app.fetch(req, srv)), websocket: app.websocket });
  });
  afterAll(async () => {
    server?.stop(true);
    await t?.close();
  });

  test('a text or binary frame holding a Latin-1 byte closes the socket with 1007 naming it; a binary frame in UTF-8 is read as the command', async () => {
    const latin1 = new Uint8Array(Buffer.from('bind ab\xfc', 'latin1'));
    expect(await closeAnswering(server.port!, clientFrame(2, latin1))).toEqual({ code: 1007, reason: 'the message is not UTF-8: byte 0xFC at byte offset 7 (counting from 0)' });
    expect((await closeAnswering(server.port!, clientFrame(1, latin1))).code).toBe(1007);
    const o = await open(`ws://127.0.0.1:${server.port}/tenants/t1/fhir/R4/websocket`);
    const answer = new Promise<string>((resolve) => (o.ws.onmessage = (e) => resolve(String(e.data))));
    o.ws.send(new TextEncoder().encode('bind \u00fc'));
    expect(await answer).toBe('error expected "bind {id}"');
    o.ws.close();
  });
});
