/**
 * The regex guard's accounts are the tenant's on the direct (hot) routes too, from the admission on: a token's scope
 * filter naming a ValueSet (`code:in=`) is completed when the token is admitted, which runs the ValueSet's `regex`
 * filter on the tenant's codes (src/regex-guard.ts). A pattern one tenant's codes proved too costly there is not
 * refused to another tenant's tokens, whose codes it runs on in microseconds. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken } from '../helpers/fhir.ts';

// A lookahead: no linear-time form, so a refused pattern has no other answer (src/regex-guard.ts).
const PATTERN = '^(?!z)(a+)+$';
const VS = 'http://example.org/vs/a-codes';
const SYSTEM = 'http://example.org/cs/codes';

await eachStore((kind, fresh) => {
  describe(`the regex guard on the direct routes' admission (${kind})`, () => {
    let t: TestApp;
    const call = (tenant: string, token: string, method: string, path: string, body?: unknown) => t.request(`${t.fhir(tenant)}/${path}`, fhirInit(token, method, body));
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      const tokenB = await t.tokenFor('t2', ['system/*.*']);
      const tokenA = await t.token();
      const setUp = async (tenant: string, token: string, codes: string[]) => {
        const put = async (path: string, body: unknown) => expect((await call(tenant, token, 'PUT', path, body)).status).toBe(201);
        await put('CodeSystem/codes', { resourceType: 'CodeSystem', id: 'codes', url: SYSTEM, status: 'active', content: 'complete', concept: codes.map((code) => ({ code })) });
        await put('ValueSet/a-codes', { resourceType: 'ValueSet', id: 'a-codes', url: VS, status: 'active', compose: { include: [{ system: SYSTEM, filter: [{ property: 'code', op: 'regex', value: PATTERN }] }] } });
        await put('Observation/o1', { resourceType: 'Observation', id: 'o1', status: 'final', code: { coding: [{ system: SYSTEM, code: codes[0] }] } });
      };
      // t1's codes make the pattern backtrack without end; t2's are plain.
      await setUp('t1', tokenA, [`${'a'.repeat(40)}!`]);
      await setUp('t2', tokenB, ['aaa']);
    }, 60_000);
    afterAll(() => t.close());

    test("a pattern t1's codes proved too costly as its token was admitted is still run for t2's token", async () => {
      const scope = `system/Observation.rs?code:in=${VS}`;
      const answered = t.app.hotRoutes!.answered.read;
      // t1's token: its filter's ValueSet cannot be expanded (too costly), so the filter grants nothing.
      expect((await call('t1', await craftToken(t, scope), 'GET', 'Observation/o1')).status).toBe(403);
      // t2's token of the same filter reads its Observation, whose code the ValueSet holds.
      const res = await call('t2', await craftToken(t, scope, { tenant: 't2' }), 'GET', 'Observation/o1');
      expect(t.app.hotRoutes!.answered.read).toBe(answered + 2);
      expect(res.status).toBe(200);
    }, 30_000);
  });
});
