/**
 * A resource scope the search engine cannot apply (`system/Patient.rs?_has:Flag:subject:status=active`: Flag has
 * no `status` search parameter) is refused where it would be registered or asked for, instead of being kept as a
 * custom scope that reads nothing; a `_has` filter the engine can apply is enforced on reads and searches, on both
 * databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { AdminError, createClient } from '../../src/auth/admin.ts';
import { updateClient } from '../../src/auth/client-lifecycle.ts';
import { sha256Hex } from '../../src/auth/secrets.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { authorizeQuery, pkce, redirectParams, userClient } from '../helpers/oauth.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { appOnFresh } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';

const BAD = 'system/Patient.rs?_has:Flag:subject:status=active';
const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const form = (body: Record<string, string>) => new URLSearchParams(body);

for (const target of targets) {
  describe(`scopes with filters the engine cannot apply, on ${target.kind}`, () => {
    let t: TestApp;
    let admin: FhirClient;
    const tokenRequest = (clientId: string, secret: string, scope?: string) => t.request('/oauth2/token', {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: 'Basic ' + btoa(`${clientId}:${secret}`) },
      body: form({ grant_type: 'client_credentials', ...(scope !== undefined && { scope }) }),
    });

    beforeAll(async () => {
      ({ t, api: admin } = await appOnFresh(target));
      await admin.put200({ resourceType: 'Patient', id: 'flagged' });
      await admin.put200({ resourceType: 'Patient', id: 'plain' });
      await admin.put200({ resourceType: 'Flag', id: 'f1', status: 'active', code: { text: 'fall risk' }, subject: { reference: 'Patient/flagged' }, identifier: [{ system: 'urn:x', value: 'risk' }] });
    });
    afterAll(() => t.close());

    test('registration refuses it, with the reason, at creation and at update', async () => {
      const created = createClient(t.store, t.clock, { tenant: 't1', scopes: [BAD] });
      await expect(created).rejects.toThrow(AdminError);
      await expect(created).rejects.toThrow(/invalid scope .*_has:Flag:subject:status.*'status' is not supported for Flag/);
      for (const scope of ['system/Patient.rs?_count=5', 'system/Patient.read?name=x', 'system/*.rs?name=x', 'system/Patient.rs?name=']) {
        await expect(createClient(t.store, t.clock, { tenant: 't1', scopes: [scope] })).rejects.toThrow(`invalid scope '${scope}'`);
      }
      // A filter's spaces percent-encoded, as a scope travels space-delimited; unencoded, it is refused.
      await expect(createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/Patient.rs?_filter=name eq x'] })).rejects.toThrow(/holds no whitespace/);
      expect((await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/Patient.rs?_filter=name%20eq%20x'] })).client.scopes).toEqual(['system/Patient.rs?_filter=name%20eq%20x']);
      const { client } = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/Patient.rs', 'custom-scope'] });
      await expect(updateClient(t.store, t.clock, client.clientId, { scopes: [BAD] })).rejects.toThrow(/invalid scope/);
      expect((await t.store.clients.get(client.clientId))!.scopes).toEqual(['system/Patient.rs', 'custom-scope']);
    });

    test('a filter whose percent-encoding is malformed, or that names no parameter, is refused at registration and when asked for', async () => {
      for (const scope of ['system/Patient.rs?name=%ZZ', 'system/Patient.rs?name=%E9', 'system/Patient.rs?%ZZ=x', 'system/Patient.rs?&', 'system/Patient.rs?&&']) {
        await expect(createClient(t.store, t.clock, { tenant: 't1', scopes: [scope] })).rejects.toThrow(`invalid scope '${scope}'`);
        const { client, clientSecret } = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.*'] });
        const asked = await tokenRequest(client.clientId, clientSecret!, scope);
        expect([scope, asked.status]).toEqual([scope, 400]);
        const body = (await asked.json()) as Json;
        expect(body.error).toBe('invalid_request');
        expect(body.error_description).toMatch(/not well percent-encoded|names no parameter/);
      }
      // Well encoded, the value is the one it encodes.
      expect((await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/Patient.rs?name=%C3%A9'] })).client.scopes).toEqual(['system/Patient.rs?name=%C3%A9']);
    });

    test('a token request asking for it is invalid_request; a registration holding it from before leaves it out', async () => {
      // Registered before registrations were checked: written to the store directly.
      const { client } = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/Flag.rs'] });
      await t.store.clients.update({ ...client, scopes: [BAD, 'system/Flag.rs'], secretHash: sha256Hex('legacy-secret') });
      const asked = await tokenRequest(client.clientId, 'legacy-secret', BAD);
      expect(asked.status).toBe(400);
      const body = (await asked.json()) as Json;
      expect(body.error).toBe('invalid_request');
      expect(body.error_description).toContain("'status' is not supported for Flag");
      const all = await tokenRequest(client.clientId, 'legacy-secret');
      expect(all.status).toBe(200);
      expect(((await all.json()) as Json).scope).toBe('system/Flag.rs');
      // A client that never had it: ignored as any scope not enabled for it is (the contract), named when nothing is left.
      const { client: plain, clientSecret } = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/Flag.rs'] });
      const beside = await tokenRequest(plain.clientId, clientSecret!, `${BAD} system/Flag.rs`);
      expect(beside.status).toBe(200);
      expect(((await beside.json()) as Json).scope).toBe('system/Flag.rs');
      const alone = await tokenRequest(plain.clientId, clientSecret!, BAD);
      expect(alone.status).toBe(400);
      expect((await alone.json()) as Json).toMatchObject({ error: 'invalid_request', error_description: expect.stringContaining("'status' is not supported for Flag") });
    });

    test('a _has filter the engine can apply is enforced on read and search', async () => {
      const scope = 'system/Patient.rs?_has:Flag:subject:identifier=urn:x|risk';
      const { client, clientSecret } = await createClient(t.store, t.clock, { tenant: 't1', scopes: [scope, 'system/Flag.rs'] });
      const api = fhirClient(t, await t.token(undefined, client.clientId, clientSecret!));
      expect((await api.get('Patient/flagged')).status).toBe(200);
      await expectOutcome(await api.get('Patient/plain'), 403);
      expect(((await api.search('Patient')).entry ?? []).map((e: Json) => e.resource.id)).toEqual(['flagged']);
    });
  });
}

describe('the authorization request', () => {
  test('asking for a resource scope the engine cannot apply is invalid_scope, back at the app', async () => {
    const t = await createTestApp();
    try {
      const c = await userClient(t, { scopes: ['user/*.read'] });
      const { challenge } = pkce();
      const res = await t.request(`/oauth2/authorize?${authorizeQuery({ clientId: c.id, challenge, state: 's1', scope: `openid ${BAD.replace('system/', 'user/')}` })}`);
      const q = redirectParams(res);
      expect(q.get('error')).toBe('invalid_scope');
      expect(q.get('error_description')).toContain("'status' is not supported for Flag");
      expect(q.get('state')).toBe('s1');
      // A scope of a type R4 does not have (an app written for another FHIR version) is left out, not refused.
      const other = await t.request(`/oauth2/authorize?${authorizeQuery({ clientId: c.id, challenge, state: 's2', scope: 'openid user/BodySite.read user/Patient.read' })}`);
      expect(other.status).toBe(200);
      expect(other.headers.get('content-type')).toStartWith('text/html');
    } finally {
      await t.close();
    }
  });
});
