/**
 * A guardian's patient choice through the login page (a Person user whose record links several children), the same on
 * SQLite and PostgreSQL: the picker lists the children its record names, in the same order (family then given, folded as
 * the string search folds them), and a name search finds the same ones. Guards of behaviour that held (fifty-second session).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { createUser } from '../../src/auth/users.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { fhirClient } from '../helpers/fhir.ts';
import { storeTargets } from '../helpers/stores.ts';
import { csrfCookie, FORM, hiddenFields, PASSWORD, REDIRECT, signIn } from '../helpers/oauth.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const FAMILIES = ['adams', 'Baker', 'Émile', 'Ebert', 'baker', 'Zed', "O'Neil", 'van Dam', 'Æsir', 'ß', 'Ss'];
const listed = (html: string) => [...html.matchAll(/name="patient" value="([^"]*)"/g)].map((m) => m[1]).join(' ');

for (const target of targets) describe(`a guardian's patient picker on ${target.kind}`, () => {
  let t: TestApp;
  beforeAll(async () => {
    const store = (await target.migrated()).open();
    await store.migrate();
    t = await createTestApp({ store });
  }, 60_000);
  afterAll(() => t.close());

  test('lists the children its record names in one order, and a name search finds the same ones', async () => {
    const api = fhirClient(t, await t.token());
    for (const [i, family] of FAMILIES.entries()) await api.put200({ resourceType: 'Patient', id: `c${i}`, name: [{ family, given: [i % 2 ? 'ann' : 'Bob'] }] });
    await api.put200({ resourceType: 'Patient', id: 'stranger', name: [{ family: 'Baker', given: ['Cy'] }] });
    await api.put200({ resourceType: 'Person', id: 'g', link: FAMILIES.map((_, i) => ({ target: { reference: `Patient/c${i}` } })) });
    const client = await createClient(t.store, t.clock, { tenant: 't1', name: 'App', grants: ['authorization_code'], redirectUris: [REDIRECT], scopes: ['launch/patient', 'patient/*.rs'] });
    await createUser(t.store, t.clock, { tenant: 't1', username: 'g', password: PASSWORD, fhirUser: 'Person/g' });
    const first = await signIn(t, { clientId: client.client.clientId, scope: 'openid launch/patient patient/*.rs' }, 'g');
    const html = await first.text();
    // (`Æsir` folds to `aesir`, as the string search folds it since index model 22.)
    expect(listed(html)).toBe('c0 c8 c1 c4 c3 c2 c6 c9 c10 c7 c5');
    const found: Record<string, string> = {};
    for (const q of ['baker', 'emile', 'ss', "o'neil", 'zed bob']) {
      const res = await t.request('/oauth2/authorize', {
        method: 'POST', headers: { ...FORM, Cookie: csrfCookie(first) }, body: new URLSearchParams({ ...hiddenFields(html), action: 'search', patient_name: q }),
      });
      expect(res.status).toBe(200);
      found[q] = listed(await res.text());
    }
    expect(found).toEqual({ baker: 'c1 c4', emile: 'c2', ss: 'c9 c10', "o'neil": 'c6', 'zed bob': '' });
  });
});
