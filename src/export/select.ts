import { compartmentsOf } from '../fhir/indexer.ts';
import type { Condition, SnapshotQuery, SnapshotRow, Store, WithExports } from '../store/types.ts';
import { expungedIssue, noteIssue, type ExportSpec, type JobProgress } from './spec.ts';
import { matchConditions, type MatchContext } from '../fhir/search-match.ts';
import { filtersAsOf } from './links-as-of.ts';

/** What a page query needs to know about its job. */
export interface SelectContext {
  store: Pick<Store, 'resources'> & WithExports<'scratch'>;
  tenant: string;
  jobId: string;
  transactionTime: number;
  spec: ExportSpec;
  /** The job's checkpoint, where a page notes what it could not judge exactly (the manifest's error file). */
  progress?: JobProgress;
}

export interface SelectedPage {
  /** Versions the database selected, as NDJSON bytes (stored text, newline-terminated). */
  lines: Uint8Array;
  count: number;
  /** Versions selected in code after a recheck: live ones to export and deletions to report. */
  rows: SnapshotRow[];
  next: number | null;
}

/** The snapshot query of one type of a job (Bulk Data 2.0 selection: `_since`, compartments, `_typeFilter`). */
export function snapshotQuery(ctx: SelectContext, type: string, after: number | null, limit: number, ids?: string[]): SnapshotQuery {
  const { spec } = ctx;
  const q: SnapshotQuery = { type, at: ctx.transactionTime, limit };
  if (after !== null) q.after = after;
  if (spec.since !== undefined) q.since = spec.since;
  if (spec.compartment === 'any') q.compartment = { kind: 'any' };
  if (spec.compartment === 'job') q.compartment = { kind: 'job', jobId: ctx.jobId };
  if (spec.joinedSince) q.joinedSince = true;
  const filters = spec.filters[type];
  if (filters?.length) q.filters = filters;
  if (ids) q.ids = ids;
  return q;
}

/**
 * Checks the versions the database could not judge (changed after transactionTime, or deletions)
 * against the same conditions in code, on their content as of transactionTime.
 */
async function recheck(ctx: SelectContext, q: SnapshotQuery, rows: SnapshotRow[]): Promise<SnapshotRow[]> {
  // A version is parsed only for what its conditions need, one at a time, each let go at once: the page's parsed
  // versions were held together (a page of large ones, several times their texts), and parsed with no condition at all.
  const parse = (row: SnapshotRow) => JSON.parse(row.content) as Record<string, unknown>;
  const patientsOf = new Map(rows.map((row) => [row, q.compartment ? compartmentsOf(parse(row), ctx.spec.fhirBase) : []]));
  let patients: Map<string, boolean> | undefined;
  if (q.compartment?.kind === 'job') {
    const all = [...new Set([...patientsOf.values()].flat())];
    patients = new Map((await ctx.store.exports.scratch.patientsIn(ctx.jobId, all)).map((p) => [p.id, p.joined]));
  }
  const joinedOnly = q.compartment?.kind === 'job' && q.compartment.joinedOnly === true;
  const pass: SnapshotRow[] = [];
  for (const row of rows) {
    let matched: string[] = [];
    if (q.compartment) {
      const members = patientsOf.get(row)!;
      matched = patients ? members.filter((p) => patients!.has(p) && (!joinedOnly || patients!.get(p) === true)) : members;
      if (matched.length === 0) continue;
    }
    const joined = q.joinedSince === true && matched.some((p) => patients?.get(p) === true);
    // Its version as of transactionTime may have been expunged: `since` cannot be judged (that version's time is gone).
    if (!row.expunged && !row.deleted && q.since !== undefined && row.lastUpdated <= q.since && !joined) continue;
    if (q.filters && !(await matchesAny(ctx, parse(row), row.lastUpdated, q.filters))) continue;
    // One in the export's reach is named in the error file, never exported (SnapshotRow.expunged).
    if (row.expunged) {
      if (ctx.progress) noteIssue(ctx.progress, expungedIssue(q.type, row.id, row.versionId));
      continue;
    }
    pass.push(row);
  }
  return pass;
}

/** Whether a version passes one of the ORed `_typeFilter` queries. */
async function matchesAny(ctx: SelectContext, resource: Record<string, unknown>, lastUpdated: number, filters: Condition[][]): Promise<boolean> {
  const match: MatchContext = { exists: async (query) => (await ctx.store.resources.search(ctx.tenant, query)).length > 0, ...(ctx.spec.fhirBase !== undefined && { base: ctx.spec.fhirBase }) };
  for (const f of filters) if (await matchConditions(resource, lastUpdated, f, match)) return true;
  return false;
}

/** One page of a type's selection as of transactionTime. */
export async function selectPage(ctx: SelectContext, q: SnapshotQuery): Promise<SelectedPage> {
  // Chains and `_has` reach resources that may have changed since transactionTime: judged as of it (links-as-of.ts).
  if (q.filters?.length) q = { ...q, filters: await filtersAsOf(ctx, q.type, q.filters) };
  const page = await ctx.store.resources.snapshot(ctx.tenant, q);
  const rows = page.recheck.length ? await recheck(ctx, q, page.recheck) : [];
  return { lines: page.lines, count: page.count, rows, next: page.next };
}

const decoder = new TextDecoder();

/** The JSON texts of an NDJSON buffer. */
export function splitLines(lines: Uint8Array): string[] {
  if (lines.byteLength === 0) return [];
  const text = decoder.decode(lines);
  return text.slice(0, -1).split('\n');
}

/** Every selected live version of a page as JSON text (for the paths that must read them: `_elements`, Provenance). */
export function pageTexts(page: SelectedPage): { id: string; content: string }[] {
  const out = splitLines(page.lines).map((content) => ({ id: (JSON.parse(content) as { id: string }).id, content }));
  for (const r of page.rows) if (!r.deleted) out.push({ id: r.id, content: r.content });
  return out;
}
