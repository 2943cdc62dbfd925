/**
 * A client or user revocation is timed by the clock the rest of the auth code reads (the app's), on every store: the
 * tokens issued on records read after it pass, those issued before it are refused. On PostgreSQL it was raised to the
 * database's clock, so a server whose clock ran behind the database's refused the tokens it issued after the change
 * for as long as it lagged (a test clock months behind: every one).
 */
import { describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { disableClient, enableClient, updateClient } from '../../src/auth/client-lifecycle.ts';
import type { Clock } from '../../src/clock.ts';
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

  describe(`a change recorded by a clock ahead of the server's (a database ahead of it, as \`cinder\` raises its clock to), on ${kind}`, () => {
    /** How far the clock that records the change (the database's, for \`cinder client\`) runs ahead of the server's. */
    const LEAD_MS = 10 * 60_000;

    test('tokens issued after the change pass at once, those issued before it (on a record still cached) are refused', async () => {
      const t = await createTestApp({ store: await fresh() });
      try {
        const { client, clientSecret } = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.read', 'system/*.write'] });
        const token = (scope?: string) => t.token(scope, client.clientId, clientSecret!);
        const read = async (token: string) => (await t.request(`${t.fhir()}/Patient`, fhirInit(token))).status;
        const ahead: Clock = { now: () => t.clock.now() + LEAD_MS };
        const before = await token();
        expect(await read(before)).toBe(200);

        t.clock.advance(1_000);
        const { tokensRevoked } = await updateClient(t.store, ahead, client.clientId, { scopes: ['system/*.read'] });
        expect(tokensRevoked).toBe(true);
        // Issued on the record the server's client cache still holds from before the change.
        const cached = await token();
        t.clock.advance(PAST_CACHES_MS);
        expect(await read(before)).toBe(401);
        expect(await read(cached)).toBe(401);
        // Issued on the record read after the change: the server's clock is ten minutes behind the change's.
        const after = await token();
        expect(await read(after)).toBe(200);

        t.clock.advance(1_000);
        await disableClient(t.store, ahead, client.clientId);
        t.clock.advance(PAST_CACHES_MS);
        expect(await read(after)).toBe(401);
        await enableClient(t.store, client.clientId);
        t.clock.advance(PAST_CACHES_MS);
        const enabled = await token();
        expect(await read(enabled)).toBe(200);
        // Its introspection says so too (the store's isRevoked, not the server's list).
        const introspected = await t.request('/oauth2/introspect', {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${btoa(`${client.clientId}:${clientSecret}`)}` },
          body: new URLSearchParams({ token: enabled }),
        });
        expect(((await introspected.json()) as { active: boolean }).active).toBe(true);
      } finally {
        await t.close();
      }
    });
  });
});
