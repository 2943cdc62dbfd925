/**
 * `cinder keys review`: after signing keys leaked, `keys rotate --compromised` stops every token they signed, but not
 * what a token forged with them set going: a Subscription notifying an attacker's endpoint, an export, an import. The
 * review lists what was written or started since the leak, and `--stop` turns the Subscriptions off and cancels the
 * jobs; what came before is left alone. The forged token is signed with the leaked key as an attacker would sign it,
 * through the HTTP API; the review runs as the command line, on both stores.
 */
import { afterAll, beforeAll, describe, expect, setSystemTime, test } from 'bun:test';
import { decodeJwt, decodeProtectedHeader, importJWK, SignJWT } from 'jose';
import { createTenant } from '../../src/auth/admin.ts';
import { createTestApp, fhirInit, type TestApp, type TestClock } from '../helpers/app.ts';
import { createCliEnv } from '../helpers/cli.ts';
import { kickOff } from '../helpers/export.ts';
import { fhirClient, type Json } from '../helpers/fhir.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

/** The system clock, moved by the tests: the app and the command line both read it. */
const systemTime: TestClock = {
  now: () => Date.now(),
  advance: (ms) => void setSystemTime(new Date(Date.now() + ms)),
  set: (ms) => void setSystemTime(new Date(ms)),
};
afterAll(() => void setSystemTime());

const subscription = (endpoint: string): Json => ({
  resourceType: 'Subscription', status: 'requested', reason: 'review', criteria: 'Patient?gender=female', channel: { type: 'rest-hook', endpoint },
});

type Row = { kind: string; tenant: string; id: string; client: string; user: string | null; state: string; at: string; target: string; stopped?: boolean };

