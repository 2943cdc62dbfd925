/**
 * private_key_jwt with a JWK Set URL Cinder will not fetch: the client is told only `invalid_client`, and
 * the operator reads why in the log (a refused private address, a name that does not resolve), with the
 * CINDER_JWKS_ALLOW_PRIVATE hint only where that setting would change the answer.
 */
import { afterAll, expect, test } from 'bun:test';
import { generateKeyPair, SignJWT } from 'jose';
import { createClient } from '../../src/auth/admin.ts';
import { ASSERTION_TYPE } from '../../src/auth/client-assertion.ts';
import { createLogger } from '../../src/log.ts';
import { createTestApp } from '../helpers/app.ts';
import { post } from '../helpers/oauth.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const { privateKey } = await generateKeyPair('ES384');

type Logged = { level: string; msg: string; clientId?: string; url?: string; err?: { message: string } };

for (const target of targets) {
  test(`${target.kind}: a refused or unresolvable JWK Set URL is invalid_client to the client and explained in the log`, async () => {
    const lines: string[] = [];
    const log = createLogger('info', {}, (line) => lines.push(line));
    const resolveHost = async (host: string) => (host === 'keys.example' ? [] : ['10.1.2.3']);
    const t = await createTestApp({ store: (await target.migrated()).open(), log, resolveHost });
    try {
      for (const [url, hinted] of [['http://127.0.0.1:9/jwks.json', true], ['https://keys.example/jwks.json', false]] as const) {
        lines.length = 0;
        const clientId = (await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.read'], jwksUrl: url })).client.clientId;
        const now = Math.floor(t.clock.now() / 1000);
        const jwt = await new SignJWT({ iss: clientId, sub: clientId, aud: 'http://cinder.test/oauth2/token', exp: now + 240, iat: now, jti: crypto.randomUUID() })
          .setProtectedHeader({ alg: 'ES384', kid: 'k1', typ: 'JWT' }).sign(privateKey);
        const res = await post(t, { grant_type: 'client_credentials', client_assertion_type: ASSERTION_TYPE, client_assertion: jwt, scope: 'system/*.read' });
        expect(res.status).toBe(400);
        const body = (await res.json()) as { error: string; error_description: string };
        expect(body).toEqual({ error: 'invalid_client', error_description: 'the client JWK Set could not be fetched' });
        const logged = lines.map((l) => JSON.parse(l) as Logged).find((l) => l.msg === 'client JWK Set could not be fetched');
        expect(logged).toMatchObject({ level: 'warn', clientId, url });
        expect(logged!.err!.message).toContain(`the JWK Set at ${url} is refused`);
        expect(logged!.err!.message.includes('CINDER_JWKS_ALLOW_PRIVATE=true allows it')).toBe(hinted);
      }
    } finally {
      await t.close();
    }
  });
}
