import { describe, expect, test } from 'bun:test';
import type { Store } from '../../../src/store/types.ts';
import { uniqueTenant } from './fixtures.ts';

/** ResourceWriter.notify's topic events: numbered by the subscription's count, their times never going back as the numbers go up. */
export function subscriptionEventsContract(store: () => Store) {
  describe('notify() topic events', () => {
    test("an event numbered after another is stamped no earlier than it, though its write took an earlier time", async () => {
      const s = store();
      const t = uniqueTenant();
      await s.resources.write(t, (w) => w.ownSubscription('s1', '{"operator":true}', 'rest-hook'));
      const event = (id: string) => ({ subscriptionId: 's1', type: 'Encounter', id, versionId: 1, event: 'create' as const });
      await s.resources.write(t, (w) => w.notify([event('e1')], 2_000));
      // A write whose time was taken before the first's, numbering its events after it (it waited for the count).
      await s.resources.write(t, (w) => w.notify([event('e2'), event('e3')], 1_000));
      await s.resources.write(t, (w) => w.notify([event('e4')], 3_000));
      const kept = await s.subscriptions.eventLog(t, 's1', 1, 10, 10);
      expect(kept.map((e) => [e.number, e.id, e.createdAt])).toEqual([[1, 'e1', 2_000], [2, 'e2', 2_000], [3, 'e3', 2_000], [4, 'e4', 3_000]]);
      const waiting = await s.subscriptions.pending(t, 's1', 10);
      expect(waiting.map((n) => [n.eventNumber, n.createdAt])).toEqual([[1, 2_000], [2, 2_000], [3, 2_000], [4, 3_000]]);
      expect(await s.subscriptions.events(t, 's1')).toBe(4);
    });
  });
}
