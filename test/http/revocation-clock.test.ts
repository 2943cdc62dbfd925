/**
 * A client or user revocation is timed by the clock the rest of the auth code reads (the app's), on every store: the
 * tokens issued on records read after it pass, those issued before it are refused. On PostgreSQL it was raised to the
 * database's clock, so a server whose clock ran behind the database's refused the tokens it issued after the change
 * for as long as it lagged (a test clock months behind: every one).
 */
import { describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { disableClient, enableClient, updateClient } from '../../src/auth/client-lifecycle.ts';
import { createTestApp, fhirInit } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';

/** Past the app's client cache and revocation poll (5 s each). */
const PAST_CACHES_MS = 6_000;

await eachStore((kind, fresh) => {
  describe(`client revocations on the app's clock, on ${kind}`, () => {
    test('narrowed scopes refuse the tokens issued before, and pass those issued 6 s after; so does a disable and an enable', async () => {
      const t = await createTestApp({ store: await fresh() });
      try {
        const { client, clientSecret } = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.read', 'system/*.write'] });
        const token = (scope?: string) => t.token(scope, client.clientId, clientSecret!);
        const read = async (token: string) => (await t.request(`${t.fhir()}/Patient`, fhirInit(token))).status;
        const before = await token();
        expect(await read(before)).toBe(200);

        t.clock.advance(1_000);
        const { tokensRevoked } = await updateClient(t.store, t.clock, client.clientId, { scopes: ['system/*.read'] });
        expect(tokensRevoked).toBe(true);
        t.clock.advance(PAST_CACHES_MS);
        expect(await read(before)).toBe(401);
        const after = await token();
        expect(await read(after)).toBe(200);

        t.clock.advance(1_000);
        await disableClient(t.store, t.clock, client.clientId);
        t.clock.advance(PAST_CACHES_MS);
        expect(await read(after)).toBe(401);
        await enableClient(t.store, client.clientId);
        t.clock.advance(PAST_CACHES_MS);
        expect(await read(await token())).toBe(200);
      } finally {
        await t.close();
      }
    });
  });
});
