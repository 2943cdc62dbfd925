/**
 * The request's Accept-Language stands for `displayLanguage` on `CodeSystem/$lookup` and
 * `CodeSystem/$validate-code` as on `$expand` and `ValueSet/$validate-code` (HL7's reference servers read
 * the header on every operation): the display is given in it, a display in it is accepted, and the answer
 * carries `Vary: Accept-Language`; `displayLanguage` wins over it; a malformed header is ignored. $lookup
 * lists every designation whatever the language. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { type OperationResponse, type Param, putResource } from '../helpers/terminology-http.ts';

const CS = 'http://cinder.test/CodeSystem/lang-fruit';
const fruit = {
  resourceType: 'CodeSystem', id: 'lang-fruit', url: CS, version: '1.0.0', status: 'active', content: 'complete', language: 'en',
  concept: [{ code: 'apple', display: 'Apple', designation: [{ language: 'de', value: 'Apfel' }, { language: 'fr', value: 'Pomme' }] }],
};

const value = (r: OperationResponse, name: string) => {
  const p = r.body.parameter?.find((x) => x.name === name);
  return p === undefined ? undefined : Object.entries(p).find(([k]) => k.startsWith('value'))?.[1];
};

await eachStore((kind, fresh) => {
  describe(`Accept-Language on the CodeSystem operations (${kind})`, () => {
    let t: TestApp;
    let token: string;
    /** POSTs the operation with the headers given; the response with its Vary header. */
    const post = async (path: string, parameter: Param[], headers: Record<string, string> = {}) => {
      const init = fhirInit(token, 'POST', { resourceType: 'Parameters', parameter });
      const res = await t.request(`${t.fhir('t1')}/${path}`, { ...init, headers: { ...(init.headers as Record<string, string>), ...headers } });
      return { status: res.status, vary: res.headers.get('Vary'), body: (await res.json()) as OperationResponse['body'] };
    };
    const lookup = (headers?: Record<string, string>, extra: Param[] = []) =>
      post('CodeSystem/$lookup', [{ name: 'system', valueUri: CS }, { name: 'code', valueCode: 'apple' }, ...extra], headers);
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      await putResource(t, token, fruit);
    });
    afterAll(() => t.close());

    test('$lookup gives the display in the Accept-Language, says it varies by it, and lists every designation', async () => {
      const plain = await lookup();
      // Without displayLanguage the answer depends on the header, sent or not: a cache must key on it.
      expect([plain.status, value(plain, 'display'), plain.vary]).toEqual([200, 'Apple', expect.stringContaining('Accept-Language')]);
      const de = await lookup({ 'Accept-Language': 'de-CH, de;q=0.9' });
      expect(value(de, 'display')).toBe('Apfel');
      expect(de.vary).toContain('Accept-Language');
      const designations = (de.body.parameter ?? []).filter((p) => p.name === 'designation')
        .map((p) => (p.part as Param[]).find((x) => x.name === 'value')?.valueString);
      expect(designations.sort()).toEqual(['Apfel', 'Apple', 'Pomme']);
      // A language the concept has nothing in: the code system's display.
      expect(value(await lookup({ 'Accept-Language': 'it' }), 'display')).toBe('Apple');
    });

    test('displayLanguage wins over Accept-Language (no Vary then); a malformed header is ignored', async () => {
      const both = await lookup({ 'Accept-Language': 'de' }, [{ name: 'displayLanguage', valueCode: 'fr' }]);
      expect(value(both, 'display')).toBe('Pomme');
      expect(both.vary ?? '').not.toContain('Accept-Language');
      const bad = await lookup({ 'Accept-Language': 'not a language!' });
      expect([bad.status, value(bad, 'display')]).toEqual([200, 'Apple']);
    });

    test('CodeSystem/$validate-code checks the display in the Accept-Language and answers in it', async () => {
      const check = (display: string, headers?: Record<string, string>) =>
        post('CodeSystem/$validate-code', [{ name: 'url', valueUri: CS }, { name: 'code', valueCode: 'apple' }, { name: 'display', valueString: display }], headers);
      const de = await check('Apfel', { 'Accept-Language': 'de' });
      expect([value(de, 'result'), value(de, 'display')]).toEqual([true, 'Apfel']);
      expect(de.vary).toContain('Accept-Language');
      // In French, the German display is not the one: the answer names the French one.
      const fr = await check('Apfel', { 'Accept-Language': 'fr' });
      expect([value(fr, 'result'), value(fr, 'display')]).toEqual([false, 'Pomme']);
      expect([value(await check('Apple'), 'display')]).toEqual(['Apple']);
    });
  });
});
