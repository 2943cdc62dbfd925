/**
 * The limits of waiting and running bulk jobs (CINDER_EXPORT_MAX_JOBS_PER_CLIENT, CINDER_IMPORT_MAX_JOBS_PER_CLIENT)
 * count per owner: the client with the signed-in user its token carries, or the client's own authority (a token of
 * no user). One user of an app at the limit is refused (429 with Retry-After), and its other users, and the app's
 * own authority, still start theirs. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome } from '../helpers/fhir.ts';
import { clientOwnToken, signedInToken, testUser, userClient } from '../helpers/oauth.ts';

const SCOPE = 'user/*.cruds';

await eachStore((kind, fresh) => {
  describe(`bulk job limits per client and user (${kind})`, () => {
    let t: TestApp;
    let client: Awaited<ReturnType<typeof userClient>>;
    const files = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response('{"resourceType":"Patient","id":"u1"}\n') });
    const importParams = {
      resourceType: 'Parameters',
      parameter: [
        { name: 'inputFormat', valueCode: 'application/fhir+ndjson' },
        { name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: `http://127.0.0.1:${files.port}/patients.ndjson` }] },
      ],
    };

    const userToken = (username: string) => signedInToken(t, client, `openid ${SCOPE}`, username);
    const ownToken = () => clientOwnToken(t, client.id, SCOPE);
    const exportKick = (token: string) => t.request(`${t.fhir()}/Patient/$export`, fhirInit(token, 'GET', undefined, { Accept: 'application/fhir+json', Prefer: 'respond-async' }));
    const importKick = (token: string) => t.request(`${t.fhir()}/$import`, fhirInit(token, 'POST', importParams));

    beforeAll(async () => {
      t = await createTestApp({
        store: await fresh(),
        env: { CINDER_IMPORT_ALLOW_PRIVATE: 'true', CINDER_EXPORT_MAX_JOBS_PER_CLIENT: '2', CINDER_IMPORT_MAX_JOBS_PER_CLIENT: '2' },
      });
      client = await userClient(t, { scopes: [SCOPE] });
      await testUser(t, { username: 'alice', fhirUser: 'Practitioner/a' });
      await testUser(t, { username: 'bob', fhirUser: 'Practitioner/b', email: 'bob@example.org' });
    });
    afterAll(async () => {
      await t.app.imports.stop();
      files.stop(true);
      await t.close();
    });

    for (const [what, kick] of [['export', exportKick], ['import', importKick]] as const) {
      test(`${what}: a user at the limit is refused; another user of the app, and its own authority, are not`, async () => {
        const alice = await userToken('alice');
        const bob = await userToken('bob');
        const own = await ownToken();
        for (let i = 0; i < 2; i++) expect((await kick(alice)).status).toBe(202);
        const refused = await kick(alice);
        const outcome = await expectOutcome(refused, 429, 'throttled');
        expect(refused.headers.get('retry-after')).toBe('30');
        expect(outcome.issue[0].diagnostics).toBe(`This user of this client already has 2 ${what}(s) in progress; wait for one to finish or cancel it`);
        // Another sign-in of the same user is the same owner.
        expect((await kick(await userToken('alice'))).status).toBe(429);
        for (let i = 0; i < 2; i++) expect((await kick(bob)).status).toBe(202);
        expect((await kick(bob)).status).toBe(429);
        for (let i = 0; i < 2; i++) expect((await kick(own)).status).toBe(202);
        const ownRefused = await expectOutcome(await kick(own), 429, 'throttled');
        expect(ownRefused.issue[0].diagnostics).toBe(`This client already has 2 ${what}(s) in progress; wait for one to finish or cancel it`);
      });
    }
  });
});