for (const target of targets) {
  describe(`cinder keys review, on ${target.kind}`, () => {
    let t: TestApp;
    let cli: ReturnType<typeof createCliEnv>;
    const hooks = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response(null, { status: 200 }) });
    const files = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response('{"resourceType":"Patient","id":"imp1"}\n') });
    const hook = (name: string) => `http://127.0.0.1:${hooks.port}/${name}`;
    let before: string;
    let leakedAt: string;
    let forged: { token: string; subscription: string; exportStatus: string; importStatus: string };

    beforeAll(async () => {
      setSystemTime(new Date('2026-04-01T09:00:00Z'));
      const db = await target.migrated();
      const store = db.open();
      await store.migrate();
      t = await createTestApp({ store, clock: systemTime, env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true', CINDER_IMPORT_ALLOW_PRIVATE: 'true', CINDER_AUDIT: 'on' } });
      cli = createCliEnv({ CINDER_DATABASE_URL: db.url, CINDER_AUDIT: 'on' });
      await createTenant(t.store, t.clock, 't2');
      const admin = fhirClient(t, await t.token());
      before = (await admin.create(subscription(hook('before')))).id as string;
      // A day later the keys leak (a backup is read); the attacker forges a token of the admin client with them.
      systemTime.advance(86_400_000);
      leakedAt = new Date().toISOString();
      systemTime.advance(60_000);
      const genuine = await t.token();
      const kid = decodeProtectedHeader(genuine).kid!;
      const leaked = (await importJWK((await t.store.keys.list(0)).find((k) => k.kid === kid)!.privateJwk, 'ES256')) as CryptoKey;
      const nowS = Math.floor(Date.now() / 1000);
      const token = await new SignJWT({ ...decodeJwt(genuine), iat: nowS, exp: nowS + 300, jti: crypto.randomUUID() })
        .setProtectedHeader({ alg: 'ES256', kid, typ: 'at+jwt' }).sign(leaked);
      const attacker = fhirClient(t, token);
      const sub = await attacker.create(subscription(hook('attacker')));
      expect(sub.status).toBe('active');
      const importParams = {
        resourceType: 'Parameters',
        parameter: [
          { name: 'inputFormat', valueCode: 'application/fhir+ndjson' },
          { name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: `http://127.0.0.1:${files.port}/p.ndjson` }] },
        ],
      };
      const imported = await t.request(`${t.fhir()}/$import`, fhirInit(token, 'POST', importParams));
      expect(imported.status).toBe(202);
      forged = { token, subscription: sub.id as string, exportStatus: await kickOff(t, token, '/$export'), importStatus: imported.headers.get('content-location')! };
    }, 60_000);
    afterAll(async () => {
      await t.app.imports.stop();
      hooks.stop(true);
      files.stop(true);
      await t.close();
      cli.close();
    });

    const review = async (...flags: string[]): Promise<Row[]> => {
      const r = await cli.run(['keys', 'review', ...flags, '--json']);
      if (r.code !== 0) throw new Error(`cinder keys review: ${r.code} ${r.stderr}`);
      return JSON.parse(r.stdout) as Row[];
    };
    const lastId = (url: string) => url.split('/').pop()!;
    const readSubscription = async (id: string) => {
      const res = await fhirClient(t, await t.token()).get(`Subscription/${id}`);
      expect(res.status).toBe(200);
      return (await res.json()) as Json;
    };

    test('after --compromised the forged token is refused, but its Subscription and jobs go on', async () => {
      const rotated = await cli.run(['keys', 'rotate', '--compromised']);
      expect(rotated.code).toBe(0);
      systemTime.advance(61_000);
      expect((await t.request(`${t.fhir()}/Patient`, fhirInit(forged.token))).status).toBe(401);
      expect((await readSubscription(forged.subscription)).status).toBe('active');
      expect((await t.request(forged.exportStatus, fhirInit(await t.token()))).status).toBe(202);
      expect((await t.request(forged.importStatus, fhirInit(await t.token()))).status).toBe(202);
    });

    test('the review lists what was written or started since the leak, with owner and target; nothing before it', async () => {
      const rows = await review('--since', leakedAt);
      const client = t.admin.client.clientId;
      expect(rows.map((r) => [r.kind, r.id])).toEqual([
        ['subscription', forged.subscription], ['export', lastId(forged.exportStatus)], ['import', lastId(forged.importStatus)],
      ]);
      expect(rows[0]).toMatchObject({ tenant: 't1', client, user: null, state: 'active', target: hook('attacker') });
      expect(rows[1]).toMatchObject({ tenant: 't1', client, state: 'accepted', target: expect.stringContaining('/$export') });
      expect(rows[2]).toMatchObject({ tenant: 't1', client, state: 'accepted', target: expect.stringContaining('/$import') });
      for (const r of rows) expect(Date.parse(r.at)).toBeGreaterThanOrEqual(Date.parse(leakedAt));
      // From before the Subscription made with the genuine token, the review lists it too; another tenant's nothing.
      expect((await review('--since', '2026-04-01T00:00:00Z')).map((r) => r.id)).toContain(before);
      expect(await review('--since', leakedAt, '--tenant', 't2')).toEqual([]);
      // Listing stops nothing.
      expect((await readSubscription(forged.subscription)).status).toBe('active');
    });

    test('--stop turns the Subscriptions off, saying why, and cancels the jobs; what came before goes on', async () => {
      const rows = await review('--since', leakedAt, '--stop');
      expect(rows.map((r) => r.stopped)).toEqual([true, true, true]);
      const sub = await readSubscription(forged.subscription);
      expect(sub.status).toBe('off');
      expect(sub.error).toContain('signing keys may have leaked');
      expect((await readSubscription(before)).status).toBe('active');
      for (const status of [forged.exportStatus, forged.importStatus]) expect((await t.request(status, fhirInit(await t.token()))).status).toBe(404);
      // Recorded in the tenant's audit trail, naming what it stopped.
      const events = await fhirClient(t, await t.token()).search('AuditEvent?subtype=urn:cinder:admin|keys-review');
      const detail = JSON.stringify(events.entry);
      for (const id of [forged.subscription, lastId(forged.exportStatus), lastId(forged.importStatus)]) expect(detail).toContain(id);
      // Stopped already: a second run stops nothing more.
      expect((await review('--since', leakedAt, '--stop')).map((r) => [r.state, r.stopped])).toEqual([['off', false], ['cancelled', false], ['cancelled', false]]);
    });

    test('--since is required, an ISO 8601 time with its offset, and not in the future', async () => {
      for (const flags of [[], ['--since', 'yesterday'], ['--since', '2026-04-01T09:00:00'], ['--since', '2099-01-01T00:00:00Z'], ['--since', leakedAt, '--tenant', 'nope']]) {
        const r = await cli.run(['keys', 'review', ...flags]);
        expect({ flags, code: r.code }).toEqual({ flags, code: 2 });
        expect(r.stderr).toMatch(/--since|tenant/);
      }
    });
  });
}
