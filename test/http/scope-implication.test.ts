/**
 * SMART scopes v1 and v2 are equivalent (`.read` = `.rs`, `.write` = `.cud`, `.*` = `.cruds`), and a
 * requested scope that a registered one implies is granted as requested: a bulk client registered with
 * `system/*.read` asking for `system/*.rs`, an app registered with `patient/*.read` asking for
 * `patient/Observation.read`.
 */
import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { decodeJwt } from 'jose';
import { createClient } from '../../src/auth/admin.ts';
import { isImpliedBy, patientBoundsLifted, scopesNotImplied } from '../../src/auth/scopes.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { basic, getCode, post, redeem, testUser, userClient } from '../helpers/oauth.ts';

describe('which registered scopes imply a requested one', () => {
  test.each([
    ['system/*.rs', ['system/*.read'], true],
    ['system/Observation.rs', ['system/*.read'], true],
    ['system/Observation.r', ['system/*.read'], true],
    ['system/*.read', ['system/*.rs'], true],
    ['system/*.cruds', ['system/*.*'], true],
    ['system/Patient.cud', ['system/*.write'], true],
    ['system/*.write', ['system/*.cud'], true],
    ['system/*.cruds', ['system/*.read'], false],
    ['system/*.rs', ['system/Observation.rs'], false],
    ['system/Observation.rs', ['user/*.read'], false],
    ['patient/Observation.read', ['patient/*.read'], true],
    ['patient/Observation.read', ['user/*.read'], false],
    ['system/Observation.sr', ['system/*.*'], false],
    ['system/Observation.x', ['system/*.*'], false],
    ['system/Observation.rs?category=laboratory', ['system/*.*'], true],
    ['system/Observation.rs?category=laboratory', ['system/Observation.rs?category=laboratory'], true],
    ['system/Observation.rs', ['system/Observation.rs?category=laboratory'], false],
    ['system/Observation.rs?category=vital-signs', ['system/Observation.rs?category=laboratory'], false],
    // A registered filter implies itself by meaning: its pairs in any order, repeated, percent-encoded otherwise.
    ['system/Observation.rs?status=final&category=laboratory', ['system/Observation.rs?category=laboratory&status=final'], true],
    ['system/Observation.rs?category=laboratory&category=laboratory', ['system/Observation.rs?category=laboratory'], true],
    ['system/Observation.rs?category=labora%74ory', ['system/Observation.rs?category=laboratory'], true],
    ['system/Observation.r?category=laboratory', ['system/Observation.rs?category=laboratory'], true],
    ['system/Observation.rs?category=laboratory&status=final', ['system/Observation.rs?category=laboratory'], false],
    ['system/Observation.rs?category=laboratory', ['system/Observation.rs?category=laboratory&status=final'], false],
    ['system/Observation.rsu?category=laboratory', ['system/Observation.rs?category=laboratory'], false],
    ['user/Observation.rs?category=laboratory', ['system/Observation.rs?category=laboratory'], false],
    // A filter reading other resources (a chain, `_has`) is applied unbounded: only where the registration searches them whole.
    ['system/Observation.rs?subject:Patient.gender=female', ['system/*.*'], true],
    ['system/Observation.rs?subject:Patient.gender=female', ['system/Observation.rs', 'system/Patient.rs'], true],
    ['system/Observation.rs?subject:Patient.gender=female', ['system/Observation.rs', 'system/Patient.r'], false],
    ['system/Observation.rs?subject:Patient.gender=female', ['system/Observation.rs', 'system/Patient.rs?gender=male'], false],
    ['system/Observation.rs?subject:Patient.gender=female', ['system/Observation.rs', 'patient/Patient.rs'], false],
    ['system/Observation.rs?_has:Provenance:target:agent=Practitioner/x', ['system/Observation.rs'], false],
    ['system/Observation.rs?subject:Patient.gender=female', ['system/Observation.rs?subject:Patient.gender=female'], true],
    ['system/Observation.rs?banana=1', ['system/*.*'], false],
    ['system/Observation.read?category=laboratory', ['system/*.*'], false],
    ['system/*.rs?category=laboratory', ['system/*.*'], false],
    ['system/Banana.rs', ['system/*.*'], false],
    ['custom', ['custom'], true],
    ['custom', ['system/*.*'], false],
  ] as const)('%s from %j: %p', (requested, registered, expected) => {
    expect(isImpliedBy(requested, registered)).toBe(expected);
  });
});

describe('which scopes a grant implies, for a refresh that narrows it (by meaning)', () => {
  test.each([
    ['patient/Patient.read', ['patient/*.read'], false, true],
    ['patient/*.rs', ['patient/*.read'], false, true],
    ['patient/Observation.rs?category=laboratory', ['patient/*.read'], false, true],
    ['patient/Observation.cruds', ['patient/*.read', 'patient/Observation.write'], false, true],
    ['patient/Observation.cruds', ['patient/*.read', 'patient/Patient.write'], false, false],
    ['patient/Observation.rs', ['patient/Observation.r', 'patient/Observation.s'], false, true],
    ['user/Observation.rs?subject=Patient/p1&category=laboratory', ['user/Observation.rs?category=laboratory'], false, true],
    ['user/Observation.rs?category=vital-signs', ['user/Observation.rs?category=laboratory'], false, false],
    ['user/Observation.rs', ['user/Observation.rs?category=laboratory'], false, false],
    ['user/Observation.rs?category=laboratory', ['user/Observation.r?category=laboratory', 'user/Observation.s'], false, true],
    ['patient/Patient.rs', ['user/*.read'], true, true],
    ['patient/Patient.rs', ['user/*.read'], false, false],
    ['user/Patient.rs', ['patient/*.read'], true, false],
    ['user/Patient.rs', ['system/*.read'], false, false],
    ['patient/*.cruds', ['patient/*.read'], true, false],
    ['openid', ['openid'], false, true],
    ['profile', ['openid'], false, false],
    ['launch/patient', ['patient/*.read'], true, false],
    ['custom', ['custom'], false, true],
  ] as const)('%s from %j (a patient in context: %p): %p', (requested, granted, withPatient, expected) => {
    expect(scopesNotImplied([requested], granted, withPatient)).toEqual(expected ? [] : [requested]);
  });
});

