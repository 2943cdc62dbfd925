/**
 * `cinder import` checks the profiles each resource claims, as a REST write does (tenant StructureDefinitions
 * as stored when the import starts, R4 core profiles, bindings through the tenant's terminology), and
 * `cinder validate` checks them on stored data; on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createCliEnv } from '../helpers/cli.ts';
import { storeTargets, type StoreTarget } from '../helpers/stores.ts';

type Json = Record<string, unknown>;

const targets = await storeTargets({ main: false });
afterAll(async () => {
  for (const t of targets) await t.cleanup();
});

const LOCAL = 'http://example.org/fhir/StructureDefinition/named-patient';
const WEIGHT = 'http://hl7.org/fhir/StructureDefinition/bodyweight';

/** A tenant's profile on Patient: `name` is required. */
function namedPatient(): Json {
  const el = (path: string, min: number) => ({ id: path, path, short: path, definition: path, min, max: '*', base: { path, min: 0, max: '*' }, isModifier: false, isSummary: false });
  return {
    resourceType: 'StructureDefinition', id: 'named-patient', url: LOCAL, name: 'NamedPatient', status: 'active', kind: 'resource', abstract: false,
    type: 'Patient', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Patient', derivation: 'constraint', fhirVersion: '4.0.1',
    snapshot: { element: [el('Patient', 0), el('Patient.name', 1)] },
  };
}

const patient = (id: string, named: boolean): Json => ({ resourceType: 'Patient', id, meta: { profile: [LOCAL] }, ...(named ? { name: [{ family: 'Doe' }] } : {}) });

/** A body weight as R4's bodyweight profile wants it, in `unit` (its required binding: kg, g, [lb_av]). */
function weight(id: string, unit: string): Json {
  return {
    resourceType: 'Observation', id, meta: { profile: [WEIGHT] }, status: 'final',
    category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }],
    code: { coding: [{ system: 'http://loinc.org', code: '29463-7' }] },
    subject: { reference: 'Patient/ok' }, effectiveDateTime: '2024-01-01',
    valueQuantity: { value: 70, unit, system: 'http://unitsofmeasure.org', code: unit },
  };
}

