/**
 * A guardian's refresh (a RelatedPerson or Person user's chosen patient, src/auth/issue.ts chosenPatientHeld) gets one
 * answer before a reindex and during it, on both databases: before, the picker's rules run as a search (`_has` over the
 * user's record); during, the reindex refuses that search and the same rules are judged by reads
 * (src/auth/patient-picker.ts choosableByReads). Each shape of the guardian's record below is written after the sign-in
 * that chose the patient; a refresh refused before the reindex is refused during it, and one granted stays granted.
 * Guards of behaviour that held (the fifty-second session found no shape on which the two differ).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { createUser } from '../../src/auth/users.ts';
import type { Rebuilding } from '../../src/fhir/reindex.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { storeTargets } from '../helpers/stores.ts';
import { basic, csrfCookie, FORM, hiddenFields, PASSWORD, post, redeem, redirectParams, REDIRECT, signIn } from '../helpers/oauth.ts';

const SCOPE = 'offline_access openid fhirUser launch/patient patient/*.rs';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) describe(`a guardian's refresh before and during a reindex, on ${target.kind}`, () => {
  let t: TestApp;
  let api: FhirClient;
  let c: { id: string; secret: string };
  // Index model 1 named no searches it spares: a reindex from model 0 refuses every search until it ends.
  let rebuilding: Rebuilding | undefined;

  beforeAll(async () => {
    const store = (await target.migrated()).open();
    await store.migrate();
    t = await createTestApp({ store, rebuilding: () => rebuilding });
    api = fhirClient(t, await t.token());
    const client = await createClient(t.store, t.clock, {
      tenant: 't1', name: 'App', grants: ['authorization_code', 'refresh_token'], redirectUris: [REDIRECT], scopes: ['launch/patient', 'patient/*.rs', 'offline_access'],
    });
    c = { id: client.client.clientId, secret: client.clientSecret! };
  }, 60_000);
  afterAll(() => t.close());

  /** Signs `username` in choosing `patient` and returns the refresh token. */
  async function refreshTokenOf(username: string, patient: string): Promise<string> {
    const first = await signIn(t, { clientId: c.id, scope: SCOPE }, username);
    const fields = hiddenFields(await first.text());
    const res = await t.request('/oauth2/authorize', {
      method: 'POST', headers: { ...FORM, Cookie: csrfCookie(first) }, body: new URLSearchParams({ ...fields, action: 'pick', patient }),
    });
    const tokens = await redeem(t, redirectParams(res).get('code')!, c);
    expect(tokens.status).toBe(200);
    return ((await tokens.json()) as { refresh_token: string }).refresh_token;
  }
  const refresh = async (token: string) => {
    const res = await post(t, { grant_type: 'refresh_token', refresh_token: token }, { Authorization: basic(c.id, c.secret) });
    return res.status === 200 ? 'granted' : ((await res.json()) as { error: string }).error;
  };
  /** A refresh's answer now, then while a reindex runs (every search refused: the reads' fallback judges). */
  const beforeAndDuring = async (token: string): Promise<[string, string]> => {
    const before = await refresh(token);
    rebuilding = { from: 0, examined: 3 };
    try {
      return [before, await refresh(token)];
    } finally {
      rebuilding = undefined;
    }
  };

  const base = () => t.fhir();
  // The reference the guardian's record holds after the sign-in, and whether the user may still have p-<case> in context.
  const shapes: [name: string, reference: (id: string) => Json, held: boolean][] = [
    ['relative', (id) => ({ reference: `Patient/${id}` }), true],
    ['this tenant\'s absolute URL', (id) => ({ reference: `${base()}/Patient/${id}` }), true],
    ['a version of it', (id) => ({ reference: `Patient/${id}/_history/1` }), true],
    ['another server\'s URL', (id) => ({ reference: `http://other.org/fhir/Patient/${id}` }), false],
    ['another tenant\'s URL', (id) => ({ reference: `${base().replace('/t1/', '/t2/')}/Patient/${id}` }), false],
    ['the id in another case', (id) => ({ reference: `Patient/${id.toUpperCase()}` }), false],
    ['an identifier only', (id) => ({ type: 'Patient', identifier: { value: id } }), false],
    ['another patient', () => ({ reference: 'Patient/p-none' }), false],
  ];

  for (const [name, reference, held] of shapes) test(`its record names ${name}: ${held ? 'granted' : 'invalid_grant'} before and during`, async () => {
    const id = `p-${name.replace(/[^a-z]/g, '')}`;
    await api.put200({ resourceType: 'Patient', id, name: [{ family: 'Smith' }] });
    await api.put200({ resourceType: 'Patient', id: id.toUpperCase(), name: [{ family: 'Smith' }] });
    await api.put200({ resourceType: 'RelatedPerson', id: `rp-${id}`, patient: { reference: `Patient/${id}` } });
    await createUser(t.store, t.clock, { tenant: 't1', username: `rel-${id}`, password: PASSWORD, fhirUser: `RelatedPerson/rp-${id}` });
    const token = await refreshTokenOf(`rel-${id}`, id);
    await api.put200({ resourceType: 'RelatedPerson', id: `rp-${id}`, patient: reference(id) });
    const [before, during] = await beforeAndDuring(token);
    expect(`${before} ${during}`).toBe(held ? 'granted granted' : 'invalid_grant invalid_grant');
  });

  test('the patient or the guardian\'s record deleted, or a Person user\'s link moved: invalid_grant before and during', async () => {
    const deleteOf = async (path: string) => expect((await api.del(path)).status).toBe(200);
    const cases: [string, string, () => Promise<unknown>][] = [
      ['RelatedPerson', 'p-gone', () => deleteOf('Patient/p-gone')],
      ['RelatedPerson', 'p-rp-gone', () => deleteOf('RelatedPerson/rp-p-rp-gone')],
      ['Person', 'p-moved', () => api.put200({ resourceType: 'Person', id: 'rp-p-moved', link: [{ target: { reference: 'Patient/p-none' } }] })],
    ];
    for (const [type, id, change] of cases) {
      await api.put200({ resourceType: 'Patient', id, name: [{ family: 'Smith' }] });
      await api.put200(type === 'Person'
        ? { resourceType: 'Person', id: `rp-${id}`, link: [{ target: { reference: `Patient/${id}` } }] }
        : { resourceType: 'RelatedPerson', id: `rp-${id}`, patient: { reference: `Patient/${id}` } });
      await createUser(t.store, t.clock, { tenant: 't1', username: `u-${id}`, password: PASSWORD, fhirUser: `${type}/rp-${id}` });
      const token = await refreshTokenOf(`u-${id}`, id);
      expect(await refresh(token)).toBe('granted');
      await change();
      const [before, during] = await beforeAndDuring(token);
      expect(`${id}: ${before} ${during}`).toBe(`${id}: invalid_grant invalid_grant`);
    }
  });
});