describe('which scopes asked on refresh would lift the patient bound the grant keeps', () => {
  const grant = ['patient/Observation.rs', 'user/Observation.rs?category=vital-signs'];
  test.each([
    [['user/Observation.rs?category=vital-signs'], grant, ['user/Observation.rs?category=vital-signs']],
    [['user/Observation.s?category=vital-signs'], grant, ['user/Observation.s?category=vital-signs']],
    [['patient/Observation.rs', 'user/Observation.rs?category=vital-signs'], grant, []],
    [['patient/Observation.rs?category=vital-signs'], grant, []],
    [['patient/Observation.r', 'user/Observation.rs?category=vital-signs'], grant, ['user/Observation.rs?category=vital-signs']],
    // A wildcard reaches the types the patient/ scope names, and those no scope names.
    [['user/*.rs'], ['patient/Observation.rs', 'user/Observation.rs?category=x'], ['user/*.rs']],
    [['user/*.rs'], ['patient/*.rs', 'user/Condition.rs'], ['user/*.rs']],
    [['user/*.rs'], ['patient/*.rs', 'user/*.rs'], []],
    [['user/Observation.rs?category=x'], ['patient/*.rs', 'user/*.rs?category=x'], ['user/Observation.rs?category=x']],
    // An unfiltered user/ scope in the grant binds nothing (it lifts the bound itself): nothing to keep.
    [['user/Observation.rs?category=vital-signs'], ['patient/Observation.rs', 'user/Observation.rs'], []],
    [['user/Condition.rs?category=x'], ['patient/Observation.rs', 'user/Condition.rs?category=x'], []],
  ] as const)('%j from %j: %j', (requested, granted, expected) => {
    expect(patientBoundsLifted(requested, granted)).toEqual([...expected]);
  });
});

let t: TestApp;
beforeEach(async () => {
  t = await createTestApp();
});
afterEach(() => t.close());

async function clientCredentials(registered: string[], scope: string) {
  const c = await createClient(t.store, t.clock, { tenant: 't1', scopes: registered });
  return post(t, { grant_type: 'client_credentials', scope }, { Authorization: basic(c.client.clientId, c.clientSecret!) });
}

describe('client_credentials', () => {
  test('a system/*.read client asking for v2 scopes gets them as requested, and they work', async () => {
    const res = await clientCredentials(['system/*.read'], 'system/*.rs system/Observation.rs');
    expect(res.status).toBe(200);
    const body = (await res.json()) as { access_token: string; scope: string };
    expect(body.scope).toBe('system/*.rs system/Observation.rs');
    expect(decodeJwt(body.access_token).scope).toBe('system/*.rs system/Observation.rs');
    expect((await t.request(`${t.fhir()}/Observation`, fhirInit(body.access_token))).status).toBe(200);
    const write = await t.request(`${t.fhir()}/Observation`, fhirInit(body.access_token, 'POST', { resourceType: 'Observation', status: 'final', code: { text: 'x' } }));
    expect(write.status).toBe(403);
  });

  test('a bulk export kick-off with a v2 scope granted from a system/*.* registration', async () => {
    const res = await clientCredentials(['system/*.*'], 'system/*.rs');
    const { access_token } = (await res.json()) as { access_token: string };
    const kick = await t.request(`${t.fhir()}/$export`, fhirInit(access_token, 'GET', undefined, { Prefer: 'respond-async' }));
    expect(kick.status).toBe(202);
  });

  test('a scope the registration does not imply is not granted', async () => {
    const res = await clientCredentials(['system/*.read'], 'system/*.cruds');
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toBe('invalid_request');
    const some = await clientCredentials(['system/*.read'], 'system/*.cruds system/Patient.rs');
    expect(((await some.json()) as { scope: string }).scope).toBe('system/Patient.rs');
  });
});

describe('authorization_code', () => {
  test('a patient/*.read app asking for patient/Observation.read gets it, and reads the patient\'s Observations', async () => {
    await testUser(t);
    const app = await userClient(t);
    const admin = await t.token();
    await t.request(`${t.fhir()}/Patient/p1`, fhirInit(admin, 'PUT', { resourceType: 'Patient', id: 'p1' }));
    await t.request(`${t.fhir()}/Observation/o1`, fhirInit(admin, 'PUT', {
      resourceType: 'Observation', id: 'o1', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/p1' },
    }));
    const code = await getCode(t, { clientId: app.id, scope: 'openid launch/patient patient/Observation.read' });
    const tokens = (await (await redeem(t, code, app)).json()) as { access_token: string; scope: string; patient: string };
    expect(tokens.scope).toBe('openid launch/patient patient/Observation.read');
    expect(tokens.patient).toBe('p1');
    expect((await t.request(`${t.fhir()}/Observation/o1`, fhirInit(tokens.access_token))).status).toBe(200);
    expect((await t.request(`${t.fhir()}/Patient/p1`, fhirInit(tokens.access_token))).status).toBe(403);
  });
});
