/**
 * Cutting access (docs/operations.md, "Incident response"): clients and users disabled, enabled, deleted and
 * changed through the `cinder` command line, as an operator does beside running servers on one database, and
 * what the token endpoint, the FHIR API, introspection and Subscriptions make of it, on both databases. The
 * command line is another process: the app sees its changes through its client cache and revocation poll,
 * which the tests pass by moving the clock past them (the system clock, which the command line reads too).
 */
import { afterAll, beforeAll, describe, expect, setSystemTime, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { ASSERTION_TYPE } from '../../src/auth/client-assertion.ts';
import { createClient } from '../../src/auth/admin.ts';
import { disableClient, updateClient } from '../../src/auth/client-lifecycle.ts';
import { deletedError, pausedError, topicPausedError } from '../../src/fhir/subscriptions/client-authority.ts';
import { grantError } from '../../src/fhir/subscriptions/owner-reach.ts';
import { createTestApp, fhirInit, type TestApp, type TestClock } from '../helpers/app.ts';
import { createCliEnv } from '../helpers/cli.ts';
import { craftToken, expectOutcome, fhirClient, type Json } from '../helpers/fhir.ts';
import { basic, getCode, PASSWORD, post, redeem, signIn, testUser, userClient } from '../helpers/oauth.ts';
import { rawStatements, storeTargets } from '../helpers/stores.ts';
import { rawSql } from '../helpers/expunge.ts';
import postgres from 'postgres';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

type Tokens = { access_token: string; refresh_token?: string; scope: string; error?: string };

/** Past the app's client cache and revocation poll (5 s each). */
const PAST_CACHES_MS = 6_000;

/** The system clock, moved by the tests: the app and the command line (systemClock) both read it. */
const BP = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/';
const X5 = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.';
/** A parameter's code in a notification Bundle's SubscriptionStatus (`type`, `status`). */
const notificationParam = (b: Json, name: string) =>
  String((((b.entry as Json[])[0]!.resource as Json).parameter as Json[]).find((x) => x.name === name)?.valueCode);

const systemTime: TestClock = {
  now: () => Date.now(),
  advance: (ms) => void setSystemTime(new Date(Date.now() + ms)),
  set: (ms) => void setSystemTime(new Date(ms)),
};
afterAll(() => void setSystemTime());

for (const target of targets) {
  describe(`client and user lifecycle through the command line, on ${target.kind}`, () => {
    let t: TestApp;
    let cli: ReturnType<typeof createCliEnv>;
    let url: string;

    beforeAll(async () => {
      const db = await target.migrated();
      const store = db.open();
      await store.migrate();
      t = await createTestApp({ store, clock: systemTime, env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
      cli = createCliEnv({ CINDER_DATABASE_URL: db.url });
      url = db.url;
      await testUser(t);
    }, 60_000);
    afterAll(async () => {
      await t.close();
      cli.close();
    });

    /** Runs a `cinder` command that must succeed; returns its --json output. */
    async function cinder(argv: string[], stdin?: string): Promise<Json> {
      const r = await cli.run([...argv, '--json'], stdin === undefined ? {} : { stdin });
      if (r.code !== 0) throw new Error(`cinder ${argv.join(' ')}: ${r.code} ${r.stderr}`);
      return JSON.parse(r.stdout) as Json;
    }
    /** Moves the clock past the app's caches. */
    const later = () => t.clock.advance(PAST_CACHES_MS);
    /** A Subscription's status, error and version, as `api` reads it. */
    const statusOf = async (api: ReturnType<typeof fhirClient>, id: string) => {
      const read = (await (await api.get(`Subscription/${id}`)).json()) as Json;
      return [read.status, read.error, (read.meta as Json).versionId];
    };
    /**
     * A topic on Patient (`http://example.org/topics/<name>`) and an id-only rest-hook Subscription of `owner` to it,
     * sent to 127.0.0.1:`port`, written `requested` (its handshake waiting); `extension` on its channel.
     */
    const topicRestHook = async (owner: ReturnType<typeof fhirClient>, name: string, port: number, extension: Json[] = []) => {
      const topic = `http://example.org/topics/${name}`;
      await owner.create({
        resourceType: 'Basic', code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
        extension: [{ url: `${X5}url`, valueUri: topic }, { url: `${X5}status`, valueCode: 'active' }, { url: `${X5}resourceTrigger`, extension: [{ url: 'resource', valueUri: 'Patient' }] }],
      });
      return owner.create({
        resourceType: 'Subscription', status: 'requested', reason: name, criteria: topic,
        channel: {
          type: 'rest-hook', endpoint: `http://127.0.0.1:${port}/hook`, payload: 'application/fhir+json',
          _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: 'id-only' }] },
          ...(extension.length > 0 && { extension }),
        },
      });
    };
    const backend = async (scopes = ['system/*.read']) => {
      const { client, clientSecret } = await createClient(t.store, t.clock, { tenant: 't1', scopes });
      return { id: client.clientId, secret: clientSecret! };
    };
    const clientCredentials = (c: { id: string; secret: string }, scope?: string) =>
      post(t, { grant_type: 'client_credentials', ...(scope ? { scope } : {}) }, { Authorization: basic(c.id, c.secret) });
    const tokenOf = async (res: Response) => {
      expect(res.status).toBe(200);
      return (await res.json()) as Tokens;
    };
    const read = (token: string) => t.request(`${t.fhir()}/Patient`, fhirInit(token));
    /** A resource server's introspection (a client registered with the `introspect` scope). */
    let rs: Awaited<ReturnType<typeof createClient>> | undefined;
    const introspect = async (token: string) => {
      rs ??= await createClient(t.store, t.clock, { tenant: 't1', name: 'resource server', scopes: ['introspect'] });
      const res = await post(t, { token }, { Authorization: basic(rs.client.clientId, rs.clientSecret!) }, '/oauth2/introspect');
      expect(res.status).toBe(200);
      return ((await res.json()) as { active: boolean }).active;
    };
    const expectTokenError = async (res: Response, error: string) => {
      expect(res.status).toBe(400);
      expect(((await res.json()) as Tokens).error).toBe(error);
    };
    /** Signs alice in to `app` and redeems the code: access and refresh token. */
    const userTokens = async (app: { id: string; secret: string | null }, scope = 'openid offline_access user/*.read') =>
      tokenOf(await redeem(t, await getCode(t, { clientId: app.id, scope }), app));
    const refresh = (app: { id: string; secret: string | null }, refreshToken: string) =>
      post(t, { grant_type: 'refresh_token', refresh_token: refreshToken, client_id: app.id }, { Authorization: basic(app.id, app.secret!) });

    /**
     * A backend client with a rest-hook Subscription to Patients of `family`, an admin API client, and how many
     * notifications of the Subscription wait (never delivered: the endpoint does not answer).
     */
    const subscribed = async (family: string) => {
      const c = await backend(['system/*.*']);
      const owner = fhirClient(t, (await tokenOf(await clientCredentials(c))).access_token);
      const res = await owner.post('Subscription', {
        resourceType: 'Subscription', status: 'requested', reason: family, criteria: `Patient?family=${family}`, channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1:9/hook' },
      });
      expect(res.status).toBe(201);
      const id = ((await res.json()) as Json).id as string;
      const admin = fhirClient(t, await t.token());
      /** The Subscription as read through the API: its status, its error (none: undefined) and version. */
      const shown = async () => {
        const sub = (await (await admin.get(`Subscription/${id}`)).json()) as Json;
        return { status: sub.status, error: sub.error, version: (sub.meta as Json).versionId };
      };
      return { c, id, admin, owner, shown, notified: async () => (await t.store.subscriptions.pending('t1', id, 100)).length };
    };

    test('client disable: every grant refused, its tokens refused and inactive; enable: new tokens only', async () => {
      const c = await backend();
      const before = (await tokenOf(await clientCredentials(c))).access_token;
      expect((await read(before)).status).toBe(200);
      expect(await cinder(['client', 'disable', c.id])).toMatchObject({ client_id: c.id, status: 'disabled' });
      // Introspection reads the database: inactive at once.
      expect(await introspect(before)).toBe(false);
      later();
      await expectTokenError(await clientCredentials(c), 'invalid_client');
      expect((await read(before)).status).toBe(401);

      expect(await cinder(['client', 'enable', c.id])).toMatchObject({ status: 'active' });
      later();
      const after = (await tokenOf(await clientCredentials(c))).access_token;
      expect((await read(after)).status).toBe(200);
      expect(await introspect(after)).toBe(true);
      // What the disable revoked stays revoked.
      expect((await read(before)).status).toBe(401);
      expect(await introspect(before)).toBe(false);
    });

    test('a token a server issued on the client record it still held from before the disable is refused too', async () => {
      const c = await backend();
      await tokenOf(await clientCredentials(c));
      await cinder(['client', 'disable', c.id]);
      t.clock.advance(1_000);
      // Within the client cache's 5 seconds this server has not seen the disable yet, and issues a token...
      const stale = (await tokenOf(await clientCredentials(c))).access_token;
      later();
      // ...which the revocation covers: it was issued on a record read before it.
      expect((await read(stale)).status).toBe(401);
      expect(await introspect(stale)).toBe(false);
    });

    test("client disable: a user app's refresh tokens stop for good, and its access tokens", async () => {
      const app = await userClient(t);
      const tokens = await userTokens(app);
      await cinder(['client', 'disable', app.id]);
      later();
      await expectTokenError(await refresh(app, tokens.refresh_token!), 'invalid_client');
      expect((await read(tokens.access_token)).status).toBe(401);
      expect(await introspect(tokens.refresh_token!)).toBe(false);
      await cinder(['client', 'enable', app.id]);
      later();
      await expectTokenError(await refresh(app, tokens.refresh_token!), 'invalid_grant');
      const again = await userTokens(app);
      expect((await read(again.access_token)).status).toBe(200);
    });

    test("a code from a sign-in before the client's tokens were revoked (a disable undone, a new secret) gives no tokens", async () => {
      const app = await userClient(t);
      const code = () => getCode(t, { clientId: app.id, scope: 'openid user/*.read' });
      const beforeDisable = await code();
      await cinder(['client', 'disable', app.id]);
      await cinder(['client', 'enable', app.id]);
      later();
      await expectTokenError(await redeem(t, beforeDisable, app), 'invalid_grant');
      const beforeRotation = await code();
      const rotated = await cinder(['client', 'rotate-secret', app.id]);
      later();
      await expectTokenError(await redeem(t, beforeRotation, { id: app.id, secret: rotated.client_secret as string }), 'invalid_grant');
      await tokenOf(await redeem(t, await code(), { id: app.id, secret: rotated.client_secret as string }));
    });

    test('client delete: soft, for good; listed and shown as deleted', async () => {
      const c = await backend();
      const token = (await tokenOf(await clientCredentials(c))).access_token;
      expect(await cinder(['client', 'delete', c.id])).toMatchObject({ status: 'deleted' });
      later();
      await expectTokenError(await clientCredentials(c), 'invalid_client');
      expect((await read(token)).status).toBe(401);
      const enable = await cli.run(['client', 'enable', c.id]);
      expect(enable.code).toBe(2);
      expect(enable.stderr).toContain('deleted');
      expect(await cinder(['client', 'show', c.id])).toMatchObject({ client_id: c.id, status: 'deleted', deleted_at: expect.any(String) });
      const listed = (await cinder(['client', 'list', '--tenant', 't1'])) as unknown as Json[];
      expect(listed.find((x) => x.client_id === c.id)).toMatchObject({ status: 'deleted' });
      expect(listed.find((x) => x.client_id === t.admin.client.clientId)).toMatchObject({ status: 'active', name: 'admin' });
    });

    test('rotate-secret: the old secret stops at once and its access tokens with it; the new one works', async () => {
      const c = await backend();
      const token = (await tokenOf(await clientCredentials(c))).access_token;
      const rotated = await cinder(['client', 'rotate-secret', c.id]);
      expect(rotated.client_secret).toEqual(expect.any(String));
      expect(rotated.previous_secret_until).toBeUndefined();
      later();
      await expectTokenError(await clientCredentials(c), 'invalid_client');
      expect((await read(token)).status).toBe(401);
      const fresh = (await tokenOf(await clientCredentials({ id: c.id, secret: rotated.client_secret as string }))).access_token;
      expect((await read(fresh)).status).toBe(200);
    });

    test('update --jwks-file without a key the client had (a leaked private key): its access tokens are cut; a key added cuts none', async () => {
      const pair = async (kid: string) => {
        const { privateKey, publicKey } = await generateKeyPair('ES384', { extractable: true });
        return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'ES384' } };
      };
      const [a, b, c] = await Promise.all([pair('a'), pair('b'), pair('c')]);
      const id = (await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.read'], jwks: { keys: [a.jwk, b.jwk] } })).client.clientId;
      const tokenBy = async (key: typeof a) => {
        const now = Math.floor(Date.now() / 1000);
        const jwt = await new SignJWT({ iss: id, sub: id, aud: `${t.config.baseUrl}/oauth2/token`, exp: now + 240, iat: now, jti: crypto.randomUUID() })
          .setProtectedHeader({ alg: 'ES384', kid: key.kid, typ: 'JWT' }).sign(key.privateKey);
        return (await tokenOf(await post(t, { grant_type: 'client_credentials', client_assertion_type: ASSERTION_TYPE, client_assertion: jwt }))).access_token;
      };
      const jwksFile = (keys: (typeof a)[]) => {
        const file = join(cli.dir, `jwks-${keys.map((k) => k.kid).join('')}.json`);
        writeFileSync(file, JSON.stringify({ keys: keys.map((k) => k.jwk) }));
        return file;
      };
      const byA = await tokenBy(a);
      // A key added: nothing revoked.
      expect(await cinder(['client', 'update', id, '--jwks-file', jwksFile([a, b, c])])).toMatchObject({ access_tokens_revoked: false });
      later();
      expect((await read(byA)).status).toBe(200);
      // Key a leaked: the set without it cuts what was issued, whichever key signed for it.
      expect(await cinder(['client', 'update', id, '--jwks-file', jwksFile([b, c])])).toMatchObject({ access_tokens_revoked: true });
      later();
      expect((await read(byA)).status).toBe(401);
      expect((await read(await tokenBy(b))).status).toBe(200);
    });

    test('rotate-secret --grace: both secrets work until the grace period ends, and issued tokens stay', async () => {
      const c = await backend();
      const token = (await tokenOf(await clientCredentials(c))).access_token;
      const rotated = await cinder(['client', 'rotate-secret', c.id, '--grace', '60']);
      expect(Date.parse(rotated.previous_secret_until as string)).toBeGreaterThan(Date.now() + 50_000);
      later();
      expect((await read(token)).status).toBe(200);
      await tokenOf(await clientCredentials(c));
      await tokenOf(await clientCredentials({ id: c.id, secret: rotated.client_secret as string }));
      t.clock.set(Date.parse(rotated.previous_secret_until as string) + PAST_CACHES_MS);
      await expectTokenError(await clientCredentials(c), 'invalid_client');
      await tokenOf(await clientCredentials({ id: c.id, secret: rotated.client_secret as string }));
      expect((await cli.run(['client', 'rotate-secret', c.id, '--grace', '-1'])).code).toBe(2);
    });

    test('update --scope narrowing: issued access tokens are cut, refresh yields only the scopes still registered', async () => {
      const c = await backend(['system/*.read']);
      const wide = (await tokenOf(await clientCredentials(c))).access_token;
      const app = await userClient(t, { scopes: ['user/Patient.read', 'user/Observation.read'] });
      await testUser(t, { username: 'frank', fhirUser: 'Practitioner/7' });
      const signedIn = await signIn(t, { clientId: app.id, scope: 'openid offline_access user/Patient.read user/Observation.read' }, 'frank');
      const tokens = await tokenOf(await redeem(t, new URL(signedIn.headers.get('location')!).searchParams.get('code')!, app));
      expect(tokens.scope.split(' ')).toContain('user/Observation.read');

      expect(await cinder(['client', 'update', c.id, '--scope', 'system/Patient.read'])).toMatchObject({ scopes: ['system/Patient.read'], access_tokens_revoked: true });
      await cinder(['client', 'update', app.id, '--scope', 'user/Patient.read']);
      later();
      expect((await read(wide)).status).toBe(401);
      expect((await read(tokens.access_token)).status).toBe(401);
      const narrow = await tokenOf(await clientCredentials(c, 'system/*.read system/Patient.read'));
      expect(narrow.scope).toBe('system/Patient.read');
      const refreshed = await tokenOf(await refresh(app, tokens.refresh_token!));
      expect(refreshed.scope.split(' ').sort()).toEqual(['offline_access', 'openid', 'user/Patient.read']);
      expect((await t.request(`${t.fhir()}/Observation`, fhirInit(refreshed.access_token))).status).toBe(403);

      // Widening again cuts nothing.
      const kept = (await tokenOf(await clientCredentials(c))).access_token;
      expect(await cinder(['client', 'update', c.id, '--scope', 'system/*.read', '--name', 'Widened'])).toMatchObject({ name: 'Widened', access_tokens_revoked: false });
      later();
      expect((await read(kept)).status).toBe(200);
    });

    test('update --scope judges narrowing by meaning: filter pairs reordered, repeated or percent-encoded cut nothing; real narrowing does', async () => {
      const lab = 'system/Observation.rs?category=laboratory&status=final';
      const registered = async () => {
        const c = await backend([lab, 'system/Patient.rs']);
        return { c, token: (await tokenOf(await clientCredentials(c))).access_token };
      };
      const update = (c: { id: string }, ...scopes: string[]) => cinder(['client', 'update', c.id, ...scopes.flatMap((s) => ['--scope', s])]);
      const observations = (token: string) => t.request(`${t.fhir()}/Observation`, fhirInit(token));

      // The same registration by meaning: the operator's edit revokes nothing, and the token keeps working.
      const same = await registered();
      expect((await observations(same.token)).status).toBe(200);
      for (const edited of [
        'system/Observation.rs?status=final&category=laboratory',
        'system/Observation.rs?status=final&category=laboratory&status=final',
        'system/Observation.rs?category=labora%74ory&status=final',
      ]) {
        expect(await update(same.c, 'system/Patient.read', edited)).toMatchObject({ access_tokens_revoked: false });
      }
      // A client_credentials request for the scope as first registered is still granted, as asked.
      expect((await tokenOf(await clientCredentials(same.c, lab))).scope).toBe(lab);
      // A filter with fewer pairs (wider) cuts nothing either.
      const wider = await registered();
      expect(await update(wider.c, 'system/Patient.rs', 'system/Observation.rs?category=laboratory')).toMatchObject({ access_tokens_revoked: false });

      // Real narrowing: another filter, a filter with more pairs, fewer permissions.
      const narrowed = [];
      for (const narrower of [
        ['system/Patient.rs', 'system/Observation.rs?category=vital-signs'],
        ['system/Patient.rs', 'system/Observation.rs?status=final&category=laboratory&code=1234-5'],
        ['system/Patient.r', 'system/Observation.rs?category=laboratory&status=final'],
      ]) {
        const r = await registered();
        expect(await update(r.c, ...narrower)).toMatchObject({ access_tokens_revoked: true });
        narrowed.push(r.token);
      }
      later();
      for (const token of [same.token, wider.token]) expect((await observations(token)).status).toBe(200);
      for (const token of narrowed) expect((await read(token)).status).toBe(401);
    });

    test("a patient user's refresh keeps the patient/ form of a scope the app still has registered as user/", async () => {
      const app = await userClient(t, { scopes: ['user/*.read'] });
      const tokens = await userTokens(app, 'openid offline_access user/*.read');
      expect(tokens.scope.split(' ')).toContain('patient/*.read');
      await cinder(['client', 'update', app.id, '--name', 'Renamed']);
      later();
      expect((await tokenOf(await refresh(app, tokens.refresh_token!))).scope.split(' ')).toContain('patient/*.read');
    });

    test('an empty --read-attribute or --access-token-ttl resets it: every attribute, the server\'s lifetime', async () => {
      const app = await userClient(t, { readAttributes: ['email', 'email_verified'], accessTokenTtl: 600 });
      const scope = 'openid profile email user/*.read';
      const limited = await redeem(t, await getCode(t, { clientId: app.id, scope }), app);
      expect(limited.status).toBe(400);
      expect(((await limited.json()) as Json).error_description).toContain("'profile'");
      expect((await userTokens(app, 'openid email user/*.read') as Json).expires_in).toBe(600);
      // Given with other values, the empty one is refused rather than read one way or the other.
      expect((await cli.run(['client', 'update', app.id, '--read-attribute', '', '--read-attribute', 'email'])).code).toBe(2);
      const reset = await cinder(['client', 'update', app.id, '--read-attribute', '', '--access-token-ttl', '']);
      expect([reset.read_attributes, reset.access_token_ttl]).toEqual([undefined, undefined]);
      expect(await cinder(['client', 'show', app.id])).not.toContainAnyKeys(['read_attributes', 'access_token_ttl']);
      later();
      const tokens = (await userTokens(app, scope)) as Json;
      expect(tokens.expires_in).toBe(3600);
      expect(tokens.scope.split(' ')).toContain('profile');
    });

    test('update is checked as create is, and a refused change writes nothing', async () => {
      const c = await backend();
      const before = await cinder(['client', 'show', c.id]);
      for (const argv of [
        ['--grant', 'authorization_code'], ['--grant', 'password'], ['--redirect-uri', 'https://app.example/cb#fragment'], ['--read-attribute', 'shoe_size'],
        ['--access-token-ttl', '5'], ['--jwks-url', 'ftp://x'], ['--jwks-url', 'https://a.example/jwks', '--jwks-file', '/dev/null'], [],
      ]) {
        const r = await cli.run(['client', 'update', c.id, ...argv]);
        expect({ argv, code: r.code }).toEqual({ argv, code: 2 });
      }
      expect(await cinder(['client', 'show', c.id])).toEqual(before);
      expect((await cli.run(['client', 'update', 'no-such-client', '--name', 'x'])).code).toBe(2);
      expect((await cli.run(['client', 'show', 'no-such-client'])).code).toBe(2);
    });

    test('client ids beginning with - or -- are taken as ids, not options; --help names the commands', async () => {
      for (const id of ['-Py2XVNzRKqLUO9cB9UAgA', '--Xy2XVNzRKqLUO9cB9UAg']) {
        const row = { ...t.admin.client, clientId: id, name: 'dashed' };
        await t.store.clients.create(row);
        expect(await cinder(['client', 'show', id])).toMatchObject({ client_id: id, name: 'dashed' });
        expect(await cinder(['client', 'update', '--name', 'still dashed', id])).toMatchObject({ client_id: id, name: 'still dashed' });
        expect(await cinder(['client', 'disable', id])).toMatchObject({ client_id: id, status: 'disabled' });
      }
      expect((await cli.run(['client', 'show', '-a', '-b'])).code).toBe(2);
      for (const argv of [['client', 'rotate-secret'], ['client', 'update'], ['user', 'update'], ['user', 'disable']]) {
        const help = await cli.run([...argv, '--help']);
        expect(help.code).toBe(0);
        expect(help.stdout).toContain(`cinder ${argv.join(' ')}`);
      }
    });

    test("user disable: sign-in fails as a wrong password does; their tokens stop; enable revives none of them", async () => {
      const app = await userClient(t);
      await testUser(t, { username: 'dave' });
      const sign = (username: string, password = PASSWORD) => signIn(t, { clientId: app.id, scope: 'openid offline_access user/*.read' }, username, password);
      const tokens = await tokenOf(await redeem(t, new URL((await sign('dave')).headers.get('location')!).searchParams.get('code')!, app));
      expect(await cinder(['user', 'disable', '--tenant', 't1', 'dave'])).toMatchObject({ username: 'dave', status: 'disabled' });
      const wrong = await sign('alice', 'not the password');
      const disabled = await sign('dave');
      expect(disabled.status).toBe(wrong.status);
      expect((await disabled.text()).replace(/value="[^"]*"/g, '')).toBe((await wrong.text()).replace(/value="[^"]*"/g, ''));
      await expectTokenError(await refresh(app, tokens.refresh_token!), 'invalid_grant');
      expect(await introspect(tokens.access_token)).toBe(false);
      later();
      expect((await read(tokens.access_token)).status).toBe(401);

      await cinder(['user', 'enable', '--tenant', 't1', 'dave']);
      later();
      expect((await sign('dave')).status).toBe(303);
      await expectTokenError(await refresh(app, tokens.refresh_token!), 'invalid_grant');
      expect((await read(tokens.access_token)).status).toBe(401);
    });

    test('a code from a sign-in before a password change or a disable and enable is refused at the token endpoint', async () => {
      const app = await userClient(t);
      await testUser(t, { username: 'fay' });
      const code = async () => new URL((await signIn(t, { clientId: app.id, scope: 'openid offline_access user/*.read' }, 'fay', PASSWORD)).headers.get('location')!).searchParams.get('code')!;
      const beforeChange = await code();
      await cinder(['user', 'update', '--tenant', 't1', 'fay', '--password-stdin'], 'a new long password\n');
      await expectTokenError(await redeem(t, beforeChange, app), 'invalid_grant');

      const beforeDisable = await signIn(t, { clientId: app.id, scope: 'openid offline_access user/*.read' }, 'fay', 'a new long password');
      await cinder(['user', 'disable', '--tenant', 't1', 'fay']);
      await cinder(['user', 'enable', '--tenant', 't1', 'fay']);
      await expectTokenError(await redeem(t, new URL(beforeDisable.headers.get('location')!).searchParams.get('code')!, app), 'invalid_grant');
      // A sign-in after them is good (the clock of these tests stands still: moved on by a millisecond).
      t.clock.advance(1);
      const after = await signIn(t, { clientId: app.id, scope: 'openid offline_access user/*.read' }, 'fay', 'a new long password');
      await tokenOf(await redeem(t, new URL(after.headers.get('location')!).searchParams.get('code')!, app));
    });

    test('user delete: soft, for good, and the username stays taken; update --password-stdin signs them out', async () => {
      const app = await userClient(t);
      await testUser(t, { username: 'erin' });
      const sign = (username: string, password = PASSWORD) => signIn(t, { clientId: app.id, scope: 'openid user/*.read' }, username, password);
      const code = new URL((await sign('erin')).headers.get('location')!).searchParams.get('code')!;
      const tokens = await tokenOf(await redeem(t, code, app));

      const updated = await cinder(['user', 'update', '--tenant', 't1', 'erin', '--password-stdin', '--email', 'erin@example.org'], 'a new long password\n');
      expect(updated).toMatchObject({ email: 'erin@example.org', email_verified: false, tokens_revoked: true });
      later();
      expect((await read(tokens.access_token)).status).toBe(401);
      expect((await sign('erin')).status).toBe(200);
      expect((await sign('erin', 'a new long password')).status).toBe(303);

      expect(await cinder(['user', 'delete', '--tenant', 't1', 'erin'])).toMatchObject({ status: 'deleted' });
      expect((await sign('erin', 'a new long password')).status).toBe(200);
      expect((await cli.run(['user', 'enable', '--tenant', 't1', 'erin'])).code).toBe(2);
      const again = await cli.run(['user', 'create', '--tenant', 't1', '--username', 'erin', '--password-stdin'], { stdin: 'another password' });
      expect(again.code).toBe(2);
      expect(await cinder(['user', 'show', '--tenant', 't1', 'erin'])).toMatchObject({ status: 'deleted', deleted_at: expect.any(String) });
      const users = (await cinder(['user', 'list', '--tenant', 't1'])) as unknown as Json[];
      expect(users.map((u) => `${u.username}:${u.status}`)).toContain('erin:deleted');
      expect((await cli.run(['user', 'update', '--tenant', 't1', 'alice', '--fhir-user', 'Observation/1'])).code).toBe(2);
    });

    test("a client's Subscriptions reach only what it still has registered: narrowed, they are paused (status error, saying why); widened again, set back and resumed", async () => {
      const { c, id, admin, shown, notified } = await subscribed('narrowed');
      await admin.put200({ resourceType: 'Patient', id: 'nw1', name: [{ family: 'narrowed' }] });
      expect(await notified()).toBe(1);
      // Another scope registered beside those the activating token was granted: nothing to show.
      expect(await cinder(['client', 'update', c.id, '--scope', 'system/*.*', '--scope', 'openid'])).toMatchObject({ subscriptions_paused: [], subscriptions_resumed: [] });
      expect(await shown()).toMatchObject({ status: 'active', version: '1' });
      expect(await cinder(['client', 'update', c.id, '--scope', 'system/Observation.rs', '--scope', 'system/Subscription.cruds'])).toMatchObject({ subscriptions_paused: [id] });
      expect(await shown()).toEqual({ status: 'error', error: expect.stringContaining(`the scopes registered for the app that activated it (client ${c.id}) no longer let it search`), version: '2' });
      later();
      await admin.put200({ resourceType: 'Patient', id: 'nw2', name: [{ family: 'narrowed' }] });
      expect(await notified()).toBe(1);
      expect(await cinder(['client', 'update', c.id, '--scope', 'system/*.*'])).toMatchObject({ subscriptions_paused: [], subscriptions_resumed: [id] });
      expect(await shown()).toEqual({ status: 'active', error: undefined, version: '3' });
      later();
      await admin.put200({ resourceType: 'Patient', id: 'nw3', name: [{ family: 'narrowed' }] });
      expect(await notified()).toBe(2);
      // Disabled, then narrowed: paused for the disable; enabled narrowed, paused for the scopes; widened, set back active.
      await cinder(['client', 'disable', c.id]);
      expect(await cinder(['client', 'update', c.id, '--scope', 'system/Observation.rs', '--scope', 'system/Subscription.cruds'])).toMatchObject({ subscriptions_paused: [] });
      expect(await cinder(['client', 'enable', c.id])).toMatchObject({ subscriptions_paused: [id], subscriptions_resumed: [] });
      expect(await shown()).toMatchObject({ status: 'error', error: expect.stringContaining('no longer let it search'), version: '5' });
      expect(await cinder(['client', 'update', c.id, '--scope', 'system/*.*'])).toMatchObject({ subscriptions_resumed: [id] });
      expect(await shown()).toEqual({ status: 'active', error: undefined, version: '6' });
      // A chain to a type the scopes no longer search pauses it too.
      const chained = await subscribed('chained');
      const sub = (await (await admin.get(`Subscription/${chained.id}`)).json()) as Json;
      await chained.owner.put200({ ...sub, status: 'requested', criteria: 'Observation?subject:Patient.name=chained' });
      expect(await cinder(['client', 'update', chained.c.id, '--scope', 'system/Observation.rs', '--scope', 'system/Subscription.cruds'])).toMatchObject({ subscriptions_paused: [chained.id] });
    });

    test('with CINDER_AUDIT=on each change is an AuditEvent in the tenant: what, to whom, by whom', async () => {
      const audited = createCliEnv({ CINDER_DATABASE_URL: url, CINDER_AUDIT: 'on', CINDER_BASE_URL: 'http://cinder.test', USER: 'ops-alice' });
      try {
        const c = await backend();
        const user = (await testUser(t, { username: 'gina' })).id;
        for (const argv of [['client', 'disable', c.id], ['client', 'rotate-secret', c.id], ['user', 'disable', '--tenant', 't1', 'gina']]) {
          expect((await audited.run(argv)).code).toBe(0);
        }
        const api = fhirClient(t, await t.token());
        const found = async (query: string) => ((await (await t.request(`${t.fhir()}/AuditEvent?${query}`, fhirInit(await t.token()))).json()) as Json).entry as { resource: Json }[] | undefined;
        const disabled = await found(`subtype=urn:cinder:admin|client-disable&entity-type=2`);
        expect(disabled).toHaveLength(1);
        const event = disabled![0]!.resource;
        expect(event).toMatchObject({
          type: { code: '110113' }, action: 'U', outcome: '0',
          agent: [{ who: { display: 'cinder command line, run by ops-alice' }, requestor: true }, { network: { address: t.fhir() } }],
          entity: [{ what: { identifier: { system: 'urn:cinder:client', value: c.id } } }],
        });
        expect(await found('subtype=urn:cinder:admin|client-rotate-secret')).toHaveLength(1);
        expect(await found('subtype=http://dicom.nema.org/resources/ontology/DCM|110137&_sort=-date')).toHaveLength(3);
        expect((await found('subtype=urn:cinder:admin|user-disable'))![0]!.resource.entity).toEqual([expect.objectContaining({ what: { identifier: { system: 'urn:cinder:user', value: user } } })]);
        // A valid R4 AuditEvent: the server takes it as a client's own.
        const { id: _id, meta: _meta, ...copy } = event;
        expect((await api.post('AuditEvent', copy)).status).toBe(201);
        // Without CINDER_AUDIT nothing is recorded.
        await cinder(['client', 'enable', c.id]);
        expect(await found('subtype=urn:cinder:admin|client-enable')).toBeUndefined();
      } finally {
        audited.close();
      }
    });

    test('with CINDER_AUDIT=on creating a client, user or tenant, rotating keys, expunge and audit prune are AuditEvents too; a prune\'s outlives it', async () => {
      const audited = createCliEnv({ CINDER_DATABASE_URL: url, CINDER_AUDIT: 'on', CINDER_BASE_URL: 'http://cinder.test', USER: 'ops-bob' });
      try {
        const run = async (argv: string[], stdin?: string) => {
          const r = await audited.run([...argv, '--json'], stdin === undefined ? {} : { stdin });
          if (r.code !== 0) throw new Error(`cinder ${argv.join(' ')}: ${r.code} ${r.stderr}`);
          return JSON.parse(r.stdout) as Json;
        };
        const found = async (query: string, tenant = 't1') => {
          const res = await t.request(`${t.fhir(tenant)}/AuditEvent?${query}`, fhirInit(await craftToken(t, 'system/*.read', { tenant })));
          expect(res.status).toBe(200);
          return (((await res.json()) as Json).entry ?? []).map((e: Json) => e.resource) as Json[];
        };
        const api = fhirClient(t, await t.token());
        /** The one event of `command`, a valid R4 AuditEvent (the server takes it as a client's own), by ops-bob. */
        const one = async (command: string, tenant = 't1') => {
          const events = await found(`subtype=urn:cinder:admin|${command}`, tenant);
          expect({ command, tenant, n: events.length }).toEqual({ command, tenant, n: 1 });
          const { id: _id, meta: _meta, ...copy } = events[0]!;
          expect({ command, status: (await api.post('AuditEvent', copy)).status }).toEqual({ command, status: 201 });
          expect(events[0]!.agent[0]).toMatchObject({ who: { display: 'cinder command line, run by ops-bob' }, requestor: true });
          return events[0]!;
        };
        const what = (e: Json) => e.entity.map((x: Json) => `${x.what.identifier.system}|${x.what.identifier.value}`);

        const client = await run(['client', 'create', '--tenant', 't1', '--name', 'Audited']);
        const created = await one('client-create');
        expect(created).toMatchObject({ type: { code: '110113' }, action: 'C', outcome: '0' });
        expect(what(created)).toEqual([`urn:cinder:client|${client.client_id}`]);
        const user = await run(['user', 'create', '--tenant', 't1', '--username', 'hal', '--password-stdin'], PASSWORD);
        expect(what(await one('user-create'))).toEqual([`urn:cinder:user|${user.user_id}`]);
        await run(['tenant', 'create', 't-audited']);
        // In the new tenant, not in another.
        expect(await found('subtype=urn:cinder:admin|tenant-create')).toEqual([]);
        expect(what(await one('tenant-create', 't-audited'))).toEqual(['urn:cinder:tenant|t-audited']);
        // Keys sign every tenant's tokens: each tenant's trail has the rotation.
        const rotated = await run(['keys', 'rotate']);
        expect(rotated.retired_kids.length).toBeGreaterThan(0);
        for (const tenant of ['t1', 't-audited']) {
          const event = await one('keys-rotate', tenant);
          // The keys added and those they retire, each with its part and the hand-over.
          expect(what(event)).toEqual([...rotated.new_kids, ...rotated.retired_kids].map((k: string) => `urn:cinder:key|${k}`));
          expect(event.entity.map((x: Json) => x.detail[0].valueString)).toEqual([...rotated.new_kids.map(() => 'new'), ...rotated.retired_kids.map(() => 'retired')]);
          expect(event.entity.every((x: Json) => x.detail[1].valueString === rotated.signs_from)).toBe(true);
          expect(event.outcomeDesc).toBe(`cinder keys rotate: ${rotated.new_kids.join(', ')} sign from ${rotated.signs_from}; ${rotated.retired_kids.join(', ')} retired`);
        }

        await api.put200({ resourceType: 'Patient', id: 'expunged-1' });
        expect((await api.del('Patient/expunged-1')).status).toBeLessThan(300);
        expect((await run(['expunge', '--tenant', 't1', '--type', 'Patient', '--id', 'expunged-1', '--deleted'])).count).toBe(2);
        const expunged = await one('expunge');
        expect(expunged).toMatchObject({ action: 'D', outcomeDesc: 'cinder expunge --tenant t1 --type Patient --id expunged-1 --deleted: 2 versions removed' });
        expect(expunged.entity[0].detail).toEqual([
          { type: 'type', valueString: 'Patient' }, { type: 'id', valueString: 'expunged-1' }, { type: 'deleted', valueString: 'true' }, { type: 'removed', valueString: '2' },
        ]);

        // Every AuditEvent so far goes; the prune's own is written after, and stays.
        const before = new Date(Date.now() + 3_600_000).toISOString();
        const all = (await api.search('AuditEvent?_summary=count')).total as number;
        expect(all).toBeGreaterThan(5);
        expect((await run(['audit', 'prune', '--tenant', 't1', '--before', before])).count).toBe(all);
        const left = await found('');
        expect(left.map((e) => e.subtype.at(-1).code)).toEqual(['audit-prune']);
        expect(left[0]).toMatchObject({ type: { code: '110101' }, action: 'D', outcomeDesc: `cinder audit prune --tenant t1 --before ${before}: ${all} AuditEvents removed` });
        expect(what(left[0]!)).toEqual(['urn:cinder:tenant|t1']);
        expect(left[0]!.entity[0].detail).toEqual([{ type: 'before', valueString: before }, { type: 'removed', valueString: String(all) }]);
        const { id: _id, meta: _meta, ...copy } = left[0]!;
        expect((await api.post('AuditEvent', copy)).status).toBe(201);
      } finally {
        audited.close();
      }
    });

    test('with CINDER_AUDIT=on an expunge that fails part-way is an AuditEvent too: a serious failure, with what it removed', async () => {
      const audited = createCliEnv({ CINDER_DATABASE_URL: url, CINDER_AUDIT: 'on', CINDER_BASE_URL: 'http://cinder.test', USER: 'ops-bob' });
      const tenant = 't-expunge-fails';
      try {
        expect((await audited.run(['tenant', 'create', tenant])).code).toBe(0);
        const api = fhirClient(t, await craftToken(t, 'system/*.*', { tenant }), tenant);
        // Basic/a goes in the first batch (types in order); Patient/y's row the database refuses to remove.
        for (const path of ['Basic/a', 'Patient/y']) {
          const [type, id] = path.split('/') as [string, string];
          await api.put200({ resourceType: type, id, ...(type === 'Basic' ? { code: { text: 'x' } } : {}) });
          expect((await api.del(path)).status).toBeLessThan(300);
        }
        await rawSql(target.kind, url, target.kind === 'sqlite'
          ? ["CREATE TRIGGER refuse BEFORE DELETE ON resources WHEN old.id = 'y' BEGIN SELECT RAISE(ABORT, 'refused'); END"]
          : ["CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF old.id = 'y' THEN RAISE EXCEPTION 'refused'; END IF; RETURN old; END $$",
             'CREATE TRIGGER refuse BEFORE DELETE ON resources FOR EACH ROW EXECUTE FUNCTION refuse()']);
        try {
          // The database's error ends the command (cinder's main prints it and exits 1).
          expect(await audited.run(['expunge', '--tenant', tenant, '--deleted']).then(() => 'ended', (err: Error) => err.message)).toBe('refused');
        } finally {
          await rawSql(target.kind, url, target.kind === 'sqlite' ? ['DROP TRIGGER refuse'] : ['DROP TRIGGER refuse ON resources', 'DROP FUNCTION refuse()']);
        }
        await expectOutcome(await api.get('Basic/a'), 404);
        const events = ((await api.search('AuditEvent?subtype=urn:cinder:admin|expunge')).entry ?? []).map((e: Json) => e.resource) as Json[];
        expect(events).toHaveLength(1);
        expect(events[0]).toMatchObject({ action: 'D', outcome: '8', outcomeDesc: expect.stringMatching(/^cinder expunge --tenant t-expunge-fails --deleted: failed after 2 versions removed: /) });
        expect(events[0]!.entity[0].detail).toEqual([{ type: 'deleted', valueString: 'true' }, { type: 'removed', valueString: '2' }]);
      } finally {
        audited.close();
      }
    });

    test("a disabled client's Subscriptions are paused (status error, saying why) and notify nothing; enabled, they are set back active and resume", async () => {
      const { c, id, admin, shown, notified } = await subscribed('lifecycle');
      await admin.put200({ resourceType: 'Patient', id: 'lc1', name: [{ family: 'lifecycle' }] });
      expect(await notified()).toBe(1);
      expect(await cinder(['client', 'disable', c.id])).toMatchObject({ status: 'disabled', subscriptions_paused: [id], subscriptions_off: [] });
      // Read as it stands: in error, saying why, a version the server wrote.
      expect(await shown()).toEqual({ status: 'error', error: expect.stringContaining(`the app that activated it (client ${c.id}) is disabled`), version: '2' });
      const inError = ((await (await admin.get('Subscription?status=error')).json()) as Json).entry as { resource: Json }[];
      expect(inError.map((e) => e.resource.id)).toContain(id);
      later();
      await admin.put200({ resourceType: 'Patient', id: 'lc2', name: [{ family: 'lifecycle' }] });
      expect(await notified()).toBe(1);
      expect(await cinder(['client', 'enable', c.id])).toMatchObject({ status: 'active', subscriptions_resumed: [id] });
      expect(await shown()).toEqual({ status: 'active', error: undefined, version: '3' });
      later();
      await admin.put200({ resourceType: 'Patient', id: 'lc3', name: [{ family: 'lifecycle' }] });
      expect(await notified()).toBe(2);
      // Disabled again before they are delivered: the delivery loop drops what waits, and sends nothing.
      await cinder(['client', 'disable', c.id]);
      later();
      const dropped = t.app.subscriptions.counts.dropped;
      for (let i = 0; i < 20 && (await notified()) > 0; i++) await t.app.subscriptions.runOnce();
      expect(await notified()).toBe(0);
      expect(t.app.subscriptions.counts.dropped - dropped).toBe(2);
      // Enabling again twice resumes it once; disabling twice pauses it once.
      expect(await cinder(['client', 'enable', c.id])).toMatchObject({ subscriptions_resumed: [id] });
      expect(await cinder(['client', 'enable', c.id])).toMatchObject({ subscriptions_resumed: [] });
      expect(await cinder(['client', 'disable', c.id])).toMatchObject({ subscriptions_paused: [id] });
      expect(await cinder(['client', 'disable', c.id])).toMatchObject({ subscriptions_paused: [] });
      expect(await shown()).toMatchObject({ status: 'error', version: '6' });
    });

    test("a paused Subscription written meanwhile keeps what was written; a deleted client's Subscriptions are turned off for good", async () => {
      const { c, id, admin, shown } = await subscribed('paused-written');
      await cinder(['client', 'disable', c.id]);
      // The operator sets it off while the client is disabled: enable leaves it off.
      const paused = (await (await admin.get(`Subscription/${id}`)).json()) as Json;
      await admin.put200({ ...paused, status: 'off' });
      expect(await cinder(['client', 'enable', c.id])).toMatchObject({ subscriptions_resumed: [] });
      expect(await shown()).toMatchObject({ status: 'off', version: '3' });

      const other = await subscribed('deleted-client');
      const pausedToo = await subscribed('deleted-paused');
      await cinder(['client', 'disable', pausedToo.c.id]);
      for (const s of [other, pausedToo]) {
        expect(await cinder(['client', 'delete', s.c.id])).toMatchObject({ status: 'deleted', subscriptions_off: [s.id] });
        expect(await s.shown()).toEqual({ status: 'off', error: expect.stringContaining(`the app that activated it (client ${s.c.id}) was deleted`), version: s === other ? '2' : '3' });
      }
    });

    test("a deleted client's Subscriptions all stop for good, saying so: in error for its grant, its topic or failed deliveries too, its users' as its own; one off stays as it was", async () => {
      const { c, id: active, admin, owner } = await subscribed('deleted-every');
      const more = async (status: string, error?: string) => {
        const created = await owner.create({
          resourceType: 'Subscription', status: 'requested', reason: status, criteria: 'Patient?family=deleted-every', channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1:9/hook' },
        });
        // Written as the server writes them (an error activates nothing: the owner stays the client's).
        await admin.put200({ ...created, status, ...(error !== undefined && { error }) });
        return created.id as string;
      };
      const grant = await more('error', grantError(c.id));
      const topic = await more('error', topicPausedError(['Encounter']));
      const failed = await more('error', 'the last delivery failed: HTTP 500');
      const off = await more('off');
      // One the app activated on a user's sign-in, in error for its grant.
      const usersSub = await more('error', grantError(c.id));
      await t.store.resources.write('t1', (w) => w.ownSubscription(usersSub, JSON.stringify({ scopes: ['system/*.*'], clientId: c.id, user: { id: 'u-del', readAt: t.clock.now() } }), 'rest-hook'));
      const versionOf = async (id: string) => ((await (await admin.get(`Subscription/${id}`)).json() as Json).meta as Json).versionId;
      const offVersion = await versionOf(off);

      const deleted = await cinder(['client', 'delete', c.id]);
      expect((deleted.subscriptions_off as string[]).sort()).toEqual([active, grant, topic, failed, usersSub].sort());
      for (const id of [active, grant, topic, failed, usersSub]) {
        const read = (await (await admin.get(`Subscription/${id}`)).json()) as Json;
        expect({ id, status: read.status, error: read.error }).toEqual({ id, status: 'off', error: deletedError(c.id) });
      }
      expect(await versionOf(off)).toBe(offVersion);
      // Nothing sets them back: enable is refused for a deleted client.
      expect((await cli.run(['client', 'enable', c.id, '--json'])).code).not.toBe(0);
    });

    test("the server's pause is not forged: a paused Subscription another client rewrote with the pause's words (its endpoint moved) is not set back by enable or update", async () => {
      const { c, id, admin, shown } = await subscribed('forged-pause');
      // Another app that may write Subscriptions, but not read Patients: it would have the first app's notifications sent to it.
      const other = await backend(['system/Subscription.cruds']);
      const writer = fhirClient(t, (await tokenOf(await clientCredentials(other))).access_token);
      await cinder(['client', 'disable', c.id]);
      const paused = (await (await writer.get(`Subscription/${id}`)).json()) as Json;
      expect(paused.status).toBe('error');
      // Written `error` with the pause's own words, the Subscription is stored as written (its owner stays the first app).
      await writer.put200({ ...paused, channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1:9/elsewhere' } });
      expect(await cinder(['client', 'enable', c.id])).toMatchObject({ subscriptions_resumed: [] });
      expect(await shown()).toMatchObject({ status: 'error', version: '3' });
      expect(await cinder(['client', 'update', c.id, '--scope', 'system/*.*'])).toMatchObject({ subscriptions_resumed: [] });
      expect(await shown()).toMatchObject({ status: 'error', version: '3' });

      // One never paused, rewritten so: update does not activate it either.
      const active = await subscribed('forged-active');
      const sub = (await (await writer.get(`Subscription/${active.id}`)).json()) as Json;
      await writer.put200({ ...sub, status: 'error', error: paused.error!.toString().replace(c.id, active.c.id), channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1:9/elsewhere' } });
      expect(await cinder(['client', 'update', active.c.id, '--scope', 'system/*.*'])).toMatchObject({ subscriptions_resumed: [] });
      expect(await active.shown()).toMatchObject({ status: 'error', version: '2' });
      // Rewritten with nothing changed but the status and its words: set back to what it was, as its own pause would be.
      const again = await subscribed('forged-same');
      const same = (await (await writer.get(`Subscription/${again.id}`)).json()) as Json;
      await writer.put200({ ...same, status: 'error', error: paused.error!.toString().replace(c.id, again.c.id) });
      expect(await cinder(['client', 'enable', again.c.id])).toMatchObject({ subscriptions_resumed: [again.id] });
      expect(await again.shown()).toEqual({ status: 'active', error: undefined, version: '3' });
    });

    test('enabled, a client\'s Subscriptions stay resumed though a server still holds its record as disabled (its 5-second cache) when the next write comes', async () => {
      const { c, id, admin, shown, notified } = await subscribed('enable-race');
      expect(await cinder(['client', 'disable', c.id])).toMatchObject({ subscriptions_paused: [id] });
      later();
      // The app reads the client record as disabled (its token endpoint refuses it) and keeps it for 5 seconds.
      await expectTokenError(await clientCredentials(c), 'invalid_client');
      expect(await cinder(['client', 'enable', c.id])).toMatchObject({ subscriptions_resumed: [id] });
      expect(await shown()).toMatchObject({ status: 'active', version: '3' });
      // Past the hub's look at the Subscriptions, within the client cache: the next write finds it active, its client disabled.
      t.clock.advance(1_000);
      await admin.put200({ resourceType: 'Patient', id: 'er1', name: [{ family: 'enable-race' }] });
      expect(await shown()).toMatchObject({ status: 'active', version: '3' });
      later();
      await admin.put200({ resourceType: 'Patient', id: 'er2', name: [{ family: 'enable-race' }] });
      expect(await notified()).toBe(1);
    });

    test("a disabled client's topic Subscription with a heartbeat period has its heartbeats again once it is enabled", async () => {
      const got: string[] = [];
      const receiver = Bun.serve({
        port: 0, hostname: '127.0.0.1',
        fetch: async (req) => (got.push(notificationParam((await req.json()) as Json, 'type')), new Response(null, { status: 200 })),
      });
      try {
        const c = await backend(['system/*.*']);
        const owner = fhirClient(t, (await tokenOf(await clientCredentials(c))).access_token);
        const sub = await topicRestHook(owner, 'lifecycle-patients', receiver.port!, [{ url: `${BP}backport-heartbeat-period`, valueUnsignedInt: 5 }]);
        const waiting = async () => (await t.store.subscriptions.pending('t1', sub.id as string, 100)).map((n) => n.event);
        // Its handshake accepted, it is active.
        await t.app.subscriptions.runOnce();
        expect(got.splice(0)).toEqual(['handshake']);
        await cinder(['client', 'disable', c.id]);
        later();
        // Disabled: each heartbeat due meanwhile is dropped, and nothing is sent.
        await t.app.subscriptions.runOnce();
        expect([await waiting(), got]).toEqual([[], []]);
        await cinder(['client', 'enable', c.id]);
        later();
        await t.app.subscriptions.runOnce();
        // Enabled again: its heartbeats go on.
        expect(got.splice(0)).toEqual(['heartbeat']);
      } finally {
        receiver.stop(true);
      }
    });

    test("a disabled client's topic Subscription awaiting its handshake is sent a handshake first once enabled (the one waiting was dropped), before its heartbeats and events", async () => {
      const got: Json[] = [];
      const receiver = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: async (req) => (got.push((await req.json()) as Json), new Response(null, { status: 200 })) });
      try {
        const c = await backend(['system/*.*']);
        const owner = fhirClient(t, (await tokenOf(await clientCredentials(c))).access_token);
        const sub = await topicRestHook(owner, 'lifecycle-awaiting', receiver.port!, [{ url: `${BP}backport-heartbeat-period`, valueUnsignedInt: 5 }]);
        await cinder(['client', 'disable', c.id]);
        later();
        // Disabled before its handshake went: the handshake is dropped with what waits; the Subscription still awaits it.
        await t.app.subscriptions.runOnce();
        expect(got).toEqual([]);
        await cinder(['client', 'enable', c.id]);
        later();
        const admin = fhirClient(t, await t.token());
        await admin.put200({ resourceType: 'Patient', id: 'awaiting1', name: [{ family: 'awaiting' }] });
        for (let i = 0; i < 20 && (await t.app.subscriptions.runOnce()) > 0; i++);
        const sent = got.map((b) => `${notificationParam(b, 'type')} ${notificationParam(b, 'status')}`);
        // Nothing reaches the endpoint before it is verified: a handshake first, then what waited, the Subscription active.
        expect(sent[0]).toBe('handshake requested');
        expect(sent.slice(1).every((k) => k.endsWith(' active'))).toBe(true);
        expect(sent).toContain('event-notification active');
        expect(((await (await admin.get(`Subscription/${sub.id}`)).json()) as Json).status).toBe('active');
      } finally {
        receiver.stop(true);
      }
    });

    test('a topic Subscription an older release stored active with its handshake waiting, paused and resumed by its client, is sent that handshake first', async () => {
      const got: Json[] = [];
      const receiver = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: async (req) => (got.push((await req.json()) as Json), new Response(null, { status: 200 })) });
      try {
        const c = await backend(['system/*.*']);
        const owner = fhirClient(t, (await tokenOf(await clientCredentials(c))).access_token);
        const sub = await topicRestHook(owner, 'lifecycle-legacy', receiver.port!);
        // As a release that stored a topic rest-hook Subscription active at once, its handshake recorded, left it.
        await rawStatements(target.kind, url, [[`UPDATE resources SET content = $1 WHERE tenant = $2 AND type = 'Subscription' AND id = $3`, [JSON.stringify({ ...sub, status: 'active' }), 't1', String(sub.id)]]]);
        // Paused and resumed by the server: the version now active is not the one the handshake was recorded for.
        expect(await cinder(['client', 'disable', c.id])).toMatchObject({ subscriptions_paused: [sub.id] });
        expect(await cinder(['client', 'enable', c.id])).toMatchObject({ subscriptions_resumed: [sub.id] });
        later();
        const admin = fhirClient(t, await t.token());
        await admin.put200({ resourceType: 'Patient', id: 'legacy1', name: [{ family: 'legacy' }] });
        for (let i = 0; i < 20 && (await t.app.subscriptions.runOnce()) > 0; i++);
        const sent = got.map((b) => notificationParam(b, 'type'));
        // Its endpoint was never verified: the handshake waiting goes first, not deleted unsent.
        expect(sent).toEqual(['handshake', 'event-notification']);
      } finally {
        receiver.stop(true);
      }
    });

    test("a user's disable, delete or new password silences the Subscriptions their app activated; enable restarts none, a new activation does", async () => {
      const app = await userClient(t, { scopes: ['openid', 'user/*.*'] });
      const signedIn = async (username: string) => {
        const code = new URL((await signIn(t, { clientId: app.id, scope: 'openid user/*.*' }, username, PASSWORD)).headers.get('location')!).searchParams.get('code')!;
        return fhirClient(t, (await tokenOf(await redeem(t, code, app))).access_token);
      };
      const subscribe = async (api: ReturnType<typeof fhirClient>, family: string, type: 'rest-hook' | 'websocket') => {
        const channel = type === 'rest-hook' ? { type, endpoint: 'http://127.0.0.1:9/hook' } : { type };
        return (await api.create({ resourceType: 'Subscription', status: 'requested', reason: family, criteria: `Patient?family=${family}`, channel })).id as string;
      };
      const admin = fhirClient(t, await t.token());
      const waiting = async (id: string) => (await t.store.subscriptions.pending('t1', id, 100)).length;
      const pinged = async (id: string) => (await t.store.subscriptions.recent([{ tenant: 't1', id }], 0)).length;
      let n = 0;
      const write = (family: string) => admin.put200({ resourceType: 'Patient', id: `us${n++}`, name: [{ family }] });

      for (const who of ['hana', 'ivo', 'jan', 'kit']) await testUser(t, { username: who, fhirUser: 'Practitioner/pr1' });
      const hana = await signedIn('hana');
      const hook = await subscribe(hana, 'usersub', 'rest-hook');
      const socket = await subscribe(hana, 'usersub', 'websocket');
      const ivosHook = await subscribe(await signedIn('ivo'), 'usersub', 'rest-hook');
      await write('usersub');
      expect([await waiting(hook), await pinged(socket), await waiting(ivosHook)]).toEqual([1, 1, 1]);

      const disabled = await cinder(['user', 'disable', '--tenant', 't1', 'hana']);
      expect((disabled.subscriptions_off as string[]).toSorted()).toEqual([hook, socket].toSorted());
      later();
      await write('usersub');
      // Nothing more on hana's authority, rest-hook or websocket; ivo's, of the same app, go on.
      expect([await waiting(hook), await pinged(socket), await waiting(ivosHook)]).toEqual([1, 1, 2]);
      // What waited from before the disable is dropped, not delivered.
      for (let i = 0; i < 20 && (await waiting(hook)) > 0; i++) await t.app.subscriptions.runOnce();
      expect(await waiting(hook)).toBe(0);

      await cinder(['user', 'enable', '--tenant', 't1', 'hana']);
      later();
      await write('usersub');
      expect([await waiting(hook), await pinged(socket)]).toEqual([0, 1]);
      // Turned off, saying why; her app activates it again with a token of a new sign-in: it notifies again.
      const again = await signedIn('hana');
      const current = (await (await again.get(`Subscription/${hook}`)).json()) as Json;
      expect(current).toMatchObject({ status: 'off', error: expect.stringContaining('the user on whose authority it was activated was disabled') });
      const { error: _error, ...rest } = current;
      expect((await again.put(`Subscription/${hook}`, { ...rest, status: 'requested' })).status).toBe(200);
      await write('usersub');
      expect(await waiting(hook)).toBe(1);

      // A new password and a delete silence theirs too.
      const jans = await subscribe(await signedIn('jan'), 'usersub', 'rest-hook');
      const kits = await subscribe(await signedIn('kit'), 'usersub', 'rest-hook');
      expect((await cinder(['user', 'update', '--tenant', 't1', 'jan', '--password-stdin'], 'a new long password\n')).subscriptions_off).toEqual([jans]);
      expect((await cinder(['user', 'delete', '--tenant', 't1', 'kit'])).subscriptions_off).toEqual([kits]);
      later();
      await write('usersub');
      expect([await waiting(jans), await waiting(kits), await waiting(hook)]).toEqual([0, 0, 2]);
    });

    test("an app's disable turns off the Subscriptions it activated on its users' sign-ins, for good; enable resumes only its own", async () => {
      const app = await userClient(t, { scopes: ['openid', 'user/*.*'] });
      await testUser(t, { username: 'max', fhirUser: 'Practitioner/pr1' });
      const code = new URL((await signIn(t, { clientId: app.id, scope: 'openid user/*.*' }, 'max', PASSWORD)).headers.get('location')!).searchParams.get('code')!;
      const max = fhirClient(t, (await tokenOf(await redeem(t, code, app))).access_token);
      const sub = await max.create({ resourceType: 'Subscription', status: 'requested', reason: 'app', criteria: 'Patient?family=appsub', channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1:9/hook' } });
      const admin = fhirClient(t, await t.token());
      expect((await max.get('Patient?_count=1')).status).toBe(200); // the server has polled its revocations
      expect((await cinder(['client', 'disable', app.id])).subscriptions_off).toEqual([sub.id]);
      // Within the servers' 5 seconds the app's token still passes: what it activates rests on the revoked sign-in.
      const late = await max.create({ resourceType: 'Subscription', status: 'requested', reason: 'late', criteria: 'Patient?family=appsub', channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1:9/hook' } });
      await cinder(['client', 'enable', app.id]);
      later();
      await admin.put200({ resourceType: 'Patient', id: 'app1', name: [{ family: 'appsub' }] });
      for (const id of [sub.id, late.id] as string[]) expect((await t.store.subscriptions.pending('t1', id, 100)).length).toBe(0);
      expect(((await (await admin.get(`Subscription/${sub.id}`)).json()) as Json)).toMatchObject({
        status: 'off', error: expect.stringContaining('the app it was activated with was disabled'),
      });
    });

    test("a Subscription activated with a user's token the servers had not yet refused after a disable notifies nothing, and reads off after the next write", async () => {
      const app = await userClient(t, { scopes: ['openid', 'user/*.*'] });
      await testUser(t, { username: 'lou', fhirUser: 'Practitioner/pr1' });
      const code = new URL((await signIn(t, { clientId: app.id, scope: 'openid user/*.*' }, 'lou', PASSWORD)).headers.get('location')!).searchParams.get('code')!;
      const lou = fhirClient(t, (await tokenOf(await redeem(t, code, app))).access_token);
      expect((await lou.get('Patient?_count=1')).status).toBe(200); // the server has polled its revocations
      expect((await cinder(['user', 'disable', '--tenant', 't1', 'lou'])).subscriptions_off).toEqual([]);
      // Within the servers' 5 seconds, her token still passes: the Subscription it activates rests on her old authority.
      const late = await lou.create({ resourceType: 'Subscription', status: 'requested', reason: 'late', criteria: 'Patient?family=latesub', channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1:9/hook' } });
      expect(late.status).toBe('active');
      await cinder(['user', 'enable', '--tenant', 't1', 'lou']);
      later();
      const admin = fhirClient(t, await t.token());
      await admin.put200({ resourceType: 'Patient', id: 'late1', name: [{ family: 'latesub' }] });
      expect((await t.store.subscriptions.pending('t1', late.id as string, 100)).length).toBe(0);
      // The write found it silenced: the server wrote it off, saying why, as `cinder` writes the others.
      const read = (await (await admin.get(`Subscription/${String(late.id)}`)).json()) as Json;
      expect([read.status, read.error, (read.meta as Json).versionId]).toEqual(['off', expect.stringContaining('the sign-in on whose authority it was activated was revoked'), '2']);
    });

    test("a client's Subscription activated with a token the servers had not yet refused after its disable is paused at the next write, and resumed by enable", async () => {
      const c = await backend(['system/*.*']);
      const owner = fhirClient(t, (await tokenOf(await clientCredentials(c))).access_token);
      expect((await owner.get('Patient?_count=1')).status).toBe(200);
      expect(await cinder(['client', 'disable', c.id])).toMatchObject({ subscriptions_paused: [] });
      const late = await owner.create({ resourceType: 'Subscription', status: 'requested', reason: 'late', criteria: 'Patient?family=lateclient', channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1:9/hook' } });
      expect(late.status).toBe('active');
      later();
      const admin = fhirClient(t, await t.token());
      await admin.put200({ resourceType: 'Patient', id: 'lateclient1', name: [{ family: 'lateclient' }] });
      expect((await t.store.subscriptions.pending('t1', late.id as string, 100)).length).toBe(0);
      const shown = () => statusOf(admin, String(late.id));
      expect(await shown()).toEqual(['error', expect.stringContaining(`the app that activated it (client ${c.id}) is disabled`), '2']);
      expect(await cinder(['client', 'enable', c.id])).toMatchObject({ subscriptions_resumed: [late.id] });
      expect(await shown()).toEqual(['active', undefined, '3']);
      later();
      await admin.put200({ resourceType: 'Patient', id: 'lateclient2', name: [{ family: 'lateclient' }] });
      expect((await t.store.subscriptions.pending('t1', late.id as string, 100)).length).toBe(1);
    });

    test('a write that finds many silenced Subscriptions shows 16 of them (its response waits for each), the next writes the others', async () => {
      const c = await backend(['system/*.*']);
      const owner = fhirClient(t, (await tokenOf(await clientCredentials(c))).access_token);
      const ids: string[] = [];
      for (let i = 0; i < 20; i++) {
        const sub = await owner.create({ resourceType: 'Subscription', status: 'requested', reason: 'many', criteria: `Patient?family=many${i}`, channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1:9/hook' } });
        ids.push(sub.id as string);
      }
      // Disabled behind cinder's back (as a token the servers had not yet refused leaves them): silenced, reading active.
      await disableClient(t.store, t.clock, c.id);
      later();
      const admin = fhirClient(t, await t.token());
      const paused = async () => {
        let n = 0;
        for (const id of ids) if (((await (await admin.get(`Subscription/${id}`)).json()) as Json).status === 'error') n++;
        return n;
      };
      await admin.put200({ resourceType: 'Patient', id: 'many1', name: [{ family: 'many' }] });
      expect(await paused()).toBe(16);
      await admin.put200({ resourceType: 'Patient', id: 'many2', name: [{ family: 'many' }] });
      expect(await paused()).toBe(20);
    });

    test("a client's Subscription activated with a token the servers had not yet refused after its scopes were narrowed is paused at the next write, and resumed once they are widened", async () => {
      const c = await backend(['system/*.*']);
      const owner = fhirClient(t, (await tokenOf(await clientCredentials(c))).access_token);
      expect((await owner.get('Patient?_count=1')).status).toBe(200);
      expect(await cinder(['client', 'update', c.id, '--scope', 'system/Observation.rs', '--scope', 'system/Subscription.cruds'])).toMatchObject({ subscriptions_paused: [] });
      // Within the servers' 5 seconds its token still passes, with the scopes it had: the Subscription is activated.
      const late = await owner.create({ resourceType: 'Subscription', status: 'requested', reason: 'late', criteria: 'Patient?family=latenarrow', channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1:9/hook' } });
      expect(late.status).toBe('active');
      later();
      const admin = fhirClient(t, await t.token());
      await admin.put200({ resourceType: 'Patient', id: 'latenarrow1', name: [{ family: 'latenarrow' }] });
      expect((await t.store.subscriptions.pending('t1', late.id as string, 100)).length).toBe(0);
      const shown = () => statusOf(admin, String(late.id));
      expect(await shown()).toEqual(['error', expect.stringContaining(`the scopes registered for the app that activated it (client ${c.id}) no longer let it search`), '2']);
      expect(await cinder(['client', 'update', c.id, '--scope', 'system/*.*'])).toMatchObject({ subscriptions_resumed: [late.id] });
      expect(await shown()).toEqual(['active', undefined, '3']);
      later();
      await admin.put200({ resourceType: 'Patient', id: 'latenarrow2', name: [{ family: 'latenarrow' }] });
      expect((await t.store.subscriptions.pending('t1', late.id as string, 100)).length).toBe(1);
    });

    /** A user app (`openid user/*.*`), `username` signed in to it, and a rest-hook Subscription to Patients of `family` activated with that sign-in's token. */
    const userSubscribed = async (username: string, family: string) => {
      const app = await userClient(t, { scopes: ['openid', 'user/*.*'] });
      await testUser(t, { username, fhirUser: 'Practitioner/pr1' });
      const code = new URL((await signIn(t, { clientId: app.id, scope: 'openid user/*.*' }, username, PASSWORD)).headers.get('location')!).searchParams.get('code')!;
      const user = fhirClient(t, (await tokenOf(await redeem(t, code, app))).access_token);
      const sub = await user.create({ resourceType: 'Subscription', status: 'requested', reason: family, criteria: `Patient?family=${family}`, channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1:9/hook' } });
      expect(sub.status).toBe('active');
      const admin = fhirClient(t, await t.token());
      return {
        app, user, id: sub.id as string, admin, shown: () => statusOf(admin, sub.id as string),
        notified: async () => (await t.store.subscriptions.pending('t1', sub.id as string, 100)).length,
      };
    };
    const NARROWED = (clientId: string) => expect.stringContaining(`the scopes registered for the app that activated it (client ${clientId}) no longer let it search`);

    test("a user's Subscription rests on their app's registration too: narrowed, it is paused (status error, saying why); widened again, set back; the app's disable turns it off", async () => {
      const { app, id, admin, shown, notified } = await userSubscribed('nia', 'usernarrow');
      await admin.put200({ resourceType: 'Patient', id: 'un1', name: [{ family: 'usernarrow' }] });
      expect(await notified()).toBe(1);
      expect(await cinder(['client', 'update', app.id, '--scope', 'openid', '--scope', 'user/Observation.rs', '--scope', 'user/Subscription.cruds'])).toMatchObject({ subscriptions_paused: [id] });
      expect(await shown()).toEqual(['error', NARROWED(app.id), '2']);
      later();
      await admin.put200({ resourceType: 'Patient', id: 'un2', name: [{ family: 'usernarrow' }] });
      expect(await notified()).toBe(1);
      expect(await cinder(['client', 'update', app.id, '--scope', 'openid', '--scope', 'user/*.*'])).toMatchObject({ subscriptions_paused: [], subscriptions_resumed: [id] });
      expect(await shown()).toEqual(['active', undefined, '3']);
      later();
      await admin.put200({ resourceType: 'Patient', id: 'un3', name: [{ family: 'usernarrow' }] });
      expect(await notified()).toBe(2);
      // Paused again, then the app disabled: the sign-in it rests on is revoked, so it is off for good, and enable sets nothing back.
      expect(await cinder(['client', 'update', app.id, '--scope', 'openid', '--scope', 'user/Observation.rs'])).toMatchObject({ subscriptions_paused: [id] });
      expect(await cinder(['client', 'disable', app.id])).toMatchObject({ subscriptions_paused: [], subscriptions_off: [id] });
      expect(await shown()).toEqual(['off', expect.stringContaining('the app it was activated with was disabled'), '5']);
      expect(await cinder(['client', 'update', app.id, '--scope', 'openid', '--scope', 'user/*.*'])).toMatchObject({ subscriptions_resumed: [] });
      expect(await cinder(['client', 'enable', app.id])).toMatchObject({ subscriptions_paused: [], subscriptions_resumed: [] });
      expect(await shown()).toEqual(['off', expect.stringContaining('the app it was activated with was disabled'), '5']);
    });

    test("a user's Subscription activated with a token the servers had not yet refused after their app's scopes were narrowed is paused at the next write, and set back once they are widened", async () => {
      const app = await userClient(t, { scopes: ['openid', 'user/*.*'] });
      await testUser(t, { username: 'ola', fhirUser: 'Practitioner/pr1' });
      const code = new URL((await signIn(t, { clientId: app.id, scope: 'openid user/*.*' }, 'ola', PASSWORD)).headers.get('location')!).searchParams.get('code')!;
      const ola = fhirClient(t, (await tokenOf(await redeem(t, code, app))).access_token);
      expect((await ola.get('Patient?_count=1')).status).toBe(200); // the server has polled its revocations
      expect(await cinder(['client', 'update', app.id, '--scope', 'openid', '--scope', 'user/Observation.rs', '--scope', 'user/Subscription.cruds'])).toMatchObject({ subscriptions_paused: [] });
      // Within the servers' 5 seconds her token still passes, with the scopes it had: the Subscription is activated.
      const late = await ola.create({ resourceType: 'Subscription', status: 'requested', reason: 'late', criteria: 'Patient?family=lateusernarrow', channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1:9/hook' } });
      expect(late.status).toBe('active');
      later();
      const admin = fhirClient(t, await t.token());
      await admin.put200({ resourceType: 'Patient', id: 'lun1', name: [{ family: 'lateusernarrow' }] });
      expect((await t.store.subscriptions.pending('t1', late.id as string, 100)).length).toBe(0);
      const shown = () => statusOf(admin, String(late.id));
      expect(await shown()).toEqual(['error', NARROWED(app.id), '2']);
      expect(await cinder(['client', 'update', app.id, '--scope', 'openid', '--scope', 'user/*.*'])).toMatchObject({ subscriptions_resumed: [late.id] });
      expect(await shown()).toEqual(['active', undefined, '3']);
      later();
      await admin.put200({ resourceType: 'Patient', id: 'lun2', name: [{ family: 'lateusernarrow' }] });
      expect((await t.store.subscriptions.pending('t1', late.id as string, 100)).length).toBe(1);
    });

    test("a Subscription the servers hold compiled whose client's scopes were narrowed without the command's pause (a write of it in between) is paused at the next write, a user's as a client's own, and set back once they are widened", async () => {
      const own = await subscribed('compilednarrow');
      const users = await userSubscribed('pia', 'compiledusernarrow');
      // A write compiles both with the scopes registered now.
      await own.admin.put200({ resourceType: 'Patient', id: 'cn1', name: [{ family: 'compilednarrow' }] });
      await users.admin.put200({ resourceType: 'Patient', id: 'cun1', name: [{ family: 'compiledusernarrow' }] });
      expect([await own.notified(), await users.notified()]).toEqual([1, 1]);
      // Narrowed as the command narrows them, without its pause (lost to a write of the Subscription at that moment, or a crash).
      await updateClient(t.store, t.clock, own.c.id, { scopes: ['system/Observation.rs', 'system/Subscription.cruds'] });
      await updateClient(t.store, t.clock, users.app.id, { scopes: ['openid', 'user/Observation.rs', 'user/Subscription.cruds'] });
      later();
      await own.admin.put200({ resourceType: 'Patient', id: 'cn2', name: [{ family: 'compilednarrow' }] });
      await users.admin.put200({ resourceType: 'Patient', id: 'cun2', name: [{ family: 'compiledusernarrow' }] });
      expect([await own.notified(), await users.notified()]).toEqual([1, 1]);
      expect(await own.shown()).toEqual({ status: 'error', error: NARROWED(own.c.id), version: '2' });
      expect(await users.shown()).toEqual(['error', NARROWED(users.app.id), '2']);
      expect(await cinder(['client', 'update', own.c.id, '--scope', 'system/*.*'])).toMatchObject({ subscriptions_resumed: [own.id] });
      expect(await cinder(['client', 'update', users.app.id, '--scope', 'openid', '--scope', 'user/*.*'])).toMatchObject({ subscriptions_resumed: [users.id] });
      later();
      await own.admin.put200({ resourceType: 'Patient', id: 'cn3', name: [{ family: 'compilednarrow' }] });
      await users.admin.put200({ resourceType: 'Patient', id: 'cun3', name: [{ family: 'compiledusernarrow' }] });
      expect([await own.notified(), await users.notified()]).toEqual([2, 2]);
      expect(await users.shown()).toEqual(['active', undefined, '3']);
    });

    /** The statement an older release (before revocation_sequence) recorded a client revocation with: no seq. */
    const olderRevocation = (kind: string, clientId: string, at: number) => target.kind === 'sqlite'
      ? `INSERT INTO revocations (kind, value, revoked_at, expires_at) VALUES ('${kind}', '${clientId}', ${at}, ${at + 90_000_000})
           ON CONFLICT (kind, value) DO UPDATE SET revoked_at = MAX(revoked_at, excluded.revoked_at), expires_at = MAX(expires_at, excluded.expires_at)`
      : `INSERT INTO revocations (kind, value, revoked_at, expires_at) VALUES ('${kind}', '${clientId}', ${at}, ${at + 90_000_000})
           ON CONFLICT (kind, value) DO UPDATE SET
             revoked_at = GREATEST(revocations.revoked_at, EXCLUDED.revoked_at), expires_at = GREATEST(revocations.expires_at, EXCLUDED.expires_at)`;

    /**
     * A topic on Patient (`http://example.org/topics/<name>`, Basic/`<name>`) the operator may widen to Encounter, and a
     * websocket Subscription to it of a backend client registered with `system/Patient.rs system/Observation.rs
     * system/Subscription.cruds` (its token's scopes, recorded), paused for its topic (widened, and a write in the tenant).
     */
    const topicPaused = async (name: string) => {
      const admin = fhirClient(t, await t.token());
      const trigger = (resource: string) => ({ url: `${X5}resourceTrigger`, extension: [{ url: 'resource', valueUri: resource }] });
      const url = `http://example.org/topics/${name}`;
      const topic = {
        resourceType: 'Basic', id: name, code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
        extension: [{ url: `${X5}url`, valueUri: url }, { url: `${X5}status`, valueCode: 'active' }, trigger('Patient')],
      };
      await admin.put200(topic);
      const c = await backend(['system/Patient.rs', 'system/Observation.rs', 'system/Subscription.cruds']);
      const owner = fhirClient(t, (await tokenOf(await clientCredentials(c))).access_token);
      const sub = await owner.create({
        resourceType: 'Subscription', status: 'requested', reason: name, criteria: url,
        channel: {
          type: 'websocket', payload: 'application/fhir+json', _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: 'id-only' }] },
          _type: { extension: [{ url: `${BP}backport-channel-type`, valueCoding: { system: 'http://terminology.hl7.org/CodeSystem/subscription-channel-type', code: 'websocket' } }] },
        },
      });
      expect(sub.status).toBe('active');
      const id = sub.id as string;
      const widen = () => admin.put200({ ...topic, extension: [...topic.extension, trigger('Encounter')] });
      const revert = () => admin.put200(topic);
      let n = 0;
      /** A write in the tenant, past the caches: the servers judge the Subscription at it. */
      const write = async () => {
        later();
        await admin.put200({ resourceType: 'Patient', id: `${name}-${n++}` });
      };
      await widen();
      await write();
      const shown = () => statusOf(admin, id);
      expect(await shown()).toEqual(['error', topicPausedError(['Encounter']), '2']);
      return { c, id, shown, widen, revert, write };
    };

    test('a Subscription paused for its topic whose registration refuses too is named by its registration (by the command and by the servers), then by its topic while that alone refuses, and set back once neither does', async () => {
      const { c, id, shown, revert, widen, write } = await topicPaused('topic-then-scopes');
      const narrowed = ['--scope', 'system/Observation.rs', '--scope', 'system/Subscription.cruds'];
      // Narrowed: the registration refuses Patient, which the token that activated it searched: named for the registration.
      expect(await cinder(['client', 'update', c.id, ...narrowed])).toMatchObject({ subscriptions_paused: [id], subscriptions_resumed: [] });
      expect(await shown()).toEqual(['error', pausedError(c.id, 'scopes'), '3']);
      // The topic as it was: the registration alone refuses, and it still says so.
      await revert();
      await write();
      expect(await shown()).toEqual(['error', pausedError(c.id, 'scopes'), '3']);
      // Widened again, then the registration too: the topic alone refuses, and it says so; the topic as it was, set back.
      await widen();
      expect(await cinder(['client', 'update', c.id, '--scope', 'system/*.*'])).toMatchObject({ subscriptions_paused: [id], subscriptions_resumed: [] });
      expect(await shown()).toEqual(['error', topicPausedError(['Encounter']), '4']);
      await revert();
      await write();
      expect(await shown()).toEqual(['active', undefined, '5']);

      // Narrowed without the command's pause (lost to a write at that moment): the servers name the registration at the
      // next write, whether the topic still refuses or not.
      const again = await topicPaused('topic-then-scopes-servers');
      await updateClient(t.store, t.clock, again.c.id, { scopes: ['system/Observation.rs', 'system/Subscription.cruds'] });
      await again.write();
      expect(await again.shown()).toEqual(['error', pausedError(again.c.id, 'scopes'), '3']);
      expect(await cinder(['client', 'update', again.c.id, '--scope', 'system/*.*'])).toMatchObject({ subscriptions_paused: [again.id] });
      expect(await again.shown()).toEqual(['error', topicPausedError(['Encounter']), '4']);
      await updateClient(t.store, t.clock, again.c.id, { scopes: ['system/Observation.rs', 'system/Subscription.cruds'] });
      await again.revert();
      await again.write();
      expect(await again.shown()).toEqual(['error', pausedError(again.c.id, 'scopes'), '5']);
    });

    test('a Subscription paused for its topic is paused for its client\'s disable, and named by its topic again once enabled while the topic still refuses', async () => {
      const { c, id, shown, revert, write } = await topicPaused('topic-then-disabled');
      expect(await cinder(['client', 'disable', c.id])).toMatchObject({ subscriptions_paused: [id] });
      expect(await shown()).toEqual(['error', pausedError(c.id, 'disabled'), '3']);
      expect(await cinder(['client', 'enable', c.id])).toMatchObject({ subscriptions_paused: [id], subscriptions_resumed: [] });
      expect(await shown()).toEqual(['error', topicPausedError(['Encounter']), '4']);
      await revert();
      await write();
      expect(await shown()).toEqual(['active', undefined, '5']);
    });

    test('an active Subscription whose topic was widened is paused for its topic at the topic\'s write, and a registration change that does not refuse it leaves it so, not paused for the registration', async () => {
      const { c, shown, revert, write } = await topicPaused('topic-active-update');
      // Set back (the topic as it was), then widened again: the topic's own write pauses it, naming the topic.
      await revert();
      await write();
      expect(await shown()).toEqual(['active', undefined, '3']);
      const admin = fhirClient(t, await t.token());
      const basic = (await (await admin.get('Basic/topic-active-update')).json()) as Json;
      await admin.put200({ ...basic, extension: [...(basic.extension as Json[]), { url: `${X5}resourceTrigger`, extension: [{ url: 'resource', valueUri: 'Encounter' }] }] });
      expect(await shown()).toEqual(['error', topicPausedError(['Encounter']), '4']);
      expect(await cinder(['client', 'update', c.id, '--scope', 'system/Patient.rs', '--scope', 'system/Subscription.cruds'])).toMatchObject({ subscriptions_paused: [], subscriptions_resumed: [] });
      expect(await shown()).toEqual(['error', topicPausedError(['Encounter']), '4']);
    });

    test('rolling upgrade: a revocation an older release writes (no number, or a row revoked again) is still applied by running servers', async () => {
      // The servers have polled past revocations recorded by this release.
      const first = await backend();
      await cinder(['client', 'disable', first.id]);
      const c = await backend();
      const token = (await tokenOf(await clientCredentials(c))).access_token;
      later();
      expect((await read(token)).status).toBe(200);
      // An older `cinder client disable` (or server) beside them: a new row.
      await rawSql(target.kind, url, [olderRevocation('client', c.id, Date.now())]);
      later();
      expect((await read(token)).status).toBe(401);

      // Disabled by this release, enabled, then disabled again by an older one: the row updated in place.
      await cinder(['client', 'disable', first.id]);
      await cinder(['client', 'enable', first.id]);
      later();
      const again = (await tokenOf(await clientCredentials(first))).access_token;
      expect((await read(again)).status).toBe(200);
      t.clock.advance(1);
      await rawSql(target.kind, url, [olderRevocation('client', first.id, Date.now())]);
      later();
      expect((await read(again)).status).toBe(401);
    });

    test.skipIf(target.kind !== 'postgres')('rolling upgrade on PostgreSQL: an older release\'s revocation committed after a later one is still read', async () => {
      const [a, b] = [await backend(), await backend()];
      const seen = async (after: number) => t.store.oauth.revokedSince(after, Date.now());
      const start = (await seen(-1)).last;
      const one = postgres(url, { max: 1, onnotice: () => undefined });
      const two = postgres(url, { max: 1, onnotice: () => undefined });
      try {
        let commit!: () => void;
        const held = new Promise<void>((resolve) => (commit = resolve));
        let inserted!: () => void;
        const inA = new Promise<void>((resolve) => (inserted = resolve));
        // An older server's revocation of `a`, its transaction still open; another's of `b` meanwhile.
        const txA = one.begin(async (tx) => {
          await tx.unsafe(olderRevocation('client', a.id, Date.now()));
          inserted();
          await held;
        });
        await inA;
        // (A postgres.js query runs once it is awaited: then() starts it here.)
        const txB = two.unsafe(olderRevocation('client', b.id, Date.now())).then(() => undefined);
        await Bun.sleep(200);
        const middle = await seen(start);
        commit();
        await txA;
        await txB;
        const after = await seen(middle.last);
        const values = [...middle.revocations, ...after.revocations].map((r) => r.value);
        expect(values).toContain(a.id);
        expect(values).toContain(b.id);
      } finally {
        await one.end();
        await two.end();
      }
    });

    test('a client disabled from a machine whose clock is 5 minutes behind: the servers still see it, and refuse its tokens', async () => {
      // The servers' clock on time, as the database's is: the tests before moved it on past their caches (later()),
      // by more than the 5 minutes this one is about once there were enough of them.
      setSystemTime();
      const { client, clientSecret } = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.read'], accessTokenTtl: 3600 });
      const c = { id: client.clientId, secret: clientSecret! };
      setSystemTime(new Date(Date.now() - 10 * 60_000)); // the servers' clock ten minutes back, to issue a token then
      const early = (await tokenOf(await clientCredentials(c))).access_token;
      setSystemTime(); // the servers' clock on time, as the database's is (the client cache's record is 10 minutes old)
      const recent = (await tokenOf(await clientCredentials(c))).access_token;
      for (const token of [early, recent]) expect((await read(token)).status).toBe(200); // the app has polled
      // `cinder client disable` on a machine 5 minutes behind.
      setSystemTime(new Date(Date.now() - 5 * 60_000));
      try {
        await cinder(['client', 'disable', c.id]);
      } finally {
        setSystemTime();
      }
      later();
      expect((await read(early)).status).toBe(401);
      expect(await introspect(early)).toBe(false);
      // On PostgreSQL the command raises its clock to the database's. SQLite has none: every process on the file runs
      // on one machine, with one clock, so a command line behind the server cannot happen there.
      if (target.kind === 'postgres') {
        expect((await read(recent)).status).toBe(401);
        expect(await introspect(recent)).toBe(false);
      }
    });
  });
}
