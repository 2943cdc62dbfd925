import { describe, expect, test } from 'bun:test';
import type { SearchQuery, Store } from '../../../src/store/types.ts';
import { MEASURED_TEXT_BYTES, StoreConflictError } from '../../../src/store/types.ts';
import { ids, save, stored, tokens, uniqueTenant, version, versions } from './fixtures.ts';

const byIdentifier = (value: string, system?: string): SearchQuery => ({
  type: 'Patient',
  sort: [],
  count: 100,
  where: tokens([{ param: 'identifier', values: [system === undefined ? { value } : { system, value }] }]),
});

/** Transactions: atomicity, index maintenance, change tokens, batching. */
export function writesContract(store: () => Store) {
  describe('write()', () => {
    test('returns what fn returns; a throw rolls everything back and is rethrown as is', async () => {
      const s = store();
      const t = uniqueTenant();
      expect(await s.resources.write(t, async (w) => (await w.current('Patient', 'x')) ?? 'none')).toBe('none');
      await save(s, t, 'Patient', 'keep', { lastUpdated: 1_000, index: [{ param: 'identifier', system: 's', value: 'old' }], compartments: ['keep'] });
      const token = await s.resources.changeToken(t, ['Patient', 'Observation']);
      const boom = new Error('boom');
      const failing = s.resources.write(t, async (w) => {
        await w.put(version('Patient', 'new', { index: [{ param: 'identifier', system: 's', value: 'new' }], compartments: ['new'] }));
        await w.put(version('Patient', 'keep', { versionId: 2, lastUpdated: 2_000, index: [{ param: 'identifier', system: 's', value: 'changed' }] }));
        // A second version of the same resource makes buffering adapters write the first one now.
        await w.put(version('Patient', 'keep', { versionId: 3, lastUpdated: 3_000 }));
        await w.put(version('Observation', 'o', { compartments: ['keep'] }));
        expect(await w.exists('Patient', 'new')).toBe(true);
        throw boom;
      });
      await expect(failing).rejects.toBe(boom);
      expect(await s.resources.read(t, 'Patient', 'new')).toBeNull();
      expect(await s.resources.read(t, 'Observation', 'o')).toBeNull();
      expect((await s.resources.read(t, 'Patient', 'keep'))!.versionId).toBe(1);
      expect(versions(await s.resources.history(t, { count: 10 }))).toEqual([1]);
      expect(ids(await s.resources.search(t, byIdentifier('old', 's')))).toEqual(['keep']);
      expect(ids(await s.resources.search(t, byIdentifier('changed')))).toEqual([]);
      expect(ids(await s.resources.search(t, byIdentifier('new')))).toEqual([]);
      expect(await s.resources.count(t, { type: 'Observation', sort: [], count: 10, compartment: 'keep' })).toBe(0);
      expect(await s.resources.changeToken(t, ['Patient', 'Observation'])).toBe(token);
    });

    test('measured() gives a small stored text, and of a large one its length in UTF-8 bytes alone; current() then reads it', async () => {
      const s = store();
      const t = uniqueTenant();
      // 2-, 3- and 4-byte characters, and characters JSON escapes.
      const large = await save(s, t, 'Basic', 'large', { body: { text: 'für 退院 🏥 "q"\n'.repeat(MEASURED_TEXT_BYTES / 8) } });
      const small = await save(s, t, 'Basic', 'small', { body: { text: 'für' } });
      await save(s, t, 'Basic', 'gone');
      await save(s, t, 'Basic', 'gone', { versionId: 2, lastUpdated: 2_000, deleted: true });
      await s.resources.write(t, async (w) => {
        expect(await w.measured('Basic', 'large')).toEqual({ versionId: 1, lastUpdated: 1_700_000_000_000, deleted: false, bytes: Buffer.byteLength(large.content) });
        expect(await w.measured('Basic', 'small')).toEqual({ versionId: 1, lastUpdated: 1_700_000_000_000, deleted: false, content: small.content });
        expect(await w.measured('Basic', 'gone')).toEqual({ versionId: 2, lastUpdated: 2_000, deleted: true, content: '' });
        expect(await w.measured('Basic', 'none')).toBeNull();
        // The row measured() locked is read whole by current(), and then known whole.
        expect((await w.current('Basic', 'large'))!.content === large.content).toBe(true);
        expect((await w.measured('Basic', 'large'))!.content === large.content).toBe(true);
        // This transaction's own writes, large ones included, with their text.
        const next = version('Basic', 'small', { versionId: 2, lastUpdated: 3_000, body: { text: 'x'.repeat(MEASURED_TEXT_BYTES) } });
        await w.put(next);
        expect((await w.measured('Basic', 'small'))!.content === next.content).toBe(true);
      });
    });

    test('ResourceRepo.measured() reads as the writer\'s measured() does, outside a transaction: a large text by its UTF-8 length alone', async () => {
      const s = store();
      const t = uniqueTenant();
      const large = await save(s, t, 'Basic', 'large', { body: { text: 'für 退院 🏥 "q"\n'.repeat(MEASURED_TEXT_BYTES / 8) } });
      const small = await save(s, t, 'Basic', 'small', { body: { text: 'für' } });
      const edge = await save(s, t, 'Basic', 'edge', { body: { text: 'x'.repeat(MEASURED_TEXT_BYTES) } });
      await save(s, t, 'Basic', 'gone');
      await save(s, t, 'Basic', 'gone', { versionId: 2, lastUpdated: 2_000, deleted: true });
      expect(await s.resources.measured(t, 'Basic', 'large')).toEqual({ versionId: 1, lastUpdated: 1_700_000_000_000, deleted: false, bytes: Buffer.byteLength(large.content) });
      expect(await s.resources.measured(t, 'Basic', 'small')).toEqual({ versionId: 1, lastUpdated: 1_700_000_000_000, deleted: false, content: small.content });
      expect(await s.resources.measured(t, 'Basic', 'edge')).toEqual({ versionId: 1, lastUpdated: 1_700_000_000_000, deleted: false, bytes: edge.content.length });
      expect(await s.resources.measured(t, 'Basic', 'gone')).toEqual({ versionId: 2, lastUpdated: 2_000, deleted: true, content: '' });
      expect(await s.resources.measured(t, 'Basic', 'none')).toBeNull();
      expect(await s.resources.measured(uniqueTenant(), 'Basic', 'large')).toBeNull();
    });

    test('present() names the ids of a type with a current row, deleted ones and this transaction\'s writes included, as ResourceRepo.present', async () => {
      const s = store();
      const t = uniqueTenant();
      await save(s, t, 'ValueSet', 'live');
      await save(s, t, 'ValueSet', 'gone');
      await save(s, t, 'ValueSet', 'gone', { versionId: 2, lastUpdated: 2_000, deleted: true });
      await save(s, uniqueTenant(), 'ValueSet', 'elsewhere');
      await s.resources.write(t, async (w) => {
        await w.put(version('ValueSet', 'new'));
        await w.put(version('CodeSystem', 'other'));
        const found = await w.present('ValueSet', ['live', 'gone', 'elsewhere', 'none', 'new', 'other', 'new']);
        expect(found.sort()).toEqual(['gone', 'live', 'new']);
        expect(await w.present('ValueSet', [])).toEqual([]);
      });
      expect((await s.resources.present(t, 'ValueSet', ['live', 'gone', 'new', 'none'])).sort()).toEqual(['gone', 'live', 'new']);
    });

    test('vread() reads a version, current or in history, this transaction\'s writes included, as ResourceRepo.vread', async () => {
      const s = store();
      const t = uniqueTenant();
      await save(s, t, 'Observation', 'o', { lastUpdated: 1_000 });
      await save(s, t, 'Observation', 'o', { versionId: 2, lastUpdated: 2_000 });
      await save(s, uniqueTenant(), 'Observation', 'elsewhere');
      await s.resources.write(t, async (w) => {
        expect(await w.vread('Observation', 'o', 1)).toEqual(await s.resources.vread(t, 'Observation', 'o', 1));
        expect((await w.vread('Observation', 'o', 1))).toMatchObject({ type: 'Observation', id: 'o', versionId: 1, lastUpdated: 1_000, deleted: false });
        await w.put(version('Observation', 'o', { versionId: 3, lastUpdated: 3_000, deleted: true }));
        await w.put(version('Observation', 'new', { lastUpdated: 3_000 }));
        expect(await w.vread('Observation', 'o', 2)).toMatchObject({ versionId: 2, lastUpdated: 2_000, deleted: false });
        expect(await w.vread('Observation', 'o', 3)).toMatchObject({ versionId: 3, deleted: true });
        expect(await w.vread('Observation', 'new', 1)).toMatchObject({ id: 'new', versionId: 1 });
        expect(await w.vread('Observation', 'o', 4)).toBeNull();
        expect(await w.vread('Observation', 'elsewhere', 1)).toBeNull();
        expect(await w.vread('Patient', 'o', 1)).toBeNull();
      });
    });

    test('existing() answers many keys at once: live rows, this transaction\'s writes, not deleted or other tenants\' rows', async () => {
      const s = store();
      const t = uniqueTenant();
      await save(s, t, 'Patient', 'live');
      await save(s, t, 'Patient', 'gone');
      await save(s, t, 'Patient', 'gone', { versionId: 2, lastUpdated: 2_000, deleted: true });
      await save(s, uniqueTenant(), 'Patient', 'elsewhere');
      await s.resources.write(t, async (w) => {
        await w.put(version('Observation', 'new'));
        await w.put(version('Patient', 'live', { versionId: 2, lastUpdated: 3_000, deleted: true }));
        const keys = [['Patient', 'live'], ['Observation', 'new'], ['Patient', 'gone'], ['Patient', 'elsewhere'], ['Patient', 'none'], ['Observation', 'new']];
        expect(await w.existing(keys.map(([type, id]) => ({ type: type!, id: id! })))).toEqual([false, true, false, false, false, true]);
        expect(await w.existing([])).toEqual([]);
      });
      await s.resources.write(t, async (w) => {
        expect(await w.existing([{ type: 'Observation', id: 'new' }, { type: 'Patient', id: 'live' }, { type: 'Encounter', id: 'new' }])).toEqual([true, false, false]);
      });
    });

    test('a throw after many writes (more than one batch) leaves nothing behind', async () => {
      const s = store();
      const t = uniqueTenant();
      const boom = new Error('late');
      const failing = s.resources.write(t, async (w) => {
        for (let i = 0; i < 1_500; i++) await w.put(version('Patient', `p${i}`, { index: [{ param: 'identifier', system: 's', value: 'x' }] }));
        throw boom;
      });
      await expect(failing).rejects.toBe(boom);
      expect(await s.resources.count(t, byIdentifier('x'))).toBe(0);
      expect(await s.resources.history(t, { count: 1 })).toEqual([]);
      expect(await s.resources.read(t, 'Patient', 'p0')).toBeNull();
    });

    test('index and compartment rows are replaced on update and removed on delete', async () => {
      const s = store();
      const t = uniqueTenant();
      const obs = (patient: string): SearchQuery => ({ type: 'Observation', sort: [], count: 10, compartment: patient });
      const code = (value: string): SearchQuery => ({ type: 'Observation', sort: [], count: 10, where: tokens([{ param: 'code', values: [{ value }] }]) });
      await save(s, t, 'Observation', 'o', { index: [{ param: 'code', system: 'l', value: 'A' }, { param: 'code', system: 'l', value: 'B' }], compartments: ['p1'] });
      expect(ids(await s.resources.search(t, code('B')))).toEqual(['o']);
      await save(s, t, 'Observation', 'o', { index: [{ param: 'code', system: 'l', value: 'C' }], compartments: ['p2', 'p3'] });
      expect(ids(await s.resources.search(t, code('A')))).toEqual([]);
      expect(ids(await s.resources.search(t, code('B')))).toEqual([]);
      expect(ids(await s.resources.search(t, code('C')))).toEqual(['o']);
      expect(ids(await s.resources.search(t, obs('p1')))).toEqual([]);
      expect(ids(await s.resources.search(t, obs('p3')))).toEqual(['o']);
      await save(s, t, 'Observation', 'o', { deleted: true });
      expect(ids(await s.resources.search(t, code('C')))).toEqual([]);
      expect(await s.resources.count(t, obs('p2'))).toBe(0);
      await save(s, t, 'Observation', 'o', { index: [{ param: 'code', system: 'l', value: 'A' }] });
      expect(ids(await s.resources.search(t, code('A')))).toEqual(['o']);
      expect(await s.resources.count(t, obs('p2'))).toBe(0);
    });

    test('changeToken changes on every write of the given types, not on other types', async () => {
      const s = store();
      const t = uniqueTenant();
      const token = () => s.resources.changeToken(t, ['ValueSet', 'CodeSystem']);
      const seen = new Set([await token()]);
      const expectChanged = async () => {
        const now = await token();
        expect(seen.has(now)).toBe(false);
        seen.add(now);
      };
      await save(s, t, 'ValueSet', 'v');
      await expectChanged();
      await save(s, t, 'ValueSet', 'v');
      await expectChanged();
      await save(s, t, 'CodeSystem', 'c');
      await expectChanged();
      await save(s, t, 'CodeSystem', 'c', { deleted: true });
      await expectChanged();
      const before = await token();
      await save(s, t, 'Patient', 'p');
      await save(s, uniqueTenant(), 'ValueSet', 'v');
      await s.resources.write(t, async () => undefined);
      expect(await token()).toBe(before);
      expect(await s.resources.changeToken(t, ['Patient'])).not.toBe(await s.resources.changeToken(uniqueTenant(), ['Patient']));
    });

    test('changeTokens reads the changeToken of each tenant asked, one with nothing held too, in one call', async () => {
      const s = store();
      const [a, b, empty] = [uniqueTenant(), uniqueTenant(), uniqueTenant()];
      await save(s, a, 'Subscription', 's1');
      await save(s, a, 'Subscription', 's2');
      await save(s, a, 'Patient', 'p');
      await save(s, b, 'Subscription', 's1', { deleted: true });
      const tokens = await s.resources.changeTokens([a, b, empty], ['Subscription']);
      expect(tokens).toEqual(new Map([
        [a, await s.resources.changeToken(a, ['Subscription'])],
        [b, await s.resources.changeToken(b, ['Subscription'])],
        [empty, await s.resources.changeToken(empty, ['Subscription'])],
      ]));
      await save(s, b, 'Subscription', 's1');
      const after = await s.resources.changeTokens([a, b], ['Subscription']);
      expect([after.get(a) === tokens.get(a), after.get(b) === tokens.get(b)]).toEqual([true, false]);
      expect(await s.resources.changeTokens([], ['Subscription'])).toEqual(new Map());
    });

    test('transactions issued together succeed or fail each on its own', async () => {
      const s = store();
      const t = uniqueTenant();
      // p0 exists before: two transactions creating one new id at once is a conflict on a database with
      // concurrent writers (the two-instance contract covers that race), not what this test is about.
      await save(s, t, 'Patient', 'p0', { body: { by: -1 } });
      const token = await s.resources.changeToken(t, ['Patient']);
      const failing = new Set([3, 7, 11]);
      // Issued in one go, as concurrent requests are: an adapter may commit them together.
      const results = await Promise.allSettled(
        Array.from({ length: 16 }, (_, i) =>
          s.resources.write(t, async (w) => {
            // Every transaction updates p0, whichever of the earlier ones committed.
            const cur = await w.current('Patient', 'p0');
            await w.put(version('Patient', 'p0', { versionId: cur!.versionId + 1, body: { by: i } }));
            await w.put(version('Patient', `p${i + 1}`, { index: [{ param: 'identifier', system: 's', value: `v${i}` }], compartments: [`p${i + 1}`] }));
            if (failing.has(i)) throw new Error(`fail ${i}`);
            return i;
          }),
        ),
      );
      results.forEach((r, i) => {
        if (failing.has(i)) expect(r).toEqual({ status: 'rejected', reason: new Error(`fail ${i}`) });
        else expect(r).toEqual({ status: 'fulfilled', value: i });
      });
      for (let i = 0; i < 16; i++) {
        expect(ids(await s.resources.search(t, byIdentifier(`v${i}`, 's')))).toEqual(failing.has(i) ? [] : [`p${i + 1}`]);
        expect(await s.resources.count(t, { type: 'Patient', sort: [], count: 1, compartment: `p${i + 1}` })).toBe(failing.has(i) ? 0 : 1);
      }
      // p0 got one version per committed transaction, numbered without gaps.
      const p0 = await s.resources.history(t, { type: 'Patient', id: 'p0', count: 100 });
      expect(versions(p0)).toEqual(Array.from({ length: 14 }, (_, i) => 14 - i));
      expect(p0.map((v) => JSON.parse(v.content).by).sort((a, b) => a - b)).toEqual([-1, ...[...Array(16).keys()].filter((i) => !failing.has(i))]);
      expect(await s.resources.changeToken(t, ['Patient'])).not.toBe(token);
    });

    test('a version not newer than the stored one is a conflict', async () => {
      const s = store();
      const t = uniqueTenant();
      await save(s, t, 'Patient', 'p');
      await save(s, t, 'Patient', 'p');
      for (const versionId of [1, 2]) {
        await expect(s.resources.write(t, (w) => w.put(version('Patient', 'p', { versionId })))).rejects.toBeInstanceOf(StoreConflictError);
      }
      expect(versions(await s.resources.history(t, { count: 10 }))).toEqual([2, 1]);
    });

    test('several versions of one resource in one transaction all reach history', async () => {
      const s = store();
      const t = uniqueTenant();
      await s.resources.write(t, async (w) => {
        for (let n = 1; n <= 3; n++) {
          const v = version('Patient', 'p', { versionId: n, lastUpdated: n, index: [{ param: 'identifier', system: '', value: `v${n}` }] });
          await w.put(v);
          expect(await w.current('Patient', 'p')).toEqual({ versionId: n, lastUpdated: n, deleted: false, content: v.content });
        }
      });
      expect(versions(await s.resources.history(t, { count: 10 }))).toEqual([3, 2, 1]);
      expect(ids(await s.resources.search(t, byIdentifier('v3', '')))).toEqual(['p']);
      expect(ids(await s.resources.search(t, byIdentifier('v1')))).toEqual([]);
    });

    test('many current() calls at once in one transaction each get their own answer', async () => {
      const s = store();
      const t = uniqueTenant();
      const saved: Record<string, string> = {};
      for (const id of ['a', 'c', 'e']) saved[id] = (await save(s, t, 'Patient', id, { lastUpdated: id.charCodeAt(0) })).content;
      await save(s, t, 'Patient', 'c', { deleted: true, lastUpdated: 5 });
      await s.resources.write(t, async (w) => {
        const keys = ['a', 'b', 'c', 'd', 'e', 'a'];
        const found = await Promise.all(keys.map((id) => w.current('Patient', id)));
        // Each with its stored text, read by the same (batched) lookup.
        expect(found).toEqual([
          { versionId: 1, lastUpdated: 97, deleted: false, content: saved.a! },
          null,
          { versionId: 2, lastUpdated: 5, deleted: true, content: '' },
          null,
          { versionId: 1, lastUpdated: 101, deleted: false, content: saved.e! },
          { versionId: 1, lastUpdated: 97, deleted: false, content: saved.a! },
        ]);
        for (const [i, id] of keys.slice(0, 5).entries()) {
          await w.put(version('Patient', id, { versionId: (found[i]?.versionId ?? 0) + 1, lastUpdated: 1_000 }));
        }
      });
      const h = await s.resources.history(t, { since: 1_000, count: 10 });
      expect(h.map((r) => `${r.id}/${r.versionId}`)).toEqual(['e/2', 'd/1', 'c/3', 'b/1', 'a/2']);
    });

    test('a large transaction (more rows than one batch) is written whole and indexed', async () => {
      const s = store();
      const t = uniqueTenant();
      const n = 2_345;
      await s.resources.write(t, async (w) => {
        for (let i = 0; i < n; i++) {
          const id = `p${String(i).padStart(5, '0')}`;
          await w.put(version('Patient', id, { lastUpdated: i, index: [{ param: 'identifier', system: 's', value: `${i % 7}` }], compartments: [id] }));
        }
      });
      expect(await s.resources.count(t, { type: 'Patient', sort: [], count: 1 })).toBe(n);
      expect(await s.resources.count(t, byIdentifier('3', 's'))).toBe(335);
      expect(ids(await s.resources.search(t, { type: 'Patient', sort: [], count: 10, compartment: 'p02344' }))).toEqual(['p02344']);
      expect(await s.resources.read(t, 'Patient', 'p01000')).toEqual(stored(version('Patient', 'p01000', { lastUpdated: 1_000 })));
    });
  });
}
