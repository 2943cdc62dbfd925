/**
 * `cinder serve` delivers Subscriptions by itself: its delivery loop sends a rest-hook notification to a
 * receiver on this machine (CINDER_SUBSCRIPTION_ALLOW_PRIVATE=true) and pings a client bound on its
 * websocket, from source and (when built) from dist/cinder. Waits for what arrives, not for a time.
 */
import { describe, expect, test } from 'bun:test';
import { clientToken, freePort } from '../helpers/export-e2e.ts';
import { cinderCommands, cleanupAfterFile, readBanner, serveEnv, spawnServe } from '../helpers/processes.ts';

const commands = cinderCommands();

const { tempDir } = cleanupAfterFile();

describe.each(commands)('cinder serve delivers Subscriptions (%s)', (_, command) => {
  test('a rest-hook POST and a websocket ping for a matching Observation', async () => {
    const received = Promise.withResolvers<{ method: string; path: string }>();
    const receiver = Bun.serve({
      port: 0, hostname: '127.0.0.1',
      fetch(req) {
        received.resolve({ method: req.method, path: new URL(req.url).pathname });
        return new Response(null, { status: 204 });
      },
    });
    const dir = tempDir('cinder-subscriptions-');
    const port = freePort();
    const base = `http://127.0.0.1:${port}`;
    const server = spawnServe(command, dir, serveEnv(dir, port, { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true', CINDER_SUBSCRIPTION_POLL_MS: '50' }));
    let socket: WebSocket | undefined;
    try {
      const { clientId, secret } = await readBanner(server.stdout);
      const token = await clientToken(base, clientId!, secret!);
      const fhir = `${base}/tenants/default/fhir/R4`;
      const post = async (type: string, body: unknown) => {
        const res = await fetch(`${fhir}/${type}`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' }, body: JSON.stringify(body) });
        expect(res.status).toBe(201);
        return (await res.json()) as { id: string; status: string };
      };
      const criteria = 'Observation?code=http://loinc.org|1234-5';
      const hook = await post('Subscription', { resourceType: 'Subscription', status: 'requested', reason: 'e2e', criteria, channel: { type: 'rest-hook', endpoint: `http://127.0.0.1:${receiver.port}/hook` } });
      const ws = await post('Subscription', { resourceType: 'Subscription', status: 'requested', reason: 'e2e', criteria, channel: { type: 'websocket' } });
      expect([hook.status, ws.status]).toEqual(['active', 'active']);

      const statement = (await (await fetch(`${fhir}/metadata`)).json()) as { rest: { extension: { valueUri: string }[] }[] };
      socket = new WebSocket(statement.rest[0]!.extension[0]!.valueUri);
      const messages: string[] = [];
      const bound = Promise.withResolvers<void>();
      const pinged = Promise.withResolvers<void>();
      socket.onmessage = (e) => {
        messages.push(String(e.data));
        if (String(e.data).startsWith('bound')) bound.resolve();
        if (String(e.data).startsWith('ping')) pinged.resolve();
      };
      await new Promise<void>((resolve) => (socket!.onopen = () => resolve()));
      socket.send(`bind ${ws.id}`);
      await bound.promise;

      await post('Observation', { resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '1234-5' }] } });
      expect(await received.promise).toEqual({ method: 'POST', path: '/hook' });
      await pinged.promise;
      expect(messages).toEqual([`bound ${ws.id}`, `ping ${ws.id}`]);
    } finally {
      socket?.close();
      server.kill('SIGTERM');
      expect(await server.exited).toBe(0);
      receiver.stop(true);
    }
  });
});
