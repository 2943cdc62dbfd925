/**
 * The profile registry remembers a bounded number of canonicals per tenant: every extension url of a
 * validated resource is looked up, so many different urls must not grow its cache without end.
 */
import { expect, test } from 'bun:test';
import { CORE_PREFIXES, ProfileRegistry } from '../../../src/fhir/validation/profile/registry.ts';
import { coreProfileFiles } from '../../../src/fhir/validation/profile/core-files.js';
import type { Store } from '../../../src/store/types.ts';
import { storeProfiles } from '../../../src/fhir/validation/profile/definitions.ts';

test('the oldest canonicals are forgotten beyond the capacity, and looked up again when named', async () => {
  let searches = 0;
  const store = { resources: { changeToken: async () => '0', search: async () => (searches++, []) } } as unknown as Store;
  const registry = new ProfileRegistry(storeProfiles(store), { files: [], capacity: 3 });
  const cache = await registry.cache('t');
  for (const url of ['http://x/a', 'http://x/b', 'http://x/c', 'http://x/d']) expect(await registry.resolve(cache, 't', url)).toEqual({ kind: 'unknown' });
  expect(searches).toBe(4);
  await registry.resolve(cache, 't', 'http://x/d');
  expect(searches).toBe(4);
  await registry.resolve(cache, 't', 'http://x/a');
  expect(searches).toBe(5);
});

test('every core profile and extension definition has a url under CORE_PREFIXES, so no other canonical needs the files read', async () => {
  const outside: string[] = [];
  let count = 0;
  for (const file of coreProfileFiles) {
    const bundle = (await Bun.file(file).json()) as { entry?: { resource?: { resourceType?: string; url?: string; derivation?: string } }[] };
    for (const e of bundle.entry ?? []) {
      const r = e.resource;
      if (r?.resourceType !== 'StructureDefinition' || r.derivation !== 'constraint' || typeof r.url !== 'string') continue;
      count++;
      if (!CORE_PREFIXES.some((p) => r.url!.startsWith(p))) outside.push(r.url);
    }
  }
  expect(count).toBeGreaterThan(400);
  expect(outside).toEqual([]);
});

test('a canonical outside CORE_PREFIXES is unknown without reading the core files', async () => {
  const store = { resources: { changeToken: async () => '0', search: async () => [] } } as unknown as Store;
  const registry = new ProfileRegistry(storeProfiles(store), { files: ["/nonexistent/core-profiles.json"] });
  const cache = await registry.cache('t');
  expect(await registry.resolve(cache, 't', 'http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient')).toEqual({ kind: 'unknown' });
  await expect(registry.resolve(cache, 't', 'http://hl7.org/fhir/StructureDefinition/bp')).rejects.toThrow();
});

test('one copy of the core profiles per process: the map registries compile from is the one snapshot generation stands on', async () => {
  const { coreDefinitions, coreProfiles } = await import('../../../src/fhir/validation/profile/core-definitions.ts');
  const profiles = await coreProfiles();
  const all = await coreDefinitions();
  expect(await coreProfiles()).toBe(profiles);
  for (const url of ['http://hl7.org/fhir/StructureDefinition/bp', 'http://hl7.org/fhir/StructureDefinition/patient-birthPlace']) {
    expect(all.get(url)).toBe(profiles.get(url)!);
    // Kept for `$snapshot` of a core profile, which generates from it.
    expect(((profiles.get(url)!.differential as { element: unknown[] }).element).length).toBeGreaterThan(0);
  }
  expect(profiles.get('http://hl7.org/fhir/StructureDefinition/Observation')).toBeUndefined();
  expect(all.get('http://hl7.org/fhir/StructureDefinition/Observation')?.kind).toBe('resource');
});
