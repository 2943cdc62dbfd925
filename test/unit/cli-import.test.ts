import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { closeSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { MAX_LINE_BYTES } from '../../src/fhir/import/lines.ts';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { Store } from '../../src/store/types.ts';
import { createCliEnv } from '../helpers/cli.ts';
import { tokens } from '../store/contract/fixtures.ts';

let cli: ReturnType<typeof createCliEnv>;
let store: Store | undefined;

beforeEach(async () => {
  cli = createCliEnv();
  expect((await cli.run(['tenant', 'create', 't1'])).code).toBe(0);
});

afterEach(async () => {
  await store?.close();
  store = undefined;
  cli.close();
});

function file(name: string, content: string): string {
  const path = join(cli.dir, name);
  writeFileSync(path, content);
  return path;
}

const ndjson = (...rows: unknown[]) => rows.map((r) => (typeof r === 'string' ? r : JSON.stringify(r))).join('\n') + '\n';

async function open(): Promise<Store> {
  store = cli.store();
  return store;
}

async function readJson(type: string, id: string): Promise<Record<string, any>> {
  const s = store ?? (await open());
  const v = await s.resources.read('t1', type, id);
  expect(v).not.toBeNull();
  return JSON.parse(v!.content);
}

describe('cinder import: NDJSON', () => {
  test('imports every line, keeping ids and assigning missing ones', async () => {
    const path = file('patients.ndjson', ndjson(
      { resourceType: 'Patient', id: 'p1', name: [{ family: 'Ng' }], meta: { versionId: '9', source: 'x' } },
      { resourceType: 'Observation', id: 'o1', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '718-7' }] }, subject: { reference: 'Patient/p1' } },
      { resourceType: 'Patient', name: [{ family: 'NoId' }] },
    ));
    const r = await cli.run(['import', '--tenant', 't1', path]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Imported 3 resources into tenant 't1' in [\d.]+ s \([\d,]+ resources\/s\); 0 failed\.\n$/);

    const p1 = await readJson('Patient', 'p1');
    expect(p1.meta).toEqual({ versionId: '1', lastUpdated: expect.any(String), source: 'x' });
    expect(Object.keys(p1).slice(0, 3)).toEqual(['resourceType', 'id', 'meta']);
    const s = store!;
    const found = await s.resources.search('t1', { type: 'Observation', where: tokens([{ param: 'code', values: [{ system: 'http://loinc.org', value: '718-7' }] }]), compartment: 'p1', sort: [], count: 10 });
    expect(found.map((v) => v.id)).toEqual(['o1']);
    const patients = await s.resources.search('t1', { type: 'Patient', sort: [], count: 10 });
    expect(patients).toHaveLength(2);
    const generated = patients.find((v) => v.id !== 'p1')!;
    expect(generated.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(JSON.parse(generated.content).name).toEqual([{ family: 'NoId' }]);
  });

  test('reports bad lines with file and line number, skips blank lines, keeps the good lines of the same batch', async () => {
    const path = file('mixed.ndjson', ndjson(
      { resourceType: 'Patient', id: 'a' },
      '{"resourceType": "Patient", "id": ',
      '',
      { resourceType: 'Spaceship', id: 'x' },
      { resourceType: 'Patient', id: 'bad id!' },
      '[1, 2]',
      { resourceType: 'Patient', id: 'b' },
      { id: 'c' },
    ));
    const r = await cli.run(['import', '--tenant', 't1', '--batch-size', '3', path]);
    expect(r.code).toBe(1);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toEqual([
      expect.stringMatching(new RegExp(`^${path}:2: malformed JSON: .+`)),
      `${path}:4: Unknown resource type 'Spaceship'`,
      `${path}:5: Invalid resource id "bad id!": expected 1-64 of [A-Za-z0-9.-]`,
      `${path}:6: not a JSON object`,
      `${path}:8: Resource has no resourceType`,
    ]);
    expect(r.stdout).toMatch(/Imported 2 resources .*; 5 failed\.\n$/);
    await readJson('Patient', 'a');
    await readJson('Patient', 'b');
    expect(await store!.resources.count('t1', { type: 'Patient', sort: [], count: 0 })).toBe(2);
  });

  test('with CINDER_VALIDATION=off a resource holding a control character is still refused, naming the element; the others are imported', async () => {
    const off = createCliEnv({ CINDER_VALIDATION: 'off' });
    try {
      expect((await off.run(['tenant', 'create', 't1'])).code).toBe(0);
      const lines = join(off.dir, 'lines.ndjson');
      writeFileSync(lines, ndjson({ resourceType: 'Patient', id: 'ok', name: [{ family: 'Ng' }] }, { resourceType: 'Patient', id: 'bad', name: [{ family: 'N\u0001g' }] }));
      const bundle = join(off.dir, 'collection.json');
      writeFileSync(bundle, JSON.stringify({ resourceType: 'Bundle', type: 'collection', entry: [{ resource: { resourceType: 'Patient', id: 'bad2', gender: '\uFFFF' } }, { resource: { resourceType: 'Patient', id: 'ok2', bogus: 1 } }] }));
      const r = await off.run(['import', '--tenant', 't1', '--json', lines, bundle]);
      expect(r.code).toBe(1);
      const summary = JSON.parse(r.stdout);
      expect(summary).toMatchObject({ imported: 2, failed: 2 });
      expect(summary.errors.map((e: { line?: number; entry?: number; issues: { expression: string[] }[] }) => [e.line ?? e.entry, e.issues[0]!.expression[0]])).toEqual([[2, 'Patient.name[0].family'], [0, 'Bundle.entry[0].resource.gender']]);
    } finally {
      off.close();
    }
  });

  test('--json prints the summary with the errors', async () => {
    const path = file('one.ndjson', ndjson({ resourceType: 'Patient', id: 'a' }, 'nope'));
    const r = await cli.run(['import', '--tenant', 't1', '--json', path]);
    expect(r.code).toBe(1);
    const summary = JSON.parse(r.stdout);
    expect(summary).toEqual({
      tenant: 't1', files: 1, imported: 1, unchanged: 0, failed: 1, seconds: expect.any(Number), resourcesPerSecond: expect.any(Number),
      errors: [{ file: path, line: 2, message: expect.stringMatching(/^malformed JSON/), issues: [expect.objectContaining({ severity: 'error', code: 'structure' })] }], warnings: [],
    });
  });

  test('re-importing the same file creates neither duplicates nor new versions: the lines are unchanged', async () => {
    const path = file('again.ndjson', ndjson({ resourceType: 'Patient', id: 'a', active: true }, { resourceType: 'Patient', id: 'b' }));
    expect((await cli.run(['import', '--tenant', 't1', path])).code).toBe(0);
    const again = await cli.run(['import', '--tenant', 't1', path]);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/^Imported 2 resources .*; 2 unchanged, 0 failed\.\n$/);
    expect((await readJson('Patient', 'a')).meta.versionId).toBe('1');
    const history = await store!.resources.history('t1', { type: 'Patient', id: 'a', count: 10 });
    expect(history.map((v) => v.versionId)).toEqual([1]);
    expect(await store!.resources.count('t1', { type: 'Patient', sort: [], count: 0 })).toBe(2);
  });

  test('a file without a known extension is sniffed; several files import in order', async () => {
    const a = file('first.txt', ndjson({ resourceType: 'Patient', id: 'a', gender: 'male' }));
    const b = file('second.data', ndjson({ resourceType: 'Patient', id: 'a', gender: 'female' }));
    const r = await cli.run(['import', '--tenant', 't1', a, b]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Imported 2 resources');
    const p = await readJson('Patient', 'a');
    expect([p.gender, p.meta.versionId]).toEqual(['female', '2']);
  });

  test('a gzip file is decompressed, as a stream, and read as its name without .gz says; a damaged one is a usage error', async () => {
    const gz = (name: string, content: string) => {
      const path = join(cli.dir, name);
      writeFileSync(path, gzipSync(content));
      return path;
    };
    const lines = gz('Patient.ndjson.gz', ndjson({ resourceType: 'Patient', id: 'gz1', gender: 'male' }, '{bad', { resourceType: 'Patient', id: 'gz2' }));
    // One line of JSON: as `.json` a transaction (not an NDJSON line storing a Bundle).
    const tx = gz('tx.json.gz', JSON.stringify({
      resourceType: 'Bundle', type: 'transaction', entry: [{ resource: { resourceType: 'Patient', id: 'gz1', gender: 'female' }, request: { method: 'PUT', url: 'Patient/gz1' } }],
    }));
    const r = await cli.run(['import', '--tenant', 't1', lines, tx]);
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe(`${lines}:2: malformed JSON: JSON Parse error: Expected '}'`);
    expect(r.stdout).toContain('Imported 3 resources');
    expect((await readJson('Patient', 'gz1')).gender).toBe('female');
    expect((await readJson('Patient', 'gz2')).id).toBe('gz2');
    expect(await store!.resources.read('t1', 'Bundle', 'tx')).toBeNull();
    const damaged = join(cli.dir, 'damaged.ndjson.gz');
    writeFileSync(damaged, gzipSync(ndjson({ resourceType: 'Patient', id: 'gz3' })).subarray(0, 12));
    const bad = await cli.run(['import', '--tenant', 't1', damaged]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain(`cannot decompress ${damaged}`);
  });
});

