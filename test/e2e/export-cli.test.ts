import { afterAll, beforeAll, expect, test } from 'bun:test';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTenant } from '../../src/auth/admin.ts';
import { runCli } from '../../src/cli/index.ts';
import { systemClock } from '../../src/clock.ts';
import { operatorAccess } from '../../src/fhir/access.ts';
import { updateResource } from '../../src/fhir/crud.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';

let dir: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cinder-export-cli-'));
  const store = createSqliteStore(join(dir, 'cinder.db'));
  await store.migrate();
  await createTenant(store, systemClock, 'acme');
  const deps = { store, clock: systemClock };
  const req = { tenant: 'acme', access: operatorAccess };
  for (let i = 0; i < 5; i++) await updateResource(deps, req, 'Patient', `p${i}`, { resourceType: 'Patient', id: `p${i}` });
  for (let i = 0; i < 20; i++) {
    await updateResource(deps, req, 'Observation', `o${i}`, { resourceType: 'Observation', id: `o${i}`, status: 'final', code: { text: 'x' }, subject: { reference: `Patient/p${i % 5}` } });
  }
  await updateResource(deps, req, 'Group', 'g', { resourceType: 'Group', id: 'g', type: 'person', actual: true, member: [{ entity: { reference: 'Patient/p1' } }] });
  await store.close();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function io() {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out, err,
    io: { env: { CINDER_DATA_DIR: dir, CINDER_LOG_LEVEL: 'silent' }, stdout: (s: string) => void out.push(s), stderr: (s: string) => void err.push(s), stdin: async () => '', isTTY: true },
  };
}

const lines = (file: string) => readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { resourceType: string; id: string });

test('cinder export writes one NDJSON file per type with a progress bar', async () => {
  const out = join(dir, 'out-all');
  const c = io();
  expect(await runCli(['export', '--tenant', 'acme', '--type', 'Patient,Observation', '--out', out, '--json'], c.io)).toBe(0);
  expect(readdirSync(out).sort()).toEqual(['Observation-1.ndjson', 'Patient-1.ndjson']);
  expect(lines(join(out, 'Observation-1.ndjson'))).toHaveLength(20);
  const summary = JSON.parse(c.out.join('')) as { resources: number; files: string[] };
  expect(summary.resources).toBe(25);
  expect(c.err.join('')).toContain('100%');
});

test('cinder export --group exports the members\' compartments; the job record is removed afterwards', async () => {
  const out = join(dir, 'out-group');
  const c = io();
  expect(await runCli(['export', '--tenant', 'acme', '--group', 'g', '--out', out], c.io)).toBe(0);
  const ids = readdirSync(out).flatMap((f) => lines(join(out, f)).map((r) => `${r.resourceType}/${r.id}`)).sort();
  expect(ids).toEqual(['Group/g', 'Observation/o1', 'Observation/o11', 'Observation/o16', 'Observation/o6', 'Patient/p1']);
  const store = createSqliteStore(join(dir, 'cinder.db'));
  expect(await store.exports.jobs.countByState()).toEqual({});
  await store.close();
});

test('cinder export --type-filter: FHIR search, :in and :not-in through the terminology service', async () => {
  const count = async (filter: string) => {
    const c = io();
    expect(await runCli(['export', '--tenant', 'acme', '--type', 'Observation', '--type-filter', filter, '--out', join(dir, `out-${crypto.randomUUID()}`), '--json'], c.io)).toBe(0);
    return (JSON.parse(c.out.join('')) as { resources: number }).resources;
  };
  expect(await count('Observation?subject=Patient/p1')).toBe(4);
  expect(await count('Observation?status:in=http://hl7.org/fhir/ValueSet/observation-status')).toBe(20);
  expect(await count('Observation?status:not-in=http://hl7.org/fhir/ValueSet/observation-status')).toBe(0);
});

test('usage errors', async () => {
  const c = io();
  expect(await runCli(['export', '--tenant', 'acme'], c.io)).toBe(2);
  expect(await runCli(['export', '--tenant', 'nope', '--out', join(dir, 'x')], c.io)).toBe(2);
  expect(await runCli(['export', '--tenant', 'acme', '--type', 'Bogus', '--out', join(dir, 'x')], c.io)).toBe(2);
  expect(c.err.join('')).toContain('Bogus');
  // A refused export (an unknown Group, a bad --since) leaves no directory behind.
  expect(await runCli(['export', '--tenant', 'acme', '--group', 'nope', '--out', join(dir, 'x')], c.io)).toBe(2);
  expect(await runCli(['export', '--tenant', 'acme', '--since', 'notadate', '--out', join(dir, 'x')], c.io)).toBe(2);
  expect(existsSync(join(dir, 'x'))).toBe(false);
  // A list given with nothing in it is refused, as `_type=` is on the API, never read as every type.
  for (const args of [['--type', ''], ['--type', ','], ['--type-filter', '']]) {
    const e = io();
    expect(await runCli(['export', '--tenant', 'acme', ...args, '--out', join(dir, `empty-${crypto.randomUUID()}`)], e.io)).toBe(2);
    expect(e.err.join('')).toContain('names nothing');
  }
});

test('an --out that cannot be made a directory (a file there, or below one) is a usage error naming it, and no job is left', async () => {
  const file = join(dir, 'a-file');
  writeFileSync(file, 'x');
  for (const out of [file, join(file, 'below')]) {
    const c = io();
    expect(await runCli(['export', '--tenant', 'acme', '--out', out], c.io)).toBe(2);
    expect(c.err.join('')).toStartWith(`cinder export: cannot make the --out directory ${out}: `);
  }
  const store = createSqliteStore(join(dir, 'cinder.db'));
  expect(await store.exports.jobs.countByState()).toEqual({});
  await store.close();
});
