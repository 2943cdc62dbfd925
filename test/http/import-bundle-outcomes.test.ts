/**
 * `cinder import` of a batch or transaction Bundle: every failing entry's OperationOutcome reaches the import's error
 * output (`--json`'s errors, as `$import`'s error file would list them) with its issues as the entry's response gave
 * them, their expressions included, whatever its status (400, 404, 409, 412 as 422); and so does a transaction's
 * rolled back whole. On both stores.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createCliEnv } from '../helpers/cli.ts';
import type { Json } from '../helpers/fhir.ts';
import { storeTargets } from '../helpers/stores.ts';

const put = (r: Json, extra: Json = {}) => ({ fullUrl: `http://example.org/fhir/${r.resourceType}/${r.id}`, resource: r, request: { method: 'PUT', url: `${r.resourceType}/${r.id}`, ...extra } });
const twin = (id: string) => ({ resourceType: 'Patient', id, identifier: [{ system: 'urn:twins', value: 'x' }] });

const targets = await storeTargets({ main: false });
afterAll(async () => {
  for (const t of targets) await t.cleanup();
});

for (const target of targets) {
  describe(`cinder import of Bundles: failing entries' outcomes (${target.kind})`, () => {
    let cli: ReturnType<typeof createCliEnv>;
    beforeAll(async () => {
      const db = await target.migrated();
      cli = createCliEnv({ CINDER_DATABASE_URL: db.url });
      expect((await cli.run(['tenant', 'create', 't1'])).code).toBe(0);
      const path = join(cli.dir, 'twins.ndjson');
      writeFileSync(path, `${JSON.stringify(twin('twin-1'))}\n${JSON.stringify(twin('twin-2'))}\n`);
      expect((await cli.run(['import', '--tenant', 't1', path])).code).toBe(0);
    });
    afterAll(() => cli.close());

    const imported = async (name: string, bundle: Json) => {
      const path = join(cli.dir, name);
      writeFileSync(path, JSON.stringify(bundle));
      const r = await cli.run(['import', '--tenant', 't1', '--json', path]);
      expect(r.code).toBe(1);
      return JSON.parse(r.stdout) as Json;
    };

    /** Each error's entry, and its issues' codes and expressions. */
    const located = (errors: Json[]) => errors.map((e) => [e.entry, (e.issues ?? []).map((i: Json) => [i.code, i.expression?.[0]])]);

    test('a batch: each failing entry (412, 404 and 400 as 422) with its issues and their expressions', async () => {
      const summary = await imported('batch.json', {
        resourceType: 'Bundle', type: 'batch',
        entry: [
          put({ resourceType: 'Patient', id: 'ok' }),
          put({ resourceType: 'Patient', id: 'locked' }, { ifMatch: 'W/"5"' }),
          { resource: { resourceType: 'Patient', identifier: [{ system: 'urn:twins', value: 'x' }] }, request: { method: 'PUT', url: 'Patient?identifier=urn:twins|x' } },
          put({ resourceType: 'Patient', id: 'bad', gender: 'sometimes' }),
          { resource: { resourceType: 'Patient', id: 'other' }, request: { method: 'PUT', url: 'Patient/elsewhere' } },
          {
            resource: { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'delete' }, { name: 'path', valueString: 'Patient.active' }] }] },
            request: { method: 'PATCH', url: 'Patient/missing' },
          },
        ],
      });
      expect(summary).toMatchObject({ imported: 1, failed: 5 });
      expect(summary.errors.map((e: Json) => e.message.split(':', 2).join(':'))).toEqual([
        'Bundle.entry[1]: 412', 'Bundle.entry[2]: 412', 'Bundle.entry[3]: 422', 'Bundle.entry[4]: 400', 'Bundle.entry[5]: 404',
      ]);
      expect(located(summary.errors)).toEqual([
        [1, [['conflict', 'Bundle.entry[1].request.ifMatch']]],
        [2, [['conflict', 'Bundle.entry[2].request.url']]],
        [3, [['code-invalid', 'Bundle.entry[3].resource.gender']]],
        [4, [['invalid', 'Bundle.entry[4].resource.id']]],
        [5, [['not-found', 'Bundle.entry[5]']]],
      ]);
      expect(summary.errors[0].issues[0].diagnostics).toContain('If-Match expects version 5 of Patient/locked');
    });

    test('a transaction rolled back on a 412: its issues and their expressions', async () => {
      const summary = await imported('tx.json', {
        resourceType: 'Bundle', type: 'transaction',
        entry: [put({ resourceType: 'Patient', id: 'tx-ok' }), put({ resourceType: 'Patient', id: 'tx-locked' }, { ifMatch: 'W/"5"' })],
      });
      expect(summary).toMatchObject({ imported: 0, failed: 2 });
      expect(summary.errors).toHaveLength(1);
      expect(summary.errors[0].message).toStartWith('transaction Bundle rolled back: Bundle.entry[1]: Version conflict');
      expect(located(summary.errors)).toEqual([[undefined, [['conflict', 'Bundle.entry[1].request.ifMatch']]]]);
    });
  });
}
