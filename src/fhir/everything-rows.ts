/**
 * The matches of `$everything` (src/fhir/everything.ts), read for many patients at once: patients in id
 * order (or the one patient), each patient's rows type after type in the order of `types`, each type's
 * by id. A page reads the sizes of a batch of patients' compartments (CompartmentReads, the index
 * alone), then the rows of as many of them as should fill it in one statement; a patient with a large
 * compartment is read type by type by the search engine instead, as one compartment search per type,
 * so that no page sorts a huge compartment to take a few rows of it.
 */
import type { CompartmentRow, CompartmentSize, Condition, SearchQuery } from '../store/types.ts';
import type { FhirDeps, FhirRequest } from './crud.ts';
import { scopeFilter } from './search.ts';
import { compartmentsOf } from './indexer.ts';
import type { Resource } from './resource.ts';

/** What a page of `$everything` reads. */
export interface EverythingRead {
  /** The types, in the order each patient's rows come (none readable: no rows). */
  types: string[];
  /** `_since`: only versions updated at or after its `low` (the range of its value, as a `_lastUpdated=ge` test). */
  since?: { low: number; high: number };
  /** What a type's rows must meet besides the access guards (guardOf): Patient-everything's care dates. */
  where?: (type: string) => Condition[] | undefined;
  /** The one patient (instance level, or a token bound to its patient); otherwise every live Patient in id order. */
  patient?: string;
  /**
   * Where the page starts: at the type level, with the rows of `patient` (whether it is still a live
   * Patient or not) and then of the live Patients after it, or from the first; in the first patient,
   * with its rows of `types[type]` after `id` (none: from that type's first).
   */
  start: { patient?: string; type: number; id?: string };
  count: number;
}

/** From this many rows a patient's compartment is read type by type (see the file's comment). */
const LARGE = 1000;
/** Most compartment rows (by the patients' sizes) one statement reads and sorts. */
const ROWS_PER_READ = 5000;
/** Most rows read at once where guards may leave some out (readChunk). */
const READ_ON = 200;
/** Patients sized at first, and at most at once. */
const FIRST_BATCH = 16;
const MAX_BATCH = 500;

type Position = { type: number; id: string } | undefined;

/** What the pages read so far say of the rest: patients done, the rows their sizes announced, the rows kept. */
interface Seen {
  patients: number;
  sized: number;
  kept: number;
}

/** The first `read.count` matches from `read.start`, each with the patient whose compartment gave it. */
export async function everythingRows(deps: FhirDeps, req: FhirRequest, read: EverythingRead): Promise<CompartmentRow[]> {
  const out: CompartmentRow[] = [];
  if (read.types.length === 0 || read.count <= 0) return out;
  const guards = (type: string) => {
    const all = [...(guardOf(req, type, read.patient) ?? []), ...(read.where?.(type) ?? [])];
    return all.length ? all : undefined;
  };
  const ctx: Context = { deps, req, read, guards: new Map(read.types.map((type) => [type, guards(type)])) };
  // The type level walks the Patients the token may list: under a scope filter of Patient, those it admits.
  if (read.patient === undefined) ctx.listed = guardOf(req, 'Patient', undefined);
  const seen: Seen = { patients: 0, sized: 0, kept: 0 };
  // The start's position holds in the first patient alone.
  let from: Position = { type: read.start.type, id: read.start.id ?? '' };
  for await (const batch of sizedPatients(ctx, () => batchSize(seen, read.count - out.length))) {
    for (let i = 0; i < batch.length && out.length < read.count; from = undefined) {
      const need = read.count - out.length;
      let found: CompartmentRow[];
      let end = i + 1;
      if (batch[i]!.rows >= LARGE) {
        found = await typeByType(ctx, batch[i]!.patient, from, need);
        seen.sized += found.length;
      } else {
        const chunk = smallChunk(batch, i, need, seen);
        end = i + chunk.patients;
        seen.sized += chunk.rows;
        const small = batch.slice(i, end).filter((p) => p.rows > 0);
        found = await readChunk(ctx, small.map((p) => p.patient), small[0] === batch[i] ? from : undefined, need);
      }
      out.push(...found);
      seen.patients += end - i;
      seen.kept += found.length;
      i = end;
    }
    if (out.length >= read.count) break;
  }
  return out;
}

