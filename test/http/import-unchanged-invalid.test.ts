/**
 * A bulk import read again over data stored before rules that now refuse it (stored at
 * CINDER_VALIDATION=structural here, or by an earlier release) keeps each resource that equals its current
 * version unchanged, with its problems as warnings, as a REST update that changes nothing is answered
 * (test/http/noop-validation.test.ts): `cinder import` (NDJSON lines, a collection, transaction or batch Bundle's entries) and
 * `$import`, on both stores. A line that changes the resource is refused as before, and nothing is written.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createCliEnv } from '../helpers/cli.ts';
import { storeTargets, type StoreTarget } from '../helpers/stores.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type Json } from '../helpers/fhir.ts';
import { putVersion } from '../../src/fhir/crud.ts';
import { createClient } from '../../src/auth/admin.ts';
import { operatorAccess } from '../../src/fhir/access.ts';
import type { Resource } from '../../src/fhir/resource.ts';

/** A Patient strict validation refuses (its gender is outside the required AdministrativeGender binding), which `structural` stores. */
const legacy = (id: string, extra: Json = {}): Json => ({ resourceType: 'Patient', id, active: true, gender: 'banana', name: [{ family: 'Legacy' }], ...extra });
const ndjson = (...resources: Json[]) => resources.map((r) => JSON.stringify(r)).join('\n') + '\n';
const severities = (issues: Json[] | undefined) => (issues ?? []).map((i) => [i.severity, i.expression?.[0]]);

const targets = await storeTargets({ main: false });
afterAll(async () => {
  for (const t of targets) await t.cleanup();
});

