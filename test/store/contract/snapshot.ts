import { beforeEach, describe, expect, test } from 'bun:test';
import { operatorAccess } from '../../../src/fhir/access.ts';
import { deleteVersion, putVersion } from '../../../src/fhir/crud.ts';
import { POSTGRES, SQLITE } from '../../../src/store/search-sql.ts';
import { snapshotWindow, WINDOW_MAX_RANGES } from '../../../src/store/snapshot-window.ts';
import type { Condition, SnapshotQuery, Store } from '../../../src/store/types.ts';
import { statementRunner } from '../../helpers/search-runner.ts';
import type { StoreTarget } from '../../helpers/stores.ts';
import { times, tokens } from './fixtures.ts';

const obs = (id: string, patient: string, code: string) => ({
  resourceType: 'Observation', id, status: 'final', code: { coding: [{ system: 'http://loinc.org', code }] }, subject: { reference: `Patient/${patient}` },
});

/** Snapshots as of a transactionTime (ResourceRepo.snapshot). Each test on a new database with the same history. */
export function snapshotContract(target: StoreTarget) {
  describe('snapshot', () => {
    let store: Store;
    let url: string;
    const put = (r: Record<string, unknown> & { resourceType: string; id: string }, now: number) =>
      store.resources.write('t1', (w) => putVersion(w, r as never, r.id, { now, access: operatorAccess }, 'PUT'));
    const del = (type: string, id: string, now: number) => store.resources.write('t1', (w) => deleteVersion(w, type, id, { now, access: operatorAccess }));

    interface Row {
      id: string;
      versionId: number;
      lastUpdated: number;
      deleted: boolean;
      verified: boolean;
      content: string;
    }

    /** Every page of the scan; judged lines and rows left to recheck in one list. */
    async function all(q: Omit<SnapshotQuery, 'limit' | 'after'>, limit = 3): Promise<Row[]> {
      const rows: Row[] = [];
      let after: number | undefined;
      for (;;) {
        const page = await store.resources.snapshot('t1', { ...q, limit, ...(after !== undefined ? { after } : {}) });
        const text = new TextDecoder().decode(page.lines);
        expect(text === '' || text.endsWith('\n')).toBe(true);
        const lines = text === '' ? [] : text.slice(0, -1).split('\n');
        expect(lines).toHaveLength(page.count);
        for (const content of lines) {
          const r = JSON.parse(content) as { id: string; meta: { versionId: string; lastUpdated: string } };
          rows.push({ id: r.id, versionId: Number(r.meta.versionId), lastUpdated: Date.parse(r.meta.lastUpdated), deleted: false, verified: true, content });
        }
        rows.push(...page.recheck.map((r) => ({ ...r, verified: false })));
        if (page.next === null) return rows;
        after = page.next;
      }
    }
    const summary = (rows: Row[]) => rows.map((r) => `${r.id}@${r.versionId}${r.deleted ? ':deleted' : ''}${r.verified ? '' : '?'}`).sort();

    beforeEach(async () => {
      const db = await target.migrated();
      url = db.url;
      store = db.open();
      await store.migrate();
      // At T = 1000: o1..o6 live; later changes after T.
      for (let i = 1; i <= 6; i++) await put(obs(`o${i}`, i <= 3 ? 'p1' : 'p2', i % 2 ? 'odd' : 'even'), 100 * i);
      await del('Observation', 'o6', 700);
      await put(obs('o2', 'p2', 'even'), 1500);
      await del('Observation', 'o3', 1600);
      await put(obs('o7', 'p1', 'odd'), 1700);
      await put(obs('o4', 'p1', 'even'), 1800);
      await put(obs('o4', 'p1', 'odd'), 1900);
    });

    test('versions as of `at`: later updates show their old version, later creations and earlier deletions nothing', async () => {
      const rows = await all({ type: 'Observation', at: 1000 });
      expect(summary(rows)).toEqual(['o1@1', 'o2@1?', 'o3@1?', 'o4@1?', 'o5@1']);
      const o2 = rows.find((r) => r.id === 'o2')!;
      expect(JSON.parse(o2.content).subject.reference).toBe('Patient/p1');
      expect(o2.lastUpdated).toBe(200);
    });

    test('paging in keyset order returns every row once whatever the page size', async () => {
      for (const limit of [1, 2, 5, 100]) expect(summary(await all({ type: 'Observation', at: 1000 }, limit))).toEqual(['o1@1', 'o2@1?', 'o3@1?', 'o4@1?', 'o5@1']);
      expect(summary(await all({ type: 'Observation', at: 5000 }))).toEqual(['o1@1', 'o2@2', 'o4@3', 'o5@1', 'o7@1']);
    });

    test('since: only versions updated after it, plus deletions after it with their last live version', async () => {
      const rows = await all({ type: 'Observation', at: 1650, since: 400 });
      expect(summary(rows)).toEqual(['o2@2', 'o3@2:deleted?', 'o4@1?', 'o5@1', 'o6@2:deleted?']);
      const o3 = rows.find((r) => r.id === 'o3')!;
      expect(JSON.parse(o3.content).id).toBe('o3');
      expect(o3.lastUpdated).toBe(1600);
    });

    test('compartments: the database judges current rows, leaves changed ones to the caller', async () => {
      expect(summary(await all({ type: 'Observation', at: 1000, compartment: { kind: 'any' } }))).toEqual(['o1@1', 'o2@1?', 'o3@1?', 'o4@1?', 'o5@1']);
      await store.exports.jobs.create({ id: 'j', tenant: 't1', clientId: 'c', request: '', spec: '{}', transactionTime: 1000, progress: '{}', createdAt: 1 }, [{ id: 'p1', joined: false }], 9);
      expect(summary(await all({ type: 'Observation', at: 1000, compartment: { kind: 'job', jobId: 'j' } }))).toEqual(['o1@1', 'o2@1?', 'o3@1?', 'o4@1?']);
      expect(summary(await all({ type: 'Observation', at: 5000, compartment: { kind: 'job', jobId: 'j' } }))).toEqual(['o1@1', 'o4@3', 'o7@1']);
    });

    test('a job compartment joinedOnly: the compartments of the patients stored as joined alone', async () => {
      await store.exports.jobs.create({ id: 'j', tenant: 't1', clientId: 'c', request: '', spec: '{}', transactionTime: 5000, progress: '{}', createdAt: 1 }, [{ id: 'p1', joined: false }, { id: 'p2', joined: true }], 9);
      expect(summary(await all({ type: 'Observation', at: 5000, compartment: { kind: 'job', jobId: 'j' } }))).toEqual(['o1@1', 'o2@2', 'o4@3', 'o5@1', 'o7@1']);
      expect(summary(await all({ type: 'Observation', at: 5000, compartment: { kind: 'job', jobId: 'j', joinedOnly: true } }))).toEqual(['o2@2', 'o5@1']);
      // With `since` and joinedSince too: the joined patients' whatever their time, and nothing of the others.
      expect(summary(await all({ type: 'Observation', at: 5000, since: 1850, joinedSince: true, compartment: { kind: 'job', jobId: 'j', joinedOnly: true } }))).toEqual(['o2@2', 'o5@1']);
    });

    test('filters (ORed) and ids', async () => {
      const filters: Condition[][] = [tokens([{ param: 'code', values: [{ value: 'odd' }] }]), [{ kind: 'id', ids: ['o2'] }]];
      expect(summary(await all({ type: 'Observation', at: 5000, filters }))).toEqual(['o1@1', 'o2@2', 'o4@3', 'o5@1', 'o7@1']);
      expect(summary(await all({ type: 'Observation', at: 5000, filters: [tokens([{ param: 'code', values: [{ system: 'http://loinc.org', value: 'even' }] }])] }))).toEqual(['o2@2']);
      expect(summary(await all({ type: 'Observation', at: 5000, filters: [times([{ op: 'ge', low: 1700, high: 1701 }])] }))).toEqual(['o4@3', 'o7@1']);
      expect(summary(await all({ type: 'Observation', at: 5000, ids: ['o1', 'o6', 'zz'] }))).toEqual(['o1@1']);
    });

    test('filters of codes: pages read through the codes\' rows hold what a scan of the type would', async () => {
      const odd = tokens([{ param: 'code', values: [{ value: 'odd' }] }]);
      const even = tokens([{ param: 'code', values: [{ system: 'http://loinc.org', value: 'even' }] }]);
      const cases: [Omit<SnapshotQuery, 'limit' | 'after'>, string[]][] = [
        [{ type: 'Observation', at: 5000, filters: [odd] }, ['o1@1', 'o4@3', 'o5@1', 'o7@1']],
        // Rows changed after `at` come back to be judged on their old version, whatever their rows say now.
        [{ type: 'Observation', at: 1000, filters: [even] }, ['o2@1?', 'o3@1?', 'o4@1?']],
        // The window's resources are probed for the rest of their alternative: pages may hold none.
        [{ type: 'Observation', at: 5000, filters: [[...odd, ...times([{ op: 'ge', low: 1700, high: 1701 }])]] }, ['o4@3', 'o7@1']],
        [{ type: 'Observation', at: 5000, filters: [odd, even] }, ['o1@1', 'o2@2', 'o4@3', 'o5@1', 'o7@1']],
        [{ type: 'Observation', at: 5000, filters: [tokens([{ param: 'code', values: [{ value: 'none' }] }])] }, []],
        [{ type: 'Observation', at: 5000, filters: [tokens([{ param: 'category', values: [{ value: 'none' }] }])] }, []],
        [{ type: 'Observation', at: 1000, filters: [tokens([{ param: 'category', values: [{ value: 'none' }] }])] }, ['o2@1?', 'o3@1?', 'o4@1?']],
        // `since` read through its window (the resources updated after it), deletions and changes after `at` as before.
        [{ type: 'Observation', at: 1650, since: 400 }, ['o2@2', 'o3@2:deleted?', 'o4@1?', 'o5@1', 'o6@2:deleted?']],
        [{ type: 'Observation', at: 5000, since: 400, filters: [odd] }, ['o3@2:deleted?', 'o4@3', 'o5@1', 'o6@2:deleted?', 'o7@1']],
        // More codes than a window reads: the type is read in order, with the same answer.
        [{ type: 'Observation', at: 5000, filters: [tokens([{ param: 'code', values: ['odd', ...Array.from({ length: WINDOW_MAX_RANGES }, (_, i) => `c${i}`)].map((value) => ({ value })) }])] }, ['o1@1', 'o4@3', 'o5@1', 'o7@1']],
      ];
      for (const [q, expected] of cases) {
        for (const limit of [1, 2, 100]) expect({ q, limit, rows: summary(await all(q, limit)) }).toEqual({ q, limit, rows: expected });
      }
      await store.exports.jobs.create({ id: 'j', tenant: 't1', clientId: 'c', request: '', spec: '{}', transactionTime: 5000, progress: '{}', createdAt: 1 }, [{ id: 'p1', joined: false }], 9);
      for (const limit of [1, 100]) {
        expect(summary(await all({ type: 'Observation', at: 5000, filters: [odd], compartment: { kind: 'job', jobId: 'j' } }, limit))).toEqual(['o1@1', 'o4@3', 'o7@1']);
      }
    });

    test('the window of a page: the first resources with a row of each alternative\'s codes, or none to read', async () => {
      const odd = tokens([{ param: 'code', values: [{ value: 'odd' }] }]);
      const { runner, close } = await statementRunner(target.kind, url);
      const window = (q: SnapshotQuery) => snapshotWindow(target.kind === 'sqlite' ? SQLITE : POSTGRES, 't1', q, (sql, values) => runner.rows(sql, values) as never);
      try {
        const first = await window({ type: 'Observation', at: 5000, filters: [odd], limit: 2 });
        expect(first).toMatchObject({ full: true, exact: true });
        expect(first!.pks).toHaveLength(2);
        expect(first!.pks[0]!).toBeLessThan(first!.pks[1]!);
        const rest = await window({ type: 'Observation', at: 5000, filters: [odd], limit: 5, after: first!.pks[1]! });
        expect(rest).toMatchObject({ full: false, exact: true });
        expect(rest!.pks).toHaveLength(2);
        expect(rest!.pks[0]!).toBeGreaterThan(first!.pks[1]!);
        const probed = await window({ type: 'Observation', at: 5000, filters: [[...odd, ...times([{ op: 'ge', low: 1700, high: 1701 }])]], limit: 5 });
        expect(probed).toMatchObject({ full: false, exact: false });
        expect(probed!.pks).toHaveLength(4);
        // Without codes in every alternative, with `since` or named ids, the page reads the type in order.
        expect(await window({ type: 'Observation', at: 5000, filters: [odd, times([{ op: 'ge', low: 1700, high: 1701 }])], limit: 5 })).toBeUndefined();
        expect(await window({ type: 'Observation', at: 5000, filters: [tokens([{ param: 'code', values: [{ system: 'http://loinc.org' }] }])], limit: 5 })).toBeUndefined();
        // With `since`: the resources last updated after it (deletions too), by the last-updated index, whatever the filters,
        // in key order from the page's start; not for joined members, whose older records count too.
        const changed = await window({ type: 'Observation', at: 5000, since: 400, filters: [odd], limit: 5 });
        expect(changed).toMatchObject({ full: true, exact: false });
        expect(changed!.pks).toEqual([...changed!.pks].sort((x, y) => x - y));
        const after = await window({ type: 'Observation', at: 5000, since: 400, limit: 5, after: changed!.pks[4]! });
        expect([after!.full, after!.pks.length, after!.pks[0]! > changed!.pks[4]!]).toEqual([false, 1, true]);
        expect((await window({ type: 'Observation', at: 5000, since: 1650, limit: 5 }))!.pks).toHaveLength(2);
        expect(await window({ type: 'Observation', at: 5000, since: 400, joinedSince: true, compartment: { kind: 'job', jobId: 'j' }, limit: 5 })).toBeUndefined();
        expect(await window({ type: 'Observation', at: 5000, ids: ['o1'], filters: [odd], limit: 5 })).toBeUndefined();
        expect(await window({ type: 'Observation', at: 5000, limit: 5 })).toBeUndefined();
      } finally {
        await close();
      }
    });

    test('other tenants and types are never seen', async () => {
      await store.resources.write('t2', (w) => putVersion(w, obs('x1', 'p1', 'odd') as never, 'x1', { now: 10, access: operatorAccess }, 'PUT'));
      expect(summary(await all({ type: 'Observation', at: 5000 })).some((s) => s.startsWith('x1'))).toBe(false);
      expect(await all({ type: 'Patient', at: 5000 })).toEqual([]);
    });
  });
}
