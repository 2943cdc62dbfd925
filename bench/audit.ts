/**
 * The cost of the audit trail: request latency with CINDER_AUDIT=on against off, in one process, in turn.
 *
 *   bun bench/audit.ts [--rounds N] [--per-round N] [--postgres <url of an empty database per side, {side} replaced by on/off>]
 *
 * Two in-process apps (test/helpers/app.ts) on fresh SQLite files (or the two PostgreSQL databases
 * given), one with CINDER_AUDIT=on, one off, each holding 200 Patients with 5 Observations each. Rounds
 * alternate between them (on off, off on, ...), the first two discarded as warm-up; a round sends
 * `per-round` requests of each kind, one at a time, through `app.request()` (no sockets):
 *   read    GET Observation/{id}          (the hot route)
 *   search  GET Observation?patient={id}  (five matches)
 *   create  POST Observation              (validated, indexed, committed)
 * and then, on the audited side, waits for the queue to be written (`audit.flush()`). Prints, per kind
 * and side, the median over rounds of each round's median latency (what a client waits), and the median
 * over rounds of the round's whole time per request including the flush (what the server spends).
 */
import { parseArgs } from 'node:util';
import { createTestApp, fhirInit, type TestApp } from '../test/helpers/app.ts';
import { createPostgresStore } from '../src/store/postgres/index.ts';
import { median } from './lib/stats.ts';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '30' }, 'per-round': { type: 'string', default: '200' }, postgres: { type: 'string' } } });
const ROUNDS = Number(values.rounds);
const PER_ROUND = Number(values['per-round']);
const PATIENTS = 200;
const KINDS = ['read', 'search', 'create'] as const;
type Kind = (typeof KINDS)[number];

interface Side {
  name: 'on' | 'off';
  t: TestApp;
  token: string;
  observations: string[];
  latency: Record<Kind, number[]>;
  total: Record<Kind, number[]>;
}


async function side(name: 'on' | 'off'): Promise<Side> {
  const store = values.postgres ? createPostgresStore(values.postgres.replace('{side}', name)) : undefined;
  const t = await createTestApp({ env: { CINDER_RATE_LIMITS: 'off', CINDER_AUDIT: name }, ...(store ? { store } : {}) });
  const token = await t.token();
  const observations: string[] = [];
  const entries = [];
  for (let p = 0; p < PATIENTS; p++) {
    entries.push({ resource: { resourceType: 'Patient', id: `p${p}`, name: [{ family: `Bench${p}` }] }, request: { method: 'PUT', url: `Patient/p${p}` } });
    for (let o = 0; o < 5; o++) {
      const id = `o${p}-${o}`;
      observations.push(id);
      entries.push({ resource: observation(p, id), request: { method: 'PUT', url: `Observation/${id}` } });
    }
  }
  const res = await t.request(t.fhir(), fhirInit(token, 'POST', { resourceType: 'Bundle', type: 'batch', entry: entries }));
  if (res.status !== 200) throw new Error(`load: ${res.status} ${await res.text()}`);
  await t.app.audit?.flush();
  return { name, t, token, observations, latency: { read: [], search: [], create: [] }, total: { read: [], search: [], create: [] } };
}

function observation(p: number, id?: string) {
  return {
    resourceType: 'Observation', ...(id ? { id } : {}), status: 'final', subject: { reference: `Patient/p${p}` },
    category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }],
    code: { coding: [{ system: 'http://loinc.org', code: '8867-4', display: 'Heart rate' }] },
    effectiveDateTime: '2025-01-01T10:00:00Z', valueQuantity: { value: 60 + (p % 40), unit: 'beats/minute', system: 'http://unitsofmeasure.org', code: '/min' },
  };
}

function request(s: Side, kind: Kind, i: number): Promise<Response> | Response {
  const base = s.t.fhir();
  if (kind === 'read') return s.t.app.request(`${base}/Observation/${s.observations[i % s.observations.length]}`, fhirInit(s.token));
  if (kind === 'search') return s.t.app.request(`${base}/Observation?patient=p${i % PATIENTS}`, fhirInit(s.token));
  return s.t.app.request(`${base}/Observation`, fhirInit(s.token, 'POST', observation(i % PATIENTS)));
}

async function round(s: Side, keep: boolean, offset: number): Promise<void> {
  for (const kind of KINDS) {
    const times: number[] = [];
    const started = performance.now();
    for (let i = 0; i < PER_ROUND; i++) {
      const t0 = performance.now();
      const res = await request(s, kind, offset + i);
      await res.arrayBuffer();
      if (res.status >= 300) throw new Error(`${s.name} ${kind}: ${res.status}`);
      times.push(performance.now() - t0);
    }
    await s.t.app.audit?.flush();
    if (keep) {
      s.latency[kind].push(median(times));
      s.total[kind].push((performance.now() - started) / PER_ROUND);
    }
  }
}

const sides = [await side('on'), await side('off')];
for (let r = 0; r < ROUNDS + 2; r++) {
  const order = r % 2 ? [sides[1]!, sides[0]!] : sides;
  for (const s of order) await round(s, r >= 2, r * PER_ROUND);
}
console.log(`${ROUNDS} rounds of ${PER_ROUND} requests per kind, ${values.postgres ? 'PostgreSQL' : 'SQLite'}; ms per request`);
console.log('kind    | latency off | latency on | +%    | with flush off | with flush on | +%');
for (const kind of KINDS) {
  const [on, off] = sides;
  const lOn = median(on!.latency[kind]), lOff = median(off!.latency[kind]);
  const tOn = median(on!.total[kind]), tOff = median(off!.total[kind]);
  const pct = (a: number, b: number) => `${(((a - b) / b) * 100).toFixed(1)}%`;
  console.log(`${kind.padEnd(7)} | ${lOff.toFixed(3).padStart(11)} | ${lOn.toFixed(3).padStart(10)} | ${pct(lOn, lOff).padStart(5)} | ${tOff.toFixed(3).padStart(14)} | ${tOn.toFixed(3).padStart(13)} | ${pct(tOn, tOff)}`);
}
const written = sides[0]!.t.app.audit!.counts;
console.log(`AuditEvents written ${written.written}, dropped ${written.dropped}, failed ${written.failed}`);
for (const s of sides) await s.t.close();