describe('cinder import: JSON documents', () => {
  test('NDJSON files and Bundles in between are applied in file order', async () => {
    const first = file('1.ndjson', ndjson({ resourceType: 'Patient', id: 'x', gender: 'male' }, { resourceType: 'Patient', id: 'y' }));
    const bundle = file('2.json', JSON.stringify({
      resourceType: 'Bundle', type: 'transaction',
      entry: [{ resource: { resourceType: 'Patient', id: 'x', gender: 'female' }, request: { method: 'PUT', url: 'Patient/x' } }],
    }));
    const third = file('3.ndjson', ndjson({ resourceType: 'Patient', id: 'x', gender: 'other' }, '{bad'));
    const r = await cli.run(['import', '--tenant', 't1', first, bundle, third]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${third}:2: malformed JSON`);
    await open();
    const history = await store!.resources.history('t1', { type: 'Patient', id: 'x', count: 10 });
    expect(history.map((v) => [v.versionId, JSON.parse(v.content).gender])).toEqual([[3, 'other'], [2, 'female'], [1, 'male']]);
  });

  test('a transaction Bundle is atomic and rewrites urn:uuid references', async () => {
    const path = file('tx.json', JSON.stringify({
      resourceType: 'Bundle', type: 'transaction',
      entry: [
        { fullUrl: 'urn:uuid:6b0e2c43-1d59-4d5e-9d0b-7d8f2a1c0001', resource: { resourceType: 'Patient', name: [{ family: 'Tx' }] }, request: { method: 'POST', url: 'Patient' } },
        { resource: { resourceType: 'Observation', id: 'obs', status: 'final', code: { text: 'x' }, subject: { reference: 'urn:uuid:6b0e2c43-1d59-4d5e-9d0b-7d8f2a1c0001' } }, request: { method: 'PUT', url: 'Observation/obs' } },
      ],
    }, null, 2));
    const r = await cli.run(['import', '--tenant', 't1', path]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Imported 2 resources');
    const obs = await readJson('Observation', 'obs');
    const [, patientId] = obs.subject.reference.split('/');
    expect((await readJson('Patient', patientId)).name).toEqual([{ family: 'Tx' }]);
  });

  test('a line longer than MAX_LINE_BYTES is a failed line, skipped without being held; the next lines are imported', async () => {
    const path = join(cli.dir, 'long.ndjson');
    const fd = openSync(path, 'w');
    const mib = Buffer.alloc(1024 * 1024, 0x61);
    writeSync(fd, '{"resourceType":"Patient","id":"a"}\n');
    for (let i = 0; i <= MAX_LINE_BYTES / mib.length; i++) writeSync(fd, mib);
    writeSync(fd, '\n{"resourceType":"Patient","id":"b"}\n');
    closeSync(fd);
    const r = await cli.run(['import', '--tenant', 't1', path]);
    rmSync(path);
    expect(r.stderr.trim()).toBe(`${path}:2: the line holds ${MAX_LINE_BYTES + mib.length} bytes, more than the ${MAX_LINE_BYTES} a line may hold: not read`);
    expect(r.stdout).toMatch(/Imported 2 resources .*; 1 failed\.\n$/);
    await readJson('Patient', 'b');
  }, 60_000);

  test('a failing transaction writes nothing and counts its entries as failed', async () => {
    const path = file('bad-tx.json', JSON.stringify({
      resourceType: 'Bundle', type: 'transaction',
      entry: [
        { resource: { resourceType: 'Patient', id: 'p' }, request: { method: 'PUT', url: 'Patient/p' } },
        { resource: { resourceType: 'Patient', id: 'q', link: [{ other: { reference: 'urn:uuid:missing' }, type: 'seealso' }] }, request: { method: 'PUT', url: 'Patient/q' } },
      ],
    }));
    const r = await cli.run(['import', '--tenant', 't1', '--json', path]);
    expect(r.code).toBe(1);
    const summary = JSON.parse(r.stdout);
    expect([summary.imported, summary.failed]).toEqual([0, 2]);
    expect(r.stderr).toContain(`${path}: transaction Bundle rolled back: Bundle.entry[1]: reference 'urn:uuid:missing' matches no fullUrl`);
    store = cli.store();
    expect(await store.resources.read('t1', 'Patient', 'p')).toBeNull();
  });

  test('a batch Bundle reports its failing entries and keeps the others', async () => {
    const path = file('batch.json', JSON.stringify({
      resourceType: 'Bundle', type: 'batch',
      entry: [
        { resource: { resourceType: 'Patient', id: 'ok' }, request: { method: 'PUT', url: 'Patient/ok' } },
        { resource: { resourceType: 'Patient', id: 'locked' }, request: { method: 'PUT', url: 'Patient/locked', ifMatch: 'W/"5"' } },
      ],
    }));
    const r = await cli.run(['import', '--tenant', 't1', path]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/Imported 1 resources .*; 1 failed\./);
    expect(r.stderr).toBe(`${path}: Bundle.entry[1]: 412: Version conflict: If-Match expects version 5 of Patient/locked; none exists\n`);
    await readJson('Patient', 'ok');
  });

  test('a collection Bundle creates or updates each entry by id; a single resource is imported as is', async () => {
    const coll = file('coll.json', JSON.stringify({
      resourceType: 'Bundle', type: 'collection',
      entry: [
        { resource: { resourceType: 'Patient', id: 'c1' } },
        { resource: { resourceType: 'Nope' } },
        { resource: { resourceType: 'Organization', name: 'Acme' } },
      ],
    }));
    const single = file('single.json', JSON.stringify({ resourceType: 'Patient', id: 'c1', active: false }, null, 2));
    const broken = file('broken.json', '{"resourceType": "Bundle",');
    const r = await cli.run(['import', '--tenant', 't1', coll, single, broken]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${coll}: Bundle.entry[1].resource: Unknown resource type 'Nope'`);
    expect(r.stderr).toMatch(new RegExp(`${broken}: malformed JSON: `));
    expect(r.stdout).toMatch(/Imported 3 resources .*; 2 failed\./);
    const c1 = await readJson('Patient', 'c1');
    expect([c1.active, c1.meta.versionId]).toEqual([false, '2']);
    expect(await store!.resources.count('t1', { type: 'Organization', sort: [], count: 0 })).toBe(1);
  });
});

