/**
 * Values no FHIR or OAuth value holds: U+0000 (which PostgreSQL cannot even compare with a stored
 * value) and the other control characters below U+0020 but tab, CR and LF. A URL holding `%00` is a
 * 400 before any route reads it; a search value holding a control character is a 400 naming the
 * parameter, wherever the search comes from (a query, a form, a header, a Bundle entry, `_typeFilter`,
 * a scope); a client id holding U+0000 is no client; a resource holding one (or U+FFFE, U+FFFF) is a
 * 422 on every write even with validation off, since no format carries it (FHIR XML cannot). Whatever
 * gets past these to PostgreSQL (an unpaired surrogate with validation off) is a 400, not a 500, and the
 * writes beside it are kept. On both databases, which answer alike but where noted.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, expectOutcome, type Json } from '../helpers/fhir.ts';
import { authorizeQuery, csrfCookie, FORM, hiddenFields, testUser, userClient } from '../helpers/oauth.ts';

await eachStore((kind, fresh) => {
  describe(`control characters (${kind})`, () => {
    let t: TestApp;
    let token: string;
    let fhir: string;

    beforeAll(async () => {
      // Validation off: the only way a resource holding U+0000 reaches the store (see the last test).
      t = await createTestApp({ store: await fresh(), env: { CINDER_VALIDATION: 'off' } });
      token = await t.token();
      fhir = t.fhir();
      const put = await t.request(`${fhir}/Patient/p1`, fhirInit(token, 'PUT', { resourceType: 'Patient', id: 'p1', name: [{ family: 'Chalmers' }] }));
      expect(put.status).toBe(201);
    });
    afterAll(() => t.close());

    const get = (path: string, headers: Record<string, string> = {}) => t.request(`${fhir}/${path}`, fhirInit(token, 'GET', undefined, headers));
    /** The outcome's first issue, after checking it is a 400 naming `expression` (none: names nothing). */
    const rejected = async (res: Response, expression?: string) => {
      const issue = (await expectOutcome(res, 400, 'invalid')).issue[0] as Json;
      expect(issue.expression).toEqual(expression === undefined ? undefined : [expression]);
      return issue.diagnostics as string;
    };

    test('%00 in a query parameter of any FHIR route is a 400 naming it', async () => {
      const cases: [string, string][] = [
        ['Patient?name=Chal%00', 'name'],
        ['Patient?identifier=x|%00', 'identifier'],
        ['Patient/p1/Observation?code=%00', 'code'],
        ['?_type=Patient&_id=%00', '_id'],
        ['ValueSet/$validate-code?url=http://example.org/vs%00&system=http://s&code=a', 'url'],
        ['CodeSystem/$lookup?system=http://example.org/cs%00&code=a', 'system'],
        ['Patient/_history?_since=2020%00', '_since'],
        ['$export?_typeFilter=Patient%3Fname%3D%00', '_typeFilter'],
      ];
      for (const [path, parameter] of cases) {
        expect(await rejected(await get(path, { Prefer: 'respond-async' }), parameter)).toBe(`The parameter '${parameter}' holds U+0000, which no value may hold`);
      }
      // With the CORS headers and the request id of every answer, so that a browser app can read why
      // and an operator find it in the log.
      const cors = await get('Patient?name=%00', { Origin: 'https://app.example', 'X-Request-Id': 'nul-1' });
      expect(cors.status).toBe(400);
      expect(cors.headers.get('access-control-allow-origin')).toBe('*');
      expect(cors.headers.get('x-request-id')).toBe('nul-1');
      expect((await get('Patient?name=%00')).headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
      const metrics = await (await t.request('/metrics')).text();
      expect(metrics.split('\n').some((l) => l.startsWith('cinder_http_requests_total{') && l.includes('route="unmatched"') && l.includes('status="400"'))).toBe(true);
    });

    test('%00 in the path is a 400 naming no parameter: a tenant, a job id, a read on the hot route', async () => {
      const paths = [`${t.fhir('t%00')}/Patient`, `${fhir}/$export-status/job%00`, `${fhir}/Patient/p1%00`];
      for (const url of paths) {
        expect(await rejected(await t.request(url, fhirInit(token)))).toBe('The URL holds %00 (U+0000), which no value may hold');
      }
    });

    test('outside the FHIR API %00 is an OAuth invalid_request; at the authorize endpoint, which a browser opens, an error page', async () => {
      const res = await t.request('/oauth2/jwks?kid=a%00');
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({ error: 'invalid_request', error_description: "The parameter 'kid' holds U+0000, which no value may hold" });
      // RFC 6749 4.1.2.1: no client to redirect to (its id cannot be one), so a page (redirects: test/http/oauth-authorize.test.ts).
      const page = await t.request('/oauth2/authorize?response_type=code&client_id=app%00&state=s');
      expect([page.status, page.headers.get('content-type'), page.headers.get('location')]).toEqual([400, 'text/html; charset=utf-8', null]);
      expect(await page.text()).toContain('The authorization request could not be read: The parameter &#39;client_id&#39; holds U+0000, which no value may hold.');
    });

    // Both databases alike: SQLite looked the user up and showed "wrong password", PostgreSQL answered a JSON 400 to the browser.
    test('a sign-in form holding U+0000 is an error page naming the parameter, on both databases', async () => {
      const c = await userClient(t);
      await testUser(t, { username: 'nul-user' });
      const login = await t.request(`/oauth2/authorize?${authorizeQuery({ clientId: c.id })}`);
      const fields = hiddenFields(await login.text());
      for (const username of ['\0', 'nul-\0user']) {
        const res = await t.request('/oauth2/authorize', { method: 'POST', headers: { ...FORM, Cookie: csrfCookie(login) }, body: new URLSearchParams({ ...fields, username, password: 'x' }) });
        expect([res.status, res.headers.get('content-type')]).toEqual([400, 'text/html; charset=utf-8']);
        expect(await res.text()).toContain('The sign-in form could not be read: The parameter &#39;username&#39; holds U+0000, which no value may hold');
      }
    });

    test('a search value holding a control character is a 400 naming the parameter, from a form, a header or a Bundle', async () => {
      const message = (p: string) => `The value of '${p}' holds a control character (below U+0020 other than tab, CR, LF), which no FHIR value holds`;
      const before = await countVersions(t);
      for (const value of ['Chal\u0000', 'Chal\u0001', 'Chal\u001f']) {
        const form = await t.request(`${fhir}/Patient/_search`, fhirInit(token, 'POST', new URLSearchParams({ name: value }).toString(), { 'Content-Type': 'application/x-www-form-urlencoded' }));
        expect(await rejected(form, 'name')).toBe(message('name'));
        const conditional = await t.request(`${fhir}/Patient`, fhirInit(token, 'POST', { resourceType: 'Patient' }, { 'If-None-Exist': `family=${encodeURIComponent(value)}` }));
        expect(await rejected(conditional, 'family')).toBe(message('family'));
      }
      // %01 passes the URL's check (only U+0000 is refused there) and is refused as a search value.
      expect(await rejected(await get('Patient?name:contains=a%01b'), 'name:contains')).toBe(message('name:contains'));
      expect(await rejected(await get('Observation?subject:Patient.name=a%1F'), 'subject:Patient.name')).toBe(message('subject:Patient.name'));
      const bundle = await t.request(fhir, fhirInit(token, 'POST', {
        resourceType: 'Bundle', type: 'batch',
        entry: [{ request: { method: 'GET', url: 'Patient?name=a\u0000' } }, { request: { method: 'GET', url: 'Patient?name=Chal' } }],
      }));
      const entries = ((await bundle.json()) as Json).entry as Json[];
      expect(entries.map((e) => e.response.status)).toEqual(['400 Bad Request', '200 OK']);
      expect(entries[0].response.outcome.issue[0].expression).toEqual(['Bundle.entry[0].request.url']);
      expect(entries[0].response.outcome.issue[0].diagnostics).toBe(`Bundle.entry[0]: ${message('name')}`);
      expect(await countVersions(t)).toBe(before);
      // Tab, CR and LF are a FHIR string's own: searched, not refused.
      expect((await get('Patient?name=Chal%09')).status).toBe(200);
    });

    test('a _typeFilter or a scope filter holding one is refused where it is given', async () => {
      const kickoff = await t.request(`${fhir}/$export`, fhirInit(token, 'POST', {
        resourceType: 'Parameters', parameter: [{ name: '_typeFilter', valueString: 'Patient?name=a\u0000' }],
      }, { Prefer: 'respond-async' }));
      expect(await rejected(kickoff, '_typeFilter')).toContain("The value of 'name' holds a control character");
      expect(await t.tokenFor('t1', ['system/Patient.rs'], 'system/Patient.rs?name=a')).toBeString();
      await expect(t.tokenFor('t1', ['system/Patient.rs'], 'system/Patient.rs?name=a%00')).rejects.toThrow(/invalid_request/);
      await expect(t.tokenFor('t1', ['system/Patient.rs'], 'system/Patient.rs?name=a%01')).rejects.toThrow(/invalid_request/);
    });

    test('a client id holding U+0000 is no client: invalid_client', async () => {
      const res = await t.request('/oauth2/token', {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: 'Basic ' + btoa('app\u0000:secret') },
        body: 'grant_type=client_credentials',
      });
      expect(res.status).toBe(400);
      expect(((await res.json()) as Json).error).toBe('invalid_client');
    });

    test('a resource holding a control character or U+FFFE is refused even with validation off (422 naming the element), on every write path; the writes beside it are kept', async () => {
      const refused = async (res: Response, expression: string, code = 'U+0000, a control character (below U+0020 other than tab, CR, LF)') => {
        const issue = (await expectOutcome(res, 422, 'value')).issue[0] as Json;
        expect(issue.expression).toEqual([expression]);
        expect(issue.diagnostics).toBe(`holds ${code}: no FHIR value holds it, and FHIR XML cannot carry it`);
      };
      const before = await countVersions(t);
      await refused(await t.request(`${fhir}/Patient`, fhirInit(token, 'POST', { resourceType: 'Patient', name: [{ family: 'a\u0000b' }] })), 'Patient.name[0].family');
      await refused(await t.request(`${fhir}/Patient/p1`, fhirInit(token, 'PUT', { resourceType: 'Patient', id: 'p1', name: [{ given: ['x', 'y\u001f'] }] })), 'Patient.name[0].given[1]', 'U+001F, a control character (below U+0020 other than tab, CR, LF)');
      await refused(await t.request(`${fhir}/Patient/p1`, fhirInit(token, 'PUT', { resourceType: 'Patient', id: 'p1', extension: [{ url: 'http://e', valueString: '\uFFFE' }] })), 'Patient.extension[0].valueString', 'U+FFFE, which is no Unicode character');
      // A member's name too (unknown elements are stored at off), named visibly.
      await refused(await t.request(`${fhir}/Patient/p1`, fhirInit(token, 'PUT', { resourceType: 'Patient', id: 'p1', 'x\u0001': 1 })), 'Patient.x\\u0001', 'U+0001, a control character (below U+0020 other than tab, CR, LF)');
      const patch = await t.request(`${fhir}/Patient/p1`, fhirInit(token, 'PATCH', [{ op: 'add', path: '/name', value: [{ family: 'z\u0007' }] }], { 'Content-Type': 'application/json-patch+json' }));
      await refused(patch, 'Patient.name[0].family', 'U+0007, a control character (below U+0020 other than tab, CR, LF)');
      const tx = await t.request(fhir, fhirInit(token, 'POST', {
        resourceType: 'Bundle', type: 'transaction',
        entry: [
          { request: { method: 'PUT', url: 'Patient/p3' }, resource: { resourceType: 'Patient', id: 'p3' } },
          { request: { method: 'POST', url: 'Patient' }, resource: { resourceType: 'Patient', name: [{ family: 'a\u0000b' }] } },
        ],
      }));
      await refused(tx, 'Bundle.entry[1].resource.name[0].family');
      expect(await countVersions(t)).toBe(before);
      // In a batch the entry alone fails; on both databases alike (PostgreSQL could not store U+0000, SQLite could).
      const bundle = await t.request(fhir, fhirInit(token, 'POST', {
        resourceType: 'Bundle', type: 'batch',
        entry: [
          { request: { method: 'POST', url: 'Patient' }, resource: { resourceType: 'Patient', name: [{ family: 'a\u0000b' }] } },
          { request: { method: 'PUT', url: 'Patient/p2' }, resource: { resourceType: 'Patient', id: 'p2' } },
        ],
      }));
      const entries = ((await bundle.json()) as Json).entry as Json[];
      expect(entries.map((e) => e.response.status)).toEqual(['422 Unprocessable Entity', '201 Created']);
      expect(entries[0].response.outcome.issue[0].expression).toEqual(['Bundle.entry[0].resource.name[0].family']);
      // Tab, CR and LF are a string's own.
      expect((await t.request(`${fhir}/Patient/p1`, fhirInit(token, 'PUT', { resourceType: 'Patient', id: 'p1', name: [{ family: 'a\tb\r\nc' }] }))).status).toBe(200);
    });

    test('an unpaired surrogate that reaches the database: PostgreSQL refuses it with a 400', async () => {
      // An unpaired surrogate (which validation refuses) in a coding's system would be stored by
      // PostgreSQL as U+FFFD, the system's search key then never found again.
      const surrogate = await t.request(`${fhir}/Observation`, fhirInit(token, 'POST', '{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://s/\\ud800","code":"x"}]}}'));
      if (kind === 'postgres') {
        expect(await rejected(surrogate)).toBe('The resource holds an unpaired surrogate (U+D800 to U+DFFF alone), which PostgreSQL cannot hold');
      } else expect(surrogate.status).toBe(201);
      const vc = await t.request(`${fhir}/ValueSet/$validate-code`, fhirInit(token, 'POST', {
        resourceType: 'Parameters', parameter: [{ name: 'url', valueUri: 'http://example.org/vs\u0000' }, { name: 'system', valueUri: 'http://s' }, { name: 'code', valueCode: 'a' }],
      }));
      await expectOutcome(vc, 400);
    });
  });
});
