/**
 * An export started with a signed-in user's token belongs to its client and that user: another user of the
 * same app neither sees its status, downloads its files nor cancels it, and neither does the client's own
 * authority (a token of no user); the user who started it does. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore, finish, kickOff, patient, put } from '../helpers/export.ts';
import { clientOwnToken, signedInToken, testUser, userClient } from '../helpers/oauth.ts';

await eachStore((kind, fresh) => {
  describe(`export jobs of signed-in users (${kind})`, () => {
    let t: TestApp;
    let client: Awaited<ReturnType<typeof userClient>>;
    const REQUESTED = 'openid user/*.rs';

    /** A user token of the client for `username` (signed in through the login page, the code redeemed). */
    const userToken = (username: string) => signedInToken(t, client, REQUESTED, username);

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      client = await userClient(t, { scopes: ['user/*.rs'] });
      await testUser(t, { username: 'alice', fhirUser: 'Practitioner/a' });
      await testUser(t, { username: 'bob', fhirUser: 'Practitioner/b', email: 'bob@example.org' });
      await put(t, patient('p1'));
    });
    afterAll(() => t.close());

    test("another user's token of the same app, and the app's own, neither see, download nor cancel the job", async () => {
      const alice = await userToken('alice');
      const bob = await userToken('bob');
      // The client's own authority: a token of its client_id with no user behind it.
      const own = await clientOwnToken(t, client.id, 'user/*.rs');
      const status = await kickOff(t, alice, '/Patient/$export?_type=Patient');
      const manifest = await finish(t, alice, status);
      const file = manifest.output[0]!.url;
      for (const other of [bob, own]) {
        expect((await t.request(status, fhirInit(other))).status).toBe(404);
        expect((await t.request(file, fhirInit(other))).status).toBe(404);
        expect((await t.request(status, fhirInit(other, 'DELETE'))).status).toBe(404);
      }
      // Alice still has it, whole; a second sign-in of hers (a new token) too.
      expect((await t.request(file, fhirInit(alice))).status).toBe(200);
      expect((await t.request(status, fhirInit(await userToken('alice')))).status).toBe(200);
      expect((await t.request(status, fhirInit(alice, 'DELETE'))).status).toBe(202);
    });

    test("a job of the client's own authority is not a user's", async () => {
      const own = await clientOwnToken(t, client.id, 'user/*.rs');
      const status = await kickOff(t, own, '/Patient/$export?_type=Patient');
      expect((await t.request(status, fhirInit(await userToken('alice')))).status).toBe(404);
      expect((await t.request(status, fhirInit(own))).status).toBeOneOf([200, 202]);
    });
  });
});

describe('the export kick-off rate limit of signed-in users', () => {
  let t: TestApp;
  afterAll(() => t.close());

  test("counts per client and user, as the limit of jobs in progress does: one user spending it leaves the app's other users and its own authority theirs", async () => {
    t = await createTestApp({ env: { CINDER_EXPORT_KICKOFF_RATE_LIMIT: '2' } });
    const client = await userClient(t, { scopes: ['user/*.rs'] });
    await testUser(t, { username: 'alice', fhirUser: 'Practitioner/a' });
    await testUser(t, { username: 'bob', fhirUser: 'Practitioner/b', email: 'bob@example.org' });
    await put(t, patient('p1'));
    const alice = await signedInToken(t, client, 'openid user/*.rs', 'alice');
    const start = (token: string) => t.request(t.fhir() + '/Patient/$export?_type=Patient', fhirInit(token));
    // Cancelled at once: the jobs-in-progress limit is not what is tried here.
    for (let i = 0; i < 2; i++) await t.request(await kickOff(t, alice, '/Patient/$export?_type=Patient'), fhirInit(alice, 'DELETE'));
    const refused = await start(alice);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('60');
    const body = (await refused.json()) as { issue: { code: string; details: { text: string } }[] };
    expect(body.issue[0]!.code).toBe('throttled');
    expect(body.issue[0]!.details.text).toContain('This user of this client started too many exports in the last minute');
    // Another sign-in of Alice's is Alice still.
    expect((await start(await signedInToken(t, client, 'openid user/*.rs', 'alice'))).status).toBe(429);
    // Bob, and the client's own authority, have counts of their own.
    expect((await start(await signedInToken(t, client, 'openid user/*.rs', 'bob'))).status).toBe(202);
    const own = await clientOwnToken(t, client.id, 'user/*.rs');
    expect((await start(own)).status).toBe(202);
    expect((await start(own)).status).toBe(202);
    const ownRefused = await start(own);
    expect(ownRefused.status).toBe(429);
    expect(JSON.stringify(await ownRefused.json())).toContain('This client started too many exports in the last minute');
  });
});