describe('cinder import: usage', () => {
  test('missing tenant option, unknown tenant, missing file and bad batch size exit with 2', async () => {
    const path = file('x.ndjson', ndjson({ resourceType: 'Patient' }));
    const noTenant = await cli.run(['import', path]);
    expect([noTenant.code, noTenant.stderr]).toEqual([2, expect.stringContaining('--tenant is required')]);
    const unknown = await cli.run(['import', '--tenant', 'nobody', path]);
    expect([unknown.code, unknown.stderr]).toEqual([2, expect.stringContaining("tenant 'nobody' does not exist")]);
    const missing = await cli.run(['import', '--tenant', 't1', join(cli.dir, 'absent.ndjson')]);
    expect([missing.code, missing.stderr]).toEqual([2, expect.stringContaining('absent.ndjson: ENOENT')]);
    const none = await cli.run(['import', '--tenant', 't1']);
    expect([none.code, none.stderr]).toEqual([2, expect.stringContaining('expected at least one file')]);
    const size = await cli.run(['import', '--tenant', 't1', '--batch-size', '0', path]);
    expect([size.code, size.stderr]).toEqual([2, expect.stringContaining('--batch-size takes 1-100000')]);
  });

  test('--help describes the command', async () => {
    const r = await cli.run(['import', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('cinder import --tenant <id> [--batch-size <n>] [--json] <file>...');
  });
});

describe('cinder import: as a process', () => {
  test('bun src/main.ts import exits 1 on a bad line and 0 on a clean file', async () => {
    // Enough resources for a bulk transaction, whose checkpoint runs on a thread that must not hold the process.
    const good = file('good.ndjson', ndjson(...Array.from({ length: 1_500 }, (_, i) => ({ resourceType: 'Patient', id: i ? `g${i}` : 'g' }))));
    const bad = file('bad.ndjson', ndjson({ resourceType: 'Patient', id: 'h' }, '{'));
    const run = (f: string) =>
      Bun.spawn(['bun', 'src/main.ts', 'import', '--tenant', 't1', f], {
        cwd: join(import.meta.dir, '../..'), env: { ...process.env, ...cli.env }, stdout: 'pipe', stderr: 'pipe',
      });
    const ok = run(good);
    expect(await ok.exited).toBe(0);
    expect(await new Response(ok.stdout).text()).toContain("Imported 1,500 resources into tenant 't1'");
    const failing = run(bad);
    expect(await failing.exited).toBe(1);
    expect(await new Response(failing.stderr).text()).toContain(`${bad}:2: malformed JSON`);
    await readJson('Patient', 'h');
  });
});
