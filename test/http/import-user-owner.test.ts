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
