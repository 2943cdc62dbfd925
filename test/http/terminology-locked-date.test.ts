/**
 * `ValueSet.compose.lockedDate` (R4): the versions of the code systems and value sets a compose does
 * not pin are those in effect at that date, for $validate-code and $expand alike, stored or inline.
 * On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { codeVersions, outcome, postOperation, putResource } from '../helpers/terminology-http.ts';

const CS = 'http://cinder.test/CodeSystem/locked-review';
const VS = 'http://cinder.test/ValueSet/locked-review-';

const codeSystem = (version: string, date: string, code: string) => ({
  resourceType: 'CodeSystem', id: `locked-review-${version}`, url: CS, version, date, status: 'active', content: 'complete', concept: [{ code, display: code.toUpperCase() }],
});
const imported = (version: string, date: string, code: string) => ({
  resourceType: 'ValueSet', id: `locked-review-imported-${version}`, url: `${VS}imported`, version, date, status: 'active',
  compose: { include: [{ system: CS, version: version === 'a' ? '1' : '2', concept: [{ code }] }] },
});

await eachStore((kind, fresh) => {
  describe(`compose.lockedDate (${kind})`, () => {
    let t: TestApp;
    let token: string;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      for (const r of [
        codeSystem('1', '2020-01-01', 'old'), codeSystem('2', '2024-01-01', 'new'),
        imported('a', '2020-01-01', 'old'), imported('b', '2024-01-01', 'new'),
        { resourceType: 'ValueSet', id: 'locked-review-system', url: `${VS}system`, status: 'active', compose: { lockedDate: '2021-06-01', include: [{ system: CS }] } },
        { resourceType: 'ValueSet', id: 'locked-review-import', url: `${VS}import`, status: 'active', compose: { lockedDate: '2021', include: [{ valueSet: [`${VS}imported`] }] } },
        { resourceType: 'ValueSet', id: 'locked-review-open', url: `${VS}open`, status: 'active', compose: { include: [{ system: CS }] } },
      ]) await putResource(t, token, r);
    });
    afterAll(() => t.close());

    const valid = async (target: Record<string, unknown>, code: string) =>
      outcome(await postOperation(t, token, 'ValueSet/$validate-code', [target as never, { name: 'system', valueUri: CS }, { name: 'code', valueCode: code }])).result;
    const expanded = async (target: Record<string, unknown>) => {
      const r = await postOperation(t, token, 'ValueSet/$expand', [target as never]);
      expect(r.status).toBe(200);
      return codeVersions(r.body.expansion);
    };

    test('an include of a code system it does not pin: the version in effect at the lockedDate', async () => {
      const url = { name: 'url', valueUri: `${VS}system` };
      expect(await valid(url, 'old')).toBe(true);
      expect(await valid(url, 'new')).toBe(false);
      expect(await expanded(url)).toEqual(['old@1']);
      // Without a lockedDate: the latest.
      expect(await expanded({ name: 'url', valueUri: `${VS}open` })).toEqual(['new@2']);
    });

    test('an import it does not pin: the value set version in effect at the lockedDate', async () => {
      const url = { name: 'url', valueUri: `${VS}import` };
      expect(await valid(url, 'old')).toBe(true);
      expect(await valid(url, 'new')).toBe(false);
      expect(await expanded(url)).toEqual(['old@1']);
    });

    test('an inline value set with a lockedDate', async () => {
      const inline = { name: 'valueSet', resource: { resourceType: 'ValueSet', status: 'active', compose: { lockedDate: '2022-02-02', include: [{ system: CS }] } } };
      expect(await valid(inline, 'old')).toBe(true);
      expect(await expanded(inline)).toEqual(['old@1']);
    });
  });
});
