/**
 * A `$validate-code` of a code system version the server lacks names the versions it has (HL7's
 * UNKNOWN_CODESYSTEM_VERSION). Those versions are read once per change of the tenant's terminology, as the code
 * systems themselves are: each such request read every stored version of the code system, its whole text (a
 * generated one of 100,000 concepts: 2-4 ms of CPU a request, against 0.04 ms for a known version), which any
 * token allowed the operation could repeat with other codes. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import type { Json } from '../helpers/fhir.ts';
import type { Store } from '../../src/store/types.ts';

const CS = 'http://example.org/fhir/CodeSystem/versioned';
const VS = 'http://example.org/fhir/ValueSet/versioned-all';

/** `store` with the type of each search of its resources recorded in `types`. */
function searchCounting(store: Store, types: string[]): Store {
  const resources = new Proxy(store.resources, {
    get(r, method) {
      const value = Reflect.get(r, method);
      if (method !== 'search' || typeof value !== 'function') return typeof value === 'function' ? value.bind(r) : value;
      return (tenant: string, query: { type: string }, ...rest: unknown[]) => {
        types.push(query.type);
        return value.call(r, tenant, query, ...rest);
      };
    },
  });
  return new Proxy(store, { get: (s, name) => (name === 'resources' ? resources : Reflect.get(s, name)) }) as Store;
}

const codeSystem = (version: string): Json => ({
  resourceType: 'CodeSystem', id: `versioned-${version}`, url: CS, version, status: 'active', content: 'complete',
  concept: [{ code: 'a', display: 'A' }, { code: 'b', display: 'B' }, { code: 'c', display: 'C' }, { code: 'd', display: 'D' }],
});

await eachStore((kind, fresh) => {
  describe(`the versions named for an unknown code system version (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const searched: string[] = [];
    beforeAll(async () => {
      t = await createTestApp({ store: searchCounting(await fresh(), searched) });
      token = await t.token();
      for (const body of [codeSystem('1'), codeSystem('2'), { resourceType: 'ValueSet', id: 'versioned-all', url: VS, status: 'active', compose: { include: [{ system: CS }] } }]) {
        expect((await t.request(`${t.fhir()}/${body.resourceType}/${body.id}`, fhirInit(token, 'PUT', body))).status).toBe(201);
      }
    });
    afterAll(() => t.close());

    const message = async (code: string): Promise<string> => {
      const body = { resourceType: 'Parameters', parameter: [{ name: 'url', valueUri: VS }, { name: 'coding', valueCoding: { system: CS, version: '9', code } }] };
      const res = await t.request(`${t.fhir()}/ValueSet/$validate-code`, fhirInit(token, 'POST', body));
      expect(res.status).toBe(200);
      const out = (await res.json()) as Json;
      expect(out.parameter.find((p: Json) => p.name === 'result').valueBoolean).toBe(false);
      return out.parameter.find((p: Json) => p.name === 'message').valueString as string;
    };

    test('read once while the terminology stays the same, and again once a version is written', async () => {
      const unknown = `A definition for CodeSystem '${CS}' version '9' could not be found, so the code cannot be validated`;
      expect(await message('a')).toContain(`${unknown}. Valid versions: 1 or 2`);
      searched.length = 0;
      // Other codes, so that no kept answer is given: the versions are not read again.
      for (const code of ['b', 'c', 'd']) expect(await message(code)).toContain(`${unknown}. Valid versions: 1 or 2`);
      expect(searched.filter((type) => type === 'CodeSystem')).toEqual([]);
      // A version written since is named by the next answer.
      expect((await t.request(`${t.fhir()}/CodeSystem/versioned-3`, fhirInit(token, 'PUT', codeSystem('3')))).status).toBe(201);
      expect(await message('a')).toContain(`${unknown}. Valid versions: 1, 2 or 3`);
    });
  });
});
