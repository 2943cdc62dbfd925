/**
 * Measures a write in a tenant with N active Subscriptions activated with user tokens that carry a chosen patient,
 * once the 5 s cache of the patients' checks (src/auth/patient-held.ts) has lapsed (docs/PERFORMANCE.md, "Fifty-first
 * session", reindex-auth): POSTs of an Observation through app.request() on SQLite (or PostgreSQL), the test clock
 * moved past the cache's life before each; a write matching no Subscription, one, or all of them. Two owners' shapes: one Practitioner user with N patients (`staff`), and N
 * guardians, each a RelatedPerson user naming its own patient (`guardians`). Each checkout named is loaded in this one
 * process (its src and test helpers) and measured in turn, round by round, so that their ratio is of one run.
 *   bun bench/subscription-patient-choices.ts [N, default 300] [rounds, default 20] [sqlite|postgres] [checkout...]
 * (checkouts default to this one; with PostgreSQL, new databases of CINDER_BENCH_POSTGRES_URL's server, dropped at the end).
 */
import { resolve } from 'node:path';
import { type serverDatabase, serverStore } from './lib/databases.ts';

const N = Number(process.argv[2] ?? 300);
const ROUNDS = Number(process.argv[3] ?? 20);
const onPostgres = process.argv[4] === 'postgres';
const roots = process.argv.slice(5).map((r) => resolve(r));
if (!roots.length) roots.push(resolve(import.meta.dir, '..'));
const databases: Awaited<ReturnType<typeof serverDatabase>>[] = [];
const SCOPES = ['launch/patient', 'patient/*.rs'];
type Json = Record<string, any>;

/** What the measured write matches: no Subscription, one (the first), or all. */
type Match = 'none' | 'one' | 'all';
const MATCHES: Match[] = ['none', 'one', 'all'];
const TEXT_OF: Record<Match, string> = { none: 'ignored', one: 'w-0', all: 'watched' };

interface Case {
  name: string;
  /** `lapsed`: the 5 s caches of owners and choices lapsed before it; else within them (the steady state of a busy tenant). */
  write(match: Match, lapsed: boolean): Promise<number>;
  close(): Promise<void>;
}

async function setUp(root: string, shape: 'staff' | 'guardians'): Promise<Case> {
  const { createTestApp } = await import(`${root}/test/helpers/app.ts`);
  const { createClient } = await import(`${root}/src/auth/admin.ts`);
  const { CLIENT_CACHE_TTL_MS } = await import(`${root}/src/auth/client-cache.ts`);
  let store;
  if (onPostgres) {
    const made = await serverStore(root);
    databases.push(made.database);
    store = made.store;
  }
  const t = await createTestApp({ resolveHost: async () => ['93.184.215.14'], ...(store && { store }) });
  // Signed again before each measured write (outside its time): the clock moved past the caches' life each round would
  // outlive a token signed once.
  let token = await t.token();
  const post = async (path: string, body: Json) => {
    const res = await t.request(`${t.fhir()}${path}`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' }, body: JSON.stringify(body) });
    if (res.status >= 300) throw new Error(`${path}: ${res.status} ${await res.text()}`);
    return (await res.json()) as Json;
  };
  const transaction = (entry: Json[]) => post('', { resourceType: 'Bundle', type: 'transaction', entry });
  const clientId = (await createClient(t.store, t.clock, { tenant: 't1', name: 'App', grants: ['authorization_code'], redirectUris: ['https://app.example/cb'], scopes: SCOPES })).client.clientId;
  await transaction(Array.from({ length: N }, (_, i) => ({ resource: { resourceType: 'Patient', id: `p-${i}`, name: [{ family: `F${i}` }] }, request: { method: 'PUT', url: `Patient/p-${i}` } })));
  const hash = await Bun.password.hash('correct horse battery');
  const user = async (username: string, fhirUser: string) => {
    const id = crypto.randomUUID();
    await t.store.users.create({
      id, tenant: 't1', username, passwordHash: hash, name: null, email: null, emailVerified: false, phone: null, phoneVerified: false, address: null,
      fhirUser, createdAt: t.clock.now(), disabled: false, deletedAt: null, tokensRevokedAt: null,
    });
    return id;
  };
  const owners: string[] = [];
  if (shape === 'staff') {
    const doc = await user('doc', 'Practitioner/d-1');
    for (let i = 0; i < N; i++) owners.push(doc);
  } else {
    await transaction(Array.from({ length: N }, (_, i) => ({ resource: { resourceType: 'RelatedPerson', id: `rp-${i}`, patient: { reference: `Patient/p-${i}` } }, request: { method: 'PUT', url: `RelatedPerson/rp-${i}` } })));
    for (let i = 0; i < N; i++) owners.push(await user(`rel-${i}`, `RelatedPerson/rp-${i}`));
  }
  // Each matches an Observation of code text `watched` (all of them) or its own `w-<i>` (one).
  const sub = (i: number) => ({ resourceType: 'Subscription', status: 'requested', reason: 'bench', criteria: `Observation?code:text=watched,w-${i}`, channel: { type: 'rest-hook', endpoint: 'https://hooks.example.org/fhir' } });
  const made = await transaction(owners.map((_, i) => ({ resource: sub(i), request: { method: 'POST', url: 'Subscription' } })));
  const ids = made.entry.map((e: Json) => e.resource.id as string);
  await t.store.resources.write('t1', async (w: Json) => {
    for (const [i, id] of ids.entries()) {
      await w.ownSubscription(id, JSON.stringify({ scopes: SCOPES, clientId, patient: `p-${i}`, user: { id: owners[i], readAt: t.clock.now() } }), 'rest-hook');
    }
  });
  // A write of a type the hub watches: its set is read again, with the owners above.
  await post('/ValueSet', { resourceType: 'ValueSet', status: 'active' });
  const obs = (text: string) => ({ resourceType: 'Observation', status: 'final', code: { text }, subject: { reference: 'Patient/p-1' } });
  await post('/Observation', obs('watched'));
  return {
    name: `${shape} ${root}`,
    async write(match, lapsed) {
      if (lapsed) t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      token = await t.token();
      const started = performance.now();
      await post('/Observation', obs(TEXT_OF[match]));
      return performance.now() - started;
    },
    close: () => t.close(),
  };
}

const cases: Case[] = [];
for (const shape of ['staff', 'guardians'] as const) for (const root of roots) cases.push(await setUp(root, shape));
const times = new Map<string, number[]>();
for (let r = 0; r < ROUNDS; r++) {
  for (const c of cases) {
    for (const lapsed of [true, false]) {
      for (const m of MATCHES) {
        const key = `${c.name} | ${m}, caches ${lapsed ? 'lapsed' : 'warm'}`;
        (times.get(key) ?? times.set(key, []).get(key)!).push(await c.write(m, lapsed));
      }
    }
  }
}
const q = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) * p)]!;
console.log(`${N} Subscriptions, ${ROUNDS} writes each, ${onPostgres ? 'PostgreSQL' : 'SQLite'}`);
console.log('| case | write matches | lowest ms | median ms | upper quartile ms |\n|---|---|---:|---:|---:|');
for (const [name, xs] of times) console.log(`| ${name} | ${q(xs, 0).toFixed(1)} | ${q(xs, 0.5).toFixed(1)} | ${q(xs, 0.75).toFixed(1)} |`);
for (const c of cases) await c.close();
for (const d of databases) await d.drop();
