/**
 * Bulk export against a model of the history: random writes, deletions, re-creations and Group membership
 * changes before and after `_since`, between kick-off and run, and during the run (between pages); every
 * export level, with and without `_since` and `_typeFilter`, under a scope filter, a patient's token and a
 * POST `patient` list. Provenance targeting the records is written too, and exported by its targets (a
 * Patient or Group export's default, `includeAssociatedData` Relevant and Latest, with the older Provenance of the
 * members who joined since `_since`), filtered by `_typeFilter`, or scanned as a type (a system export, a patient's
 * token). Each export's output (versions) and `deleted` files must be exactly what the model says held at its
 * transactionTime (Bulk Data 2.0.0), files split small so that two steps write parts of Provenance.
 */
import { describe, expect, test } from 'bun:test';
import type { ResourceRepo, Store } from '../../src/store/types.ts';
import { createTestApp, fhirInit, testClock, type TestApp } from '../helpers/app.ts';
import { download, eachStore, put, remove, runExports, type Manifest } from '../helpers/export.ts';
import { craftToken } from '../helpers/fhir.ts';
import { prng } from '../helpers/prng.ts';

type Res = Record<string, any> & { resourceType: string; id: string };
interface Version { at: number; deleted: boolean; res?: Res }
interface Job {
  name: string; status: string; token: string; level: 'system' | 'patient' | 'group'; since: boolean; filtered: boolean;
  /** Provenance exported: scanned as a type, or found by its targets (Job.scoped: within the scope filter on them). */
  provenance?: 'scanned' | 'compartment' | 'relevant' | 'latest';
  /** `_typeFilter=Provenance?recorded=gt2025-01-01`. */
  recent?: boolean;
  /** The token's scope filter (Observation code A) holds, on Provenance targets too. */
  scoped?: boolean;
  /** A POST's `patient` list (those that exist count), or `bound`: the compartment of a patient's token, as its searches read it. */
  patients?: string[]; bound?: boolean;
}

const PATIENTS = ['p0', 'p1', 'p2', 'p3', 'p4', 'p5'];
const TYPES = '_type=Patient,Observation,Encounter';
const WITH_PROVENANCE = `${TYPES},Provenance`;
const RECENT = '2025-01-01T00:00:00Z';
const SEEDS = 3;

/** Writes random changes through the store and records every version in `history` as the store stamped it. */
function writer(t: TestApp, clock: ReturnType<typeof testClock>, rand: () => number, history: Map<string, Version[]>) {
  const pick = <T,>(a: T[]) => a[Math.floor(rand() * a.length)]!;
  const versions = (key: string) => history.get(key) ?? history.set(key, []).get(key)!;
  const write = async (r: Res) => {
    clock.advance(10);
    await put(t, r);
    const v = (await t.store.resources.read('t1', r.resourceType, r.id))!;
    versions(`${r.resourceType}/${r.id}`).push({ at: v.lastUpdated, deleted: false, res: JSON.parse(v.content) });
  };
  const del = async (type: string, id: string) => {
    const h = history.get(`${type}/${id}`);
    if (!h || h[h.length - 1]!.deleted) return;
    clock.advance(10);
    await remove(t, type, id);
    h.push({ at: (await t.store.resources.read('t1', type, id))!.lastUpdated, deleted: true });
  };
  const ref = () => ({ reference: `Patient/${pick(PATIENTS)}` });
  const group = () => {
    const member = PATIENTS.filter(() => rand() < 0.5).map((p) => ({ entity: { reference: `Patient/${p}` } }));
    return { resourceType: 'Group', id: 'g1', type: 'person', actual: true, ...(member.length ? { member } : {}) };
  };
  const op = async () => {
    const x = rand();
    const n = (max: number) => Math.floor(rand() * max);
    if (x < 0.1) await write({ resourceType: 'Patient', id: pick(PATIENTS), gender: pick(['male', 'female']) });
    else if (x < 0.15) await del('Patient', pick(PATIENTS));
    else if (x < 0.5) {
      // performer is a second Patient compartment parameter of Observation.
      await write({ resourceType: 'Observation', id: `o${n(20)}`, status: 'final', code: { coding: [{ system: 'http://loinc.org', code: pick(['A', 'B']) }] }, subject: ref(), ...(rand() < 0.4 ? { performer: [ref()] } : {}) });
    } else if (x < 0.6) await del('Observation', `o${n(20)}`);
    else if (x < 0.72) await write({ resourceType: 'Encounter', id: `e${n(8)}`, status: 'finished', class: { code: 'AMB' }, subject: ref() });
    else if (x < 0.76) await del('Encounter', `e${n(8)}`);
    else if (x < 0.84) await write(group());
    else if (x < 0.97) {
      // Provenance of one or two records (a Patient, an Observation, an Encounter), recorded in 2024 or 2025.
      const target = () => (rand() < 0.2 ? ref() : { reference: rand() < 0.6 ? `Observation/o${n(20)}` : `Encounter/e${n(8)}` });
      const recorded = new Date(Date.UTC(pick([2024, 2025]), n(12), 1 + n(28))).toISOString();
      await write({ resourceType: 'Provenance', id: `v${n(10)}`, target: rand() < 0.4 ? [target(), target()] : [target()], recorded, agent: [{ who: { display: 'Clinician' } }] });
    } else await del('Provenance', `v${n(10)}`);
  };
  return { write, group, op };
}