for (const target of targets) {
  describe(`cinder import of unchanged resources the rules now refuse (${target.kind})`, () => {
    let strict: ReturnType<typeof createCliEnv>;
    let structural: ReturnType<typeof createCliEnv>;
    let db: Awaited<ReturnType<StoreTarget['fresh']>>;
    beforeAll(async () => {
      db = await target.migrated();
      strict = createCliEnv({ CINDER_DATABASE_URL: db.url });
      structural = createCliEnv({ CINDER_DATABASE_URL: db.url, CINDER_VALIDATION: 'structural' });
      expect((await strict.run(['tenant', 'create', 't1'])).code).toBe(0);
    });
    afterAll(() => {
      strict.close();
      structural.close();
    });

    const importJson = async (name: string, text: string) => {
      const path = join(strict.dir, name);
      writeFileSync(path, text);
      const r = await strict.run(['import', '--tenant', 't1', '--json', path]);
      return { code: r.code, summary: JSON.parse(r.stdout) as Json, path };
    };
    const versionOf = async (id: string) => {
      const store = db.open();
      try {
        return (await store.resources.read('t1', 'Patient', id))?.versionId;
      } finally {
        await store.close();
      }
    };

    test('an NDJSON line equal to the stored version is unchanged with warnings; a changed one fails and writes nothing', async () => {
      const first = join(structural.dir, 'legacy.ndjson');
      writeFileSync(first, ndjson(legacy('n1'), legacy('n2')));
      expect((await structural.run(['import', '--tenant', 't1', first])).code).toBe(0);

      const again = await importJson('again.ndjson', ndjson(legacy('n1'), legacy('n2', { active: false }), { resourceType: 'Patient', id: 'n3', gender: 'banana' }));
      expect(again.code).toBe(1);
      expect(again.summary).toMatchObject({ imported: 1, unchanged: 1, failed: 2 });
      // The unchanged line: a warning telling so, then what the rules refuse in it.
      expect(again.summary.warnings).toHaveLength(1);
      expect(again.summary.warnings[0]).toMatchObject({ file: again.path, line: 1, severity: 'warning', message: expect.stringContaining('Patient/n1 unchanged') });
      expect(severities(again.summary.warnings[0].issues)).toEqual([['information', undefined], ['warning', 'Patient.gender']]);
      // The changed line and a new one: refused, each problem named.
      expect(again.summary.errors.map((e: Json) => [e.line, e.issues.map((i: Json) => i.expression[0])])).toEqual([[2, ['Patient.gender']], [3, ['Patient.gender']]]);
      expect([await versionOf('n1'), await versionOf('n2'), await versionOf('n3')]).toEqual([1, 1, undefined]);

      // The text summary says so too.
      const path = join(strict.dir, 'again-text.ndjson');
      writeFileSync(path, ndjson(legacy('n1')));
      const text = await strict.run(['import', '--tenant', 't1', path]);
      expect(text.code).toBe(0);
      expect(text.stdout).toContain('1 unchanged (1 of them not valid now: warnings above), 0 failed');
      expect(text.stderr).toContain(`${path}:1: warning: Patient/n1 unchanged`);
    });

    test('a refused line equal to the version an earlier line of the run replaces fails, and is not told unchanged', async () => {
      const first = join(structural.dir, 'replaced.ndjson');
      writeFileSync(first, ndjson(legacy('r1')));
      expect((await structural.run(['import', '--tenant', 't1', first])).code).toBe(0);
      // Line 1 corrects r1 (a version 2); line 2, as stored before the run, would take it back: a change, refused.
      const again = await importJson('replaced-again.ndjson', ndjson(legacy('r1', { gender: 'male' }), legacy('r1')));
      expect(again.code).toBe(1);
      expect(again.summary).toMatchObject({ imported: 1, unchanged: 0, failed: 1, warnings: [] });
      expect(again.summary.errors.map((e: Json) => [e.line, e.issues.map((i: Json) => i.expression[0])])).toEqual([[2, ['Patient.gender']]]);
      expect(await versionOf('r1')).toBe(2);
    });

    test("a collection Bundle's entry equal to the stored version is unchanged with warnings too", async () => {
      const bundle = (r: Json) => JSON.stringify({ resourceType: 'Bundle', type: 'collection', entry: [{ fullUrl: `http://example.org/fhir/Patient/${r.id}`, resource: r }] });
      const first = join(structural.dir, 'legacy-bundle.json');
      writeFileSync(first, bundle(legacy('c1')));
      expect((await structural.run(['import', '--tenant', 't1', first])).code).toBe(0);
      const again = await importJson('again-bundle.json', bundle(legacy('c1')));
      expect(again.code).toBe(0);
      expect(again.summary).toMatchObject({ imported: 1, unchanged: 1, failed: 0 });
      expect(again.summary.warnings[0]).toMatchObject({ entry: 0, severity: 'warning' });
      // An entry of another file of the run referring to it by its fullUrl refers to it as stored.
      const kept = join(strict.dir, 'kept.json');
      writeFileSync(kept, JSON.stringify({ resourceType: 'Bundle', type: 'collection', entry: [{ fullUrl: 'urn:uuid:5b1f6d0e-8f7a-4c47-9a5e-2f1f3c1d2e01', resource: legacy('c1') }] }));
      const referring = join(strict.dir, 'referring.json');
      writeFileSync(referring, JSON.stringify({ resourceType: 'Bundle', type: 'collection', entry: [
        { fullUrl: 'urn:uuid:5b1f6d0e-8f7a-4c47-9a5e-2f1f3c1d2e02', resource: { resourceType: 'Observation', id: 'c1-obs', status: 'final', code: { text: 'x' }, subject: { reference: 'urn:uuid:5b1f6d0e-8f7a-4c47-9a5e-2f1f3c1d2e01' } } },
      ] }));
      const both = await strict.run(['import', '--tenant', 't1', '--json', referring, kept]);
      expect(JSON.parse(both.stdout)).toMatchObject({ imported: 2, unchanged: 1, failed: 0 });
      const store = db.open();
      try {
        expect(JSON.parse((await store.resources.read('t1', 'Observation', 'c1-obs'))!.content).subject).toEqual({ reference: 'Patient/c1' });
      } finally {
        await store.close();
      }
      const changed = await importJson('changed-bundle.json', bundle(legacy('c1', { active: false })));
      expect(changed.summary).toMatchObject({ imported: 0, failed: 1, warnings: [] });
      expect(changed.summary.errors[0]).toMatchObject({ entry: 0, issues: [expect.objectContaining({ expression: ['Bundle.entry[0].resource.gender'] })] });
      expect(await versionOf('c1')).toBe(1);
    });

    test("a transaction or batch Bundle's PUT equal to the stored version is unchanged with warnings, as an NDJSON line is", async () => {
      const first = join(structural.dir, 'legacy-tx.ndjson');
      writeFileSync(first, ndjson(legacy('t1'), legacy('t2')));
      expect((await structural.run(['import', '--tenant', 't1', first])).code).toBe(0);
      const put = (r: Json) => ({ fullUrl: `http://example.org/fhir/Patient/${r.id}`, resource: r, request: { method: 'PUT', url: `Patient/${r.id}` } });
      const valid = { resourceType: 'Patient', id: 't3', gender: 'female' };
      for (const type of ['transaction', 'batch']) {
        const again = await importJson(`again-${type}.json`, JSON.stringify({ resourceType: 'Bundle', type, entry: [put(valid), put(legacy('t1')), put(legacy('t2'))] }));
        expect(again.code).toBe(0);
        // The first run writes t3; the second finds it unchanged too, valid, and says nothing of it.
        expect(again.summary).toMatchObject({ imported: 3, unchanged: type === 'transaction' ? 2 : 3, failed: 0, errors: [] });
        expect(again.summary.warnings.map((w: Json) => [w.file, w.entry, w.severity])).toEqual([[again.path, 1, 'warning'], [again.path, 2, 'warning']]);
        expect(again.summary.warnings[0].message).toContain('Patient/t1 unchanged');
        // Located in the document, as a failed entry's problems are.
        expect(severities(again.summary.warnings[0].issues)).toEqual([['information', undefined], ['warning', 'Bundle.entry[1].resource.gender']]);
      }
      expect([await versionOf('t1'), await versionOf('t2'), await versionOf('t3')]).toEqual([1, 1, 1]);
      // The text summary counts them as the NDJSON import does, and names each.
      const path = join(strict.dir, 'again-tx-text.json');
      writeFileSync(path, JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry: [put(legacy('t1'))] }));
      const text = await strict.run(['import', '--tenant', 't1', path]);
      expect(text.code).toBe(0);
      expect(text.stdout).toContain('1 unchanged (1 of them not valid now: warnings above), 0 failed');
      expect(text.stderr).toContain('warning: Patient/t1 unchanged');
      expect(text.stderr).toContain('  Bundle.entry[0].resource.gender: ');
    });
  });
}

