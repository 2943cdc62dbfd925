/**
 * Attacks on a refresh that narrows its grant by meaning, and on the scopes a client still holds when its
 * registration narrowed since (stillRegistered), through `app.request()`, on both databases. A refresh may
 * yield a token that reads, searches or writes no more than the grant's own tokens did (RFC 6749 6: no
 * scope "not originally granted by the resource owner"; SMART App Launch 2.2: "equal to or a subset of the
 * scopes granted"); a registration narrowed since may take scopes away, never lift a bound the grant kept.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { disableClient } from '../../src/auth/client-lifecycle.ts';
import { disableUser } from '../../src/auth/user-lifecycle.ts';
import { createUser } from '../../src/auth/users.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { download, finish, kickOff, refs } from '../helpers/export.ts';
import { fhirClient, ids, type Json } from '../helpers/fhir.ts';
import { basic, csrfCookie, FORM, hiddenFields, PASSWORD, post, redeem, redirectParams, REDIRECT, signIn } from '../helpers/oauth.ts';
import { receiver } from '../helpers/rest-hook.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

type Tokens = { access_token: string; refresh_token?: string; patient?: string; scope: string; error?: string; error_description?: string };
type App = { id: string; secret: string };

const category = (code: string) => [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code }] }];

for (const target of targets) {
  describe(`attacks on refresh narrowing and narrowed registrations, on ${target.kind}`, () => {
    let t: TestApp;
    let c: App;

    beforeAll(async () => {
      const store = (await target.migrated()).open();
      await store.migrate();
      t = await createTestApp({ store, env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
      const admin = fhirClient(t, await t.token());
      c = await app(['launch/patient', 'patient/*.cruds', 'user/*.cruds']);
      for (const id of ['p1', 'p2']) await admin.put200({ resourceType: 'Patient', id });
      for (const [id, patient, kind] of [['o1-lab', 'p1', 'laboratory'], ['o1-vital', 'p1', 'vital-signs'], ['o2-vital', 'p2', 'vital-signs']]) {
        await admin.put200({ resourceType: 'Observation', id, status: 'final', category: category(kind!), code: { text: 'x' }, subject: { reference: `Patient/${patient}` } });
      }
      // What a grant of Patients and Observations alone may not read: p1's diagnosis, a List naming p1, p2's encounter.
      await admin.put200({ resourceType: 'Condition', id: 'dx1', code: { coding: [{ system: 'http://example.org/dx', code: 'secret' }] }, subject: { reference: 'Patient/p1' } });
      await admin.put200({ resourceType: 'List', id: 'l1', status: 'current', mode: 'working', entry: [{ item: { reference: 'Patient/p1' } }] });
      await admin.put200({ resourceType: 'Encounter', id: 'e2', status: 'in-progress', class: { code: 'AMB' }, subject: { reference: 'Patient/p2' } });
      await admin.put200({ resourceType: 'Observation', id: 'o2-enc', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/p2' }, encounter: { reference: 'Encounter/e2' } });
      await createUser(t.store, t.clock, { tenant: 't1', username: 'doc', password: PASSWORD, fhirUser: 'Practitioner/d-1' });
      await createUser(t.store, t.clock, { tenant: 't1', username: 'pat', password: PASSWORD, fhirUser: 'Patient/p1' });
      await createUser(t.store, t.clock, { tenant: 't1', username: 'nurse', password: PASSWORD, fhirUser: 'Practitioner/n-1' });
    }, 120_000);
    afterAll(() => t.close());

    async function app(scopes: string[]): Promise<App> {
      const made = await createClient(t.store, t.clock, {
        tenant: 't1', name: 'Refreshing app', grants: ['authorization_code', 'refresh_token'], redirectUris: [REDIRECT], scopes,
      });
      return { id: made.client.clientId, secret: made.clientSecret! };
    }

    /** `doc` signs in to `o` for `scope`, picks `patient` when the picker asks, redeems the code. */
    async function grant(o: App, scope: string, patient?: string, username = 'doc'): Promise<Tokens> {
      let res = await signIn(t, { clientId: o.id, scope }, username);
      if (patient !== undefined) {
        const html = await res.text();
        res = await t.request('/oauth2/authorize', {
          method: 'POST', headers: { ...FORM, Cookie: csrfCookie(res) }, body: new URLSearchParams({ ...hiddenFields(html), action: 'pick', patient }),
        });
      }
      const body = (await (await redeem(t, redirectParams(res).get('code')!, o)).json()) as Tokens;
      expect(body.refresh_token).toBeDefined();
      return body;
    }

    const refresh = async (o: App, token: string, scope?: string) => {
      const res = await post(t, { grant_type: 'refresh_token', refresh_token: token, ...(scope === undefined ? {} : { scope }) }, { Authorization: basic(o.id, o.secret) });
      return { status: res.status, body: (await res.json()) as Tokens };
    };
    const status = async (token: string, path: string) => (await fhirClient(t, token).get(path)).status;
    const search = async (token: string, query: string) => ids(await fhirClient(t, token).search(query)).sort();

    test("a filter a refresh adds may not read other resources (_has, _list, a chain): the grant's tokens may not search them", async () => {
      const { refresh_token: rt, access_token: own } = await grant(c, 'offline_access user/Patient.rs user/Observation.rs');
      // The grant's own token may not ask which patients have a diagnosis, are on a List, or which Observations an encounter in progress holds.
      expect(await status(own, 'Patient?_has:Condition:subject:code=http://example.org/dx|secret')).toBe(403);
      expect(await status(own, 'Patient?_list=l1')).toBe(403);
      expect(await status(own, 'Observation?encounter:Encounter.status=in-progress')).toBe(403);
      expect(await status(own, 'Patient?organization:below=Organization/o1')).toBe(403);
      // Nor may a token a refresh narrowed to a filter that does (it listed p1, p2's Observation: what they hold).
      for (const scope of [
        'user/Patient.rs?_has:Condition:subject:code=http://example.org/dx|secret',
        'user/Patient.rs?_list=l1',
        'user/Patient.rs?organization:below=Organization/o1',
        'user/Observation.rs?encounter:Encounter.status=in-progress',
        'user/Observation.rs?encounter.status=in-progress',
        'user/Observation.rs?_filter=encounter.status eq in-progress',
        'user/Observation.rs?category=vital-signs&subject._has:Condition:subject:code=secret',
      ]) {
        const res = await refresh(c, rt!, scope);
        expect({ scope, ...res }).toEqual({ scope, status: 400, body: expect.objectContaining({ error: 'invalid_request' }) });
      }
      expect((await refresh(c, rt!, 'user/Patient.rs?_list=l1&gender=female')).body.error_description).toBe(
        'scope exceeds the original grant: user/Patient.rs?_list=l1&gender=female (unless the granted filter holds it, a filter may not add _list=l1: it reads other resources)',
      );
      // A filter on the resource's own elements still narrows.
      const own2 = await refresh(c, rt!, 'user/Patient.rs?_id=p2');
      expect(own2.status).toBe(200);
      expect(await search(own2.body.access_token, 'Patient')).toEqual(['p2']);
      // A chain to a type the grant searches whole reads nothing the grant could not: the refresh narrows to it, as a sign-in
      // registered so is granted it (it was refused, and the sign-in's token left it out though the sign-in granted it).
      const chained = await refresh(c, rt!, 'user/Observation.rs?subject:Patient._id=p1');
      expect(chained.status).toBe(200);
      expect(await search(chained.body.access_token, 'Observation')).toEqual(await search(own, 'Observation?subject:Patient._id=p1'));
    });

    test('a filter the grant holds keeps its chain when narrowed; repeats are ANDed; percent-encoding changes nothing', async () => {
      const o = await app(['user/Observation.rs?encounter:Encounter.status=in-progress', 'user/Observation.rs?category=laboratory']);
      const { refresh_token: rt } = await grant(o, 'offline_access user/Observation.rs?encounter:Encounter.status=in-progress user/Observation.rs?category=laboratory');
      const kept = await refresh(o, rt!, 'user/Observation.rs?encounter:Encounter.status=in-progress&status=final');
      expect(kept.status).toBe(200);
      expect(await search(kept.body.access_token, 'Observation')).toEqual(['o2-enc']);
      // A repeated parameter is ANDed (search.html): laboratory and vital-signs both, which no Observation is.
      const both = await refresh(o, rt!, 'user/Observation.rs?category=laboratory&category=vital-signs');
      expect(both.status).toBe(200);
      expect(await search(both.body.access_token, 'Observation')).toEqual([]);
      // An encoded comma is a comma (ORed values): wider than the grant's filter.
      expect((await refresh(o, rt!, 'user/Observation.rs?category=laboratory%2Cvital-signs')).status).toBe(400);
      // The same filter written encoded is the same filter.
      const encoded = await refresh(o, rt!, 'user/Observation.rs?%63ategory=laboratory');
      expect(encoded.status).toBe(200);
      expect(await search(encoded.body.access_token, 'Observation')).toEqual(['o1-lab']);
    });

    /**
     * A client registered for p1's Observations beside every patient's vital signs, whose doc signs in choosing p1
     * (so the grant's tokens read p1's Observations alone), and whose registration then drops the patient/ scope
     * (as `cinder client update --scope` writes it, without its revocation row); `before` runs first with the grant.
     */
    async function narrowedRegistration(before: (signed: Tokens) => Promise<void> = async () => {}) {
      const scopes = ['launch/patient', 'user/Subscription.cruds', 'patient/Observation.rs', 'user/Observation.rs?category=vital-signs'];
      const o = await app(scopes);
      const signed = await grant(o, `offline_access ${scopes.join(' ')}`, 'p1');
      expect(await search(signed.access_token, 'Observation?category=laboratory,vital-signs')).toEqual(['o1-lab', 'o1-vital']);
      await before(signed);
      await t.store.clients.update({ ...(await t.store.clients.get(o.id))!, scopes: ['launch/patient', 'user/Subscription.cruds', 'user/Observation.rs?category=vital-signs'] });
      t.clock.advance(5_001); // client records are cached for five seconds
      return { o, signed };
    }

    test("a registration narrowed since never lifts the patient bound of the grant's filtered user/ scopes on a refresh", async () => {
      const { o, signed } = await narrowedRegistration();
      // Both together: p1's vital signs, in the patient/ form of the registered filtered scope.
      const whole = await refresh(o, signed.refresh_token!);
      expect(whole.status).toBe(200);
      expect(whole.body).toMatchObject({ scope: 'offline_access launch/patient user/Subscription.cruds patient/Observation.rs?category=vital-signs', patient: 'p1' });
      expect(await search(whole.body.access_token, 'Observation')).toEqual(['o1-vital']);
      expect(await status(whole.body.access_token, 'Observation/o2-vital')).toBe(403);
      expect((await refresh(o, signed.refresh_token!, 'user/Observation.rs?category=vital-signs')).status).toBe(400);
      expect((await refresh(o, signed.refresh_token!, 'patient/Observation.rs?category=vital-signs')).status).toBe(200);
    });

    test("a registration narrowed since never lifts the patient bound of a Subscription its grant's token activated", async () => {
      const hook = receiver();
      try {
        await narrowedRegistration(async (signed) => {
          const sub = await fhirClient(t, signed.access_token).post('Subscription', {
            resourceType: 'Subscription', status: 'requested', reason: 'vitals', criteria: 'Observation?category=vital-signs',
            channel: { type: 'rest-hook', endpoint: hook.url },
          });
          expect(sub.status).toBe(201);
        });
        const admin = fhirClient(t, await t.token());
        for (const [id, patient] of [['o2-vital-new', 'p2'], ['o1-vital-new', 'p1']]) {
          await admin.put200({ resourceType: 'Observation', id, status: 'final', category: category('vital-signs'), code: { text: 'x' }, subject: { reference: `Patient/${patient}` } });
        }
        for (let i = 0; i < 50 && (await t.app.subscriptions.runOnce()) > 0; i++);
        // p1's new vital sign notifies; p2's, which the grant's tokens never read, does not.
        expect(hook.got.length).toBe(1);
      } finally {
        hook.stop();
      }
    });

    test("a narrowed token's $everything, GraphQL and bulk export reach what its scopes do, not the grant's", async () => {
      const { refresh_token: rt } = await grant(c, 'offline_access user/*.read', undefined, 'pat');
      const narrowed = await refresh(c, rt!, 'patient/Patient.rs patient/Observation.rs?category=laboratory');
      expect(narrowed.body).toMatchObject({ scope: 'patient/Patient.rs patient/Observation.rs?category=laboratory', patient: 'p1' });
      const token = narrowed.body.access_token;
      const api = fhirClient(t, token);
      expect(await search(token, 'Patient/p1/$everything')).toEqual(['o1-lab', 'p1']);
      const graphql = async (path: string, query: string) => (await (await api.post(path, JSON.stringify({ query }), { 'Content-Type': 'application/json' })).json()) as Json;
      expect(await graphql('$graphql', '{ ObservationList { id } }')).toEqual({ data: { ObservationList: [{ id: 'o1-lab' }] } });
      expect(await graphql('$graphql', '{ ConditionList { id } }')).toMatchObject({ errors: expect.any(Array) });
      expect(((await graphql('$graphql', '{ Observation(id: "o1-vital") { id } }')) as { errors?: unknown[] }).errors).toBeDefined();
      const manifest = await finish(t, token, await kickOff(t, token, '/Patient/$export', { Prefer: 'respond-async' }));
      expect(refs(await download(t, token, manifest.output))).toEqual(['Observation/o1-lab', 'Patient/p1']);
    });

    test('a disabled user or client gets no narrowed token either', async () => {
      const o = await app(['user/*.cruds']);
      const byNurse = await grant(o, 'offline_access user/*.read', undefined, 'nurse');
      const byDoc = await grant(o, 'offline_access user/*.read');
      expect((await refresh(o, byNurse.refresh_token!, 'user/Patient.rs')).status).toBe(200);
      await disableUser(t.store, t.clock, 't1', 'nurse');
      expect(await refresh(o, byNurse.refresh_token!, 'user/Patient.rs')).toEqual({ status: 400, body: expect.objectContaining({ error: 'invalid_grant' }) });
      await disableClient(t.store, t.clock, o.id);
      t.clock.advance(5_001); // client records are cached for five seconds
      expect(await refresh(o, byDoc.refresh_token!, 'user/Patient.rs')).toEqual({ status: 400, body: expect.objectContaining({ error: 'invalid_client' }) }); // the contract: every token error is a 400
    });
  });
}
