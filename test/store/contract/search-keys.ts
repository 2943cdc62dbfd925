import { describe, expect, test } from 'bun:test';
import type { Condition, SearchQuery, Store, TokenValue } from '../../../src/store/types.ts';
import { rawStatements, type StoreTarget } from '../../helpers/stores.ts';
import { ids, uniqueTenant, version } from './fixtures.ts';

const q = (param: string, values: TokenValue[]): SearchQuery =>
  ({ type: 'Patient', sort: [{ by: 'id', descending: false }], count: 100, where: [{ kind: 'token', param, values } as Condition] });

/** Writes Patient `id` with one token row of `param`, in a transaction of its own that `fail` makes roll back once written. */
function put(s: Store, t: string, id: string, param: string, system: string, fail = false): Promise<void> {
  return s.resources.write(t, async (w) => {
    const v = version('Patient', id, { index: [{ param, system, value: 'v' }] });
    if (!fail) return w.put(v);
    // insertNew writes at once (a put may wait in a buffer until COMMIT).
    await w.insertNew([v]);
    throw new Error('roll back');
  });
}

async function keyCount(target: StoreTarget, tenant: string): Promise<number> {
  const [[row]] = await rawStatements(target.kind, target.url, [['SELECT COUNT(*) AS n FROM search_keys WHERE tenant = $1', [tenant]]]);
  return Number(row!.n);
}

/**
 * The search key dictionary (search_keys) as writers use it: keys are shared by every instance on a
 * database, created once, and never used unless committed.
 */
export function searchKeysContract(target: () => StoreTarget, canRace: boolean) {
  describe('search keys', () => {
    test('an instance finds the rows another wrote and writes its own under the same keys; keys never collide', async () => {
      const [a, b] = [target().open(), target().open()];
      const t = uniqueTenant();
      await put(a, t, 'p1', 'identifier', 'sys');
      await put(b, t, 'p2', 'identifier', 'sys');
      // Parts that join into the same text ('ab' + 'c', 'a' + 'bc') are different keys.
      await put(a, t, 'p3', 'ab', 'c');
      await put(a, t, 'p4', 'a', 'bc');
      for (const s of [a, b]) {
        expect(ids(await s.resources.search(t, q('identifier', [{ system: 'sys', value: 'v' }])))).toEqual(['p1', 'p2']);
        expect(ids(await s.resources.search(t, q('ab', [{ system: 'c' }])))).toEqual(['p3']);
        expect(ids(await s.resources.search(t, q('a', [{ system: 'bc' }])))).toEqual(['p4']);
      }
      expect(await keyCount(target(), t)).toBe(3);
    });

    test('a key whose transaction rolled back is never used: a later write has the key it names', async () => {
      const s = target().open();
      const t = uniqueTenant();
      // Issued together (one SQLite group commit: the first is rolled back to its savepoint, and the
      // second's new key may take the number the first's had), then once more on their own.
      const together = await Promise.allSettled([put(s, t, 'p1', 'kx', 'one', true), put(s, t, 'p2', 'kx', 'two')]);
      expect(together.map((r) => r.status)).toEqual(['rejected', 'fulfilled']);
      await put(s, t, 'p3', 'kx', 'one');
      await expect(put(s, t, 'p4', 'ky', 'three', true)).rejects.toThrow('roll back');
      await put(s, t, 'p5', 'ky', 'four');
      await put(s, t, 'p6', 'ky', 'three');
      const find = async (param: string, system: string) => ids(await s.resources.search(t, q(param, [{ system }])));
      expect([await find('kx', 'one'), await find('kx', 'two'), await find('ky', 'three'), await find('ky', 'four')])
        .toEqual([['p3'], ['p2'], ['p6'], ['p5']]);
    });

    // SQLite instances in one process share a thread, so their writes cannot interleave.
    test.if(canRace)('instances creating the same new keys at once all commit, and each key exists once', async () => {
      const [a, b] = [target().open(), target().open()];
      const t = uniqueTenant();
      const systems = Array.from({ length: 20 }, (_, i) => `s${i}`);
      const write = (s: Store, id: string) =>
        s.resources.write(t, (w) => w.put(version('Patient', id, { index: systems.map((system) => ({ param: 'race', system, value: 'v' })) })));
      const writers = Array.from({ length: 10 }, (_, i) => [write(a, `a${i}`), write(b, `b${i}`)]).flat();
      await Promise.all(writers);
      for (const system of ['s0', 's19']) expect(ids(await b.resources.search(t, q('race', [{ system, value: 'v' }])))).toHaveLength(20);
      expect(await keyCount(target(), t)).toBe(20);
    });

    test.if(canRace)('more transactions than pool connections, each with new keys, all commit', async () => {
      const s = target().open();
      const t = uniqueTenant();
      // Every pool connection is held by a transaction waiting for its keys: they are created elsewhere.
      await Promise.all(Array.from({ length: 12 }, (_, i) => put(s, t, `p${i}`, 'pool', `s${i}`)));
      expect(ids(await s.resources.search(t, q('pool', [{ value: 'v' }])))).toHaveLength(12);
    });
  });
}