await eachStore((kind, fresh) => {
  describe(`$import of unchanged resources the rules now refuse (${kind})`, () => {
    let t: TestApp;
    let token: string;
    let file = '';
    const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response(file) });
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), env: { CINDER_IMPORT_ALLOW_PRIVATE: 'true' } });
      token = await t.token();
    });
    afterAll(async () => {
      await t.app.imports.stop();
      server.stop(true);
      await t.close();
    });

    test('an unchanged line is counted unchanged, its problems listed as warnings (inline and in the file); a changed one fails', async () => {
      await t.store.resources.write('t1', (w) => putVersion(w, legacy('i1') as unknown as Resource, 'i1', { now: t.clock.now(), access: operatorAccess }, 'PUT'));
      file = ndjson(legacy('i1'), legacy('i1', { active: false }));
      const body = {
        resourceType: 'Parameters',
        parameter: [
          { name: 'inputFormat', valueCode: 'application/fhir+ndjson' },
          { name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: `http://127.0.0.1:${server.port}/p.ndjson` }] },
        ],
      };
      const kick = await t.request(`${t.fhir()}/$import`, fhirInit(token, 'POST', body));
      expect(kick.status).toBe(202);
      await t.app.imports.runOnce();
      const status = (await (await t.request(kick.headers.get('content-location')!, fhirInit(token))).json()) as Json;
      expect(status.output).toEqual([expect.objectContaining({ count: 1, unchanged: 1 })]);
      expect(status.error).toHaveLength(1);
      expect(status.error[0].count).toBe(1);
      // A failure is told as its line is read, a line kept unchanged as its batch commits (its transaction decides it).
      const issues = status.error[0].outcome.issue as Json[];
      expect(issues.map((i) => [i.severity, i.location[0], i.expression?.[0]])).toEqual([
        ['error', 'Line[2]', 'Patient.gender'], ['information', 'Line[1]', undefined], ['warning', 'Line[1]', 'Patient.gender'],
      ]);
      expect(issues[1].diagnostics).toContain('Patient/i1 unchanged');
      const lines = (await (await t.request(status.error[0].url, fhirInit(token))).text()).trimEnd().split('\n').map((l) => JSON.parse(l) as Json);
      expect(lines.map((o) => (o.issue as Json[]).map((i) => i.severity))).toEqual([['error'], ['information', 'warning']]);
      expect((await t.store.resources.read('t1', 'Patient', 'i1'))!.versionId).toBe(1);
      // As a REST update of the same content is answered.
      expect((await fhirClient(t, token).put('Patient/i1', legacy('i1'))).status).toBe(200);
      expect((await t.store.resources.read('t1', 'Patient', 'i1'))!.versionId).toBe(1);
    });

    test('1,000 lines of new, changed, unchanged valid and unchanged invalid resources, one replaced by an earlier line: each counted once, the file telling exactly the failures and the kept', async () => {
      const valid = (id: string, extra: Json = {}): Json => ({ resourceType: 'Patient', id, active: true, gender: 'female', name: [{ family: 'Valid' }], ...extra });
      const stored: Json[] = [
        ...Array.from({ length: 200 }, (_, i) => valid(`m${i}`)),
        ...Array.from({ length: 200 }, (_, i) => legacy(`m${200 + i}`)),
        ...Array.from({ length: 200 }, (_, i) => valid(`m${400 + i}`)),
        ...Array.from({ length: 100 }, (_, i) => legacy(`m${600 + i}`)),
        legacy('mx'),
      ];
      await t.store.resources.write('t1', async (w) => {
        for (const r of stored) await putVersion(w, r as unknown as Resource, r.id, { now: t.clock.now(), access: operatorAccess }, 'PUT');
      });
      const lines: Json[] = [
        ...Array.from({ length: 200 }, (_, i) => valid(`m${i}`)), // lines 1-200: unchanged, valid
        ...Array.from({ length: 200 }, (_, i) => legacy(`m${200 + i}`)), // 201-400: unchanged, refused now: kept with warnings
        ...Array.from({ length: 200 }, (_, i) => valid(`m${400 + i}`, { active: false })), // 401-600: changed, valid
        ...Array.from({ length: 100 }, (_, i) => legacy(`m${600 + i}`, { active: false })), // 601-700: changed, refused
        ...Array.from({ length: 298 }, (_, i) => valid(`new${i}`)), // 701-998: new
        legacy('mx', { gender: 'male' }), // 999: corrects mx
        legacy('mx'), // 1000: mx as stored before the run, which line 999 replaced: a change, refused
      ];
      expect(lines).toHaveLength(1000);
      file = ndjson(...lines);
      const body = {
        resourceType: 'Parameters',
        parameter: [
          { name: 'inputFormat', valueCode: 'application/fhir+ndjson' },
          { name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: `http://127.0.0.1:${server.port}/mix.ndjson` }] },
        ],
      };
      const kick = await t.request(`${t.fhir()}/$import`, fhirInit(token, 'POST', body));
      expect(kick.status).toBe(202);
      await t.app.imports.runOnce();
      const status = (await (await t.request(kick.headers.get('content-location')!, fhirInit(token))).json()) as Json;
      // Imported: 200 + 200 unchanged, 200 changed, 298 new and line 999; failed: lines 601-700 and 1000.
      expect(status.output).toEqual([expect.objectContaining({ count: 899, unchanged: 400 })]);
      expect(status.error).toHaveLength(1);
      expect(status.error[0].count).toBe(101);
      const outcomes = (await (await t.request(status.error[0].url, fhirInit(token))).text()).trimEnd().split('\n').map((l) => JSON.parse(l) as Json);
      const lineOf = (o: Json) => Number(/^Line\[(\d+)\]$/.exec((o.issue as Json[])[0].location[0])![1]);
      const kept = outcomes.filter((o) => (o.issue as Json[]).every((i) => i.severity !== 'error')).map(lineOf).sort((a, b) => a - b);
      const failed = outcomes.filter((o) => (o.issue as Json[]).some((i) => i.severity === 'error')).map(lineOf).sort((a, b) => a - b);
      expect(kept).toEqual(Array.from({ length: 200 }, (_, i) => 201 + i));
      expect(failed).toEqual([...Array.from({ length: 100 }, (_, i) => 601 + i), 1000]);
      const version = async (id: string) => (await t.store.resources.read('t1', 'Patient', id))?.versionId;
      expect(await Promise.all(['m0', 'm200', 'm400', 'm600', 'new0', 'mx'].map(version))).toEqual([1, 1, 2, 1, 1, 2]);
      expect(JSON.parse((await t.store.resources.read('t1', 'Patient', 'mx'))!.content).gender).toBe('male');
    });

    test("a client that may not read every Patient is never told a refused line is unchanged: it fails, as a new one would", async () => {
      await t.store.resources.write('t1', (w) => putVersion(w, legacy('s1', { gender: 'male', extension: [{ url: 'http://example.org/x', valueString: 'x' }], birthDate: 'not a date' }) as unknown as Resource, 's1', { now: t.clock.now(), access: operatorAccess }, 'PUT'));
      const stored = legacy('s1', { gender: 'male', extension: [{ url: 'http://example.org/x', valueString: 'x' }], birthDate: 'not a date' });
      file = ndjson(stored);
      const body = {
        resourceType: 'Parameters',
        parameter: [
          { name: 'inputFormat', valueCode: 'application/fhir+ndjson' },
          { name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: `http://127.0.0.1:${server.port}/s.ndjson` }] },
        ],
      };
      const outcomeOf = async (scopes: string[]) => {
        const c = await createClient(t.store, t.clock, { tenant: 't1', name: scopes.join(' '), scopes });
        const tok = await t.token(undefined, c.client.clientId, c.clientSecret!);
        const kick = await t.request(`${t.fhir()}/$import`, fhirInit(tok, 'POST', body));
        expect(kick.status).toBe(202);
        await t.app.imports.runOnce();
        return (await (await t.request(kick.headers.get('content-location')!, fhirInit(tok))).json()) as Json;
      };
      // Writes only; writes with reads of female Patients only: the line fails, its problems told, nothing of what is stored.
      for (const scopes of [['system/Patient.cu'], ['system/Patient.cud', 'system/Patient.rs?gender=female']]) {
        const status = await outcomeOf(scopes);
        expect(status.output).toEqual([expect.objectContaining({ count: 0, unchanged: 0 })]);
        expect(status.error[0].count).toBe(1);
        const told = JSON.stringify(status.error[0].outcome);
        expect(told).not.toContain('unchanged');
        expect((status.error[0].outcome.issue as Json[]).every((i) => i.severity === 'error')).toBe(true);
      }
      // One that reads and updates every Patient is told it is unchanged.
      const status = await outcomeOf(['system/Patient.cruds']);
      expect(status.output).toEqual([expect.objectContaining({ count: 1, unchanged: 1 })]);
      expect(status.error[0].count).toBe(0);
      expect((await t.store.resources.read('t1', 'Patient', 's1'))!.versionId).toBe(1);
    });
  });
});