/** How many patients to size next: as many as the rows kept per patient so far say would fill what is left. */
function batchSize(seen: Seen, left: number): number {
  if (seen.patients === 0) return FIRST_BATCH;
  const perPatient = seen.kept / seen.patients;
  return Math.min(MAX_BATCH, Math.max(FIRST_BATCH, Math.ceil(left / Math.max(perPatient, 1 / MAX_BATCH))));
}

/**
 * The small patients from `batch[i]` to read in one statement: those whose sizes, times the share of
 * sized rows kept so far (`_since` and scope filters leave some out), should give the `need` rows, and
 * whose sizes add up to at most ROWS_PER_READ (the first one whatever its size).
 */
function smallChunk(batch: CompartmentSize[], i: number, need: number, seen: Seen): { patients: number; rows: number } {
  const kept = seen.sized ? seen.kept / seen.sized : 1;
  const target = Math.min(ROWS_PER_READ, Math.ceil(need / Math.max(kept, need / ROWS_PER_READ)));
  let j = i;
  let rows = 0;
  while (j < batch.length && batch[j]!.rows < LARGE && rows < target && (j === i || rows + batch[j]!.rows <= ROWS_PER_READ)) rows += batch[j++]!.rows;
  return { patients: j - i, rows };
}

interface Context {
  deps: FhirDeps;
  req: FhirRequest;
  read: EverythingRead;
  /** What a type's rows must meet besides the compartment (guardOf, and the read's `where`), if anything. */
  guards: Map<string, Condition[] | undefined>;
  /**
   * At the type level, what a Patient must meet to be walked (its scope filter), if anything: the records of
   * one it does not meet are listed under none (`Patient/{id}/$everything` refuses it), and a record it shares
   * comes with the first patient that does (firstOwned).
   */
  listed?: Condition[];
}

/**
 * The patients to read, in batches with their sizes: the one patient, or (type level) the start's
 * patient and then the live Patients after it in id order, `batchSize()` at a time.
 */
async function* sizedPatients(ctx: Context, batchSize: () => number): AsyncGenerator<CompartmentSize[]> {
  const { deps, req, read } = ctx;
  const sizes = (patients: { ids: string[] } | { after?: string; count: number }) =>
    deps.store.resources.compartmentSizes(req.tenant, { patients, types: read.types, cap: LARGE });
  if (read.patient !== undefined) {
    yield await sizes({ ids: [read.patient] });
    return;
  }
  let after = read.start.patient;
  if (after !== undefined) {
    const first = await listedOf(ctx, await sizes({ ids: [after] }));
    if (first.length) yield first;
  }
  for (;;) {
    const count = batchSize();
    const batch = await sizes({ after, count });
    const listed = await listedOf(ctx, batch);
    if (listed.length) yield listed;
    if (batch.length < count) return;
    after = batch[batch.length - 1]!.patient;
  }
}

/** The Patients of `batch` the type level walks (Context.listed): all of them without a filter, else those it admits. */
async function listedOf(ctx: Context, batch: CompartmentSize[]): Promise<CompartmentSize[]> {
  if (ctx.listed === undefined || batch.length === 0) return batch;
  const admitted = await patientsListed(ctx, batch.map((p) => p.patient));
  return batch.filter((p) => admitted.has(p.patient));
}

/** Of these ids, the live Patients the type level walks (Context.listed), by one search a thousand ids. */
async function patientsListed(ctx: Context, ids: string[]): Promise<Set<string>> {
  const out = new Set<string>();
  for (let k = 0; k < ids.length; k += 1000) {
    const where: Condition[] = [{ kind: 'id', ids: ids.slice(k, k + 1000) }, ...(ctx.listed ?? [])];
    for (const v of await ctx.deps.store.resources.search(ctx.req.tenant, { type: 'Patient', where, sort: [], count: 1000 })) out.add(v.id);
  }
  return out;
}

