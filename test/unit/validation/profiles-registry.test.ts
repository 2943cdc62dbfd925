/**
 * The profile registry remembers a bounded number of canonicals per tenant: every extension url of a
 * validated resource is looked up, so many different urls must not grow its cache without end.
 */
import { expect, test } from 'bun:test';
import { ProfileRegistry } from '../../../src/fhir/validation/profile/registry.ts';
import type { Store } from '../../../src/store/types.ts';
import { storeProfiles } from '../../../src/fhir/validation/profile/definitions.ts';

test('the oldest canonicals are forgotten beyond the capacity, and looked up again when named', async () => {
  let searches = 0;
  const store = { resources: { changeToken: async () => '0', search: async () => (searches++, []) } } as unknown as Store;
  const registry = new ProfileRegistry(storeProfiles(store), [], 3);
  const cache = await registry.cache('t');
  for (const url of ['http://x/a', 'http://x/b', 'http://x/c', 'http://x/d']) expect(await registry.resolve(cache, 't', url)).toEqual({ kind: 'unknown' });
  expect(searches).toBe(4);
  await registry.resolve(cache, 't', 'http://x/d');
  expect(searches).toBe(4);
  await registry.resolve(cache, 't', 'http://x/a');
  expect(searches).toBe(5);
});
