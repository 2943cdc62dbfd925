/**
 * The core layer's lookups (src/fhir/core-index.ts) answer the conditions they take exactly as the
 * engine's in-memory matcher does: differentially, over every core ValueSet and CodeSystem.
 */
import { describe, expect, test } from 'bun:test';
import { CoreLayer, type CoreHit } from '../../src/fhir/core-layer.ts';
import { LookupIndex } from '../../src/fhir/core-index.ts';
import { indexEntries } from '../../src/fhir/indexer.ts';
import { compileSearch } from '../../src/fhir/search.ts';
import { matchConditions } from '../../src/fhir/search-match.ts';
import { textKey } from '../../src/fhir/search-order.ts';
import type { Condition } from '../../src/store/types.ts';
import { testCoreBundle } from '../helpers/terminology-service.ts';

const QUERIES: Record<string, string[]> = {
  ValueSet: [
    '_id=administrative-gender,v2-0203,nope', 'url=http://hl7.org/fhir/ValueSet/administrative-gender', 'status=active', 'status=draft,retired',
    'reference=http://hl7.org/fhir/administrative-gender', 'name=adm', 'name=v2', 'name:exact=AdministrativeGender', 'name:exact=administrativegender',
    'title:contains=gender', 'publisher=hl7', 'version=4.0.1', 'jurisdiction=001', 'description:contains=identifier', 'url:below=http://terminology.hl7.org/ValueSet/v3',
    'status=active&name=obs', 'identifier=urn:ietf:rfc:3986|urn:oid:2.16.840.1.113883.4.642.3.1',
  ],
  CodeSystem: ['code=male', 'system=http://hl7.org/fhir/administrative-gender', 'content-mode=complete', 'name=v3', 'title:contains=act', 'code=MR&status=active'],
};

async function conditions(type: string, query: string): Promise<Condition[]> {
  return compileSearch(type, new URLSearchParams(query), true).pending as Condition[];
}

describe('core lookups', () => {
  for (const [type, queries] of Object.entries(QUERIES)) {
    test(`${type}: narrowed and matched as the matcher alone would`, async () => {
      const content = await testCoreBundle().load();
      const items: CoreHit[] = content.all(type).map((e) => ({
        version: { type, id: e.id, versionId: 1, lastUpdated: 0, deleted: false, content: e.content },
        rows: indexEntries(JSON.parse(e.content)),
      }));
      const index = new LookupIndex(items);
      const layer = new CoreLayer(testCoreBundle());
      const none = { exists: async () => false };
      for (const query of queries) {
        const where = await conditions(type, query);
        const expected: string[] = [];
        for (const item of index.all) if (await matchConditions({ resourceType: type, id: item.version.id }, 0, where, none, item.rows)) expected.push(item.version.id);
        const found = (await layer.search(type, where, none)).map((h) => h.version.id);
        expect({ query, found }).toEqual({ query, found: expected });
        for (const c of where) {
          const one = index.lookup(c);
          if (one === undefined || !one.exact) continue;
          const alone: string[] = [];
          for (const item of index.all) if (await matchConditions({ resourceType: type, id: item.version.id }, 0, [c], none, item.rows)) alone.push(item.version.id);
          expect({ query, c, ids: [...one.items].map((h) => h.version.id).sort() }).toEqual({ query, c, ids: alone.sort() });
        }
      }
      expect(index.all.map((h) => textKey(h.version.id))).toEqual(index.all.map((h) => textKey(h.version.id)).sort());
    });
  }
});