/** What the model says `job` holds: `Type/id@version` of its output, `Type/id` of its deletions. */
function expected(job: Job, history: Map<string, Version[]>, at: number, since: number) {
  const asOf = (h: Version[], time: number) => h.findLast((v) => v.at <= time);
  const patientsOf = (r: Res): string[] => {
    if (r.resourceType === 'Patient') return [r.id];
    // A Provenance is in the compartment of the Patients it targets (its `patient` parameter).
    if (r.resourceType === 'Provenance') return r.target.map((t: any) => t.reference).filter((s: string) => s.startsWith('Patient/')).map((s: string) => s.split('/')[1]!);
    return [r.subject.reference, ...(r.performer ?? []).map((p: any) => p.reference)].map((s: string) => s.split('/')[1]!);
  };
  const membersAt = (time: number) => {
    const g = asOf(history.get('Group/g1')!, time);
    return new Set<string>(g && !g.deleted ? (g.res!.member ?? []).map((m: any) => m.entity.reference.split('/')[1]) : []);
  };
  // A named Patient counts when it existed at transactionTime or, with `_since`, was deleted after it.
  const known = (p: string) => {
    const v = asOf(history.get(`Patient/${p}`)!, at);
    return v !== undefined && (!v.deleted || (job.since && v.at > since));
  };
  let patients = job.patients ? new Set(job.bound ? job.patients : job.patients.filter(known)) : undefined;
  let joined = new Set<string>();
  if (job.level === 'group') {
    // A patient's token exports its own compartment, its patient a member (or the kick-off was a 403).
    if (!job.bound) patients = new Set([...membersAt(at)].filter(known));
    // Members at `_since` (the earlier export's): those whose Patient existed then, for a token told which exist.
    const existed = (p: string) => { const v = asOf(history.get(`Patient/${p}`)!, since); return v !== undefined && !v.deleted; };
    const before = new Set([...membersAt(since)].filter((p) => job.bound || existed(p)));
    if (job.since) joined = new Set([...patients!].filter((p) => !before.has(p)));
  }
  const inPatients = (r: Res, set: Set<string> | undefined) => (set ? patientsOf(r).some((p) => set.has(p)) : patientsOf(r).length > 0);
  const recent = (r: Res) => !job.recent || r.resourceType !== 'Provenance' || r.recorded > RECENT;
  const selected = (r: Res) => (!patients || patientsOf(r).some((p) => patients!.has(p))) && !(job.filtered && r.resourceType === 'Observation' && r.code.coding[0].code !== 'A') && recent(r);
  const scanned = (key: string) => !key.startsWith('Group/') && (!key.startsWith('Provenance/') || job.provenance === 'scanned');
  const output: string[] = [];
  const deleted: string[] = [];
  for (const [key, h] of history) {
    const v = scanned(key) ? asOf(h, at) : undefined;
    if (!v) continue;
    if (!v.deleted) {
      if (!selected(v.res!) || (job.since && v.at <= since && !patientsOf(v.res!).some((p) => joined.has(p)))) continue;
      output.push(`${key}@${v.res!.meta.versionId}`);
    } else if (job.since && v.at > since) {
      const live = h.findLast((x) => x.at < v.at && !x.deleted);
      if (live && selected(live.res!)) deleted.push(key);
    }
  }
  if (job.provenance && job.provenance !== 'scanned') provenanceByTargets(job, history, at, since, { asOf, inPatients, recent, patients, joined, output, deleted });
  return { output: output.sort(), deleted: deleted.sort() };
}

/**
 * Provenance found by its targets as of `at`: in `compartment` mode those targeting a record in a job patient's
 * compartment (within the token's scope filter, whatever `_type` and `_typeFilter` select), in `relevant` and
 * `latest` those targeting an exported record (`latest`: the most recent one of each by `recorded`, then last
 * update, then id). With `_since`: changed since, or older and targeting a record of a member who joined since.
 */