/**
 * The conditions a type's rows must meet besides the compartment: the token's SMART v2 scope filter,
 * and, where its scopes bind the type to its patient but this is not (only) that patient's everything
 * (a Patient it reads through `Patient.link`, or a `patient/Observation.rs` beside a `user/Patient.rs`),
 * that patient's compartment, as a search of the type is bound.
 */
export function guardOf(req: FhirRequest, type: string, patient: string | undefined): Condition[] | undefined {
  const out: Condition[] = [];
  const filter = scopeFilter(req, type, 'r');
  if (filter) out.push(filter);
  const bound = req.access.patientLimit(type, 'r');
  if (bound !== undefined && bound !== patient) out.push({ kind: 'compartment', patient: bound });
  return out.length ? out : undefined;
}

/** The rows of these patients (small compartments) from `from` in the first, until `need` are kept or none are left. */
async function readChunk(ctx: Context, patients: string[], from: Position, need: number): Promise<CompartmentRow[]> {
  const { deps, req, read } = ctx;
  const kept: CompartmentRow[] = [];
  // Rows a guard may leave out are read at least READ_ON at a time: one at a time, a page of one past a
  // patient's 999 rows out of a care-date range or a scope filter was 999 statements.
  const filtered = [...ctx.guards.values()].some((g) => g !== undefined);
  while (patients.length) {
    const count = filtered ? Math.max(need - kept.length, READ_ON) : need - kept.length;
    // The store tells a record's first owner among every live Patient; under a filter of the Patients walked, firstOwned
    // tells it among those the filter admits (a record shared with one out of its reach comes with the other).
    const rows = await deps.store.resources.compartmentRows(req.tenant, {
      patients, types: read.types, since: read.since?.low, after: from, count, firstOwner: read.patient === undefined && ctx.listed === undefined,
    });
    const owned = ctx.listed === undefined ? rows : await firstOwned(ctx, rows);
    kept.push(...(await guarded(ctx, owned)));
    if (rows.length < count || kept.length >= need) break;
    // Rows left out by a guard: read on after the last row read.
    const last = rows[rows.length - 1]!;
    patients = patients.slice(patients.indexOf(last.patient));
    from = { type: read.types.indexOf(last.type), id: last.id };
  }
  // What was read past `need` is the next page's: its cursor is the last row kept here.
  return kept.slice(0, need);
}

/** The rows that meet their type's guard, by one search of each guarded type's ids (1,000 at a time). */
async function guarded(ctx: Context, rows: CompartmentRow[]): Promise<CompartmentRow[]> {
  const ids = new Map<string, Set<string>>();
  for (const r of rows) if (ctx.guards.get(r.type)) (ids.get(r.type) ?? ids.set(r.type, new Set()).get(r.type)!).add(r.id);
  if (ids.size === 0) return rows;
  const met = new Set<string>();
  for (const [type, of] of ids) {
    const list = [...of];
    for (let k = 0; k < list.length; k += 1000) {
      const where: Condition[] = [{ kind: 'id', ids: list.slice(k, k + 1000) }, ...ctx.guards.get(type)!];
      for (const v of await ctx.deps.store.resources.search(ctx.req.tenant, { type, where, sort: [], count: 1000 })) met.add(`${type}/${v.id}`);
    }
  }
  return rows.filter((r) => !ctx.guards.get(r.type) || met.has(`${r.type}/${r.id}`));
}

