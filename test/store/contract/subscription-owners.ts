import { describe, expect, test } from 'bun:test';
import type { Store } from '../../../src/store/types.ts';
import { uniqueTenant, version } from './fixtures.ts';

/**
 * SubscriptionRepo.owner: one Subscription's recorded owner, as owners() lists it, by one lookup (ownersOf: those of some ids); pendingBatch: what waits
 * with the Subscription's version and owner as they stand.
 */
export function subscriptionOwnersContract(store: () => Store) {
  describe('subscriptions.owner()', () => {
    test("answers the owner owners() lists for that id, null for one with none or of another tenant, and the latest after another activation", async () => {
      const s = store();
      const t = uniqueTenant();
      const other = uniqueTenant();
      const a = JSON.stringify({ scopes: ['user/*.rs'], clientId: 'app-a' });
      const b = JSON.stringify({ scopes: ['user/Encounter.rs'], clientId: 'app-b', patient: 'p1' });
      await s.resources.write(t, async (w) => {
        await w.ownSubscription('s1', a, 'websocket');
        await w.ownSubscription('s2', '{"operator":true}', 'rest-hook');
      });
      await s.resources.write(other, (w) => w.ownSubscription('s3', b, 'websocket'));
      const owners = await s.subscriptions.owners(t);
      expect(await s.subscriptions.owner(t, 's1')).toBe(owners.get('s1')!);
      expect(await s.subscriptions.owner(t, 's2')).toBe('{"operator":true}');
      expect(await s.subscriptions.owner(t, 's3')).toBeNull();
      expect(await s.subscriptions.owner(t, 'none')).toBeNull();
      expect(await s.subscriptions.owner(other, 's3')).toBe(b);
      await s.resources.write(t, (w) => w.ownSubscription('s1', b, 'websocket', undefined, true));
      expect(await s.subscriptions.owner(t, 's1')).toBe(b);
    });

    test('ownersOf answers the owners of the ids asked, as owners() lists them, and none of another id or tenant', async () => {
      const s = store();
      const t = uniqueTenant();
      const other = uniqueTenant();
      const a = JSON.stringify({ scopes: ['user/*.rs'], clientId: 'app-a' });
      await s.resources.write(t, async (w) => {
        for (let i = 0; i < 5; i++) await w.ownSubscription(`s${i}`, `${a}${i}`, 'websocket');
      });
      await s.resources.write(other, (w) => w.ownSubscription('s1', 'theirs', 'websocket'));
      const owners = await s.subscriptions.owners(t);
      expect(await s.subscriptions.ownersOf(t, ['s1', 's3', 'none', "s'4"])).toEqual(new Map([['s1', owners.get('s1')!], ['s3', owners.get('s3')!]]));
      expect(await s.subscriptions.ownersOf(t, [])).toEqual(new Map());
      expect(await s.subscriptions.ownersOf(other, ['s1', 's2'])).toEqual(new Map([['s1', 'theirs']]));
    });

    test('pendingBatch reads what waits, oldest first, with the Subscription\'s current version and owner; nulls where there is none', async () => {
      const s = store();
      const t = uniqueTenant();
      const a = JSON.stringify({ scopes: ['user/*.rs'], clientId: 'app-a' });
      const b = JSON.stringify({ scopes: ['user/Encounter.rs'], clientId: 'app-b', patient: 'p1' });
      const told = (id: string) => ({ subscriptionId: 's1', type: 'Encounter', id, versionId: 1 });
      expect(await s.subscriptions.pendingBatch(t, 's1', 10)).toEqual({ versionId: null, owner: null, notifications: [] });
      await s.resources.write(t, async (w) => {
        await w.put(version('Subscription', 's1'));
        await w.ownSubscription('s1', a, 'rest-hook');
      });
      expect(await s.subscriptions.pendingBatch(t, 's1', 10)).toEqual({ versionId: 1, owner: a, notifications: [] });
      await s.resources.write(t, (w) => w.notify([told('e1'), told('e2'), told('e3')], 1_000));
      const first = await s.subscriptions.pendingBatch(t, 's1', 2);
      expect([first.versionId, first.owner, first.notifications.map((n) => n.id)]).toEqual([1, a, ['e1', 'e2']]);
      // Another owner's activation, with the Subscription's next version: what waited went with it.
      await s.resources.write(t, async (w) => {
        await w.put(version('Subscription', 's1', { versionId: 2 }));
        await w.ownSubscription('s1', b, 'rest-hook');
        await w.notify([told('e4')], 2_000);
      });
      const next = await s.subscriptions.pendingBatch(t, 's1', 10);
      expect([next.versionId, next.owner, next.notifications.map((n) => n.id)]).toEqual([2, b, ['e4']]);
      expect(await s.subscriptions.pending(t, 's1', 10)).toEqual(next.notifications);
    });
  });

  describe('subscriptions.claim() with apps excluded, and handBack()', () => {
    test("leaves out the excluded apps' Subscriptions (the operator's as ''); one handed back is free and due at the time given", async () => {
      const s = store();
      const t = uniqueTenant();
      const owners: Record<string, string> = {
        a1: JSON.stringify({ scopes: ['system/*.rs'], clientId: 'app-a' }),
        a2: JSON.stringify({ scopes: ['user/*.rs'], clientId: 'app-a', user: { id: 'u1', readAt: 1 } }),
        b1: JSON.stringify({ scopes: ['system/*.rs'], clientId: 'app-b' }),
        op: '{"operator":true}',
      };
      await s.resources.write(t, async (w) => {
        for (const [id, owner] of Object.entries(owners)) await w.ownSubscription(id, owner, 'rest-hook');
        await w.notify(Object.keys(owners).map((id) => ({ subscriptionId: id, type: 'Encounter', id: 'e1', versionId: 1 })), 1_000);
      });
      // Claims take every tenant's: those of this tenant are looked at, the others released at once.
      const claim = async (worker: string, now: number, exclude?: string[]) => {
        const got = await s.subscriptions.claim(worker, now, 10_000, 10_000, exclude);
        for (const c of got) if (c.tenant !== t) await s.subscriptions.release(c.tenant, c.id, worker);
        return got.filter((c) => c.tenant === t).map((c) => c.id).sort();
      };
      expect(await claim('w1', 2_000, ['app-a', ''])).toEqual(['b1']);
      expect(await claim('w1', 2_000, ['app-b'])).toEqual(['a1', 'a2', 'op']);
      // Held (leased until 12,000): none claimed again; a1 handed back by its holder alone, free and due at 3,000.
      expect(await claim('w2', 2_001)).toEqual([]);
      await s.subscriptions.handBack(t, 'a1', 'w2', 5_000);
      await s.subscriptions.handBack(t, 'a1', 'w1', 3_000);
      expect(await claim('w2', 2_002)).toEqual([]);
      expect(await claim('w2', 3_000)).toEqual(['a1']);
    });

    test("a delivery lease is judged by the database's clock: a worker far ahead does not take a live lease, one behind takes a lapsed one", async () => {
      const s = store();
      const t = uniqueTenant();
      const now = Date.now();
      await s.resources.write(t, async (w) => {
        await w.ownSubscription('k1', '{"operator":true}', 'rest-hook');
        await w.notify([{ subscriptionId: 'k1', type: 'Encounter', id: 'e1', versionId: 1 }], now);
      });
      const claim = async (worker: string, at: number, leaseMs: number) => {
        const got = await s.subscriptions.claim(worker, at, leaseMs, 10_000);
        for (const c of got) if (c.tenant !== t) await s.subscriptions.release(c.tenant, c.id, worker);
        return got.filter((c) => c.tenant === t).map((c) => c.id);
      };
      expect(await claim('w1', now, 30_000)).toEqual(['k1']);
      // A worker whose clock is a minute ahead: the lease has 30 s to run by the database's clock.
      expect(await claim('w2', now + 60_000, 30_000)).toEqual([]);
      await s.subscriptions.release(t, 'k1', 'w1');
      // A holder whose clock is a minute behind does not stretch its lease; once it lapses, another worker takes it.
      expect(await claim('w1', now - 60_000, 1)).toEqual(['k1']);
      await Bun.sleep(20);
      expect(await claim('w2', now, 30_000)).toEqual(['k1']);
    });
  });
}
