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
    for (let i = 0; i < 50 && (await metric(t, 'cinder_subscription_websockets ')) !== 'cinder_subscription_websockets 2'; i++) await Bun.sleep(10);
    const f = track(await open(url('t1')));
    expect(await answered(f)).toBe(true);
    expect(await metric(t, 'cinder_subscription_websockets ')).toBe('cinder_subscription_websockets 3');
  });
});
