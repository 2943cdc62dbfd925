import { afterEach, beforeEach, expect, test } from 'bun:test';
import { createClientCache } from '../../src/auth/client-cache.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';

let t: TestApp;
beforeEach(async () => {
  t = await createTestApp();
});
afterEach(() => t.close());

test('client records are read once per five seconds, unknown ids included', async () => {
  let reads = 0;
  const store = { ...t.store, clients: { ...t.store.clients, get: (id: string) => (reads++, t.store.clients.get(id)) } };
  const cache = createClientCache(store, t.clock);
  const id = t.admin.client.clientId;
  expect((await cache.get(id))!.clientId).toBe(id);
  expect((await cache.get(id))!.clientId).toBe(id);
  expect(await cache.get('nobody')).toBeNull();
  expect(await cache.get('nobody')).toBeNull();
  expect(reads).toBe(2);
  t.clock.advance(5_000);
  await cache.get(id);
  expect(reads).toBe(3);
});
