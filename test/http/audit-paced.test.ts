/**
 * The audit trail makes a transaction's AuditEvents with turns of the event loop (src/audit/trail.ts
 * writeBatch, restEvents): a transaction of thousands of entries makes one AuditEvent per entry, and making
 * and preparing them (their index rows, their text) ran in one hold of the loop at the flush, its response
 * Bundle parsed twice with a whole JSON.parse (a transaction of 20,000 entries held it 4.8 s). What is
 * written is unchanged.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { createTestApp } from '../helpers/app.ts';
import { fhirClient, type Json } from '../helpers/fhir.ts';
import { tailHold } from '../helpers/loop.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`the audit trail of a large transaction, on ${target.kind}`, () => {
    test('its AuditEvents are made with turns of the event loop, one for the transaction and one for each entry', async () => {
      const db = await target.migrated();
      const store = db.open();
      await store.migrate();
      // Flushed by the test alone (a minute apart).
      const t = await createTestApp({ store, env: { CINDER_AUDIT: 'on', CINDER_AUDIT_FLUSH_MS: '60000' } });
      try {
        const api = fhirClient(t, await t.token());
        const n = 4000;
        const entry = Array.from({ length: n }, (_, i) => ({
          fullUrl: `urn:uuid:00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
          resource: { resourceType: 'Patient', name: [{ family: `Lee ${i}`, given: ['Ann'] }] },
          request: { method: 'POST', url: 'Patient' },
        }));
        const res = await api.call('POST', '', { resourceType: 'Bundle', type: 'transaction', entry }, { Prefer: 'return=minimal' });
        expect(res.status).toBe(200);
        const { took, longest } = await tailHold(() => t.app.audit!.flush());
        // Made and prepared in one call, its events held the loop for most of the flush (65-75% of it); with turns, the
        // longest hold is a commit's or a collection's.
        expect({ took: took > 80, longest: longest < took / 4 }).toEqual({ took: true, longest: true });
        expect(t.app.audit!.counts).toEqual({ written: n + 2, dropped: 0, failed: 0 });
        const count = async (query: string) => ((await api.search(`AuditEvent?_summary=count&${query}`)) as Json).total;
        expect([await count('subtype=transaction'), await count('subtype=create')]).toEqual([1, n]);
        const [event] = ((await api.search('AuditEvent?subtype=transaction')) as Json).entry.map((e: Json) => e.resource);
        expect(event.entity.filter((x: Json) => x.role?.code === '4')).toHaveLength(n);
      } finally {
        await t.close();
      }
    });
  });
}