await eachStore((kind, fresh) => {
  describe(`$import beside a REST write to a line it keeps (${kind})`, () => {
    let t: TestApp;
    let token: string;
    let file = '';
    const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response(file) });
    /** Run once before the next write of resources the store is asked for: a client's write in between the import's read and its batch. */
    let beforeNextWrite: (() => Promise<unknown>) | undefined;
    beforeAll(async () => {
      const store = await fresh();
      const resources = new Proxy(store.resources, {
        get(r, method) {
          const value = Reflect.get(r, method);
          if (typeof value !== 'function') return value;
          if (method !== 'write') return value.bind(r);
          return async (...args: unknown[]) => {
            const hook = beforeNextWrite;
            beforeNextWrite = undefined;
            if (hook) await hook();
            return value.apply(r, args);
          };
        },
      });
      t = await createTestApp({ store: new Proxy(store, { get: (s, name) => (name === 'resources' ? resources : Reflect.get(s, name)) }), env: { CINDER_IMPORT_ALLOW_PRIVATE: 'true' } });
      token = await t.token();
    });
    afterAll(async () => {
      await t.app.imports.stop();
      server.stop(true);
      await t.close();
    });

    test('a line found equal to its stored version, then changed by a PUT before its batch, fails and is not told unchanged', async () => {
      await t.store.resources.write('t1', (w) => putVersion(w, legacy('k1') as unknown as Resource, 'k1', { now: t.clock.now(), access: operatorAccess }, 'PUT'));
      file = ndjson(legacy('k1'), { resourceType: 'Patient', id: 'k2', gender: 'female' });
      const body = {
        resourceType: 'Parameters',
        parameter: [
          { name: 'inputFormat', valueCode: 'application/fhir+ndjson' },
          { name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: `http://127.0.0.1:${server.port}/k.ndjson` }] },
        ],
      };
      const kick = await t.request(`${t.fhir()}/$import`, fhirInit(token, 'POST', body));
      expect(kick.status).toBe(202);
      let put = 0;
      beforeNextWrite = async () => (put = (await t.request(`${t.fhir()}/Patient/k1`, fhirInit(token, 'PUT', legacy('k1', { gender: 'male' })))).status);
      await t.app.imports.runOnce();
      expect(put).toBe(200);
      const status = (await (await t.request(kick.headers.get('content-location')!, fhirInit(token))).json()) as Json;
      expect(status.output).toEqual([expect.objectContaining({ count: 1, unchanged: 0 })]);
      expect(status.error[0].count).toBe(1);
      const issues = status.error[0].outcome.issue as Json[];
      expect(issues.map((i) => [i.severity, i.location[0], i.expression?.[0]])).toEqual([['error', 'Line[1]', 'Patient.gender']]);
      const lines = (await (await t.request(status.error[0].url, fhirInit(token))).text()).trimEnd().split('\n');
      expect(lines).toHaveLength(1);
      const k1 = (await t.store.resources.read('t1', 'Patient', 'k1'))!;
      expect([k1.versionId, JSON.parse(k1.content).gender]).toEqual([2, 'male']);
    });
  });
});
