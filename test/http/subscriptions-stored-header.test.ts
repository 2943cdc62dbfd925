/**
 * A rest-hook Subscription whose `channel.header` holds a line no HTTP request can carry (a line break in its value, a
 * name with a space, no colon), as a database an older release or a direct edit wrote it, activation refusing such
 * lines: each delivery fails saying which header, retried and then `error` naming it, not an internal error of the
 * server's; nothing reaches the endpoint. On both databases.
 */
import { afterAll, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import type { Json } from '../helpers/fhir.ts';
import { receiver } from '../helpers/rest-hook.ts';
import { rawStatements, storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

async function caller(t: TestApp) {
  const token = await t.token();
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await t.request(`${t.fhir()}/${path}`, fhirInit(token, method, body));
    return { status: res.status, body: (await res.json().catch(() => ({}))) as Json };
  };
  const drain = async () => {
    for (let i = 0; i < 20 && (await t.app.subscriptions.runOnce()) > 0; i++);
  };
  return { call, drain };
}

for (const target of targets) {
  for (const [label, line] of [['a line break', 'X-Token: a\r\nX-Injected: b'], ['a name with a space', 'X Token: a'], ['no colon', 'X-Token']] as const) {
    test(`${target.kind}: a stored header with ${label} fails each delivery naming it, then error naming it`, async () => {
      const db = await target.migrated();
      const hook = receiver();
      const t = await createTestApp({ store: db.open(), env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
      try {
        const { call, drain } = await caller(t);
        const created = await call('POST', 'Subscription', {
          resourceType: 'Subscription', status: 'requested', reason: 'observations', criteria: 'Observation?status=final',
          channel: { type: 'rest-hook', endpoint: hook.url, payload: 'application/fhir+json', header: ['X-Kept: 1', 'X-Token: a'] },
        });
        expect(created.status).toBe(201);
        const id = String(created.body.id);
        const stored = (await call('GET', `Subscription/${id}`)).body;
        expect(stored.status).toBe('active');
        const channel = { ...(stored.channel as Json), header: ['X-Kept: 1', line] };
        await rawStatements(target.kind, db.url, [[`UPDATE resources SET content = $1 WHERE tenant = $2 AND type = 'Subscription' AND id = $3`, [JSON.stringify({ ...stored, channel }), 't1', id]]]);
        expect((await call('POST', 'Observation', { resourceType: 'Observation', status: 'final', code: { text: 'x' } })).status).toBe(201);
        await drain();
        for (const wait of [5_000, 10_000, 20_000, 40_000]) {
          t.clock.advance(wait);
          await drain();
        }
        const errored = (await call('GET', `Subscription/${id}`)).body;
        expect(errored.status).toBe('error');
        expect(errored.error).toContain('Subscription.channel.header[1]');
        expect(errored.error).not.toContain('internal error');
        expect(hook.got).toEqual([]);
      } finally {
        hook.stop();
        await t.close();
      }
    }, 60_000);
  }
}