function provenanceByTargets(job: Job, history: Map<string, Version[]>, at: number, since: number, m: {
  asOf: (h: Version[], time: number) => Version | undefined; inPatients: (r: Res, set: Set<string> | undefined) => boolean; recent: (r: Res) => boolean;
  patients: Set<string> | undefined; joined: Set<string>; output: string[]; deleted: string[];
}) {
  const exported = new Set(m.output.map((o) => o.split('@')[0]!));
  const kept = (ref: string, joinedOnly: boolean) => {
    const v = m.asOf(history.get(ref) ?? [], at);
    if (!v || v.deleted) return false;
    if (joinedOnly && !m.inPatients(v.res!, m.joined)) return false;
    if (job.provenance !== 'compartment') return exported.has(ref);
    return m.inPatients(v.res!, m.patients) && !(job.scoped && v.res!.resourceType === 'Observation' && v.res!.code.coding[0].code !== 'A');
  };
  const targets = (r: Res): string[] => r.target.map((t: any) => t.reference);
  const owed = (v: Version) => ((!job.since || v.at > since) ? targets(v.res!).filter((t) => kept(t, false)) : targets(v.res!).filter((t) => kept(t, true)));
  const latest = new Map<string, { rank: string; key: string }>();
  for (const [key, h] of history) {
    if (!key.startsWith('Provenance/')) continue;
    const v = m.asOf(h, at);
    if (!v) continue;
    if (!v.deleted) {
      if (!m.recent(v.res!)) continue;
      const found = owed(v);
      if (!found.length) continue;
      if (job.provenance !== 'latest') {
        m.output.push(`${key}@${v.res!.meta.versionId}`);
        continue;
      }
      const rank = `${String(Date.parse(v.res!.recorded)).padStart(15, '0')}.${String(v.at).padStart(15, '0')}.${v.res!.id}`;
      for (const t of found) if (!latest.has(t) || latest.get(t)!.rank < rank) latest.set(t, { rank, key: `${key}@${v.res!.meta.versionId}` });
    } else if (job.since && v.at > since && job.provenance !== 'latest') {
      const live = h.findLast((x) => x.at < v.at && !x.deleted);
      if (live && m.recent(live.res!) && targets(live.res!).some((t) => kept(t, false))) m.deleted.push(key);
    }
  }
  m.output.push(...new Set([...latest.values()].map((l) => l.key)));
}

