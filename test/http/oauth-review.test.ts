/**
 * Findings of an adversarial review of the authorization server, through `app.request()`, on both databases
 * where a store is involved.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { basic, getCode, post, redeem, testUser, userClient } from '../helpers/oauth.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

type Tokens = { access_token: string; refresh_token?: string; error?: string };

for (const target of targets) {
  describe(`authorization code replay, on ${target.kind}`, () => {
    let t: TestApp;

    beforeAll(async () => {
      const store = (await target.migrated()).open();
      await store.migrate();
      t = await createTestApp({ store });
      await testUser(t);
    }, 120_000);
    afterAll(() => t.close());

    // RFC 9700 4.4 asks for the grant of a replayed code to be revoked; a replay by another client is no
    // replay by the code's client but a client mismatch (RFC 6749 4.1.3), which must not let whoever read a
    // used code in a log or a Referer, through any client (a public one needs no secret), end the user's grant.
    test("another client presenting a used code gets invalid_grant and does not revoke the code's grant", async () => {
      const victim = await userClient(t);
      const intruder = await userClient(t, { secret: false, grants: ['authorization_code'] });
      const code = await getCode(t, { clientId: victim.id, scope: 'openid offline_access user/*.read' });
      const issued = (await (await redeem(t, code, victim)).json()) as Tokens;
      expect(issued.refresh_token).toBeDefined();

      for (const other of [intruder, await userClient(t)]) {
        const res = await redeem(t, code, other);
        expect(res.status).toBe(400);
        expect(((await res.json()) as Tokens).error).toBe('invalid_grant');
      }
      expect((await t.request(`${t.fhir('t1')}/Patient`, fhirInit(issued.access_token))).status).toBe(200);
      const refreshed = await post(t, { grant_type: 'refresh_token', refresh_token: issued.refresh_token! }, { Authorization: basic(victim.id, victim.secret!) });
      expect(refreshed.status).toBe(200);

      // The code's own client replaying it still revokes the grant.
      expect((await redeem(t, code, victim)).status).toBe(400);
      expect((await t.request(`${t.fhir('t1')}/Patient`, fhirInit(issued.access_token))).status).toBe(401);
    });
  });
}
