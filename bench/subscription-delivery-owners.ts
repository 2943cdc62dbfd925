/**
 * Measures a delivery round's reads of its Subscriptions' owners (docs/PERFORMANCE.md, "Fifty-third session"): N active
 * rest-hook Subscriptions (default 16, the loop's CLAIMS), each activated by its own user through one of four clients,
 * each with one notification waiting; the 5 s caches of client and user records lapsed (the test clock moved past them)
 * before each round, whose time is that of `subscriptions.runOnce()` (claim, owners' reads, sends to a hook answering
 * 200 at once, outbox updates). The write recording the notifications is outside the time. Each checkout named is loaded
 * in this one process (its src and test helpers) and measured in turn, round by round, so that their ratio is of one run.
 *   bun bench/subscription-delivery-owners.ts [N, default 16] [rounds, default 40] [sqlite|postgres] [checkout...]
 * (checkouts default to this one; with PostgreSQL, new databases of CINDER_BENCH_POSTGRES_URL's server, dropped at the end).
 * With CINDER_BENCH_PATIENTS=1 each owner (a staff user) activated theirs with a patient in context, a Patient of its own,
 * whose check (src/auth/patient-held.ts, remembered as long as the caches) has lapsed too (fifty-fourth session).
 */
import { resolve } from 'node:path';
import { type serverDatabase, serverStore } from './lib/databases.ts';

const N = Number(process.argv[2] ?? 16);
const ROUNDS = Number(process.argv[3] ?? 40);
const onPostgres = process.argv[4] === 'postgres';
const roots = process.argv.slice(5).map((r) => resolve(r));
if (!roots.length) roots.push(resolve(import.meta.dir, '..'));
const databases: Awaited<ReturnType<typeof serverDatabase>>[] = [];
const SCOPES = ['user/*.rs'];
const PATIENTS = process.env.CINDER_BENCH_PATIENTS === '1';
type Json = Record<string, any>;

interface Case {
  name: string;
  round(): Promise<number>;
  close(): Promise<void>;
}

async function setUp(root: string): Promise<Case> {
  const { createTestApp } = await import(`${root}/test/helpers/app.ts`);
  const { createClient } = await import(`${root}/src/auth/admin.ts`);
  const { CLIENT_CACHE_TTL_MS } = await import(`${root}/src/auth/client-cache.ts`);
  let store;
  if (onPostgres) {
    const made = await serverStore(root);
    databases.push(made.database);
    store = made.store;
  }
  let sent = 0;
  const hook = (async () => {
    sent++;
    return new Response(null, { status: 200 });
  }) as unknown as typeof fetch;
  const t = await createTestApp({ resolveHost: async () => ['93.184.215.14'], fetch: hook, ...(store && { store }) });
  let token = await t.token();
  const post = async (path: string, body: Json) => {
    const res = await t.request(`${t.fhir()}${path}`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' }, body: JSON.stringify(body) });
    if (res.status >= 300) throw new Error(`${path}: ${res.status} ${await res.text()}`);
    return (await res.json()) as Json;
  };
  const clients: string[] = [];
  for (let i = 0; i < 4; i++) {
    clients.push((await createClient(t.store, t.clock, { tenant: 't1', name: `App ${i}`, grants: ['authorization_code'], redirectUris: ['https://app.example/cb'], scopes: SCOPES })).client.clientId);
  }
  const hash = await Bun.password.hash('correct horse battery');
  const users: string[] = [];
  for (let i = 0; i < N; i++) {
    const id = crypto.randomUUID();
    await t.store.users.create({
      id, tenant: 't1', username: `u-${i}`, passwordHash: hash, name: null, email: null, emailVerified: false, phone: null, phoneVerified: false, address: null,
      fhirUser: null, createdAt: t.clock.now(), disabled: false, deletedAt: null, tokensRevokedAt: null,
    });
    users.push(id);
    if (PATIENTS) {
      const res = await t.request(`${t.fhir()}/Patient/p${i}`, { method: 'PUT', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' }, body: JSON.stringify({ resourceType: 'Patient', id: `p${i}`, name: [{ family: `Chosen${i}` }] }) });
      if (res.status >= 300) throw new Error(`Patient/p${i}: ${res.status} ${await res.text()}`);
    }
  }
  const sub = (i: number) => ({ resourceType: 'Subscription', status: 'requested', reason: 'bench', criteria: 'Observation?code:text=watched', channel: { type: 'rest-hook', endpoint: `https://hooks.example.org/fhir/${i}` } });
  const made = await post('', { resourceType: 'Bundle', type: 'transaction', entry: users.map((_, i) => ({ resource: sub(i), request: { method: 'POST', url: 'Subscription' } })) });
  const ids = made.entry.map((e: Json) => e.resource.id as string);
  await t.store.resources.write('t1', async (w: Json) => {
    for (const [i, id] of ids.entries()) await w.ownSubscription(id, JSON.stringify({ scopes: SCOPES, clientId: clients[i % 4], ...(PATIENTS && { patient: `p${i}` }), user: { id: users[i], readAt: t.clock.now() } }), 'rest-hook');
  });
  await post('/ValueSet', { resourceType: 'ValueSet', status: 'active' });
  const obs = { resourceType: 'Observation', status: 'final', code: { text: 'watched' } };
  // The handshakes, and the Subscriptions activated.
  for (let i = 0; i < 10 && (await t.app.subscriptions.runOnce()) > 0; i++);
  return {
    name: root,
    async round() {
      token = await t.token();
      await post('/Observation', obs);
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      const before = sent;
      const started = performance.now();
      await t.app.subscriptions.runOnce();
      const ms = performance.now() - started;
      if (sent - before !== N) throw new Error(`${root}: ${sent - before} sent, expected ${N}`);
      return ms;
    },
    close: () => t.close(),
  };
}

const cases: Case[] = [];
for (const root of roots) cases.push(await setUp(root));
const times = new Map<string, number[]>();
for (let r = 0; r < ROUNDS; r++) {
  for (const c of cases) (times.get(c.name) ?? times.set(c.name, []).get(c.name)!).push(await c.round());
}
const q = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) * p)]!;
console.log(`${N} Subscriptions, one notification each${PATIENTS ? ', a patient in context each' : ''}, ${ROUNDS} rounds, caches lapsed, ${onPostgres ? 'PostgreSQL' : 'SQLite'}`);
console.log('| checkout | lowest ms | median ms | upper quartile ms |\n|---|---:|---:|---:|');
for (const [name, xs] of times) console.log(`| ${name} | ${q(xs, 0).toFixed(1)} | ${q(xs, 0.5).toFixed(1)} | ${q(xs, 0.75).toFixed(1)} |`);
for (const c of cases) await c.close();
for (const d of databases) await d.drop();