/** A large compartment's rows from `from`, up to `need`: compartment searches of each type in turn, by id. */
async function typeByType(ctx: Context, patient: string, from: Position, need: number): Promise<CompartmentRow[]> {
  const { deps, req, read } = ctx;
  const out: CompartmentRow[] = [];
  for (let t = from?.type ?? 0, after = from?.id || undefined; t < read.types.length && out.length < need; t++, after = undefined) {
    const type = read.types[t]!;
    for (;;) {
      const count = need - out.length;
      const q: SearchQuery = { type, where: [], sort: [], count, compartment: patient };
      if (read.since !== undefined) q.where!.push({ kind: 'lastUpdated', tests: [{ op: 'ge', ...read.since }] });
      if (type === 'Patient') q.where!.push({ kind: 'id', ids: [patient] });
      q.where!.push(...(ctx.guards.get(type) ?? []));
      if (after !== undefined) q.after = { lastUpdated: 0, id: after };
      const found = (await deps.store.resources.search(req.tenant, q)).map((v) => ({ ...v, patient }));
      out.push(...(await firstOwned(ctx, found)));
      // The type's rows are all read, or the page is full; else some were another patient's: read on.
      if (found.length < count || out.length >= need) break;
      after = found[found.length - 1]!.id;
    }
  }
  return out;
}

/** From this many characters of stored text in all, a batch's rows find their patients on the compartment index (firstOwned). */
const INDEX_PATIENTS_FROM = 1 << 20;

/**
 * At the type level, the rows that no live Patient walked (Context.listed) of a smaller id than their patient's also holds
 * (compartmentRows' `firstOwner`, for the rows the search engine read): a resource in several patients'
 * compartments is the match of the first of them alone, so no page repeats it. Their patients come from
 * their stored texts (compartmentsOf) while these are small, and from the compartment index
 * (compartmentPatients, one statement a thousand rows) once they reach INDEX_PATIENTS_FROM characters in
 * all: parsing a MiB costs more than the statement (a millisecond or two on PostgreSQL, about 15 µs a row).
 */
async function firstOwned(ctx: Context, rows: CompartmentRow[]): Promise<CompartmentRow[]> {
  if (ctx.read.patient !== undefined) return rows;
  const others = rows.filter((r) => r.type !== 'Patient');
  const holders = others.reduce((n, r) => n + r.content.length, 0) >= INDEX_PATIENTS_FROM
    ? await indexedPatients(ctx, others)
    : parsedPatients(ctx, others);
  const before = new Map<CompartmentRow, string[]>();
  for (const r of rows) {
    if (r.type === 'Patient') continue;
    const earlier = (holders.get(`${r.type}/${r.id}`) ?? []).filter((q) => q < r.patient);
    if (earlier.length) before.set(r, earlier);
  }
  if (before.size === 0) return rows;
  // The earlier patients that hold it as a match: live, and walked (Context.listed).
  const live = await patientsListed(ctx, [...new Set([...before.values()].flat())]);
  return rows.filter((r) => !before.get(r)?.some((q) => live.has(q)));
}

/** The patients of each row (`Type/id`) by its stored text. */
function parsedPatients(ctx: Context, rows: CompartmentRow[]): Map<string, string[]> {
  const base = ctx.deps.fhirBase?.(ctx.req.tenant);
  return new Map(rows.map((r) => [`${r.type}/${r.id}`, compartmentsOf(JSON.parse(r.content) as Resource, base)]));
}

/** The patients of each row (`Type/id`) on the compartment index. */
async function indexedPatients(ctx: Context, rows: CompartmentRow[]): Promise<Map<string, string[]>> {
  const byType = new Map<string, Set<string>>();
  for (const r of rows) (byType.get(r.type) ?? byType.set(r.type, new Set()).get(r.type)!).add(r.id);
  const holders = new Map<string, string[]>();
  for (const [type, of] of byType) {
    const list = [...of];
    for (let k = 0; k < list.length; k += 1000) {
      for (const { id, patient } of await ctx.deps.store.resources.compartmentPatients(ctx.req.tenant, type, list.slice(k, k + 1000))) {
        const key = `${type}/${id}`;
        (holders.get(key) ?? holders.set(key, []).get(key)!).push(patient);
      }
    }
  }
  return holders;
}
