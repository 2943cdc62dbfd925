/**
 * The row locks of a Subscription's delivery state on a real PostgreSQL (src/store/postgres/writer.ts): a
 * deletion's endSubscription takes the subscription's state row before its notifications and events, in the
 * order delivery (`delivered`, `drop`) takes them, and takes it with the rows notify numbers events by, in id
 * order, so that no two of them wait for each other in a cycle; an activation's ownSubscription writes its state row
 * in the same pass (and compares the owner stored as it locks it).
 */
import { afterAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { storeTargets } from '../helpers/stores.ts';

const targets = (await storeTargets()).filter((t) => t.kind === 'postgres');
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const event = (subscriptionId: string, id: string) => ({ subscriptionId, type: 'Encounter', id, versionId: 1, event: 'create' as const });

type Opened = ReturnType<(typeof targets)[number]['open']>;
type Writer = Parameters<Parameters<Opened['resources']['write']>[1]>[0];

/** A new tenant of a migrated store where the operator owns Subscription a, one event of it waiting (e1). */
async function ownedWithOneEvent(s: Opened): Promise<string> {
  await s.migrate();
  const tenant = `locks-${crypto.randomUUID().slice(0, 8)}`;
  await s.resources.write(tenant, async (w) => {
    await w.ownSubscription('a', '{"operator":true}', 'rest-hook');
    await w.notify([event('a', 'e1')], 1_000);
  });
  return tenant;
}

/**
 * Subscriptions a and b owned in a new tenant; then a transaction doing `first` (to b) and, once a second
 * one numbering events of a and b (in id order) waits for it, numbering an event of a. The outcomes of both.
 */
async function againstEventsOfBoth(s: Opened, first: (w: Writer) => Promise<void>): Promise<{ tenant: string; outcomes: unknown[] }> {
  await s.migrate();
  const tenant = `locks-${crypto.randomUUID().slice(0, 8)}`;
  await s.resources.write(tenant, async (w) => {
    await w.ownSubscription('a', '{"operator":true}', 'rest-hook');
    await w.ownSubscription('b', '{"operator":true}', 'rest-hook');
  });
  const { promise: reached, resolve: reach } = Promise.withResolvers<void>();
  const { promise: gate, resolve: open } = Promise.withResolvers<void>();
  const firstWrite = s.resources.write(tenant, async (w) => {
    await first(w);
    reach();
    await gate;
    await w.notify([event('a', 'e1')], 1_000);
    return 'committed';
  }).catch((e: Error) => e);
  await reached;
  const both = s.resources.write(tenant, (w) => w.notify([event('a', 'e2'), event('b', 'e3')], 1_000).then(() => 'committed')).catch((e: Error) => e);
  await Bun.sleep(300);
  open();
  return { tenant, outcomes: await Promise.all([firstWrite, both]) };
}

for (const target of targets) {
  describe('Subscription state locks on PostgreSQL', () => {
    test('a deletion ending a subscription while a delivery holds its state row and deletes a notification: both commit, no deadlock', async () => {
      const s = target.open();
      const tenant = await ownedWithOneEvent(s);
      const raw = postgres(target.url, { max: 1, onnotice: () => undefined });
      try {
        let ended: Promise<unknown> = Promise.resolve();
        // As `delivered` does: the state row, then the notification delivered.
        const delivery = raw.begin(async (tx) => {
          await tx`UPDATE subscription_state SET failures = 0 WHERE tenant = ${tenant} AND id = 'a'`;
          ended = s.resources.write(tenant, (w) => w.endSubscription('a')).then(() => 'ended', (e: Error) => e);
          await Bun.sleep(300);
          await tx`DELETE FROM subscription_notifications WHERE tenant = ${tenant} AND subscription_id = 'a'`;
          return 'delivered';
        }).catch((e: Error) => e);
        expect(await delivery).toBe('delivered');
        expect(await ended).toBe('ended');
        expect(await s.subscriptions.owner(tenant, 'a')).toBeNull();
        expect(await s.subscriptions.pending(tenant, 'a', 10)).toEqual([]);
      } finally {
        await raw.end({ timeout: 1 });
      }
    }, 30_000);

    test('a transaction ending subscription b and numbering an event of a, beside one numbering events of a and b: both commit, no deadlock', async () => {
      const s = target.open();
      // A transaction deleting Subscription b and writing what a's topic notifies of (its DELETE comes first).
      const { tenant, outcomes } = await againstEventsOfBoth(s, (w) => w.endSubscription('b'));
      expect(outcomes).toEqual(['committed', 'committed']);
      expect(await s.subscriptions.owner(tenant, 'b')).toBeNull();
      expect(await s.subscriptions.events(tenant, 'a')).toBe(2);
    }, 30_000);

    test('a transaction activating subscription b again and numbering an event of a, beside one numbering events of a and b: both commit, no deadlock', async () => {
      const s = target.open();
      // A PUT of the active Subscription b (a new owner) in a transaction writing what a's topic notifies of.
      const { tenant, outcomes } = await againstEventsOfBoth(s, (w) => w.ownSubscription('b', '{"operator":true,"again":1}', 'websocket'));
      expect(outcomes).toEqual(['committed', 'committed']);
      expect(await s.subscriptions.owner(tenant, 'b')).toBe('{"operator":true,"again":1}');
      expect(await s.subscriptions.events(tenant, 'a')).toBe(2);
      expect(await s.subscriptions.events(tenant, 'b')).toBe(1);
    }, 30_000);

    test('an activation anew, written at the commit, deletes the notifications waiting from before it and keeps those recorded after it', async () => {
      const s = target.open();
      const tenant = await ownedWithOneEvent(s);
      await s.resources.write(tenant, async (w) => {
        await w.notify([{ subscriptionId: 'a', type: 'Encounter', id: 'e2', versionId: 1 }], 2_000);
        await w.ownSubscription('a', '{"operator":true}', 'rest-hook', undefined, true);
        await w.notify([{ subscriptionId: 'a', type: 'Subscription', id: 'a', versionId: 2, event: 'handshake' }], 2_000);
        await w.notify([event('a', 'e3')], 2_000);
      });
      expect((await s.subscriptions.pending(tenant, 'a', 10)).map((n) => [n.id, n.event])).toEqual([['a', 'handshake'], ['e3', 'create']]);
      expect(await s.subscriptions.events(tenant, 'a')).toBe(2);
    }, 30_000);

    test('an activation by another owner, written in the pass of a later event, deletes the notifications waiting from before it; by the same owner, keeps them', async () => {
      const s = target.open();
      const tenant = await ownedWithOneEvent(s);
      await s.resources.write(tenant, async (w) => {
        await w.ownSubscription('a', '{"operator":true}', 'rest-hook');
        await w.notify([event('a', 'e2')], 2_000);
      });
      expect((await s.subscriptions.pending(tenant, 'a', 10)).map((n) => n.id)).toEqual(['e1', 'e2']);
      await s.resources.write(tenant, async (w) => {
        await w.ownSubscription('a', '{"scopes":["patient/*.rs"],"clientId":"c","patient":"p"}', 'rest-hook');
        await w.notify([event('a', 'e3')], 3_000);
      });
      expect((await s.subscriptions.pending(tenant, 'a', 10)).map((n) => n.id)).toEqual(['e3']);
      expect(await s.subscriptions.events(tenant, 'a')).toBe(3);
    }, 30_000);

    test('notifications matched for an owner key-share its state row with each other; an activation by another owner waits for them and deletes them, and later ones matched for the earlier owner are not queued', async () => {
      const s = target.open();
      await s.migrate();
      const tenant = `locks-${crypto.randomUUID().slice(0, 8)}`;
      const admin = '{"operator":true}';
      const patient = '{"scopes":["patient/*.rs"],"clientId":"c","patient":"p"}';
      const matched = (id: string, matchedFor: string) => ({ subscriptionId: 'a', type: 'Observation', id, versionId: 1, matchedFor });
      await s.resources.write(tenant, (w) => w.ownSubscription('a', admin, 'rest-hook'));
      const { promise: reached, resolve: reach } = Promise.withResolvers<void>();
      const { promise: gate, resolve: open } = Promise.withResolvers<void>();
      const held = s.resources.write(tenant, async (w) => {
        await w.notify([matched('o1', admin)], 1_000);
        reach();
        await gate;
      });
      await reached;
      // Another write matched for the same owner does not wait for the first.
      await s.resources.write(tenant, (w) => w.notify([matched('o2', admin)], 1_000));
      const activation = s.resources.write(tenant, (w) => w.ownSubscription('a', patient, 'rest-hook'));
      await Bun.sleep(300);
      open();
      await Promise.all([held, activation]);
      expect(await s.subscriptions.pending(tenant, 'a', 10)).toEqual([]);
      await s.resources.write(tenant, (w) => w.notify([matched('o3', admin), matched('o4', patient)], 2_000));
      expect((await s.subscriptions.pending(tenant, 'a', 10)).map((n) => n.id)).toEqual(['o4']);
      await s.close();
    }, 30_000);

    test('a write counting an event whose state row was updated by a write committed after its statement began folds the tally into the newest row: no count lost', async () => {
      const s = target.open();
      await s.migrate();
      const tenant = `locks-${crypto.randomUUID().slice(0, 8)}`;
      const admin = '{"operator":true}';
      const matched = (id: string) => ({ subscriptionId: 'a', type: 'Observation', id, versionId: 1, matchedFor: admin });
      await s.resources.write(tenant, (w) => w.ownSubscription('a', admin, 'rest-hook'));
      const raw = postgres(target.url, { max: 1, onnotice: () => undefined });
      try {
        let later: Promise<unknown> = Promise.resolve();
        // A write counting its own event holds the state row; one beside it finds the row held and adds a tally row.
        const counting = raw.begin(async (tx) => {
          await tx`SELECT 1 FROM subscription_state WHERE tenant = ${tenant} AND id = 'a' FOR NO KEY UPDATE`;
          await s.resources.write(tenant, (w) => w.notify([matched('o1')], 1_000));
          await tx`SELECT 1 FROM subscription_state WHERE tenant = ${tenant} AND id = 'a' FOR UPDATE`;
          await tx`UPDATE subscription_state SET events = events + 1 WHERE tenant = ${tenant} AND id = 'a'`;
          // A third write's statement begins now and waits for the row; it takes it once this one has committed.
          later = s.resources.write(tenant, (w) => w.notify([matched('o2')], 1_000)).then(() => 'committed', (e: Error) => e);
          await Bun.sleep(300);
          return 'committed';
        });
        expect(await counting).toBe('committed');
        expect(await later).toBe('committed');
        expect(await s.subscriptions.events(tenant, 'a')).toBe(3);
      } finally {
        await raw.end({ timeout: 1 });
        await s.close();
      }
    }, 30_000);
  });
}