for (const target of targets) {
  describe(`profiles in cinder import and validate (${target.kind})`, () => {
    let cli: ReturnType<typeof createCliEnv>;
    let db: Awaited<ReturnType<StoreTarget['fresh']>>;
    const file = (name: string, lines: unknown[]) => {
      const path = join(cli.dir, name);
      writeFileSync(path, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
      return path;
    };
    const read = async (type: string, id: string) => {
      const store = db.open();
      return (await store.resources.read('t1', type, id)) !== null;
    };

    beforeAll(async () => {
      db = await target.migrated();
      cli = createCliEnv({ CINDER_DATABASE_URL: db.url });
      expect((await cli.run(['tenant', 'create', 't1'])).code).toBe(0);
    });
    afterAll(() => cli.close());

    test('a profile imported in a run applies from the next run on', async () => {
      const r = await cli.run(['import', '--tenant', 't1', '--json', file('same-run.ndjson', [namedPatient(), patient('early', false)])]);
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ imported: 2, failed: 0 });
      const next = await cli.run(['import', '--tenant', 't1', '--json', file('next-run.ndjson', [patient('late', false)])]);
      expect(next.code).toBe(1);
      expect(JSON.parse(next.stdout)).toMatchObject({ imported: 0, failed: 1, errors: [{ line: 1, issues: [{ expression: ['Patient.name'] }] }] });
    });

    test('NDJSON lines: tenant and core profiles are checked on the preparation thread, bindings by the terminology', async () => {
      const path = file('lines.ndjson', [patient('ok', true), patient('unnamed', false), weight('kg', 'kg'), weight('cm', 'cm')]);
      const r = await cli.run(['import', '--tenant', 't1', '--json', path]);
      expect(r.code).toBe(1);
      const summary = JSON.parse(r.stdout);
      expect(summary).toMatchObject({ imported: 2, failed: 2 });
      const byLine = new Map<number, { message: string; issues: { expression: string[]; details?: { text: string } }[] }>(summary.errors.map((e: { line: number }) => [e.line, e]));
      expect([...byLine.keys()].sort()).toEqual([2, 4]);
      expect(byLine.get(2)!.issues.map((i) => i.expression[0])).toEqual(['Patient.name']);
      expect(byLine.get(2)!.message).toContain('Patient is not valid');
      expect(byLine.get(4)!.issues.map((i) => i.expression[0])).toEqual(['Observation.value.ofType(Quantity).code']);
      expect(byLine.get(4)!.issues[0]!.details?.text).toContain('ucum-bodyweight');
      expect(await read('Patient', 'ok')).toBe(true);
      expect(await read('Patient', 'unnamed')).toBe(false);
      expect(await read('Observation', 'kg')).toBe(true);
      expect(await read('Observation', 'cm')).toBe(false);
    });

    test('the extensions of a line claiming a profile are checked against their definitions', async () => {
      const birthPlace = (value: Json) => ({ ...patient('x', true), extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/patient-birthPlace', ...value }] });
      // A profile Cinder does not know: the line's extensions are still checked, on its first line and after.
      const usCore = { meta: { profile: ['http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient'] } };
      const lines = [
        { ...birthPlace({ valueAddress: { city: 'Lyon' } }), id: 'born-ok' },
        { ...birthPlace({ valueString: 'Lyon' }), id: 'born-bad' },
        { ...patient('us-plain', true), ...usCore },
        { ...birthPlace({ valueString: 'Lyon' }), ...usCore, id: 'us-bad' },
      ];
      const r = await cli.run(['import', '--tenant', 't1', '--json', file('extensions.ndjson', lines)]);
      expect(r.code).toBe(1);
      const summary = JSON.parse(r.stdout);
      expect(summary).toMatchObject({ imported: 2, failed: 2, errors: [{ line: 2 }, { line: 4 }] });
      for (const e of summary.errors) expect(e.issues[0].expression[0]).toStartWith('Patient.extension[0]');
      expect(await read('Patient', 'born-ok')).toBe(true);
      expect(await read('Patient', 'us-plain')).toBe(true);
    });

    test('JSON documents: a collection entry and a transaction entry are checked on the importing thread', async () => {
      const collection = join(cli.dir, 'collection.json');
      writeFileSync(collection, JSON.stringify({ resourceType: 'Bundle', type: 'collection', entry: [{ resource: patient('c-ok', true) }, { resource: patient('c-bad', false) }] }));
      const transaction = join(cli.dir, 'transaction.json');
      writeFileSync(transaction, JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry: [{ resource: patient('t-bad', false), request: { method: 'PUT', url: 'Patient/t-bad' } }] }));
      const r = await cli.run(['import', '--tenant', 't1', '--json', collection, transaction]);
      expect(r.code).toBe(1);
      const summary = JSON.parse(r.stdout);
      expect(summary).toMatchObject({ imported: 1, failed: 2 });
      expect(summary.errors[0]).toMatchObject({ file: collection, entry: 1 });
      expect(summary.errors[0].issues[0].expression).toEqual(['Bundle.entry[1].resource.name']);
      expect(summary.errors[1].file).toBe(transaction);
      expect(summary.errors[1].message).toContain('Patient.name');
      expect(await read('Patient', 'c-ok')).toBe(true);
      expect(await read('Patient', 'c-bad')).toBe(false);
      expect(await read('Patient', 't-bad')).toBe(false);
    });

    test('an NDJSON line with urn: references is checked once they are resolved, on the importing thread', async () => {
      const uuid = 'urn:uuid:6f1e0b7a-9c4d-4e58-8a3b-1c2d3e4f5a6b';
      const collection = join(cli.dir, 'subjects.json');
      writeFileSync(collection, JSON.stringify({ resourceType: 'Bundle', type: 'collection', entry: [{ fullUrl: uuid, resource: patient('subject', true) }] }));
      const lines = [weight('urn-kg', 'kg'), weight('urn-cm', 'cm')].map((o) => ({ ...o, subject: { reference: uuid } }));
      const r = await cli.run(['import', '--tenant', 't1', '--json', file('urn.ndjson', lines), collection]);
      expect(r.code).toBe(1);
      const summary = JSON.parse(r.stdout);
      expect(summary).toMatchObject({ imported: 2, failed: 1, errors: [{ line: 2, issues: [{ expression: ['Observation.value.ofType(Quantity).code'] }] }] });
      expect(await read('Observation', 'urn-kg')).toBe(true);
      expect(await read('Observation', 'urn-cm')).toBe(false);
    });

    test('at CINDER_VALIDATION=structural, nothing is checked against profiles; cinder validate finds it', async () => {
      const loose = createCliEnv({ CINDER_DATABASE_URL: db.url, CINDER_VALIDATION: 'structural' });
      const collection = join(cli.dir, 'loose.json');
      writeFileSync(collection, JSON.stringify({ resourceType: 'Bundle', type: 'collection', entry: [{ resource: patient('loose-entry', false) }] }));
      const r = await loose.run(['import', '--tenant', 't1', '--json', file('loose.ndjson', [patient('loose', false), weight('loose-cm', 'cm')]), collection]);
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ imported: 3, failed: 0 });
      const v = await cli.run(['validate', '--tenant', 't1', '--type', 'Patient,Observation']);
      expect(v.code).toBe(1);
      const outcomes = v.stdout.trim().split('\n').map((l) => JSON.parse(l) as { issue: { diagnostics: string; expression: string[] }[] });
      const found = outcomes.flatMap((o) => o.issue.map((i) => `${i.diagnostics.split(':')[0]} ${i.expression[0]}`)).sort();
      expect(found).toEqual(['Observation/loose-cm Observation.value.ofType(Quantity).code', 'Patient/early Patient.name', 'Patient/loose Patient.name', 'Patient/loose-entry Patient.name']);
      expect(v.stderr).toContain('4 invalid');
    });

    test('a profile with only a differential: checked from its generated snapshot on both threads, and by cinder validate', async () => {
      const url = 'http://example.org/fhir/StructureDefinition/gendered-patient';
      const profile = {
        resourceType: 'StructureDefinition', id: 'gendered-patient', url, name: 'GenderedPatient', status: 'active', kind: 'resource', abstract: false,
        type: 'Patient', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Patient', derivation: 'constraint',
        differential: { element: [{ id: 'Patient.gender', path: 'Patient.gender', min: 1 }] },
      };
      expect((await cli.run(['import', '--tenant', 't1', '--json', file('gendered-profile.ndjson', [profile])])).code).toBe(0);
      const gendered = (id: string, gender?: string): Json => ({ resourceType: 'Patient', id, meta: { profile: [url] }, ...(gender ? { gender } : {}) });
      const collection = join(cli.dir, 'gendered.json');
      writeFileSync(collection, JSON.stringify({ resourceType: 'Bundle', type: 'collection', entry: [{ resource: gendered('g-entry') }] }));
      const r = await cli.run(['import', '--tenant', 't1', '--json', file('gendered.ndjson', [gendered('g-ok', 'female'), gendered('g-bad')]), collection]);
      expect(r.code).toBe(1);
      const summary = JSON.parse(r.stdout);
      expect(summary).toMatchObject({ imported: 1, failed: 2, errors: [{ line: 2, issues: [{ expression: ['Patient.gender'] }] }, { file: collection, entry: 0 }] });
      expect(await read('Patient', 'g-ok')).toBe(true);
      expect(await read('Patient', 'g-bad')).toBe(false);
      const loose = createCliEnv({ CINDER_DATABASE_URL: db.url, CINDER_VALIDATION: 'structural' });
      expect((await loose.run(['import', '--tenant', 't1', '--json', file('g-loose.ndjson', [gendered('g-loose')])])).code).toBe(0);
      const v = await cli.run(['validate', '--tenant', 't1', '--type', 'Patient']);
      expect(v.stdout).toContain('Patient/g-loose');
      expect(v.stdout).not.toContain('Patient/g-ok');
    });
  });
}
