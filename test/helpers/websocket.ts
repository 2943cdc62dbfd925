/** Real servers and websocket clients for the Subscription websocket tests. */
import type { App } from '../../src/app.ts';

/** A real server of `app`, as `cinder serve` runs it (the websocket upgraded, everything else the app's). */
export function serveWithWebsocket(app: App) {
  const server = Bun.serve({
    port: 0, hostname: '127.0.0.1',
    fetch: (req, srv) => (app.upgrade(req, srv) ? undefined : app.fetch(req, srv)), websocket: app.websocket,
  });
  return { url: `ws://127.0.0.1:${server.port}/tenants/t1/fhir/R4/websocket`, stop: () => server.stop(true) };
}

/** A websocket client whose messages are taken in order with `next()`. */
export async function websocketClient(url: string) {
  const ws = new WebSocket(url);
  const queue: string[] = [];
  const waiting: ((m: string) => void)[] = [];
  ws.onmessage = (e) => {
    const m = String(e.data);
    const w = waiting.shift();
    if (w) w(m);
    else queue.push(m);
  };
  await new Promise<void>((resolve, reject) => {
    ws.onopen = () => resolve();
    ws.onerror = () => reject(new Error('websocket failed'));
  });
  const next = () => (queue.length ? Promise.resolve(queue.shift()!) : new Promise<string>((resolve) => waiting.push(resolve)));
  return {
    next,
    send: (m: string) => ws.send(m),
    /** Every message until now: a bind the server refuses is answered after whatever it sent before. */
    async drained(): Promise<string[]> {
      ws.send('bind marker-that-is-no-subscription');
      const got: string[] = [];
      for (let m = await next(); !m.startsWith('error marker-that-is-no-subscription'); m = await next()) got.push(m);
      return got;
    },
    close: () => ws.close(),
  };
}
