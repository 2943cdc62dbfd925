import { describe, expect, test } from 'bun:test';
import type { Store } from '../../../src/store/types.ts';
import { save, tokens, uniqueTenant, version } from './fixtures.ts';

/** Many concurrent current()/put() calls inside one transaction, as a bulk import issues them. */
export function batchingContract(store: () => Store) {
  describe('bulk writes in one transaction', () => {
    test('concurrent current() + put() over more rows than one batch: each resource written once, at the right version', async () => {
      const s = store();
      const t = uniqueTenant();
      for (let i = 0; i < 30; i += 3) await save(s, t, 'Patient', `p${i}`, { lastUpdated: 1 });
      const n = 2_200;
      await s.resources.write(t, (w) =>
        Promise.all(
          Array.from({ length: n }, async (_, i) => {
            const cur = await w.current('Patient', `p${i}`);
            const v = version('Patient', `p${i}`, {
              versionId: (cur?.versionId ?? 0) + 1,
              lastUpdated: 10,
              index: [{ param: 'identifier', system: 's', value: String(i % 10) }],
            });
            await w.put(v);
          }),
        ),
      );
      expect(await s.resources.count(t, { type: 'Patient', sort: [], count: 1 })).toBe(n);
      const since = await s.resources.history(t, { since: 10, count: 10_000 });
      expect(since).toHaveLength(n);
      const byId = new Map(since.map((r) => [r.id, r.versionId]));
      for (const i of [0, 1, 3, 29, 30, 2_199]) expect(byId.get(`p${i}`)).toBe(i < 30 && i % 3 === 0 ? 2 : 1);
      expect(await s.resources.count(t, { type: 'Patient', sort: [], count: 1, where: tokens([{ param: 'identifier', values: [{ system: 's', value: '7' }] }]) })).toBe(220);
    });
  });
}
