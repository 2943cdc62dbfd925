/**
 * Tenant isolation, attacked as a hostile tenant would: what one tenant writes, holds or is refused never
 * shows in, or changes, what another reads, through the data paths (references, includes, chains, `_has`,
 * conditional references, GraphQL, `$document`, history), the per-tenant parts of shared caches
 * (terminology, profiles, the CapabilityStatement), Subscriptions, bulk export and the audit trail.
 * On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { signAccessToken } from '../../src/auth/tokens.ts';
import type { Store } from '../../src/store/types.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import type { Json } from '../helpers/fhir.ts';

const T1 = 'http://cinder.test/tenants/t1/fhir/R4';

type Call = (method: string, path: string, body?: unknown, headers?: Record<string, string>) => Promise<Response>;

/** Two tenants on one app: `a` calls t1 with its admin's token, `b` calls t2 with a `system/*.*` token of t2's own client. */
async function twoTenants(store: Store, env: Record<string, string> = {}) {
  const t = await createTestApp({ store, env });
  const tokenA = await t.token();
  const tokenB = await t.tokenFor('t2', ['system/*.*']);
  const call = (tenant: string, token: string): Call => async (method, path, body, headers = {}) =>
    t.request(`${t.fhir(tenant)}/${path}`, fhirInit(token, method, body, headers));
  return { t, tokenA, tokenB, a: call('t1', tokenA), b: call('t2', tokenB) };
}

const entries = (bundle: Json): Json[] => (bundle.entry ?? []).map((e: Json) => e.resource);

await eachStore((kind, fresh) => {
  describe(`tenant isolation: the audit trail (${kind})`, () => {
    let t: TestApp;
    let b: Call;
    beforeAll(async () => {
      ({ t, b } = await twoTenants(await fresh(), { CINDER_AUDIT: 'on' }));
    });
    afterAll(() => t.close());

    test("a request refused for another tenant's token names none of that tenant's client, user or patient in this tenant's AuditEvents", async () => {
      expect((await b('PUT', 'Patient/p1', { resourceType: 'Patient', id: 'p1' })).status).toBe(201);
      // A SMART app's token of t1, its user a Practitioner and its patient t1's Patient/p1, sent to t2 (a misdirected app, or a probe).
      const foreign = (await signAccessToken(t.keys, t.clock, t.config.baseUrl, {
        sub: 'user-of-t1', aud: T1, client_id: 'app-of-t1', scope: 'launch/patient patient/*.rs', tenant: 't1', patient: 'p1', fhirUser: `${T1}/Practitioner/doc`,
      }, 300)).token;
      const refused = await t.request(`${t.fhir('t2')}/Observation?code=1234-5`, fhirInit(foreign));
      expect(refused.status).toBe(403);
      await t.app.audit!.flush();
      const bundle = (await (await b('GET', 'AuditEvent?outcome=4&_count=100')).json()) as Json;
      const [event, ...more] = entries(bundle).filter((e) => e.subtype?.[0]?.code === 'search');
      expect(more).toEqual([]);
      expect(event.outcomeDesc).toBe('HTTP 403');
      const text = JSON.stringify(event);
      for (const leaked of ['app-of-t1', 'user-of-t1', 'Practitioner/doc', '/tenants/t1/']) expect(text).not.toContain(leaked);
      // t2's Patient/p1 was neither read nor asked for: the foreign token's patient is not this tenant's.
      expect((event.entity ?? []).filter((x: Json) => x.role?.code === '1')).toEqual([]);
      expect(event.agent.find((x: Json) => x.requestor).who).toEqual({ display: 'unauthenticated' });
      const aboutP1 = entries((await (await b('GET', 'AuditEvent?patient=p1&_count=100')).json()) as Json);
      expect(aboutP1.map((e) => e.subtype[0].code)).toEqual(['update']);
    });
  });
});
