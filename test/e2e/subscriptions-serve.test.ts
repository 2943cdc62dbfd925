/**
 * `cinder serve` delivers Subscriptions by itself: its delivery loop sends a rest-hook notification to a
 * receiver on this machine (CINDER_SUBSCRIPTION_ALLOW_PRIVATE=true) and pings a client bound on its
 * websocket, from source and (when built) from dist/cinder. Waits for what arrives, not for a time.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../helpers/export-e2e.ts';
import { cinderCommands } from '../helpers/processes.ts';

const commands = cinderCommands();

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

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
    const dir = mkdtempSync(join(tmpdir(), 'cinder-subscriptions-'));
    dirs.push(dir);
    const port = freePort();
    const base = `http://127.0.0.1:${port}`;
    const env = {
      PATH: process.env.PATH ?? '', HOME: dir, CINDER_PORT: String(port), CINDER_HOST: '127.0.0.1', CINDER_BASE_URL: base,
      CINDER_DATA_DIR: join(dir, 'data'), CINDER_LOG_LEVEL: 'error', CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true', CINDER_SUBSCRIPTION_POLL_MS: '50',
    };
    const server = Bun.spawn([...command, 'serve'], { env, cwd: dir, stdin: 'ignore', stdout: 'pipe', stderr: 'inherit' });
    let socket: WebSocket | undefined;
    try {
      const reader = server.stdout.getReader();
      let banner = '';
      while (!banner.includes('token URL:')) {
        const chunk = await reader.read();
        if (chunk.done) break;
        banner += new TextDecoder().decode(chunk.value);
      }
      const clientId = /client_id:\s+(\S+)/.exec(banner)![1]!;
      const secret = /client_secret:\s+(\S+)/.exec(banner)![1]!;
      const tokenRes = await fetch(`${base}/oauth2/token`, {
        method: 'POST',
        headers: { Authorization: 'Basic ' + btoa(`${clientId}:${secret}`), 'Content-Type': 'application/x-www-form-urlencoded' },
        body: 'grant_type=client_credentials',
      });
      const { access_token: token } = (await tokenRes.json()) as { access_token: string };
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
