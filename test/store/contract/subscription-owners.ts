import { describe, expect, test } from 'bun:test';
import type { Store } from '../../../src/store/types.ts';
import { uniqueTenant } from './fixtures.ts';

/** SubscriptionRepo.owner: one Subscription's recorded owner, as owners() lists it, by one lookup. */
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
  });
}
