/**
 * Tenant isolation, attacked as a hostile tenant would: what one tenant writes, holds or is refused never
 * shows in, or changes, what another reads, through the data paths (references, includes, chains, `_has`,
 * conditional references, GraphQL, `$document`, history), the per-tenant parts of shared caches and
 * process state (terminology, profiles, the CapabilityStatement, the regex guard), Subscriptions, bulk
 * export, tokens at the authorization server and the audit trail. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { signAccessToken } from '../../src/auth/tokens.ts';
import type { Store } from '../../src/store/types.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import type { Json } from '../helpers/fhir.ts';
import { basic, getCode, post, REDIRECT, redeem, signIn, testUser, userClient } from '../helpers/oauth.ts';
import { createClient } from '../../src/auth/admin.ts';

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

  describe(`tenant isolation: the regex guard (${kind})`, () => {
    let t: TestApp;
    let a: Call;
    let b: Call;
    beforeAll(async () => {
      ({ t, a, b } = await twoTenants(await fresh()));
    });
    afterAll(() => t.close());

    // A lookahead: no linear-time form, so a refused pattern has no other answer (src/regex-guard.ts).
    const PATTERN = '^(?!z)(a+)+$';
    const expand = (system: string) => ({
      resourceType: 'Parameters',
      parameter: [{ name: 'valueSet', resource: { resourceType: 'ValueSet', status: 'active', compose: { include: [{ system, filter: [{ property: 'code', op: 'regex', value: PATTERN }] }] } } }],
    });
    const codeSystem = (url: string, codes: string[]) => ({ resourceType: 'CodeSystem', id: 'cs', url, status: 'active', content: 'complete', concept: codes.map((code) => ({ code })) });
    const codes = (vs: Json) => (vs.expansion.contains ?? []).map((c: Json) => c.code);

    test("a pattern one tenant proved too costly on its own codes is still run for another tenant's", async () => {
      expect((await b('PUT', 'CodeSystem/cs', codeSystem('http://example.org/b', ['aaa', 'zaa']))).status).toBe(201);
      const before = await b('POST', 'ValueSet/$expand', expand('http://example.org/b'));
      expect(before.status).toBe(200);
      expect(codes((await before.json()) as Json)).toEqual(['aaa']);
      // t1's codes make the pattern backtrack without end: refused to t1.
      expect((await a('PUT', 'CodeSystem/cs', codeSystem('http://example.org/a', [`${'a'.repeat(40)}!`, `${'a'.repeat(41)}!`]))).status).toBe(201);
      const costly = await a('POST', 'ValueSet/$expand', expand('http://example.org/a'));
      expect(costly.status).toBe(400);
      expect(((await costly.json()) as Json).issue[0].code).toBe('too-costly');
      // t2's expansion is answered as before, and again.
      for (let i = 0; i < 2; i++) {
        const after = await b('POST', 'ValueSet/$expand', expand('http://example.org/b'));
        expect(after.status).toBe(200);
        expect(codes((await after.json()) as Json)).toEqual(['aaa']);
      }
    }, 30_000);

    test('so is one refused through the direct route of ValueSet/$validate-code', async () => {
      const pattern = '^(?!y)(b+)+$';
      const validate = (system: string, code: string) => ({
        resourceType: 'Parameters',
        parameter: [
          { name: 'valueSet', resource: { resourceType: 'ValueSet', status: 'active', compose: { include: [{ system, filter: [{ property: 'code', op: 'regex', value: pattern }] }] } } },
          { name: 'system', valueUri: system }, { name: 'code', valueCode: code },
        ],
      });
      const result = async (res: Response) => ((await res.json()) as Json).parameter.find((p: Json) => p.name === 'result')?.valueBoolean;
      expect((await b('PUT', 'CodeSystem/hot', { ...codeSystem('http://example.org/hot-b', ['bbb']), id: 'hot' })).status).toBe(201);
      expect((await a('PUT', 'CodeSystem/hot', { ...codeSystem('http://example.org/hot-a', [`${'b'.repeat(40)}!`]), id: 'hot' })).status).toBe(201);
      const answered = t.app.hotRoutes!.answered.validate;
      // t1's code backtracks without end: not checked (result false).
      expect(await result(await a('POST', 'ValueSet/$validate-code', validate('http://example.org/hot-a', `${'b'.repeat(40)}!`)))).toBe(false);
      expect(await result(await b('POST', 'ValueSet/$validate-code', validate('http://example.org/hot-b', 'bbb')))).toBe(true);
      expect(t.app.hotRoutes!.answered.validate).toBe(answered + 2);
    }, 30_000);

    test("so is one refused completing a token's scope filter at POST /oauth2/launch (outside the FHIR API)", async () => {
      const pattern = '^(?!x)(c+)+$';
      const VS = 'http://example.org/vs/launch';
      const valueSet = (system: string) => ({
        resourceType: 'ValueSet', id: 'launch', url: VS, status: 'active', compose: { include: [{ system, filter: [{ property: 'code', op: 'regex', value: pattern }] }] },
      });
      expect((await a('PUT', 'CodeSystem/launch', { ...codeSystem('http://example.org/launch-a', [`${'c'.repeat(40)}!`]), id: 'launch' })).status).toBe(201);
      expect((await a('PUT', 'ValueSet/launch', valueSet('http://example.org/launch-a'))).status).toBe(201);
      expect((await b('PUT', 'CodeSystem/launch', { ...codeSystem('http://example.org/launch-b', ['ccc']), id: 'launch' })).status).toBe(201);
      expect((await b('PUT', 'ValueSet/launch', valueSet('http://example.org/launch-b'))).status).toBe(201);
      const observation = (system: string, code: string) => ({ resourceType: 'Observation', id: 'ol', status: 'final', code: { coding: [{ system, code }] }, subject: { reference: 'Patient/pl' } });
      for (const [call, system, code] of [[a, 'http://example.org/launch-a', `${'c'.repeat(40)}!`], [b, 'http://example.org/launch-b', 'ccc']] as const) {
        expect((await call('PUT', 'Patient/pl', { resourceType: 'Patient', id: 'pl' })).status).toBe(201);
        expect((await call('PUT', 'Observation/ol', observation(system, code))).status).toBe(201);
      }
      // An EHR's token of each tenant: Patients, and the Observations whose code is in the tenant's ValueSet.
      const scope = `system/Patient.rs system/Observation.rs?code:in=${encodeURIComponent(VS)}`;
      const ehrToken = async (tenant: string) => (await signAccessToken(t.keys, t.clock, t.config.baseUrl, {
        sub: `ehr-${tenant}`, aud: t.fhir(tenant), client_id: `ehr-${tenant}`, scope, tenant,
      }, 300)).token;
      // The launch reads the Observation in context as the token may: only if the filter was completed.
      const launch = async (tenant: string) => t.request('/oauth2/launch', {
        method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${await ehrToken(tenant)}` },
        body: JSON.stringify({ patient: 'pl', fhirContext: [{ reference: 'Observation/ol' }] }),
      });
      // t1's code makes the pattern backtrack without end: t1's filter cannot be completed, and grants nothing.
      expect((await launch('t1')).status).toBe(403);
      // t2's is completed as before, and again.
      for (let i = 0; i < 2; i++) {
        const res = await launch('t2');
        expect(res.status, await res.clone().text()).toBe(201);
      }
    }, 30_000);
  });

  describe(`tenant isolation: data paths (${kind})`, () => {
    let t: TestApp;
    let a: Call;
    let b: Call;
    const ids = async (res: Response) => {
      expect(res.status).toBe(200);
      return entries((await res.json()) as Json).map((r) => `${r.resourceType}/${r.id}`).sort();
    };
    beforeAll(async () => {
      ({ t, a, b } = await twoTenants(await fresh()));
      for (const r of [
        { resourceType: 'Patient', id: 'pa', identifier: [{ system: 'urn:mrn', value: 'secret' }], name: [{ family: 'Alpha' }] },
        { resourceType: 'Observation', id: 'oa', status: 'final', code: { coding: [{ system: 'urn:codes', code: 'x' }] }, subject: { reference: 'Patient/pa' } },
        { resourceType: 'Questionnaire', id: 'q', url: 'urn:questionnaire', status: 'active', title: 'Hidden', item: [{ linkId: '1', type: 'string', required: true }] },
        { resourceType: 'Binary', id: 'bin', contentType: 'text/plain', data: btoa('secret') },
      ]) expect((await a('PUT', `${r.resourceType}/${r.id}`, r)).status).toBe(201);
      // t2 points at t1's resources by relative and absolute references, and by canonical.
      for (const r of [
        { resourceType: 'Observation', id: 'rel', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/pa' } },
        { resourceType: 'Observation', id: 'abs', status: 'final', code: { text: 'x' }, subject: { reference: `${T1}/Patient/pa` } },
        { resourceType: 'QuestionnaireResponse', id: 'qr', status: 'completed', questionnaire: 'urn:questionnaire', item: [{ linkId: 'not-in-t1s' }] },
        { resourceType: 'Composition', id: 'doc', status: 'final', type: { text: 'x' }, date: '2024-01-01', title: 'd', author: [{ reference: `${T1}/Patient/pa` }] },
      ]) expect((await b('PUT', `${r.resourceType}/${r.id}`, r)).status).toBe(201);
    });
    afterAll(() => t.close());

    test("reads, searches, history and operations of one tenant never find another's resources", async () => {
      for (const path of ['Patient/pa', 'Patient/pa/_history/1', 'Patient/pa/$everything', 'Binary/bin', 'Patient/pa/$meta', 'Questionnaire/q']) {
        expect((await b('GET', path)).status).toBe(404);
      }
      expect(await ids(await b('GET', 'Patient?identifier=urn:mrn|secret'))).toEqual([]);
      expect(await ids(await b('GET', 'Patient?_has:Observation:subject:code=urn:codes|x'))).toEqual([]);
      expect(await ids(await b('GET', 'Observation?subject:Patient.name=Alpha'))).toEqual([]);
      expect(await ids(await b('GET', 'Observation?patient.identifier=urn:mrn|secret'))).toEqual([]);
      expect(await ids(await b('GET', 'Observation?_include=Observation:subject'))).toEqual(['Observation/abs', 'Observation/rel']);
      expect(await ids(await b('GET', 'QuestionnaireResponse?_include=QuestionnaireResponse:questionnaire'))).toEqual(['QuestionnaireResponse/qr']);
      expect(await ids(await b('GET', 'Patient/pa/Observation'))).toEqual(['Observation/rel']);
      expect(await ids(await b('GET', 'Questionnaire?_content=Hidden'))).toEqual([]);
      const history = (await (await b('GET', '_history?_count=100')).json()) as Json;
      expect(entries(history).every((r) => r === undefined || ['abs', 'rel', 'qr', 'doc'].includes(r.id))).toBe(true);
      const graphql = (await (await b('POST', '$graphql', { query: '{ Observation(id: "abs") { subject { resource { ... on Patient { id } } } } PatientList { id } }' }, { 'Content-Type': 'application/json' })).json()) as Json;
      expect(graphql.data).toEqual({ Observation: { subject: { resource: null } }, PatientList: [] });
      // $document does not fetch the author another tenant's base names.
      expect((await b('GET', 'Composition/doc/$document')).status).toBe(422);
    });

    test("conditional references, creates and updates of one tenant match nothing of another's", async () => {
      const txn = await b('POST', '', { resourceType: 'Bundle', type: 'transaction', entry: [
        { resource: { resourceType: 'Observation', status: 'final', code: { text: 'y' }, subject: { reference: 'Patient?identifier=urn:mrn|secret' } }, request: { method: 'POST', url: 'Observation' } },
      ] });
      expect(txn.status).toBe(412);
      // Each creates a Patient its condition finds (a conditional create must), in t2: the DELETE between them removes the first.
      const secret = [{ system: 'urn:mrn', value: 'secret' }];
      const created = await b('POST', 'Patient', { resourceType: 'Patient', identifier: secret, name: [{ family: 'Beta' }] }, { 'If-None-Exist': 'identifier=urn:mrn|secret' });
      expect(created.status).toBe(201);
      expect((await b('DELETE', 'Patient?identifier=urn:mrn|secret')).status).toBeLessThan(300);
      const updated = await b('PUT', 'Patient?identifier=urn:mrn|secret', { resourceType: 'Patient', identifier: secret, name: [{ family: 'Gamma' }] });
      expect(updated.status).toBe(201);
      expect((await b('DELETE', 'Patient?identifier=urn:mrn|secret')).status).toBeLessThan(300);
      // t1's Patient is untouched.
      const pa = (await (await a('GET', 'Patient/pa')).json()) as Json;
      expect([pa.meta.versionId, pa.name[0].family]).toEqual(['1', 'Alpha']);
      // A transaction entry naming t1's base is no URL of t2's.
      const foreign = await b('POST', '', { resourceType: 'Bundle', type: 'transaction', entry: [
        { fullUrl: `${T1}/Patient/pa`, resource: { resourceType: 'Patient', id: 'pa', name: [{ family: 'Hijack' }] }, request: { method: 'PUT', url: `${T1}/Patient/pa` } },
      ] });
      expect(foreign.status).toBe(400);
      expect(((await (await a('GET', 'Patient/pa')).json()) as Json).name[0].family).toBe('Alpha');
    });

    test("referential integrity checks a reference in the writer's tenant only", async () => {
      const strict = await twoTenants(await fresh(), { CINDER_REFERENTIAL_INTEGRITY: 'on' });
      try {
        expect((await strict.a('PUT', 'Patient/pa', { resourceType: 'Patient', id: 'pa' })).status).toBe(201);
        const refused = await strict.b('POST', 'Observation', { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/pa' } });
        expect(refused.status).toBe(422);
        expect(((await refused.json()) as Json).issue[0].expression).toEqual(['Observation.subject.reference']);
      } finally {
        await strict.t.close();
      }
    });
  });

  describe(`tenant isolation: terminology and profiles of one url in two tenants (${kind})`, () => {
    let t: TestApp;
    let a: Call;
    let b: Call;
    const URL = 'http://example.org/shared';
    const param = (body: Json, name: string) => body.parameter?.find((p: Json) => p.name === name);
    /** A profile of Patient whose snapshot asks for `element`. */
    const profile = (id: string, element: string) => {
      const el = (path: string, min: number) => ({ id: path, path, short: path, definition: path, min, max: '*', base: { path, min: 0, max: '*' }, isModifier: false, isSummary: false });
      return {
        resourceType: 'StructureDefinition', id, url: `${URL}/profile`, name: 'Shared', status: 'active', kind: 'resource', abstract: false, type: 'Patient',
        baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Patient', derivation: 'constraint', fhirVersion: '4.0.1',
        snapshot: { element: [el('Patient', 0), el(`Patient.${element}`, 1)] },
      };
    };
    beforeAll(async () => {
      ({ t, a, b } = await twoTenants(await fresh()));
    });
    afterAll(() => t.close());

    test("each tenant's CodeSystem and ValueSet of one url answer its own $lookup, $validate-code, $expand and :in", async () => {
      const cs = (code: string) => ({ resourceType: 'CodeSystem', id: 'cs', url: `${URL}/cs`, status: 'active', content: 'complete', concept: [{ code, display: code.toUpperCase() }] });
      const vs = { resourceType: 'ValueSet', id: 'vs', url: `${URL}/vs`, status: 'active', compose: { include: [{ system: `${URL}/cs` }] } };
      expect((await a('PUT', 'CodeSystem/cs', cs('only-a'))).status).toBe(201);
      expect((await a('PUT', 'ValueSet/vs', vs)).status).toBe(201);
      // t1's are read (and cached) first.
      expect((await a('GET', `CodeSystem/$lookup?system=${URL}/cs&code=only-a`)).status).toBe(200);
      expect((await a('GET', `ValueSet/$expand?url=${URL}/vs`)).status).toBe(200);
      // t2 has none yet: t1's are not found.
      expect((await b('GET', `CodeSystem/$lookup?system=${URL}/cs&code=only-a`)).status).toBe(404);
      expect((await b('GET', `ValueSet/$expand?url=${URL}/vs`)).status).toBe(400);
      expect((await b('GET', `Observation?code:in=${URL}/vs`)).status).toBe(400);
      expect((await b('PUT', 'CodeSystem/cs', cs('only-b'))).status).toBe(201);
      expect((await b('PUT', 'ValueSet/vs', vs)).status).toBe(201);
      expect((await b('PUT', 'Observation/o', { resourceType: 'Observation', id: 'o', status: 'final', code: { coding: [{ system: `${URL}/cs`, code: 'only-b' }] } })).status).toBe(201);
      expect((await a('PUT', 'Observation/o', { resourceType: 'Observation', id: 'o', status: 'final', code: { coding: [{ system: `${URL}/cs`, code: 'only-a' }] } })).status).toBe(201);
      for (const [call, own, other] of [[a, 'only-a', 'only-b'], [b, 'only-b', 'only-a']] as const) {
        expect((await call('GET', `CodeSystem/$lookup?system=${URL}/cs&code=${own}`)).status).toBe(200);
        expect((await call('GET', `CodeSystem/$lookup?system=${URL}/cs&code=${other}`)).status).toBe(404);
        const valid = (await (await call('GET', `ValueSet/$validate-code?url=${URL}/vs&system=${URL}/cs&code=${other}`)).json()) as Json;
        expect(param(valid, 'result').valueBoolean).toBe(false);
        const expansion = (await (await call('GET', `ValueSet/$expand?url=${URL}/vs`)).json()) as Json;
        expect(expansion.expansion.contains.map((c: Json) => c.code)).toEqual([own]);
        const found = (await (await call('GET', `Observation?code:in=${URL}/vs`)).json()) as Json;
        expect(entries(found).map((r) => r.code.coding[0].code)).toEqual([own]);
      }
    });

    test("a write claiming a profile is held to its own tenant's StructureDefinition of that url, and metadata lists each tenant's own", async () => {
      const claims = (extra: Json) => ({ resourceType: 'Patient', meta: { profile: [`${URL}/profile`] }, ...extra });
      expect((await a('PUT', 'StructureDefinition/p', profile('p', 'identifier'))).status).toBe(201);
      expect((await a('POST', 'Patient', claims({ gender: 'male' }))).status).toBe(422);
      // t2 has no such profile: t1's is not applied to its writes, nor listed in its metadata.
      expect((await b('POST', 'Patient', claims({ gender: 'male' }))).status).toBe(201);
      const listed = async (tenant: string) => {
        const statement = (await (await t.request(`${t.fhir(tenant)}/metadata`)).json()) as Json;
        return statement.rest[0].resource.find((r: Json) => r.type === 'Patient').supportedProfile;
      };
      expect(await listed('t1')).toEqual([`${URL}/profile`]);
      expect(await listed('t2')).toBeUndefined();
      expect((await b('PUT', 'StructureDefinition/p', profile('p', 'gender'))).status).toBe(201);
      expect((await b('POST', 'Patient', claims({ identifier: [{ value: '1' }] }))).status).toBe(422);
      expect((await b('POST', 'Patient', claims({ gender: 'male' }))).status).toBe(201);
      expect((await a('POST', 'Patient', claims({ identifier: [{ value: '1' }] }))).status).toBe(201);
      expect(await listed('t2')).toEqual([`${URL}/profile`]);
      // t2's deletion ends t2's profile, not t1's.
      expect((await b('DELETE', 'StructureDefinition/p')).status).toBe(200);
      expect(await listed('t2')).toBeUndefined();
      expect(await listed('t1')).toEqual([`${URL}/profile`]);
      expect((await a('POST', 'Patient', claims({ gender: 'male' }))).status).toBe(422);
    });
  });

  describe(`tenant isolation: Subscriptions and bulk export (${kind})`, () => {
    let t: TestApp;
    let a: Call;
    let b: Call;
    let tokenA: string;
    let tokenB: string;
    const got: string[] = [];
    const hook = Bun.serve({ port: 0, hostname: '127.0.0.1', async fetch(req) {
      got.push(`${new URL(req.url).pathname} ${await req.text()}`);
      return new Response(null, { status: 200 });
    } });
    const drain = async () => {
      for (let i = 0; i < 50 && (await t.app.subscriptions.runOnce()) > 0; i++);
    };
    beforeAll(async () => {
      ({ t, a, b, tokenA, tokenB } = await twoTenants(await fresh(), { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' }));
    });
    afterAll(async () => {
      hook.stop(true);
      await t.close();
    });

    test("a tenant's Subscription is notified of its own tenant's writes only; another's $status and $events are not found", async () => {
      const subscription = (tenant: string) => ({
        resourceType: 'Subscription', status: 'requested', reason: tenant, criteria: 'Observation',
        channel: { type: 'rest-hook', endpoint: `http://127.0.0.1:${hook.port}/${tenant}`, payload: 'application/fhir+json' },
      });
      const subA = (await (await a('POST', 'Subscription', subscription('t1'))).json()) as Json;
      const subB = (await (await b('POST', 'Subscription', subscription('t2'))).json()) as Json;
      expect([subA.status, subB.status]).toEqual(['active', 'active']);
      await drain();
      got.length = 0;
      expect((await a('PUT', 'Observation/from-a', { resourceType: 'Observation', id: 'from-a', status: 'final', code: { text: 'a' } })).status).toBe(201);
      expect((await b('PUT', 'Observation/from-b', { resourceType: 'Observation', id: 'from-b', status: 'final', code: { text: 'b' } })).status).toBe(201);
      await drain();
      expect(got.map((g) => g.split(' ')[0]).sort()).toEqual(['/t1/Observation/from-a', '/t2/Observation/from-b']);
      expect(got.find((g) => g.startsWith('/t2/'))).not.toContain('from-a');
      for (const path of [`Subscription/${subA.id}/$status`, `Subscription/${subA.id}/$events`, `Subscription/${subA.id}/$get-ws-binding-token`]) {
        expect((await b('GET', path)).status).toBe(404);
      }
      const status = (await (await b('GET', `Subscription/$status?id=${subA.id}`)).json()) as Json;
      expect(status.total).toBe(0);
    });

    test("another tenant's export job and files are not found at its base, and refused at the job's", async () => {
      const kickoff = await a('GET', '$export', undefined, { Accept: 'application/fhir+json', Prefer: 'respond-async' });
      expect(kickoff.status).toBe(202);
      const statusUrl = kickoff.headers.get('content-location')!;
      const jobAtB = statusUrl.replace('/tenants/t1/', '/tenants/t2/');
      expect((await t.request(statusUrl, fhirInit(tokenB))).status).toBe(403);
      expect((await t.request(jobAtB, fhirInit(tokenB))).status).toBe(404);
      expect((await t.request(jobAtB, fhirInit(tokenB, 'DELETE'))).status).toBe(404);
      // The job goes on: not cancelled by t2's DELETE.
      expect((await t.request(statusUrl, fhirInit(tokenA))).status).toBe(202);
    });
  });

  describe(`tenant isolation: tokens at the authorization server (${kind})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      ({ t } = await twoTenants(await fresh()));
    });
    afterAll(() => t.close());

    test("another tenant's client can neither introspect, revoke nor refresh a tenant's tokens; its own user cannot sign in there", async () => {
      await testUser(t);
      const app = await userClient(t, { grants: ['authorization_code', 'refresh_token'], scopes: ['user/*.read', 'patient/*.read'] });
      const code = await getCode(t, { clientId: app.id, scope: 'openid fhirUser offline_access user/*.read' });
      const issued = (await (await redeem(t, code, app)).json()) as { access_token: string; refresh_token: string };
      // t2's clients: a confidential resource server, and one registered with the same grants and redirect URI as t1's app.
      const rs = await createClient(t.store, t.clock, { tenant: 't2', name: 'resource server', scopes: ['system/*.read', 'introspect'] });
      const twin = await createClient(t.store, t.clock, { tenant: 't2', name: 'twin', grants: ['authorization_code', 'refresh_token'], scopes: ['user/*.read'], redirectUris: [REDIRECT] });
      const asRs = { Authorization: basic(rs.client.clientId, rs.clientSecret!) };
      for (const token of [issued.access_token, issued.refresh_token]) {
        expect(await (await post(t, { token }, asRs, '/oauth2/introspect')).json()).toEqual({ active: false });
        expect((await post(t, { token }, asRs, '/oauth2/revoke')).status).toBe(200);
      }
      const refreshed = await post(t, { grant_type: 'refresh_token', refresh_token: issued.refresh_token }, { Authorization: basic(twin.client.clientId, twin.clientSecret!) });
      expect(refreshed.status).toBe(400);
      expect(((await refreshed.json()) as Json).error).toBe('invalid_grant');
      // Neither revocation took: both tokens still work for their own client.
      expect((await t.request(`${t.fhir('t1')}/Patient`, fhirInit(issued.access_token))).status).toBe(200);
      const own = await post(t, { grant_type: 'refresh_token', refresh_token: issued.refresh_token }, { Authorization: basic(app.id, app.secret!) });
      expect(own.status).toBe(200);
      // t1's user is unknown to t2's client's login page.
      const signedIn = await signIn(t, { clientId: twin.client.clientId, aud: t.fhir('t2') });
      expect(signedIn.status).toBe(200);
      expect(signedIn.headers.get('location')).toBeNull();
    });
  });
});
