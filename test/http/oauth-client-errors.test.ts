/**
 * The interface document (Errors, Token endpoint): every token error is HTTP 400 with a JSON body
 * whose `error` holds the code, `invalid_client` included. Revocation and introspection authenticate
 * clients the same way. Run on both databases: the client is looked up in the store.
 */
import { describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { createTestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { basic, post } from '../helpers/oauth.ts';

const ENDPOINTS = [
  ['/oauth2/token', { grant_type: 'client_credentials' }],
  ['/oauth2/revoke', { token: 'x' }],
  ['/oauth2/introspect', { token: 'x' }],
] as const;

await eachStore((kind, fresh) => {
  describe(`failed client authentication on ${kind}`, () => {
    test('wrong secret, unknown client, malformed credentials: 400 invalid_client JSON with a Basic challenge', async () => {
      const t = await createTestApp({ store: await fresh() });
      try {
        const c = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.read'] });
        const failures = [basic(c.client.clientId, 'wrong'), basic('nobody', c.clientSecret!), 'Basic !!!', 'Basic ' + btoa('no-colon')];
        for (const [path, form] of ENDPOINTS) {
          for (const authorization of failures) {
            const res = await post(t, form, { Authorization: authorization }, path);
            expect([path, authorization, res.status]).toEqual([path, authorization, 400]);
            expect(res.headers.get('content-type')).toBe('application/json;charset=UTF-8');
            expect(res.headers.get('www-authenticate')).toStartWith('Basic realm="cinder"');
            expect(((await res.json()) as { error: string }).error).toBe('invalid_client');
          }
        }
        // The same client with its right secret is accepted, so the 400s above are about the credentials.
        expect((await post(t, { grant_type: 'client_credentials' }, { Authorization: basic(c.client.clientId, c.clientSecret!) })).status).toBe(200);
      } finally {
        await t.close();
      }
    });
  });
});
