/**
 * The server's pauses of a client's Subscriptions (client-authority.ts, silenced.ts) in the long run: a paused one goes
 * back to the status it had however many versions were written while it was paused (the server's own pause writes, or
 * rewrites of it as it stands), and a silenced one whose status write always fails does not keep a write from showing
 * the others, nor is tried at every write. Through the API and the `cinder` command line, on both databases.
 */
import { afterAll, beforeAll, describe, expect, setSystemTime, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { disableClient } from '../../src/auth/client-lifecycle.ts';
import { pausedError } from '../../src/fhir/subscriptions/client-authority.ts';
import { SHOWN_PER_WRITE } from '../../src/fhir/subscriptions/silenced.ts';
import { createTestApp, type TestApp, type TestClock } from '../helpers/app.ts';
import { createCliEnv } from '../helpers/cli.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { basic, post } from '../helpers/oauth.ts';
import { storeTargets } from '../helpers/stores.ts';
import type { ResourceWriter, Store } from '../../src/store/types.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

/** The wait before a silenced Subscription whose write failed is tried again (silenced.ts SHOW_RETRY_FIRST_MS). */
const FIRST_RETRY_MS = 30_000;
/** Past the app's client cache (5 s). */
const PAST_CACHES_MS = 6_000;

/** The system clock, moved by the tests: the app and the command line both read it. */
const systemTime: TestClock = {
  now: () => Date.now(),
  advance: (ms) => void setSystemTime(new Date(Date.now() + ms)),
  set: (ms) => void setSystemTime(new Date(ms)),
};
afterAll(() => void setSystemTime());

/**
 * `store` whose writes of a version of a Subscription whose id `unstorable` holds fail, whoever writes it (a version an
 * older release stored that this one cannot store again, a constraint it breaks): the rest as `store` does it.
 */
function failingWrites(store: Store, unstorable: ReadonlySet<string>): Store {
  const bound = <T extends object>(o: T) => (target: T, key: string | symbol) => {
    const value = Reflect.get(target, key, target) as unknown;
    return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(o) : value;
  };
  const resources = new Proxy(store.resources, {
    get: (target, key) => key !== 'write' ? bound(target)(target, key) : (tenant: string, fn: (w: ResourceWriter) => Promise<unknown>) =>
      target.write(tenant, (w) => fn({
        ...w,
        put: async (v) => {
          if (v.type === 'Subscription' && unstorable.has(v.id)) throw new Error(`Subscription/${v.id} cannot be stored`);
          return w.put(v);
        },
      })),
  });
  return new Proxy(store, { get: (target, key) => (key === 'resources' ? resources : bound(target)(target, key)) });
}

for (const target of targets) {
  describe(`the server's pauses of Subscriptions in the long run, on ${target.kind}`, () => {
    let t: TestApp;
    let cli: ReturnType<typeof createCliEnv>;
    let admin: FhirClient;
    const unstorable = new Set<string>();

    beforeAll(async () => {
      const db = await target.migrated();
      const store = failingWrites(db.open(), unstorable);
      await store.migrate();
      t = await createTestApp({ store, clock: systemTime, env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
      cli = createCliEnv({ CINDER_DATABASE_URL: db.url });
      admin = fhirClient(t, await t.token());
    }, 60_000);
    afterAll(async () => {
      await t.close();
      cli.close();
    });

    async function cinder(argv: string[]): Promise<Json> {
      const r = await cli.run([...argv, '--json']);
      if (r.code !== 0) throw new Error(`cinder ${argv.join(' ')}: ${r.code} ${r.stderr}`);
      return JSON.parse(r.stdout) as Json;
    }
    const later = (ms = PAST_CACHES_MS) => t.clock.advance(ms);
    /** A backend client (system/*.*) and an API client with its token. */
    const backend = async () => {
      const { client, clientSecret } = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.*'] });
      const res = await post(t, { grant_type: 'client_credentials' }, { Authorization: basic(client.clientId, clientSecret!) });
      expect(res.status).toBe(200);
      return { id: client.clientId, api: fhirClient(t, ((await res.json()) as { access_token: string }).access_token) };
    };
    /** A rest-hook Subscription of `api` to Patients of `family`, active; its id. */
    const subscribe = async (api: FhirClient, family: string) => {
      const sub = await api.create({ resourceType: 'Subscription', status: 'requested', reason: family, criteria: `Patient?family=${family}`, channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1:9/hook' } });
      expect(sub.status).toBe('active');
      return sub.id as string;
    };
    const read = async (id: string) => (await (await admin.get(`Subscription/${id}`)).json()) as Json;
    const shown = async (id: string) => {
      const sub = await read(id);
      return [sub.status, sub.error, sub.meta.versionId];
    };

    test('a paused Subscription written more than 20 (here 106) times while paused goes back to the status it had; one moved meanwhile does not', async () => {
      const c = await backend();
      const id = await subscribe(c.api, 'long-paused');
      const moved = await subscribe(c.api, 'long-moved');
      const narrow = ['--scope', 'system/Observation.rs', '--scope', 'system/Subscription.cruds'];
      expect(await cinder(['client', 'update', c.id, ...narrow])).toMatchObject({ subscriptions_paused: [id, moved].sort() });
      // One of them moved to another endpoint while paused, then the pause's words written over it: never set back.
      const movedSub = await read(moved);
      await admin.put200({ ...movedSub, channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1:9/elsewhere' } });
      // Written again and again as it stands, with the words of one pause or the other (96 versions, the last with the words of the scopes pause: its history is
      // read more than a page back)...
      for (let i = 0; i < 96; i++) await admin.put200({ ...(await read(id)), error: pausedError(c.id, i % 2 === 0 ? 'disabled' : 'scopes') });
      // ...and paused again by the server as its client is disabled and enabled, still narrowed (10 more).
      for (let i = 0; i < 5; i++) {
        expect(await cinder(['client', 'disable', c.id])).toMatchObject({ subscriptions_paused: [id, moved].sort() });
        expect(await cinder(['client', 'enable', c.id])).toMatchObject({ subscriptions_paused: [id, moved].sort() });
      }
      expect(await shown(id)).toEqual(['error', pausedError(c.id, 'scopes'), '108']);
      expect(await cinder(['client', 'update', c.id, '--scope', 'system/*.*'])).toMatchObject({ subscriptions_resumed: [id] });
      expect(await shown(id)).toEqual(['active', undefined, '109']);
      expect(await shown(moved)).toEqual(['error', pausedError(c.id, 'scopes'), '13']);
      // Active again, it notifies.
      later();
      await admin.put200({ resourceType: 'Patient', id: 'lp1', name: [{ family: 'long-paused' }] });
      expect(await t.store.subscriptions.pending('t1', id, 10)).toHaveLength(1);
    });

    test('a silenced Subscription whose status write always fails does not keep a write from showing the others, and waits before it is tried again', async () => {
      const c = await backend();
      const broken: string[] = [];
      for (let i = 0; i < SHOWN_PER_WRITE; i++) broken.push(await subscribe(c.api, `broken${i}`));
      const others = [await subscribe(c.api, 'others0'), await subscribe(c.api, 'others1')];
      // Its versions cannot be stored: each status write of it fails.
      for (const id of broken) unstorable.add(id);
      // Disabled behind cinder's back (as a token the servers had not yet refused leaves them): silenced, reading active.
      await disableClient(t.store, t.clock, c.id);
      later();
      const statuses = async (ids: string[]) => Promise.all(ids.map(async (id) => (await read(id)).status));
      let n = 0;
      const write = () => admin.put200({ resourceType: 'Patient', id: `sf${n++}`, name: [{ family: 'silenced-failing' }] });
      await write();
      // The first write tried the broken ones (they come first), and failed each; the next shows the others.
      expect(await statuses(others)).toEqual(['active', 'active']);
      await write();
      expect(await statuses(others)).toEqual(['error', 'error']);
      expect(await shown(others[0]!)).toEqual(['error', expect.stringContaining(`(client ${c.id}) is disabled`), '2']);
      // A broken one repaired meanwhile is not tried again before its wait is over; then it is shown.
      unstorable.delete(broken[0]!);
      await write();
      expect((await read(broken[0]!)).status).toBe('active');
      later(FIRST_RETRY_MS);
      await write();
      expect(await shown(broken[0]!)).toEqual(['error', expect.stringContaining(`(client ${c.id}) is disabled`), '2']);
      expect(await statuses(broken.slice(1))).toEqual(broken.slice(1).map(() => 'active'));
    });

    test("`client enable` sets paused Subscriptions back only up to the tenant's 1,000 active ones: the rest are set off, naming the bound, and said on stderr", async () => {
      // A tenant of its own, filled by another app; this app's three paused by its disable.
      const other = fhirClient(t, await t.tokenFor('bound', ['system/*.*']), 'bound');
      const { client, clientSecret } = await createClient(t.store, t.clock, { tenant: 'bound', scopes: ['system/*.*'] });
      const res = await post(t, { grant_type: 'client_credentials' }, { Authorization: basic(client.clientId, clientSecret!) });
      const api = fhirClient(t, ((await res.json()) as { access_token: string }).access_token, 'bound');
      const ours: string[] = [];
      for (let i = 0; i < 3; i++) ours.push((await api.create({ resourceType: 'Subscription', status: 'requested', reason: 'ours', criteria: `Patient?family=b${i}`, channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1:9/hook' } })).id as string);
      ours.sort();
      expect(await cinder(['client', 'disable', client.clientId])).toMatchObject({ subscriptions_paused: ours });
      // 998 more activated meanwhile: room for two of the three.
      const fill = await other.post('', {
        resourceType: 'Bundle', type: 'transaction',
        entry: Array.from({ length: 998 }, (_, i) => ({
          resource: { resourceType: 'Subscription', id: `w-${i}`, status: 'requested', reason: 'fill', criteria: `Observation?code=http://loinc.org|w${i}`, channel: { type: 'websocket' } },
          request: { method: 'PUT', url: `Subscription/w-${i}` },
        })),
      });
      expect(fill.status).toBe(200);
      const r = await cli.run(['client', 'enable', client.clientId, '--json']);
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ status: 'active', subscriptions_resumed: ours.slice(0, 2), subscriptions_off: [ours[2]], subscriptions_paused: [] });
      expect(r.stderr).toContain(`1 paused Subscription was set off, not back to active: tenant bound has 1000 active Subscriptions, the most Cinder matches (${ours[2]})`);
      const shownIn = async (id: string) => {
        const sub = (await (await other.get(`Subscription/${id}`)).json()) as Json;
        return [sub.status, sub.error];
      };
      expect(await shownIn(ours[0]!)).toEqual(['active', undefined]);
      expect(await shownIn(ours[1]!)).toEqual(['active', undefined]);
      const [status, error] = await shownIn(ours[2]!);
      expect(status).toBe('off');
      expect(error).toContain('the tenant has 1000 active Subscriptions');
      const count = (await (await other.get('Subscription?status=active,requested&_summary=count')).json()) as Json;
      expect(count.total).toBe(1000);
      // Activating it again is refused at the bound, as any activation is (a 422), until another is set off.
      const again = await api.put('Subscription/' + ours[2], { ...((await (await other.get(`Subscription/${ours[2]}`)).json()) as Json), status: 'requested', error: undefined });
      expect(again.status).toBe(422);
      expect((await other.del('Subscription/w-0')).status).toBe(200);
      const later = await api.put('Subscription/' + ours[2], { ...((await (await other.get(`Subscription/${ours[2]}`)).json()) as Json), status: 'requested', error: undefined });
      expect([later.status, ((await later.json()) as Json).status]).toEqual([200, 'active']);
      // Enabled again with nothing paused: nothing more set off, and nothing said.
      const quiet = await cli.run(['client', 'enable', client.clientId, '--json']);
      expect([quiet.code, quiet.stderr, JSON.parse(quiet.stdout).subscriptions_off]).toEqual([0, '', []]);
    }, 60_000);
  });
}
