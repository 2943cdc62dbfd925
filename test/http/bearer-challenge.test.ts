/**
 * Every `WWW-Authenticate` challenge Cinder sends is one RFC 6750 3 allows: `error_description` is a quoted
 * string of the characters %x20-21 / %x23-5B / %x5D-7E (no `"`, no `\`), so that a client that parses the
 * challenge to learn why it was refused (a SMART client deciding whether to refresh its token) reads it, on the
 * FHIR API (401 and 403) and on userinfo. A message holding a quote (`"Bearer <token>"`) is sent with `'` for it.
 * No store is involved: the token is refused before any read.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';

/** RFC 6750 3's challenge: the realm, then an error code and a description of the allowed characters. */
const CHALLENGE = /^Bearer realm="cinder"(, error="(invalid_request|invalid_token|insufficient_scope)", error_description="[\x20\x21\x23-\x5B\x5D-\x7E]*")?$/;

describe('WWW-Authenticate challenges', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  test('a malformed Authorization header: 401 invalid_request with a well-formed challenge, on the FHIR API and userinfo', async () => {
    for (const path of [`${t.fhir()}/Patient`, `${t.fhir()}/Patient/x`, '/oauth2/userinfo']) {
      for (const authorization of ['Basic abc', 'Bearer', 'Bearer a b']) {
        const res = await t.request(path, { headers: { Authorization: authorization } });
        const challenge = res.headers.get('www-authenticate');
        expect({ path, authorization, status: res.status, wellFormed: CHALLENGE.test(challenge ?? '') }).toEqual({ path, authorization, status: 401, wellFormed: true });
        expect(challenge).toContain('error="invalid_request"');
        expect(challenge).toContain("'Bearer <token>'");
      }
    }
  });

  test('other refusals stay well-formed: no token, a bad token, a scope the token lacks', async () => {
    const narrow = await t.tokenFor('t1', ['system/Observation.rs']);
    for (const [path, authorization, status] of [
      [`${t.fhir()}/Patient`, undefined, 401],
      [`${t.fhir()}/Patient`, 'Bearer abc.def.ghi', 401],
      [`${t.fhir()}/Patient`, `Bearer ${narrow}`, 403],
    ] as const) {
      const res = await t.request(path, authorization === undefined ? {} : { headers: { Authorization: authorization } });
      expect({ authorization, status: res.status, wellFormed: CHALLENGE.test(res.headers.get('www-authenticate') ?? '') }).toEqual({ authorization, status, wellFormed: true });
    }
  });
});
