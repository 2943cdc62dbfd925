import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { Database } from 'bun:sqlite';
import { decodeJwt } from 'jose';
import { createClient } from '../../src/auth/admin.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { basic, getCode, post, redeem, testUser, userClient } from '../helpers/oauth.ts';

let t: TestApp;
let c: Awaited<ReturnType<typeof userClient>>;
let refreshToken: string;
const SCOPE = 'openid profile email offline_access user/*.read patient/*.read';
/** What the sign-in grants: Alice (testUser) is a Patient, whose `user/` scopes are granted as `patient/` ones. */
const GRANTED = 'openid profile email offline_access patient/*.read';

beforeEach(async () => {
  t = await createTestApp();
  c = await userClient(t);
  await testUser(t);
  const code = await getCode(t, { clientId: c.id, scope: SCOPE, nonce: 'n' });
  refreshToken = ((await (await redeem(t, code, c)).json()) as { refresh_token: string }).refresh_token;
});
afterEach(() => t.close());

const refresh = (extra: Record<string, string> = {}, who: { id: string; secret: string | null } = c) =>
  post(t, { grant_type: 'refresh_token', refresh_token: refreshToken, ...extra }, who.secret ? { Authorization: basic(who.id, who.secret) } : {});

async function error(res: Response): Promise<string> {
  expect(res.status).toBe(400);
  return ((await res.json()) as { error: string }).error;
}

describe('refresh_token', () => {
  test('returns access_token and id_token, never a new refresh_token; the refresh token stays usable', async () => {
    t.clock.advance(600_000);
    for (let i = 0; i < 2; i++) {
      const res = await refresh();
      expect(res.status).toBe(200);
      expect(res.headers.get('cache-control')).toBe('no-store');
      const body = (await res.json()) as Record<string, string>;
      expect(Object.keys(body).sort()).toEqual(['access_token', 'expires_in', 'id_token', 'need_patient_banner', 'patient', 'scope', 'token_type']);
      expect(body.scope).toBe(GRANTED);
      const id = decodeJwt(body.id_token!);
      expect(id.aud).toBe(c.id);
      expect(id.auth_time).toBe(Math.floor((t.clock.now() - 600_000) / 1000));
      expect(id.nonce).toBeUndefined();
      expect(id.email).toBe('alice@example.org');
    }
  });

  test('refresh_token missing -> invalid_request', async () => {
    expect(await error(await post(t, { grant_type: 'refresh_token', client_id: c.id }, { Authorization: basic(c.id, c.secret!) }))).toBe('invalid_request');
  });

  test('scope may narrow', async () => {
    const res = await refresh({ scope: 'openid patient/*.read' });
    const body = (await res.json()) as { scope: string; id_token: string };
    expect(body.scope).toBe('openid patient/*.read');
    expect(decodeJwt(body.id_token).email).toBeUndefined();
  });

  test('asking again for the user/ scope the sign-in asked for narrows to the patient/ form it was granted as', async () => {
    const res = await refresh({ scope: 'openid user/*.read' });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { scope: string; patient: string; access_token: string };
    expect(body).toMatchObject({ scope: 'openid patient/*.read', patient: 'p1' });
    expect(decodeJwt(body.access_token).scope).toBe('openid patient/*.read');
  });

  test('scope may not widen -> invalid_request (the contract names no invalid_scope)', async () => {
    expect(await error(await refresh({ scope: 'openid user/*.write' }))).toBe('invalid_request');
  });

  test('revoked -> invalid_grant', async () => {
    const r = await post(t, { token: refreshToken }, { Authorization: basic(c.id, c.secret!) }, '/oauth2/revoke');
    expect(r.status).toBe(200);
    expect(await error(await refresh())).toBe('invalid_grant');
  });

  test('expired -> invalid_grant', async () => {
    t.clock.advance(t.config.refreshTokenTtl * 1000 + 1);
    expect(await error(await refresh())).toBe('invalid_grant');
  });

  test('unknown -> invalid_grant', async () => {
    refreshToken = 'not-a-refresh-token';
    expect(await error(await refresh())).toBe('invalid_grant');
  });

  test("another client's refresh token -> invalid_grant", async () => {
    const other = await userClient(t);
    expect(await error(await refresh({}, other))).toBe('invalid_grant');
  });

  test('a client not allowed the refresh_token grant -> unauthorized_client', async () => {
    const cc = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.read'] });
    expect(await error(await refresh({}, { id: cc.client.clientId, secret: cc.clientSecret }))).toBe('unauthorized_client');
  });

  test('scope/attribute rule applies on refresh: the client may no longer read email_verified -> invalid_grant', async () => {
    const db = new Database(`${t.dir}/cinder.db`);
    db.query('UPDATE clients SET read_attributes = ? WHERE client_id = ?').run(JSON.stringify(['name', 'email']), c.id);
    db.close();
    t.clock.advance(5_001); // client records are cached for five seconds
    expect(await error(await refresh())).toBe('invalid_grant');
    const narrowed = await refresh({ scope: 'openid profile user/*.read' });
    expect(narrowed.status).toBe(200);
  });
});
