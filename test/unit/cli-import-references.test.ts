/**
 * `cinder import` resolves `urn:uuid:` references across the files of one run, whatever their order,
 * on both databases: Synthea-shaped Bundles (test/fixtures/import/synthea) and NDJSON.
 */
import { afterAll, afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Store } from '../../src/store/types.ts';
import { createCliEnv } from '../helpers/cli.ts';
import { storeTargets } from '../helpers/stores.ts';

type Json = Record<string, any>;

const FIXTURES = join(import.meta.dir, '../fixtures/import/synthea');
/** Byte order, as `ls` in the C locale or a sort in a script gives them: the Group first. */
const NAMES = readdirSync(FIXTURES).sort();
const JANE = 'urn:uuid:d1e2f3a4-0001-4ccc-8000-00000000c001';
const TYPES = ['Organization', 'Location', 'Practitioner', 'PractitionerRole', 'Patient', 'Encounter', 'Observation', 'Condition', 'Group'];

const targets = await storeTargets({ main: false });
afterAll(async () => {
  for (const t of targets) await t.cleanup();
}, 60_000);

/** Every stored resource of the tenant, by `Type/id`. */
async function stored(store: Store): Promise<Map<string, Json>> {
  const out = new Map<string, Json>();
  for (const type of TYPES) {
    for (const v of await store.resources.search('t1', { type, sort: [], count: 1000 })) out.set(`${type}/${v.id}`, JSON.parse(v.content));
  }
  return out;
}

/**
 * The stored graph with server ids replaced by natural keys: each resource as `Type identifier`, with
 * its references as the keys of their targets (`?` for a target that is not stored). The same data
 * imported in any order gives the same graph.
 */
function graph(resources: Map<string, Json>): string[] {
  const key = (r: Json | undefined) => (r ? `${r.resourceType} ${r.identifier?.[0]?.value}` : '?');
  return [...resources.values()]
    .map((r) => {
      const refs: string[] = [];
      const walk = (node: unknown, path: string): void => {
        if (Array.isArray(node)) return node.forEach((n, i) => walk(n, `${path}[${i}]`));
        if (node === null || typeof node !== 'object') return;
        for (const [k, v] of Object.entries(node)) {
          if (k === 'reference' && typeof v === 'string') refs.push(`${path}=${key(resources.get(v))}`);
          else walk(v, `${path}.${k}`);
        }
      };
      walk(r, r.resourceType);
      return `${key(r)}: ${refs.join(', ')}`;
    })
    .sort();
}

/** What the fixtures hold once every reference is resolved. */
const EXPECTED = [
  'Encounter d1e2f3a4-0002-4ccc-8000-00000000c002: Encounter.subject=Patient d1e2f3a4-0001-4ccc-8000-00000000c001, Encounter.participant[0].individual=Practitioner 9999999301, Encounter.serviceProvider=Organization b1c2d3e4-0001-4aaa-8000-00000000a001',
  'Encounter e1f2a3b4-0002-4ddd-8000-00000000d002: Encounter.subject=Patient e1f2a3b4-0001-4ddd-8000-00000000d001, Encounter.participant[0].individual=Practitioner 9999999301, Encounter.serviceProvider=Organization b1c2d3e4-0001-4aaa-8000-00000000a001',
  'Group cardiac: Group.member[0].entity=Patient d1e2f3a4-0001-4ccc-8000-00000000c001, Group.member[1].entity=Patient e1f2a3b4-0001-4ddd-8000-00000000d001',
  'Location b1c2d3e4-0002-4aaa-8000-00000000a002: Location.managingOrganization=Organization b1c2d3e4-0001-4aaa-8000-00000000a001',
  'Observation d1e2f3a4-0003-4ccc-8000-00000000c003: Observation.subject=Patient d1e2f3a4-0001-4ccc-8000-00000000c001, Observation.encounter=Encounter d1e2f3a4-0002-4ccc-8000-00000000c002',
  'Observation e1f2a3b4-0003-4ddd-8000-00000000d003: Observation.subject=Patient e1f2a3b4-0001-4ddd-8000-00000000d001, Observation.encounter=Encounter e1f2a3b4-0002-4ddd-8000-00000000d002',
  'Organization b1c2d3e4-0001-4aaa-8000-00000000a001: ',
  'Patient d1e2f3a4-0001-4ccc-8000-00000000c001: ',
  'Patient e1f2a3b4-0001-4ddd-8000-00000000d001: ',
  'Practitioner 9999999301: ',
  'PractitionerRole c1d2e3f4-0002-4bbb-8000-00000000b002: PractitionerRole.practitioner=Practitioner 9999999301, PractitionerRole.organization=Organization b1c2d3e4-0001-4aaa-8000-00000000a001',
];

