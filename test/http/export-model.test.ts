/**
 * Bulk export against a model of the history: random writes, deletions, re-creations and Group membership
 * changes before and after `_since`, between kick-off and run, and during the run (between pages); every
 * export level, with and without `_since` and `_typeFilter`, under a scope filter, a patient's token and a
 * POST `patient` list. Each export's output (versions) and `deleted` files must be exactly what the model
 * says held at its transactionTime (Bulk Data 2.0.0).
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
  /** A POST's `patient` list (those that exist count), or `bound`: the compartment of a patient's token, as its searches read it. */
  patients?: string[]; bound?: boolean;
}

const PATIENTS = ['p0', 'p1', 'p2', 'p3', 'p4', 'p5'];
const TYPES = '_type=Patient,Observation,Encounter';
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
    } else if (x < 0.65) await del('Observation', `o${n(20)}`);
    else if (x < 0.8) await write({ resourceType: 'Encounter', id: `e${n(8)}`, status: 'finished', class: { code: 'AMB' }, subject: ref() });
    else if (x < 0.88) await del('Encounter', `e${n(8)}`);
    else await write(group());
  };
  return { write, group, op };
}

/** What the model says `job` holds: `Type/id@version` of its output, `Type/id` of its deletions. */
function expected(job: Job, history: Map<string, Version[]>, at: number, since: number) {
  const asOf = (h: Version[], time: number) => h.findLast((v) => v.at <= time);
  const patientsOf = (r: Res): string[] => r.resourceType === 'Patient' ? [r.id] : [r.subject.reference, ...(r.performer ?? []).map((p: any) => p.reference)].map((s: string) => s.split('/')[1]!);
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
  const selected = (r: Res) => (!patients || patientsOf(r).some((p) => patients!.has(p))) && !(job.filtered && r.resourceType === 'Observation' && r.code.coding[0].code !== 'A');
  const output: string[] = [];
  const deleted: string[] = [];
  for (const [key, h] of history) {
    const v = key.startsWith('Group/') ? undefined : asOf(h, at);
    if (!v) continue;
    if (!v.deleted) {
      if (!selected(v.res!) || (job.since && v.at <= since && !patientsOf(v.res!).some((p) => joined.has(p)))) continue;
      output.push(`${key}@${v.res!.meta.versionId}`);
    } else if (job.since && v.at > since) {
      const live = h.findLast((x) => x.at < v.at && !x.deleted);
      if (live && selected(live.res!)) deleted.push(key);
    }
  }
  return { output: output.sort(), deleted: deleted.sort() };
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
        clock.advance(1000);

        const admin = await t.token();
        const scoped = await craftToken(t, 'system/Patient.rs system/Encounter.rs system/Group.rs system/Observation.rs?code=http://loinc.org|A');
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

        // Writes after transactionTime: before the jobs run, and between their pages.
        clock.advance(1000);
        for (let i = 0; i < 10; i++) await w.op();
        const resources: ResourceRepo = Object.create(t.store.resources);
        let writing = false;
        resources.snapshot = async (tenant, q) => {
          const page = await t.store.resources.snapshot(tenant, q);
          if (!writing) {
            writing = true;
            await w.op().finally(() => (writing = false));
          }
          return page;
        };
        const store = new Proxy(t.store, { get: (target, key) => (key === 'resources' ? resources : Reflect.get(target, key)) }) as Store;
        expect(new Set(await runExports(t, { pageSize: 3, store }))).toEqual(new Set(['completed']));

        for (const job of jobs) {
          const manifest = (await (await t.request(job.status, fhirInit(job.token))).json()) as Manifest;
          const output = Object.values(await download(t, job.token, manifest.output)).flat().map((r: any) => `${r.resourceType}/${r.id}@${r.meta.versionId}`).sort();
          const deleted = Object.values(await download(t, job.token, manifest.deleted ?? [])).flat().map((b: any) => b.entry[0].request.url).sort();
          expect({ job: job.name, output, deleted }).toEqual({ job: job.name, ...expected(job, history, at, since) });
        }
        await t.close();
      }, 120_000);
    }
  });
});
