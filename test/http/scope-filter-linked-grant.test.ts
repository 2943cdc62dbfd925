/**
 * A scope filter reading other resources (a chain, `_has`) is applied unbounded by the token's scopes, so an
 * unfiltered registered scope grants one only where the registration searches each type it reads whole: a client registered with `system/Observation.rs` alone asked for
 * `system/Observation.rs?patient._has:Condition:patient:code=x` and learnt which patients have a Condition it may
 * not read (its own search of Condition is a 403), or through `subject:Patient.gender=female` the gender of patients
 * its Patient filter hides. A filter reading the Observation alone is granted as before, and such a filter registered
 * itself still is. On both databases, by client_credentials and by a sign-in.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type Json } from '../helpers/fhir.ts';
import { basic, getCode, post, redeem, signIn, testUser, userClient } from '../helpers/oauth.ts';

const HAS = 'system/Observation.rs?patient._has:Condition:patient:code=urn:x|secret';
const CHAIN = 'system/Observation.rs?subject:Patient.gender=female';

await eachStore((kind, fresh) => {
  describe(`scope filters reading other resources, asked of an unfiltered registered scope (${kind})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      const admin = fhirClient(t, await t.token());
      await admin.put200({ resourceType: 'Patient', id: 'p1', gender: 'female' });
      await admin.put200({ resourceType: 'Patient', id: 'p2', gender: 'male' });
      for (const [id, p] of [['o1', 'p1'], ['o2', 'p2']]) {
        await admin.put200({ resourceType: 'Observation', id, status: 'final', code: { text: 'weight' }, subject: { reference: `Patient/${p}` } });
      }
      await admin.put200({ resourceType: 'Condition', id: 'c1', subject: { reference: 'Patient/p1' }, code: { coding: [{ system: 'urn:x', code: 'secret' }] } });
    });
    afterAll(() => t.close());

    const ask = async (registered: string[], scope: string) => {
      const c = await createClient(t.store, t.clock, { tenant: 't1', scopes: registered });
      return post(t, { grant_type: 'client_credentials', scope }, { Authorization: basic(c.client.clientId, c.clientSecret!) });
    };
    const observations = async (token: string) => ((await fhirClient(t, token).search('Observation')).entry ?? []).map((e: Json) => e.resource.id).sort();

    test('client_credentials: a chain or _has is not granted; a filter on the Observation alone is', async () => {
      for (const [registered, scope] of [[['system/Observation.rs'], HAS], [['system/Observation.rs', 'system/Patient.rs'], HAS], [['system/Observation.rs', 'system/Patient.rs?gender=male'], CHAIN]] as const) {
        const alone = await ask([...registered], scope);
        expect([scope, alone.status]).toEqual([scope, 400]);
        expect(((await alone.json()) as Json).error).toBe('invalid_request');
        // Beside a scope it is granted, it is left out as any scope the client lacks.
        const beside = (await (await ask([...registered], `${scope} system/Observation.rs?status=final`)).json()) as Json;
        expect(beside.scope).toBe('system/Observation.rs?status=final');
        expect(await observations(beside.access_token)).toEqual(['o1', 'o2']);
      }
      const plain = (await (await ask(['system/Observation.rs'], 'system/Observation.rs?code:text=weight')).json()) as Json;
      expect(plain.scope).toBe('system/Observation.rs?code:text=weight');
      // Where the registration searches every type the filter reads whole, the filter tells nothing more: granted.
      for (const registered of [['system/*.rs'], ['system/Observation.rs', 'system/Patient.rs', 'system/Condition.rs']]) {
        const whole = (await (await ask(registered, HAS)).json()) as Json;
        expect(whole.scope).toBe(HAS);
        expect(await observations(whole.access_token)).toEqual(['o1']);
      }
    });

    test('a filter registered itself is granted, and reads as it says', async () => {
      const res = (await (await ask([HAS], HAS)).json()) as Json;
      expect(res.scope).toBe(HAS);
      expect(await observations(res.access_token)).toEqual(['o1']);
    });

    test('a sign-in whose registration searches the types read whole is granted it at the token too, and a refresh narrows to it', async () => {
      await testUser(t, { username: 'whole', fhirUser: 'Practitioner/x' });
      const app = await userClient(t, { scopes: ['user/*.rs'] });
      const wanted = 'user/Observation.rs?patient._has:Condition:patient:code=urn:x|secret';
      const res = await signIn(t, { clientId: app.id, scope: `openid offline_access ${wanted}` }, 'whole');
      const code = new URL(res.headers.get('location')!).searchParams.get('code')!;
      const tokens = (await (await redeem(t, code, app)).json()) as Json;
      expect(tokens.scope).toBe(`openid offline_access ${wanted}`);
      expect(await observations(tokens.access_token)).toEqual(['o1']);
      // A grant of user/*.rs may narrow to such a filter: it reads nothing the grant could not search.
      const wide = await signIn(t, { clientId: app.id, scope: 'openid offline_access user/*.rs' }, 'whole');
      const grant = (await (await redeem(t, new URL(wide.headers.get('location')!).searchParams.get('code')!, app)).json()) as Json;
      const narrowed = await post(t, { grant_type: 'refresh_token', refresh_token: grant.refresh_token, client_id: app.id, scope: wanted }, { Authorization: basic(app.id, app.secret!) });
      expect(narrowed.status).toBe(200);
      const body = (await narrowed.json()) as Json;
      expect(body.scope).toBe(wanted);
      expect(await observations(body.access_token)).toEqual(['o1']);
    });

    test('a sign-in is not granted it either', async () => {
      await testUser(t, { fhirUser: 'Practitioner/x' });
      const app = await userClient(t, { scopes: ['user/Observation.rs'] });
      const wanted = 'user/Observation.rs?patient._has:Condition:patient:code=urn:x|secret';
      const code = await getCode(t, { clientId: app.id, scope: `openid ${wanted} user/Observation.rs?status=final` });
      const tokens = (await (await redeem(t, code, app)).json()) as Json;
      expect(tokens.scope.split(' ')).not.toContain(wanted);
      expect(await observations(tokens.access_token)).toEqual(['o1', 'o2']);
    });
  });
});
