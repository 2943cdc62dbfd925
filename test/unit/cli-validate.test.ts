import { afterEach, describe, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createCliEnv } from '../helpers/cli.ts';

let cli: ReturnType<typeof createCliEnv> | undefined;
afterEach(() => cli?.close());

async function env(extra: Record<string, string> = {}) {
  cli = createCliEnv(extra);
  expect((await cli.run(['tenant', 'create', 't1'])).code).toBe(0);
  return cli;
}

function file(name: string, lines: unknown[]): string {
  const path = join(cli!.dir, name);
  writeFileSync(path, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  return path;
}

const GOOD = { resourceType: 'Patient', id: 'good', gender: 'female' };
const BAD = { resourceType: 'Patient', id: 'bad', gender: 'banana', birthDate: '2020-02-30' };
const BAD_OBSERVATION = { resourceType: 'Observation', id: 'obs', code: { text: 'x' } };

describe('cinder import validates every resource', () => {
  test('invalid lines are reported with file, line and each problem; the valid ones are stored; exit 1', async () => {
    const c = await env();
    const path = file('mixed.ndjson', [GOOD, BAD, BAD_OBSERVATION]);
    const r = await c.run(['import', '--tenant', 't1', path]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('Imported 1 resources');
    expect(r.stdout).toContain('2 failed');
    expect(r.stderr).toContain(`${path}:2: Patient is not valid: 2 problems`);
    expect(r.stderr).toContain('  Patient.gender: "banana" is not in the required value set');
    expect(r.stderr).toContain('  Patient.birthDate: "2020-02-30"');
    expect(r.stderr).toContain(`${path}:3: Observation is not valid: Observation.status: Observation.status is required`);
    const store = c.store();
    try {
      expect(await store.resources.read('t1', 'Patient', 'good')).not.toBeNull();
      expect(await store.resources.read('t1', 'Patient', 'bad')).toBeNull();
    } finally {
      await store.close();
    }
  });

  test('--json lists the issues of each invalid line', async () => {
    const c = await env();
    const r = await c.run(['import', '--tenant', 't1', '--json', file('bad.ndjson', [BAD])]);
    expect(r.code).toBe(1);
    const summary = JSON.parse(r.stdout);
    expect(summary.errors).toHaveLength(1);
    expect(summary.errors[0].line).toBe(1);
    expect(summary.errors[0].issues.map((i: { expression: string[] }) => i.expression[0]).sort()).toEqual(['Patient.birthDate', 'Patient.gender']);
  });

  test('JSON documents: a collection Bundle entry and a single resource', async () => {
    const c = await env();
    const bundle = join(c.dir, 'collection.json');
    writeFileSync(bundle, JSON.stringify({ resourceType: 'Bundle', type: 'collection', entry: [{ resource: GOOD }, { resource: BAD }] }));
    const r = await c.run(['import', '--tenant', 't1', bundle]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('Bundle.entry[1].resource is not valid');
    expect(r.stdout).toContain('Imported 1 resources');
  });

  test('CINDER_VALIDATION=off loads legacy data as it is', async () => {
    const c = await env({ CINDER_VALIDATION: 'off' });
    const r = await c.run(['import', '--tenant', 't1', file('legacy.ndjson', [GOOD, BAD, BAD_OBSERVATION])]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Imported 3 resources');
  });
});

describe('cinder validate', () => {
  test('reports each invalid stored resource as an OperationOutcome line; exit 1', async () => {
    const c = await env({ CINDER_VALIDATION: 'off' });
    expect((await c.run(['import', '--tenant', 't1', file('legacy.ndjson', [GOOD, BAD, BAD_OBSERVATION])])).code).toBe(0);
    const r = await c.run(['validate', '--tenant', 't1']);
    expect(r.code).toBe(1);
    const outcomes = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(outcomes).toHaveLength(2);
    for (const o of outcomes) expect(o.resourceType).toBe('OperationOutcome');
    const byResource = Object.fromEntries(outcomes.map((o) => [o.issue[0].diagnostics.split(':')[0], o.issue.map((i: { expression: string[] }) => i.expression[0]).sort()]));
    expect(byResource).toEqual({ 'Observation/obs': ['Observation.status'], 'Patient/bad': ['Patient.birthDate', 'Patient.gender'] });
    expect(r.stderr).toContain("Checked 3 resources of tenant 't1'");
    expect(r.stderr).toContain('2 invalid');
  });

  test('a check of every type that finds nothing invalid ends the validation debt of data loaded unvalidated', async () => {
    const c = await env({ CINDER_VALIDATION: 'off' });
    expect((await c.run(['import', '--tenant', 't1', file('legacy.ndjson', [GOOD])])).code).toBe(0);
    const debt = async () => {
      const store = c.store();
      try {
        return await store.tenants.validationDebt('t1');
      } finally {
        await store.close();
      }
    };
    expect(await debt()).not.toBeNull();
    // Checking some types only says nothing about the others.
    expect((await c.run(['validate', '--tenant', 't1', '--type', 'Patient'])).code).toBe(0);
    expect(await debt()).not.toBeNull();
    const r = await c.run(['validate', '--tenant', 't1']);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('no longer validate');
    expect(await debt()).toBeNull();
  });

  test('--type limits the check; --json prints a summary; a valid tenant exits 0', async () => {
    const c = await env({ CINDER_VALIDATION: 'off' });
    expect((await c.run(['import', '--tenant', 't1', file('legacy.ndjson', [GOOD, BAD, BAD_OBSERVATION])])).code).toBe(0);
    const r = await c.run(['validate', '--tenant', 't1', '--type', 'Observation', '--json']);
    expect(r.code).toBe(1);
    const summary = JSON.parse(r.stdout);
    expect(summary).toMatchObject({ tenant: 't1', checked: 1, invalid: 1, resources: [{ reference: 'Observation/obs', versionId: 1, errors: 1 }] });
    const clean = await c.run(['validate', '--tenant', 't1', '--type', 'Patient,Encounter']);
    expect(clean.code).toBe(1);
    expect((await c.run(['validate', '--tenant', 't1', '--type', 'Encounter'])).code).toBe(0);
    expect((await c.run(['validate', '--tenant', 't1', '--type', 'Spaceship'])).code).toBe(2);
    expect((await c.run(['validate'])).code).toBe(2);
  });
});
