import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { download, eachStore, finish, kickOff, observation, patient, put, refs, remove } from '../helpers/export.ts';
import type { SnapshotQuery, Store } from '../../src/store/types.ts';

let t: TestApp;
let token: string;
const prov = (id: string, recorded: string, ...targets: string[]) => ({
  resourceType: 'Provenance', id, recorded, target: targets.map((reference) => ({ reference })), agent: [{ who: { display: 'someone' } }],
});

await eachStore((kind, fresh) => {
  describe(kind, () => {
    beforeEach(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      await put(t, patient('p1'));
      await put(t, patient('p2'));
      await put(t, observation('o1', 'p1'));
      await put(t, observation('o2', 'p2'));
      await put(t, { resourceType: 'Medication', id: 'm1' });
      await put(t, { resourceType: 'Group', id: 'g1', type: 'person', actual: true, member: [{ entity: { reference: 'Patient/p1' } }] });
      await put(t, prov('prov-o1-old', '2025-01-01T00:00:00Z', 'Observation/o1'));
      await put(t, prov('prov-o1-new', '2025-06-01T00:00:00Z', 'Observation/o1', 'Medication/m1'));
      await put(t, prov('prov-o2', '2025-06-01T00:00:00Z', 'Observation/o2'));
      await put(t, prov('prov-p1', '2025-02-01T00:00:00Z', 'Patient/p1'));
      await put(t, prov('prov-m1', '2025-02-01T00:00:00Z', 'Medication/m1'));
    });
    afterEach(async () => t.close());

    const provenance = async (path: string) => {
      const files = await download(t, token, (await finish(t, token, await kickOff(t, token, path))).output);
      return refs({ Provenance: files.Provenance ?? [] });
    };

    describe(`Provenance (${kind})`, () => {
      test("a Group export includes the Provenance targeting resources in its patients' compartments, and no other", async () => {
        expect(await provenance('/Group/g1/$export')).toEqual(['Provenance/prov-o1-new', 'Provenance/prov-o1-old', 'Provenance/prov-p1']);
      });

      test('a Patient export limited by _type includes Provenance only when asked for', async () => {
        expect(await provenance('/Patient/$export?_type=Observation')).toEqual([]);
        // prov-p1 targets a Patient, which is in its own compartment, though no Patient is exported.
        expect(await provenance('/Patient/$export?_type=Observation,Provenance')).toEqual([
          'Provenance/prov-o1-new', 'Provenance/prov-o1-old', 'Provenance/prov-o2', 'Provenance/prov-p1',
        ]);
      });

      test("a Group export's Provenance is that of every resource in its patients' compartments, whatever _type and _typeFilter export of them", async () => {
        const p1 = ['Provenance/prov-o1-new', 'Provenance/prov-o1-old', 'Provenance/prov-p1'];
        expect(await provenance('/Group/g1/$export?_type=Patient,Provenance')).toEqual(p1);
        expect(await provenance('/Group/g1/$export?_typeFilter=' + encodeURIComponent('Observation?code=nothing'))).toEqual(p1);
        // includeAssociatedData keeps to the resources being returned.
        expect(await provenance('/Group/g1/$export?_type=Patient,Provenance&includeAssociatedData=RelevantProvenanceResources')).toEqual(['Provenance/prov-p1']);
      });

      test('_typeFilter on Provenance applies to the Provenance found by its targets', async () => {
        const recent = encodeURIComponent('Provenance?recorded=gt2025-03-01');
        expect(await provenance(`/Group/g1/$export?_type=Observation,Provenance&_typeFilter=${recent}`)).toEqual(['Provenance/prov-o1-new']);
        expect(await provenance(`/Patient/$export?_typeFilter=${recent}`)).toEqual(['Provenance/prov-o1-new', 'Provenance/prov-o2']);
        expect(await provenance(`/$export?_type=Medication&includeAssociatedData=RelevantProvenanceResources&_typeFilter=${recent}`)).toEqual(['Provenance/prov-o1-new']);
        // Provenance not exported: its filter selects nothing (Bulk Data 2.0 filters what would be returned).
        expect(await provenance(`/Group/g1/$export?_type=Observation&_typeFilter=${recent}`)).toEqual([]);
      });

      test('with _since, a deleted Provenance of a resource in the compartment is reported in deleted', async () => {
        t.clock.advance(60_000);
        const since = new Date(t.clock.now()).toISOString();
        t.clock.advance(1000);
        await remove(t, 'Provenance', 'prov-o1-old');
        t.clock.advance(1000);
        const m = await finish(t, token, await kickOff(t, token, `/Group/g1/$export?_since=${since}`));
        const deleted = await download(t, token, m.deleted ?? []);
        const urls = (deleted.Bundle ?? []).flatMap((b) => (b.entry as { request: { url: string } }[]).map((e) => e.request.url));
        expect(urls).toEqual(['Provenance/prov-o1-old']);
      });

      test("with _since, a member who joined since comes with the Provenance of its records, older ones too; the others' only when changed", async () => {
        await put(t, prov('prov-o2-older', '2025-01-01T00:00:00Z', 'Observation/o2'));
        t.clock.advance(60_000);
        const since = new Date(t.clock.now()).toISOString();
        t.clock.advance(1000);
        // p2 joins; p1's Observation gets a Provenance since.
        await put(t, { resourceType: 'Group', id: 'g1', type: 'person', actual: true, member: [{ entity: { reference: 'Patient/p1' } }, { entity: { reference: 'Patient/p2' } }] });
        await put(t, prov('prov-o1-since', '2025-07-01T00:00:00Z', 'Observation/o1'));
        t.clock.advance(1000);
        expect(await provenance(`/Group/g1/$export?_since=${since}`)).toEqual(['Provenance/prov-o1-since', 'Provenance/prov-o2', 'Provenance/prov-o2-older']);
        // Narrowed to the resources returned: p2's Observation (all of them, it joined) and p1's changed ones (none).
        const relevant = `/Group/g1/$export?_type=Observation,Provenance&_since=${since}&includeAssociatedData=`;
        expect(await provenance(relevant + 'RelevantProvenanceResources')).toEqual(['Provenance/prov-o2', 'Provenance/prov-o2-older']);
        expect(await provenance(relevant + 'LatestProvenanceResources')).toEqual(['Provenance/prov-o2']);
        // `_typeFilter` on Provenance applies to the joined member's older ones too.
        const recent = encodeURIComponent('Provenance?recorded=gt2025-03-01');
        expect(await provenance(`/Group/g1/$export?_since=${since}&_typeFilter=${recent}`)).toEqual(['Provenance/prov-o1-since', 'Provenance/prov-o2']);
        // Records changed after transactionTime are judged as of it: p1's Observation, updated meanwhile, is still no joined member's.
        const status = await kickOff(t, token, `/Group/g1/$export?_type=Observation,Provenance&_since=${since}`);
        t.clock.advance(1000);
        await put(t, observation('o1', 'p1', '5678-9'));
        await put(t, observation('o2', 'p2', '5678-9'));
        const files = await download(t, token, (await finish(t, token, status)).output);
        expect(refs({ Provenance: files.Provenance ?? [] })).toEqual(['Provenance/prov-o1-since', 'Provenance/prov-o2', 'Provenance/prov-o2-older']);
      });

      test("with _since, a joined member's older Provenance is read from its records, not from every older Provenance of the tenant", async () => {
        // 150 older Provenance of p1's record (p1 a member all along), one of p2's (who joins), none changed since.
        for (let i = 0; i < 150; i++) await put(t, prov(`prov-o1-${i}`, '2025-01-01T00:00:00Z', 'Observation/o1'));
        await put(t, prov('prov-o2-older', '2025-01-01T00:00:00Z', 'Observation/o2'));
        t.clock.advance(60_000);
        const since = new Date(t.clock.now()).toISOString();
        t.clock.advance(1000);
        await put(t, { resourceType: 'Group', id: 'g1', type: 'person', actual: true, member: [{ entity: { reference: 'Patient/p1' } }, { entity: { reference: 'Patient/p2' } }] });
        t.clock.advance(1000);
        // The Provenance rows every snapshot page of the export hands back.
        let read = 0;
        const store: Store = { ...t.store, resources: { ...t.store.resources, snapshot: async (tenant: string, q: SnapshotQuery) => {
          const page = await t.store.resources.snapshot(tenant, q);
          if (q.type === 'Provenance') read += page.count + page.recheck.length;
          return page;
        } } };
        for (const associated of ['', '&includeAssociatedData=RelevantProvenanceResources', '&includeAssociatedData=LatestProvenanceResources']) {
          read = 0;
          const status = await kickOff(t, token, `/Group/g1/$export?_type=Observation,Provenance&_since=${since}${associated}`);
          // p2's Observation moves to p1 after transactionTime: as of it, it was p2's, whose Provenance is owed still.
          t.clock.advance(1000);
          await put(t, observation('o2', 'p1'));
          const files = await download(t, token, (await finish(t, token, status, { store })).output);
          const expected = associated.includes('Latest') ? ['Provenance/prov-o2'] : ['Provenance/prov-o2', 'Provenance/prov-o2-older'];
          expect([associated, refs({ Provenance: files.Provenance ?? [] })]).toEqual([associated, expected]);
          expect(read).toBeLessThanOrEqual(associated.includes('Latest') ? 6 : 4);
          t.clock.advance(1000);
          await put(t, observation('o2', 'p2'));
          t.clock.advance(1000);
        }
      });

      test("with _since, a joined member's older Provenance naming several of its records is no reason to stop before the next page", async () => {
        // prov-o2 (setup) and prov-o2-single fill the first page of two; prov-o2-both, naming two of p2's records, has two
        // index rows that fill the second page's reading of them.
        await put(t, observation('o3', 'p2'));
        await put(t, prov('prov-o2-single', '2025-01-01T00:00:00Z', 'Observation/o2'));
        await put(t, prov('prov-o2-both', '2025-01-01T00:00:00Z', 'Observation/o2', 'Observation/o3'));
        await put(t, prov('prov-o2-after', '2025-01-01T00:00:00Z', 'Observation/o2'));
        t.clock.advance(60_000);
        const since = new Date(t.clock.now()).toISOString();
        t.clock.advance(1000);
        await put(t, { resourceType: 'Group', id: 'g1', type: 'person', actual: true, member: [{ entity: { reference: 'Patient/p1' } }, { entity: { reference: 'Patient/p2' } }] });
        t.clock.advance(1000);
        const owed = ['Provenance/prov-o2', 'Provenance/prov-o2-after', 'Provenance/prov-o2-both', 'Provenance/prov-o2-single'];
        for (const associated of ['', '&includeAssociatedData=RelevantProvenanceResources']) {
          const status = await kickOff(t, token, `/Group/g1/$export?_type=Observation,Provenance&_since=${since}${associated}`);
          const files = await download(t, token, (await finish(t, token, status, { pageSize: 2 })).output);
          expect([associated, refs({ Provenance: files.Provenance ?? [] })]).toEqual([associated, owed]);
        }
      });

      test('with _since and no member who joined since, the plan has no step for joined members\' Provenance (no second scan of it)', async () => {
        t.clock.advance(60_000);
        const since = new Date(t.clock.now()).toISOString();
        t.clock.advance(1000);
        await put(t, prov('prov-o1-since', '2025-07-01T00:00:00Z', 'Observation/o1'));
        const kinds = async (path: string) => {
          const status = await kickOff(t, token, path);
          const job = (await t.store.exports.jobs.get('t1', status.split('/').pop()!))!;
          await t.request(status, fhirInit(token, 'DELETE'));
          return (JSON.parse(job.spec) as { steps: { kind: string }[] }).steps.map((s) => s.kind).filter((k) => k.startsWith('provenance'));
        };
        expect(await kinds(`/Group/g1/$export?_since=${since}`)).toEqual(['provenance']);
        expect(await kinds(`/Group/g1/$export?_since=${since}&includeAssociatedData=LatestProvenanceResources`)).toEqual(['provenance-scan', 'provenance-emit']);
        expect(await provenance(`/Group/g1/$export?_since=${since}`)).toEqual(['Provenance/prov-o1-since']);
        // One who joined brings the step.
        await put(t, { resourceType: 'Group', id: 'g1', type: 'person', actual: true, member: [{ entity: { reference: 'Patient/p1' } }, { entity: { reference: 'Patient/p2' } }] });
        expect(await kinds(`/Group/g1/$export?_since=${since}`)).toEqual(['provenance', 'provenance-joined']);
      });

      test('Provenance of resources the token may not read is left out', async () => {
        const exported = async (scopes: string[], scope = scopes.join(' ')) => {
          const other = await t.tokenFor('t1', scopes, scope);
          const m = await finish(t, other, await kickOff(t, other, '/Group/g1/$export?_type=Patient,Provenance'));
          return refs({ Provenance: (await download(t, other, m.output)).Provenance ?? [] });
        };
        const all = ['Provenance/prov-o1-new', 'Provenance/prov-o1-old', 'Provenance/prov-p1'];
        const granted = ['system/Patient.rs', 'system/Group.rs', 'system/Provenance.rs'];
        expect(await exported(granted)).toEqual(['Provenance/prov-p1']);
        expect(await exported([...granted, 'system/Observation.rs'])).toEqual(all);
        // A scope filter on the target's type limits the targets as it limits what the token reads.
        const filtered = (code: string) => [...granted, `system/Observation.rs?code=http://loinc.org|${code}`].join(' ');
        expect(await exported([...granted, 'system/Observation.rs'], filtered('nothing'))).toEqual(['Provenance/prov-p1']);
        expect(await exported([...granted, 'system/Observation.rs'], filtered('1234-5'))).toEqual(all);
      });

      test('LatestProvenanceResources: only the most recent Provenance of each exported resource', async () => {
        expect(await provenance('/Group/g1/$export?includeAssociatedData=LatestProvenanceResources')).toEqual(['Provenance/prov-o1-new', 'Provenance/prov-p1']);
        expect(await provenance('/$export?_type=Medication&includeAssociatedData=LatestProvenanceResources')).toEqual(['Provenance/prov-o1-new']);
      });

      test('RelevantProvenanceResources wins over Latest (least restrictive)', async () => {
        expect(await provenance('/$export?_type=Observation&includeAssociatedData=LatestProvenanceResources,RelevantProvenanceResources')).toEqual([
          'Provenance/prov-o1-new', 'Provenance/prov-o1-old', 'Provenance/prov-o2',
        ]);
      });

      test('a system export without includeAssociatedData exports Provenance as a type', async () => {
        expect(await provenance('/$export')).toHaveLength(5);
      });

      test('unknown includeAssociatedData values are a 400, or an issue with lenient handling', async () => {
        const res = await t.request(t.fhir() + '/$export?includeAssociatedData=_everything', fhirInit(token));
        expect(res.status).toBe(400);
        const m = await finish(t, token, await kickOff(t, token, '/$export?_type=Patient&includeAssociatedData=_everything', { Prefer: 'handling=lenient' }));
        expect(JSON.stringify(await download(t, token, m.error))).toContain('_everything');
      });
    });
  });
});