for (const target of targets) {
  describe(`cinder import across files (${target.kind})`, () => {
    let cli: ReturnType<typeof createCliEnv>;
    let store: Store;

    beforeEach(async () => {
      const db = await target.migrated();
      cli = createCliEnv({ CINDER_DATABASE_URL: db.url });
      expect((await cli.run(['tenant', 'create', 't1'])).code).toBe(0);
      store = db.open();
    });
    afterEach(() => cli.close());

    /** Writes `content` (a JSON value, or NDJSON rows) to a file of the run's directory. */
    function file(name: string, content: unknown): string {
      const path = join(cli.dir, name);
      const text = Array.isArray(content) ? content.map((r) => JSON.stringify(r)).join('\n') + '\n' : JSON.stringify(content, null, 2);
      writeFileSync(path, text);
      return path;
    }

    const fixture = (name: string) => join(FIXTURES, name);
    const importJson = async (paths: string[]) => {
      const r = await cli.run(['import', '--tenant', 't1', '--json', ...paths]);
      return { ...r, summary: JSON.parse(r.stdout) as Json };
    };

    test('Synthea files in name order, the Group first: every urn:uuid and conditional reference resolves', async () => {
      expect(NAMES[0]).toBe('Group_cardiac_cohort.json');
      const r = await importJson(NAMES.map(fixture));
      expect([r.code, r.stderr]).toEqual([0, '']);
      expect(r.summary).toMatchObject({ imported: 11, failed: 0, errors: [] });
      const resources = await stored(store);
      expect(graph(resources)).toEqual(EXPECTED);
      for (const r of resources.values()) expect(JSON.stringify(r)).not.toMatch(/"reference":"(urn:|[A-Za-z]+\?)/);
      const group = resources.get('Group/cardiac-cohort')!;
      for (const m of group.member) expect(resources.get(m.entity.reference)?.resourceType).toBe('Patient');
    });

    test('any other order gives the same data', async () => {
      const r = await importJson([...NAMES].reverse().map(fixture));
      expect([r.code, r.stderr, r.summary.imported]).toEqual([0, '', 11]);
      expect(graph(await stored(store))).toEqual(EXPECTED);
      const shuffled = [NAMES[3]!, NAMES[0]!, NAMES[2]!, NAMES[4]!, NAMES[1]!];
      const fresh = await target.migrated();
      const other = createCliEnv({ CINDER_DATABASE_URL: fresh.url });
      try {
        expect((await other.run(['tenant', 'create', 't1'])).code).toBe(0);
        expect((await other.run(['import', '--tenant', 't1', ...shuffled.map(fixture)])).code).toBe(0);
        expect(graph(await stored(fresh.open()))).toEqual(EXPECTED);
      } finally {
        other.close();
      }
    });

    test('a member that no Bundle of the run writes: reported with file, entry and reference, exit 1; the rest is imported', async () => {
      const group = JSON.parse(readFileSync(fixture(NAMES[0]!), 'utf8')) as Json;
      const dead = 'urn:uuid:0badc0de-0000-4000-8000-000000000000';
      group.entry[0].resource.member.push({ entity: { reference: dead } });
      const groupFile = file(NAMES[0]!, group);
      const r = await importJson([groupFile, ...NAMES.slice(1).map(fixture)]);
      expect(r.code).toBe(1);
      const message = `transaction Bundle rolled back: Bundle.entry[0]: reference '${dead}' matches no fullUrl in the Bundle or of an entry written by this import`;
      expect(r.stderr).toBe(`${groupFile}: ${message}\n`);
      expect(r.summary).toMatchObject({ imported: 10, failed: 1, errors: [{ file: groupFile, entry: 0, reference: dead, message }] });
      const resources = await stored(store);
      expect(resources.has('Group/cardiac-cohort')).toBe(false);
      expect(graph(resources)).toEqual(EXPECTED.filter((line) => !line.startsWith('Group')));
    });

    test('NDJSON lines refer to Bundle entries of the run by urn:uuid, before or after them; an unknown one is reported', async () => {
      const obs = (id: string, subject: string, extra: Json = {}) => ({
        resourceType: 'Observation', id, identifier: [{ system: 'urn:oid:2.16.840.1', value: id }], status: 'final', code: { text: 'x' }, subject: { reference: subject }, ...extra,
      });
      const lines = file('A_observations.ndjson', [
        obs('o-jane', JANE, { performer: [{ reference: 'urn:uuid:c1d2e3f4-0001-4bbb-8000-00000000b001' }] }),
        obs('o-lost', 'urn:uuid:0badc0de-0000-4000-8000-000000000001'),
        obs('o-plain', 'Patient/elsewhere'),
        { resourceType: 'Patient', id: 'p-oid', identifier: [{ system: 'urn:oid:1.2.3', value: '1' }] },
      ]);
      const r = await importJson([lines, ...NAMES.map(fixture)]);
      expect(r.code).toBe(1);
      const message = "reference 'urn:uuid:0badc0de-0000-4000-8000-000000000001' matches no fullUrl of a Bundle entry written by this import";
      expect(r.stderr).toBe(`${lines}:2: ${message}\n`);
      expect(r.summary).toMatchObject({ imported: 14, failed: 1, errors: [{ file: lines, line: 2, reference: 'urn:uuid:0badc0de-0000-4000-8000-000000000001', message }] });
      const resources = await stored(store);
      expect(resources.has('Observation/o-lost')).toBe(false);
      expect(resources.get('Observation/o-plain')!.subject.reference).toBe('Patient/elsewhere');
      expect(graph(new Map([...resources].filter(([k]) => k === 'Observation/o-jane' || !k.startsWith('Observation/o-'))))).toContain(
        'Observation o-jane: Observation.subject=Patient d1e2f3a4-0001-4ccc-8000-00000000c001, Observation.performer[0]=Practitioner 9999999301',
      );
    });

    test('a batch Bundle waits like a transaction; at the end only its entries with unresolved references fail', async () => {
      const dead = 'urn:uuid:0badc0de-0000-4000-8000-000000000002';
      const post = (resource: Json, fullUrl?: string) => ({ ...(fullUrl ? { fullUrl } : {}), resource, request: { method: 'POST', url: resource.resourceType } });
      const batch = file('C_batch.json', {
        resourceType: 'Bundle', type: 'batch',
        entry: [
          post({ resourceType: 'Condition', identifier: [{ value: 'ok' }], subject: { reference: JANE } }),
          post({ resourceType: 'Condition', identifier: [{ value: 'lost' }], subject: { reference: dead } }),
          post({ resourceType: 'Condition', identifier: [{ value: 'chained' }], subject: { reference: JANE }, encounter: { reference: 'urn:uuid:cc000000-0000-4000-8000-000000000001' } }),
          post({ resourceType: 'Encounter', identifier: [{ value: 'batch-enc' }], status: 'finished', class: { code: 'AMB' }, subject: { reference: JANE } }, 'urn:uuid:cc000000-0000-4000-8000-000000000001'),
        ],
      });
      const r = await importJson([batch, ...NAMES.map(fixture)]);
      expect(r.code).toBe(1);
      const unmatched = (ref: string) => `reference '${ref}' matches no fullUrl in the Bundle or of an entry written by this import`;
      // Entry 2 refers to entry 3, which a batch writes after it: it fails on its own, as a batch entry would.
      expect(r.summary).toMatchObject({
        imported: 13, failed: 2,
        errors: [
          { file: batch, entry: 1, reference: dead, message: `Bundle.entry[1]: ${unmatched(dead)}` },
          { file: batch, entry: 2, message: `Bundle.entry[2]: 400: ${unmatched('urn:uuid:cc000000-0000-4000-8000-000000000001')}` },
        ],
      });
      const lines = graph(await stored(store)).filter((l) => l.startsWith('Condition') || l.startsWith('Encounter batch'));
      expect(lines).toEqual([
        'Condition ok: Condition.subject=Patient d1e2f3a4-0001-4ccc-8000-00000000c001',
        'Encounter batch-enc: Encounter.subject=Patient d1e2f3a4-0001-4ccc-8000-00000000c001',
      ]);
    });

    test('an IG-style transaction and batch: canonical resources whose fullUrl is their url keep it; references to them are rewritten', async () => {
      const vs = 'http://example.org/fhir/ValueSet/b';
      const cs = 'http://example.org/fhir/CodeSystem/colours';
      const sd = 'http://example.org/fhir/StructureDefinition/favourite-colour';
      const put = (fullUrl: string, resource: Json) => ({ fullUrl, resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
      const ig = file('D_ig.json', {
        resourceType: 'Bundle', type: 'transaction',
        entry: [
          put(cs, { resourceType: 'CodeSystem', id: 'colours', url: cs, status: 'active', content: 'complete', concept: [{ code: 'red' }] }),
          put(vs, { resourceType: 'ValueSet', id: 'b', url: vs, status: 'active', compose: { include: [{ system: cs }] } }),
          { fullUrl: 'urn:uuid:dd000000-0000-4000-8000-000000000001', request: { method: 'POST', url: 'Provenance' }, resource: {
            resourceType: 'Provenance', recorded: '2026-01-01T00:00:00Z', agent: [{ who: { display: 'IG publisher' } }], target: [{ reference: vs }],
          } },
        ],
      });
      const batch = file('E_batch.json', {
        resourceType: 'Bundle', type: 'batch',
        entry: [put(sd, {
          resourceType: 'StructureDefinition', id: 'favourite-colour', url: sd, name: 'FavouriteColour', status: 'active', kind: 'complex-type', abstract: false,
          context: [{ type: 'element', expression: 'Patient' }], type: 'Extension', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Extension', derivation: 'constraint',
          differential: { element: [{ id: 'Extension', path: 'Extension', max: '1' }, { id: 'Extension.value[x]', path: 'Extension.value[x]', type: [{ code: 'Coding' }], binding: { strength: 'required', valueSet: vs } }] },
        })],
      });
      const r = await importJson([ig, batch]);
      expect([r.code, r.stderr]).toEqual([0, '']);
      expect(r.summary).toMatchObject({ imported: 4, failed: 0, errors: [] });
      const one = async (type: string) => (await store.resources.search('t1', { type, sort: [], count: 10 })).map((v) => JSON.parse(v.content) as Json);
      const [storedVs] = await one('ValueSet');
      expect([storedVs!.id, storedVs!.url, storedVs!.compose.include[0].system]).toEqual(['b', vs, cs]);
      expect((await one('CodeSystem')).map((c) => c.url)).toEqual([cs]);
      const [storedSd] = await one('StructureDefinition');
      expect([storedSd!.url, storedSd!.differential.element[1].binding.valueSet]).toEqual([sd, vs]);
      expect((await one('Provenance'))[0]!.target).toEqual([{ reference: 'ValueSet/b' }]);
    });

    test('collection Bundle entries refer to each other and to other Bundles\' entries by fullUrl', async () => {
      const coll = file('B_collection.json', {
        resourceType: 'Bundle', type: 'collection',
        entry: [
          { fullUrl: 'urn:uuid:aa000000-0000-4000-8000-000000000001', resource: { resourceType: 'Condition', identifier: [{ value: 'c1' }], subject: { reference: JANE }, encounter: { reference: 'urn:uuid:aa000000-0000-4000-8000-000000000002' } } },
          { fullUrl: 'urn:uuid:aa000000-0000-4000-8000-000000000002', resource: { resourceType: 'Encounter', id: 'enc-coll', identifier: [{ value: 'e1' }], status: 'finished', class: { code: 'AMB' }, subject: { reference: JANE } } },
        ],
      });
      const r = await importJson([coll, ...NAMES.map(fixture)]);
      expect([r.code, r.stderr, r.summary.imported]).toEqual([0, '', 13]);
      expect(graph(await stored(store))).toContain('Condition c1: Condition.subject=Patient d1e2f3a4-0001-4ccc-8000-00000000c001, Condition.encounter=Encounter e1');
    });
  });
}
