import { afterAll, describe, expect, test } from 'bun:test';
import { createTokenVerifier } from '../../src/auth/tokens.ts';
import { fhirAdmission, type GateRequest } from '../../src/http/middleware/fhir-gate.ts';
import { createTestApp } from '../helpers/app.ts';
import { craftToken } from '../helpers/fhir.ts';

const t = await createTestApp();
afterAll(() => t.close());

const request = (token: string, tenant = 't1', rest = '/Patient/1'): GateRequest => ({
  tenant, rest, format: null, accept: 'application/fhir+json', authorization: `Bearer ${token}`,
});

describe('FHIR admission: one function, answering at once in the steady state', () => {
  test('the first request of a tenant and token is answered later, the next ones at once', async () => {
    const admit = fhirAdmission({ store: t.store, verify: createTokenVerifier(t.keys, t.clock, t.config.baseUrl) });
    const token = await craftToken(t, 'system/*.read');
    const first = admit(request(token));
    expect(first).toBeInstanceOf(Promise);
    expect((await first).tenant).toBe('t1');
    const warm = admit(request(token));
    expect(warm).not.toBeInstanceOf(Promise); // the performance property: no promise, nothing awaited
    expect(warm).toMatchObject({ tenant: 't1', bearer: { token: { tenant: 't1' } } });
  });

  test('refusals: an unknown tenant later (it is read), a token of another tenant at once once verified', async () => {
    const admit = fhirAdmission({ store: t.store, verify: createTokenVerifier(t.keys, t.clock, t.config.baseUrl) });
    await expect(admit(request('x', 'nowhere'))).rejects.toThrow("Tenant 'nowhere' does not exist");
    const other = await craftToken(t, 'system/*.read', { tenant: 't2' });
    await expect(admit(request(other))).rejects.toThrow('not valid for this tenant');
    expect(() => admit(request(other))).toThrow('not valid for this tenant');
    expect(() => admit({ ...request(other), authorization: null })).toThrow('An access token is required');
  });

  test('public paths need no token', async () => {
    const admit = fhirAdmission({ store: t.store, verify: createTokenVerifier(t.keys, t.clock, t.config.baseUrl) });
    expect(await admit({ ...request(''), rest: '/metadata', authorization: null })).toEqual({ tenant: 't1', bearer: null });
    expect(admit({ ...request(''), rest: '/metadata', authorization: null })).toEqual({ tenant: 't1', bearer: null });
  });
});
