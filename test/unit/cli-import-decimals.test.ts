/**
 * `cinder import` keeps numbers as written (src/fhir/exact-json.ts) on each of its paths, on both
 * adapters: NDJSON lines prepared on the worker thread, a line with a `urn:` reference resolved on the
 * importing thread, a transaction Bundle (with a urn:uuid reference) and a collection Bundle. A line whose
 * integer is written with a fraction is refused, or with validation off stored as written, and then
 * found by `cinder validate`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { storeTargets, type StoreTarget } from '../helpers/stores.ts';
import { createCliEnv } from '../helpers/cli.ts';

const targets = await storeTargets({ main: false });

afterAll(async () => {
  for (const t of targets) await t.cleanup();
});

const LITERALS = ['98.60', '1.0', '0.010', '1e-26', '12345678901234567890.5', '-0.0', '0.00000000000000000000000001'];
const components = LITERALS.map((l, i) => `{"code":{"text":"c${i}"},"valueQuantity":{"value":${l}}}`).join(',');
/** An Observation (JSON text) with every literal, identified by `tag`. */
const observation = (tag: string, extra = '') =>
  `{"resourceType":"Observation",${extra}"identifier":[{"system":"urn:decimals","value":"${tag}"}],"status":"final","code":{"text":"decimals"},"component":[${components}]}`;
const PATIENT = 'urn:uuid:0e6b2a8c-5d1f-4f0a-9c3e-7b2d1a0f9e84';

for (const target of targets) {
  describe(`cinder import keeps numbers as written (${target.kind})`, () => {
    let cli: ReturnType<typeof createCliEnv>;
    let db: Awaited<ReturnType<StoreTarget['fresh']>>;

    beforeAll(async () => {
      db = await target.migrated();
      cli = createCliEnv({ CINDER_DATABASE_URL: db.url });
      expect((await cli.run(['tenant', 'create', 't1'])).code).toBe(0);
    });

    afterAll(() => cli.close());

    test('NDJSON lines, a urn: line, a transaction and a collection Bundle', async () => {
      const transaction = `{"resourceType":"Bundle","type":"transaction","entry":[
        {"fullUrl":"${PATIENT}","resource":{"resourceType":"Patient","active":true},"request":{"method":"POST","url":"Patient"}},
        {"resource":${observation('transaction', `"subject":{"reference":"${PATIENT}"},`)},"request":{"method":"POST","url":"Observation"}}]}`;
      const ndjson = [
        observation('line', '"id":"line",'),
        observation('urn', `"id":"urn","subject":{"reference":"${PATIENT}"},`),
        '{"resourceType":"Observation","id":"integer","status":"final","code":{"text":"i"},"valueInteger":1.0}',
      ].join('\n') + '\n';
      const collection = `{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:5f1c9d2e-8a7b-4c6d-9e0f-1a2b3c4d5e6f","resource":${observation('collection')}}]}`;
      const files = [['transaction.json', transaction], ['lines.ndjson', ndjson], ['collection.json', collection]].map(([name, text]) => {
        const path = join(cli.dir, name!);
        writeFileSync(path, text!);
        return path;
      });
      const r = await cli.run(['import', '--tenant', 't1', '--json', ...files]);
      expect(r.code).not.toBe(0);
      const summary = JSON.parse(r.stdout);
      expect(summary).toMatchObject({ imported: 5, failed: 1 });
      expect(JSON.stringify(summary)).toContain('not 1.0');

      const store = db.open();
      const stored = (await store.resources.history('t1', { type: 'Observation', count: 100 })).map((v) => v.content);
      const patient = (await store.resources.history('t1', { type: 'Patient', count: 10 }))[0]!;
      for (const tag of ['transaction', 'line', 'urn', 'collection']) {
        const text = stored.find((s) => s.includes(`"value":"${tag}"`));
        expect({ tag, found: text !== undefined }).toEqual({ tag, found: true });
        for (const l of LITERALS) expect(text).toContain(`{"value":${l}}`);
        if (tag === 'transaction' || tag === 'urn') expect(JSON.parse(text!).subject.reference).toBe(`Patient/${patient.id}`);
      }
      expect(stored.some((s) => s.includes('"id":"integer"'))).toBe(false);
    });

    test('with CINDER_VALIDATION=off an integer written 1.0 is stored as written, and cinder validate finds it', async () => {
      const off = createCliEnv({ CINDER_DATABASE_URL: db.url, CINDER_VALIDATION: 'off' });
      try {
        const path = join(off.dir, 'legacy.ndjson');
        writeFileSync(path, '{"resourceType":"Observation","id":"legacy","status":"final","code":{"text":"i"},"valueInteger":1.0}\n');
        expect((await off.run(['import', '--tenant', 't1', path])).code).toBe(0);
        const store = db.open();
        expect((await store.resources.read('t1', 'Observation', 'legacy'))!.content).toEndWith('"valueInteger":1.0}');
        const r = await off.run(['validate', '--tenant', 't1', '--type', 'Observation']);
        expect(r.code).toBe(1);
        expect(r.stdout).toContain('not 1.0');
        expect(r.stdout).toContain('Observation.value.ofType(integer)');
      } finally {
        off.close();
      }
    });
  });
}
