/**
 * A `displayLanguage` list, or the Accept-Language header standing for it, is read once per request and for its
 * 16 most wanted languages (MAX_DISPLAY_LANGUAGES): each code of an expansion is shown in the first of them it
 * has a display in, and the list was read again, whole, for each code, so 2,000 tags in an 8 KB header held one
 * `$expand` of 20,000 codes 60 s (0.4 s with one tag). On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type Json } from '../helpers/fhir.ts';
import { textWork } from '../helpers/text-work.ts';
import { MAX_DISPLAY_LANGUAGES } from '../../src/terminology/ops/display-language.ts';

const CS = 'http://cinder.test/CodeSystem/lang-many';
const VS = 'http://cinder.test/ValueSet/lang-many';
const CODES = 20_000;
/** Tags no concept has a display in (`xaa`, `xab`, ...): 2,000 of them make an 8 KB header. */
const junk = (n: number) => Array.from({ length: n }, (_, i) => `x${String.fromCharCode(97 + (i % 26))}${String.fromCharCode(97 + (Math.floor(i / 26) % 26))}${String.fromCharCode(97 + (Math.floor(i / 676) % 26))}`);

await eachStore((kind, fresh) => {
  describe(`a list of display languages (${kind})`, () => {
    let t: TestApp;
    let token: string;
    /** The expansion's displays, and the work of the request on text (textWork: counted, not timed; bench/hostile-input.ts times it). */
    const expand = async (acceptLanguage: string, count = 10) => {
      const { value: res, work } = await textWork(() => t.request(`${t.fhir('t1')}/ValueSet/$expand?url=${encodeURIComponent(VS)}&count=${count}`, { headers: { authorization: `Bearer ${token}`, 'accept-language': acceptLanguage } }));
      expect(res.status).toBe(200);
      const body = (await res.json()) as Json;
      return { work, displays: (body.expansion.contains as Json[]).map((c) => c.display) };
    };
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      const api = fhirClient(t, token);
      await api.put200({
        resourceType: 'CodeSystem', id: 'lang-many', url: CS, status: 'active', content: 'complete', language: 'en',
        concept: Array.from({ length: CODES }, (_, i) => ({ code: `c${i}`, display: `Code ${i}`, designation: [{ language: 'de', value: `Kode ${i}` }] })),
      });
      await api.put200({ resourceType: 'ValueSet', id: 'lang-many', url: VS, status: 'active', compose: { include: [{ system: CS }] } });
    }, 120_000);
    afterAll(() => t.close());

    test('2,000 languages in Accept-Language cost what the 16 most wanted do', async () => {
      const one = await expand('de');
      expect(one.displays[0]).toBe('Kode 0');
      const header = junk(2_000).join(',');
      expect(header.length).toBeGreaterThan(8_000);
      const many = await expand(header);
      expect(many.displays[0]).toBe('Code 0');
      // 60 s when the list was read for each of the 20,000 codes: 20,000 times its 8 KB split. Read once, for its 16
      // most wanted, it costs what 16 tags cost, and its length a few times over.
      const sixteen = await expand(junk(MAX_DISPLAY_LANGUAGES).join(','));
      expect(sixteen.displays[0]).toBe('Code 0');
      expect(many.work).toBeLessThan(sixteen.work + 10 * header.length);
    }, 120_000);

    test('the most wanted languages are read, in the order of their q-values', async () => {
      // German among the 16 most wanted: shown in German, also behind 15 others and after a q-value sort.
      expect((await expand(`${junk(MAX_DISPLAY_LANGUAGES - 1).join(',')},de`, 1)).displays).toEqual(['Kode 0']);
      expect((await expand(`${junk(40).map((l) => `${l};q=0.5`).join(',')},de;q=0.9`, 1)).displays).toEqual(['Kode 0']);
      // Behind 16 others it is not read.
      expect((await expand(`${junk(MAX_DISPLAY_LANGUAGES).join(',')},de`, 1)).displays).toEqual(['Code 0']);
    }, 120_000);
  });
});
