/**
 * An import started with a signed-in user's token belongs to its client and that user, as an export does: another
 * user of the same app neither sees its status, reads its error files nor cancels it, and neither does the client's
 * own authority (a token of no user); the user who started it does. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { clientOwnToken, signedInToken, testUser, userClient } from '../helpers/oauth.ts';

const SCOPE = 'user/*.cruds';

await eachStore((kind, fresh) => {
  describe(`import jobs of signed-in users (${kind})`, () => {
    let t: TestApp;
    let client: Awaited<ReturnType<typeof userClient>>;
    const files = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response('{"resourceType":"Patient","id":"u1"}\n{"resourceType":"Patient","gender":"sometimes"}\n') });
    const params = {
      resourceType: 'Parameters',
      parameter: [
        { name: 'inputFormat', valueCode: 'application/fhir+ndjson' },
        { name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: `http://127.0.0.1:${files.port}/patients.ndjson` }] },
      ],
    };

    const userToken = (username: string) => signedInToken(t, client, `openid ${SCOPE}`, username);
    const ownToken = () => clientOwnToken(t, client.id, SCOPE);
    async function kickOff(token: string): Promise<string> {
      const res = await t.request(`${t.fhir()}/$import`, fhirInit(token, 'POST', params));
      expect(res.status).toBe(202);
      return res.headers.get('content-location')!;
    }

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), env: { CINDER_IMPORT_ALLOW_PRIVATE: 'true' } });
      client = await userClient(t, { scopes: [SCOPE] });
      await testUser(t, { username: 'alice', fhirUser: 'Practitioner/a' });
      await testUser(t, { username: 'bob', fhirUser: 'Practitioner/b', email: 'bob@example.org' });
    });
    afterAll(async () => {
      await t.app.imports.stop();
      files.stop(true);
      await t.close();
    });

    test("another user's token of the same app, and the app's own, neither see, read the errors of nor cancel the job", async () => {
      const alice = await userToken('alice');
      const bob = await userToken('bob');
      const own = await ownToken();
      const status = await kickOff(alice);
      // Queued: nobody else may cancel it.
      for (const other of [bob, own]) {
        expect((await t.request(status, fhirInit(other))).status).toBe(404);
        expect((await t.request(status, fhirInit(other, 'DELETE'))).status).toBe(404);
      }
      await t.app.imports.runOnce();
      const done = await t.request(status, fhirInit(alice));
      expect(done.status).toBe(200);
      const errors = ((await done.json()) as { error: { url: string }[] }).error[0]!.url;
      for (const other of [bob, own]) {
        expect((await t.request(status, fhirInit(other))).status).toBe(404);
        expect((await t.request(errors, fhirInit(other))).status).toBe(404);
      }
      // Alice still has it; a second sign-in of hers (a new token) too.
      expect((await t.request(errors, fhirInit(alice))).status).toBe(200);
      expect((await t.request(status, fhirInit(await userToken('alice')))).status).toBe(200);
    });

    test("a job of the client's own authority is not a user's", async () => {
      const own = await ownToken();
      const status = await kickOff(own);
      expect((await t.request(status, fhirInit(await userToken('alice')))).status).toBe(404);
      expect((await t.request(status, fhirInit(await userToken('alice'), 'DELETE'))).status).toBe(404);
      expect((await t.request(status, fhirInit(own))).status).toBeOneOf([200, 202]);
    });
  });
});

describe('the import kick-off rate limit', () => {
  let t: TestApp;
  afterAll(() => t.close());

  test('counts per client and signed-in user, as the export kick-off limit does, before the body is read; cancelled jobs count', async () => {
    t = await createTestApp({ env: { CINDER_EXPORT_KICKOFF_RATE_LIMIT: '2', CINDER_IMPORT_ALLOW_PRIVATE: 'true' } });
    const client = await userClient(t, { scopes: [SCOPE] });
    await testUser(t, { username: 'alice', fhirUser: 'Practitioner/a' });
    await testUser(t, { username: 'bob', fhirUser: 'Practitioner/b', email: 'bob@example.org' });
    const params = {
      resourceType: 'Parameters',
      parameter: [
        { name: 'inputFormat', valueCode: 'application/fhir+ndjson' },
        { name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: 'http://127.0.0.1:9/patients.ndjson' }] },
      ],
    };
    const start = (token: string, body: unknown = params) => t.request(`${t.fhir()}/$import`, fhirInit(token, 'POST', body));
    const alice = await signedInToken(t, client, `openid ${SCOPE}`, 'alice');
    for (let i = 0; i < 2; i++) {
      const res = await start(alice);
      expect(res.status).toBe(202);
      // Cancelled at once: the jobs-in-progress limit is not what is tried here.
      expect((await t.request(res.headers.get('content-location')!, fhirInit(alice, 'DELETE'))).status).toBe(202);
    }
    // Refused before its body is read: a body that is no Parameters is a 429 all the same.
    for (const body of [params, { resourceType: 'Patient' }]) {
      const refused = await start(alice, body);
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('60');
      const outcome = (await refused.json()) as { issue: { code: string; details: { text: string } }[] };
      expect(outcome.issue[0]!.code).toBe('throttled');
      expect(outcome.issue[0]!.details.text).toContain('This user of this client started too many imports in the last minute');
    }
    // Exports are counted apart, and Bob and the client's own authority have counts of their own.
    expect((await t.request(`${t.fhir()}/Patient/$export?_type=Patient`, fhirInit(alice))).status).toBe(202);
    expect((await start(await signedInToken(t, client, `openid ${SCOPE}`, 'bob'))).status).toBe(202);
    const own = await clientOwnToken(t, client.id, SCOPE);
    for (let i = 0; i < 2; i++) {
      const res = await start(own);
      expect(res.status).toBe(202);
      expect((await t.request(res.headers.get('content-location')!, fhirInit(own, 'DELETE'))).status).toBe(202);
    }
    const ownRefused = await start(own);
    expect(ownRefused.status).toBe(429);
    expect(JSON.stringify(await ownRefused.json())).toContain('This client started too many imports in the last minute');
  });
});
