import { describe, expect, test } from 'bun:test';
import type { Store } from '../../../src/store/types.ts';
import { CLAIM_KEPT_MS, StoreConflictError } from '../../../src/store/types.ts';
import type { StoreDatabase } from '../../helpers/stores.ts';
import { save, saveRetrying, uniqueTenant, version, versions } from './fixtures.ts';

/** Two Store instances on one database, as two processes would have. */
export function twoInstanceContract(db: () => StoreDatabase, canRace: boolean) {
  describe('two instances on one database', () => {
    test("a write by one is visible to the other and changes the other's changeToken", async () => {
      const [a, b] = [db().open(), db().open()];
      const t = uniqueTenant();
      const token = await b.resources.changeToken(t, ['Patient']);
      const v = await save(a, t, 'Patient', 'p', { index: [{ param: 'identifier', system: 's', value: '1' }] });
      expect((await b.resources.read(t, 'Patient', 'p'))!.content).toBe(v.content);
      expect(await b.resources.changeToken(t, ['Patient'])).not.toBe(token);
      const again = await b.resources.changeToken(t, ['Patient']);
      await save(a, t, 'Patient', 'p');
      expect(await b.resources.changeToken(t, ['Patient'])).not.toBe(again);
      await b.tenants.create(t, 9);
      expect(await a.tenants.get(t)).toEqual({ id: t, createdAt: 9 });
    });

    // SQLite instances in one process share a thread, so their writes cannot interleave; these need real concurrency.
    test.if(canRace)('concurrent updates of one resource yield consecutive versions, nothing lost', async () => {
      const [a, b] = [db().open(), db().open()];
      const t = uniqueTenant();
      await save(a, t, 'Patient', 'p', { body: { by: 'seed' } });
      const rounds = 15;
      const run = (s: Store, who: string) => (async () => {
        for (let i = 0; i < rounds; i++) await saveRetrying(s, t, 'Patient', 'p', { body: { by: `${who}${i}` } });
      })();
      const tokens = new Set<string>();
      const watch = (async () => {
        for (let i = 0; i < 10; i++) tokens.add(await b.resources.changeToken(t, ['Patient']));
      })();
      await Promise.all([run(a, 'a'), run(b, 'b'), watch]);
      const history = await a.resources.history(t, { id: 'p', type: 'Patient', count: 100 });
      expect(versions(history)).toEqual(Array.from({ length: 2 * rounds + 1 }, (_, i) => 2 * rounds + 1 - i));
      const writers = history.map((h) => JSON.parse(h.content).by as string).sort();
      const expected = ['seed', ...Array.from({ length: rounds }, (_, i) => [`a${i}`, `b${i}`]).flat()].sort();
      expect(writers).toEqual(expected);
      expect(tokens.size).toBeGreaterThan(0);
    });

    test.if(canRace)('two instances creating the same new id: one wins, the other gets a conflict and can retry', async () => {
      const [a, b] = [db().open(), db().open()];
      const t = uniqueTenant();
      let arrived = 0;
      let release!: () => void;
      const bothLooked = new Promise<void>((r) => (release = r));
      const create = (s: Store, who: string) =>
        s.resources.write(t, async (w) => {
          const cur = await w.current('Patient', 'same');
          if (++arrived === 2) release();
          await bothLooked;
          await w.put(version('Patient', 'same', { versionId: (cur?.versionId ?? 0) + 1, body: { by: who } }));
        });
      const results = await Promise.allSettled([create(a, 'a'), create(b, 'b')]);
      const failed = results.filter((r) => r.status === 'rejected');
      expect(failed).toHaveLength(1);
      expect((failed[0] as PromiseRejectedResult).reason).toBeInstanceOf(StoreConflictError);
      await saveRetrying(b, t, 'Patient', 'same', { body: { by: 'retry' } });
      const history = await a.resources.history(t, { count: 10 });
      expect(versions(history)).toEqual([2, 1]);
      expect(JSON.parse(history[0]!.content).by).toBe('retry');
    });

    test.if(canRace)('many concurrent transactions on both instances all commit', async () => {
      const [a, b] = [db().open(), db().open()];
      const t = uniqueTenant();
      await Promise.all(
        Array.from({ length: 24 }, (_, i) =>
          saveRetrying(i % 2 ? a : b, t, 'Observation', `o${i % 6}`, { compartments: ['p'], index: [{ param: 'code', system: 's', value: `${i}` }] }),
        ),
      );
      expect(await a.resources.count(t, { type: 'Observation', sort: [], count: 1, compartment: 'p' })).toBe(6);
      expect((await b.resources.history(t, { count: 100 })).length).toBe(24);
    });

    test("condition claims: a claim moves on from the count read, once; a stale count or a rolled-back claim moves nothing", async () => {
      const [a, b] = [db().open(), db().open()];
      const t = uniqueTenant();
      expect(await a.resources.claims(t, ['k1', 'k2'])).toEqual([0, 0]);
      expect(await a.resources.write(t, (w) => w.claim([{ key: 'k1', seen: 0 }], 1000))).toBe(true);
      // The other instance read 0 before that commit: its claim from 0 fails.
      expect(await b.resources.write(t, (w) => w.claim([{ key: 'k1', seen: 0 }], 1001))).toBe(false);
      expect(await b.resources.claims(t, ['k2', 'k1'])).toEqual([0, 1]);
      expect(await b.resources.write(t, (w) => w.claim([{ key: 'k2', seen: 0 }, { key: 'k1', seen: 1 }], 1002))).toBe(true);
      expect(await a.resources.write(t, (w) => w.claim([{ key: 'k1', seen: 1 }], 1003))).toBe(false);
      expect(await a.resources.claims(t, ['k1', 'k2'])).toEqual([2, 1]);
      // Claims are per tenant.
      expect(await a.resources.claims(uniqueTenant(), ['k1'])).toEqual([0]);
      // A transaction that fails after claiming leaves the count where it was.
      await expect(a.resources.write(t, async (w) => {
        expect(await w.claim([{ key: 'k1', seen: 2 }], 1004)).toBe(true);
        throw new Error('rolled back');
      })).rejects.toThrow('rolled back');
      expect(await b.resources.claims(t, ['k1'])).toEqual([2]);
    });

    test('condition claims not moved for an hour are purged by new claims', async () => {
      const a = db().open();
      const t = uniqueTenant();
      const start = 1_000_000_000_000;
      expect(await a.resources.write(t, (w) => w.claim([{ key: 'old', seen: 0 }, { key: 'kept', seen: 0 }], start))).toBe(true);
      expect(await a.resources.write(t, (w) => w.claim([{ key: 'kept', seen: 1 }], start + CLAIM_KEPT_MS - 1000))).toBe(true);
      expect(await a.resources.write(t, (w) => w.claim([{ key: 'new', seen: 0 }], start + CLAIM_KEPT_MS + 1))).toBe(true);
      expect(await a.resources.claims(t, ['old', 'kept', 'new'])).toEqual([0, 2, 1]);
    });

    test.if(canRace)('a claim waits for a transaction holding the same condition, then fails if that one commits', async () => {
      const [a, b] = [db().open(), db().open()];
      const t = uniqueTenant();
      let claimed!: () => void;
      const held = new Promise<void>((r) => (claimed = r));
      let finish!: () => void;
      const done = new Promise<void>((r) => (finish = r));
      const first = a.resources.write(t, async (w) => {
        const ok = await w.claim([{ key: 'k', seen: 0 }], 1);
        claimed();
        await done;
        return ok;
      });
      await held;
      let settled = false;
      const second = b.resources.write(t, (w) => w.claim([{ key: 'k', seen: 0 }], 2)).finally(() => (settled = true));
      await Bun.sleep(200);
      expect(settled).toBe(false);
      finish();
      expect(await first).toBe(true);
      expect(await second).toBe(false);
    });
  });
}