await eachStore((kind, fresh) => {
  describe(`export against a model of the history (${kind})`, () => {
    for (let seed = 1; seed <= SEEDS; seed++) {
      test(`seed ${seed}`, async () => {
        const rand = prng(seed);
        const clock = testClock();
        const t = await createTestApp({ clock, store: await fresh(), env: { CINDER_RATE_LIMITS: 'off', CINDER_EXPORT_MAX_JOBS_PER_CLIENT: '100' } });
        const history = new Map<string, Version[]>();
        const w = writer(t, clock, rand, history);
        for (const p of PATIENTS) await w.write({ resourceType: 'Patient', id: p });
        await w.write(w.group());
        for (let i = 0; i < 40; i++) await w.op();
        clock.advance(1000);
        const since = clock.now();
        clock.advance(1000);
        for (let i = 0; i < 40; i++) await w.op();
        // Members who joined since: everyone on odd seeds (their older records and Provenance are owed), at random on the others.
        if (seed % 2) await w.write({ ...w.group(), member: PATIENTS.map((p) => ({ entity: { reference: `Patient/${p}` } })) });
        clock.advance(1000);

        const admin = await t.token();
        const scoped = await craftToken(t, 'system/Patient.rs system/Encounter.rs system/Group.rs system/Provenance.rs system/Observation.rs?code=http://loinc.org|A');
        const ofPatient = await craftToken(t, 'patient/*.rs', { patient: 'p1' });
        const jobs: Job[] = [];
        const start = async (job: Omit<Job, 'status'>, path: string, init: RequestInit) => {
          const res = await t.request(t.fhir() + path, init);
          // A patient's token exports a Group only when its patient is a member.
          if (res.status === 403 && job.level === 'group' && job.token === ofPatient) return;
          expect({ job: job.name, status: res.status }).toEqual({ job: job.name, status: 202 });
          jobs.push({ ...job, status: res.headers.get('content-location')! });
        };
        for (const [level, path] of [['system', '/$export'], ['patient', '/Patient/$export'], ['group', '/Group/g1/$export']] as const) {
          for (const withSince of [false, true]) {
            for (const filtered of [false, true]) {
              let query = `${path}?${TYPES}`;
              if (withSince) query += `&_since=${new Date(since).toISOString()}`;
              if (filtered) query += `&_typeFilter=${encodeURIComponent('Observation?code=A')}`;
              await start({ name: query, token: admin, level, since: withSince, filtered }, query, fhirInit(admin));
              if (!filtered) await start({ name: `${query} (scope filter)`, token: scoped, level, since: withSince, filtered: true }, query, fhirInit(scoped));
              if (level !== 'system') await start({ name: `${query} (Patient/p1's token)`, token: ofPatient, level, since: withSince, filtered, patients: ['p1'], bound: true }, query, fhirInit(ofPatient));
            }
            // With Provenance: scanned by a system export and a patient's token, else found by its targets.
            const sinceParam = withSince ? `&_since=${new Date(since).toISOString()}` : '';
            const byTargets = level === 'system' ? 'scanned' : 'compartment';
            for (const recent of [false, true]) {
              const query = `${path}?${WITH_PROVENANCE}${sinceParam}${recent ? `&_typeFilter=${encodeURIComponent(`Provenance?recorded=gt${RECENT}`)}` : ''}`;
              await start({ name: query, token: admin, level, since: withSince, filtered: false, provenance: byTargets, recent }, query, fhirInit(admin));
            }
            const query = `${path}?${WITH_PROVENANCE}${sinceParam}`;
            await start({ name: `${query} (scope filter)`, token: scoped, level, since: withSince, filtered: true, scoped: true, provenance: byTargets }, query, fhirInit(scoped));
            if (level !== 'system') {
              await start({ name: `${query} (Patient/p1's token)`, token: ofPatient, level, since: withSince, filtered: false, patients: ['p1'], bound: true, provenance: 'scanned' }, query, fhirInit(ofPatient));
              for (const [associated, mode] of [['RelevantProvenanceResources', 'relevant'], ['LatestProvenanceResources', 'latest']] as const) {
                for (const filtered of [false, true]) {
                  const q = `${path}?${TYPES}${sinceParam}&includeAssociatedData=${associated}${filtered ? `&_typeFilter=${encodeURIComponent('Observation?code=A')}` : ''}`;
                  await start({ name: q, token: admin, level, since: withSince, filtered, provenance: mode }, q, fhirInit(admin));
                }
              }
            }
          }
          if (level === 'patient') {
            for (const withSince of [false, true]) {
              const parameter: Record<string, unknown>[] = [{ name: '_type', valueString: 'Patient,Observation,Encounter' }, ...['p1', 'p2'].map((p) => ({ name: 'patient', valueReference: { reference: `Patient/${p}` } }))];
              if (withSince) parameter.push({ name: '_since', valueInstant: new Date(since).toISOString() });
              const init = fhirInit(admin, 'POST', { resourceType: 'Parameters', parameter }, { Prefer: 'handling=lenient' });
              await start({ name: `POST ${path} patient=p1,p2${withSince ? ' _since' : ''}`, token: admin, level, since: withSince, filtered: false, patients: ['p1', 'p2'] }, path, init);
            }
          }
        }
        const at = clock.now();

        // Writes after transactionTime: before the jobs run, and between their pages (after every third page read:
        // some 1,150 pages of 3 rows; a write after each was most of the time taken on PostgreSQL, 12 ms each there).
        clock.advance(1000);
        for (let i = 0; i < 10; i++) await w.op();
        const resources: ResourceRepo = Object.create(t.store.resources);
        let writing = false;
        let pages = 0;
        let between = 0;
        resources.snapshot = async (tenant, q) => {
          const page = await t.store.resources.snapshot(tenant, q);
          if (!writing && pages++ % 3 === 0) {
            writing = true;
            between++;
            await w.op().finally(() => (writing = false));
          }
          return page;
        };
        const store = new Proxy(t.store, { get: (target, key) => (key === 'resources' ? resources : Reflect.get(target, key)) }) as Store;
        // Small files: a type's parts roll over within a step and go on across the two steps that write Provenance.
        expect(new Set(await runExports(t, { pageSize: 3, fileMaxBytes: 1500, store }))).toEqual(new Set(['completed']));
        expect(between).toBeGreaterThan(300);

        for (const job of jobs) {
          const manifest = (await (await t.request(job.status, fhirInit(job.token))).json()) as Manifest;
          const output = Object.values(await download(t, job.token, manifest.output)).flat().map((r: any) => `${r.resourceType}/${r.id}@${r.meta.versionId}`).sort();
          const deleted = Object.values(await download(t, job.token, manifest.deleted ?? [])).flat().map((b: any) => b.entry[0].request.url).sort();
          expect({ job: job.name, output, deleted }).toEqual({ job: job.name, ...expected(job, history, at, since) });
        }
        await t.close();
      }, 300_000);
    }
  });
});
