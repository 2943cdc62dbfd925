import { parseReference } from '../fhir/references.ts';
import type { Condition, SnapshotQuery } from '../store/types.ts';
import type { Chunk } from './part-writer.ts';
import { pageTexts, selectPage, snapshotQuery, type SelectedPage } from './select.ts';
import { targetTypes } from './spec.ts';
import { toChunk, type StepContext } from './step-context.ts';

/** Provenance is chosen by what it targets, not by compartment. */
function provenanceQuery(ctx: StepContext, after: number | null, ids?: string[]): SnapshotQuery {
  const q = snapshotQuery(ctx, 'Provenance', after, ctx.pageSize, ids);
  delete q.compartment;
  delete q.joinedSince;
  return q;
}

/**
 * The Provenance a Group export with `_since` may owe the members who joined since (ExportSpec.joinedSince):
 * last updated at or before `_since` (those after it are found by provenanceQuery), as of transactionTime.
 * No deletions: a Provenance deleted before the member joined was never exported to the client. Only those
 * whose `target` names a resource of `types` in a joined member's compartment are read (SnapshotQuery.referringTo),
 * not every older Provenance of the tenant; the targets are judged as of transactionTime after (TargetSelection).
 */
function joinedProvenanceQuery(ctx: StepContext, after: number | null, types: string[]): SnapshotQuery {
  const q = provenanceQuery(ctx, after);
  const since = q.since!;
  delete q.since;
  const until: Condition = { kind: 'lastUpdated', tests: [{ op: 'lt', low: since + 1, high: since + 1 }] };
  q.filters = (q.filters?.length ? q.filters : [[]]).map((alternative) => [...alternative, until]);
  q.referringTo = { param: 'target', types, compartment: { kind: 'job', jobId: ctx.jobId, joinedOnly: true } };
  return q;
}

/** The job's patients, or (`joined`) those of them who joined the Group since `_since`. */
function jobCompartment(ctx: StepContext, joined: boolean): SnapshotQuery['compartment'] {
  return { kind: 'job', jobId: ctx.jobId, ...(joined ? { joinedOnly: true } : {}) };
}

interface Text {
  id: string;
  content: string;
}

function targetsOf(row: Text, base: string | undefined): string[] {
  const p = JSON.parse(row.content) as { target?: { reference?: unknown }[] };
  const out: string[] = [];
  for (const t of Array.isArray(p.target) ? p.target : []) {
    const ref = typeof t?.reference === 'string' ? parseReference(t.reference, base) : null;
    if (ref) out.push(`${ref.type}/${ref.id}`);
  }
  return out;
}

/** The query that finds which of `ids` (of `type`) a target selection holds, from `after`. */
type TargetQuery = (type: string, after: number | null, ids: string[]) => SnapshotQuery;

/**
 * Which of `refs` (`Type/id`) are selected by `query`: one query per target type and page of Provenance
 * (its ids together), never one per resource.
 */
async function selectedTargets(ctx: StepContext, refs: Iterable<string>, types: Set<string>, query: TargetQuery): Promise<Set<string>> {
  const byType = new Map<string, Set<string>>();
  for (const ref of refs) {
    const [type, id] = ref.split('/') as [string, string];
    if (types.has(type)) (byType.get(type) ?? byType.set(type, new Set()).get(type)!).add(id);
  }
  const selected = new Set<string>();
  for (const [type, ids] of byType) {
    let after: number | null = null;
    do {
      const page = await selectPage(ctx, query(type, after, [...ids]));
      for (const r of pageTexts(page)) selected.add(`${type}/${r.id}`);
      after = page.next;
    } while (after !== null);
  }
  return selected;
}

/**
 * Which of `refs` this job exports: the same selection as the type scans, limited to those ids; `joined`: of
 * those, the ones in the compartment of a member who joined since `_since`.
 */
function exportedTargets(ctx: StepContext, refs: Iterable<string>, joined = false): Promise<Set<string>> {
  return selectedTargets(ctx, refs, new Set(targetTypes(ctx.spec)), (type, after, ids) => {
    const q = snapshotQuery(ctx, type, after, ctx.pageSize, ids);
    if (joined) q.compartment = jobCompartment(ctx, true);
    return q;
  });
}

/**
 * Which of `refs` are resources in the compartment of one of the job's patients (`joined`: of one who joined
 * since `_since`) as of transactionTime (`provenanceTargets`' types, within the token's scope filter on
 * each), whatever `_type`, `_typeFilter` and `_since` select of them.
 */
function compartmentTargets(ctx: StepContext, refs: Iterable<string>, joined = false): Promise<Set<string>> {
  const targets = ctx.spec.provenanceTargets ?? {};
  const compartment: SnapshotQuery['compartment'] = ctx.spec.compartment === 'job' ? jobCompartment(ctx, joined) : { kind: 'any' };
  return selectedTargets(ctx, refs, new Set(Object.keys(targets)), (type, after, ids) => {
    const q: SnapshotQuery = { type, at: ctx.transactionTime, limit: ctx.pageSize, compartment, ids };
    if (after !== null) q.after = after;
    if (targets[type]!.length) q.filters = targets[type]!;
    return q;
  });
}

type TargetSelection = (ctx: StepContext, refs: Iterable<string>) => Promise<Set<string>>;

/** A page of Provenance with the targets of its live versions and deletions, and which of those `select` keeps. */
async function provenancePage(ctx: StepContext, q: SnapshotQuery, select: TargetSelection) {
  const page = await selectPage(ctx, q);
  const texts = pageTexts(page);
  const targets = new Map(texts.map((r) => [r, targetsOf(r, ctx.spec.fhirBase)]));
  const deletions = page.rows.filter((r) => r.deleted).map((r) => ({ row: r, targets: targetsOf(r, ctx.spec.fhirBase) }));
  const kept = await select(ctx, new Set([...targets.values(), ...deletions.map((d) => d.targets)].flat()));
  return { page, texts, targets, deletions, kept };
}

/** A chunk of the given Provenance texts (re-encoded; their lines already passed `pageTexts`). */
function chunkOf(ctx: StepContext, texts: Text[], deletions: SelectedPage['rows'], next: number | string | null): Chunk {
  const rows = [...texts.map((t) => ({ id: t.id, versionId: 0, lastUpdated: 0, deleted: false, content: t.content })), ...deletions];
  return toChunk(ctx, 'Provenance', { lines: new Uint8Array(0), count: 0, rows }, next);
}

/**
 * A page of Provenance found by its targets: `relevant` (`RelevantProvenanceResources`) keeps every
 * Provenance whose target was exported; `compartment` (the Patient and Group default) every one whose
 * target is a resource in one of the patients' compartments. `_typeFilter` and `_since` on Provenance
 * apply to the Provenance itself (provenanceQuery).
 */
export async function provenanceByTargetsPage(ctx: StepContext, mode: 'relevant' | 'compartment', after: number | null, joined = false): Promise<Chunk> {
  const selection = mode === 'relevant' ? exportedTargets : compartmentTargets;
  const select: TargetSelection = (c, refs) => selection(c, refs, joined);
  const types = mode === 'relevant' ? targetTypes(ctx.spec) : Object.keys(ctx.spec.provenanceTargets ?? {});
  const query = joined ? joinedProvenanceQuery(ctx, after, types) : provenanceQuery(ctx, after);
  const { page, texts, targets, deletions, kept } = await provenancePage(ctx, query, select);
  const live = texts.filter((r) => targets.get(r)!.some((t) => kept.has(t)));
  const deleted = deletions.filter((d) => d.targets.some((t) => kept.has(t))).map((d) => d.row);
  return chunkOf(ctx, live, deleted, page.next);
}

/** Orders Provenance for "most recent": `recorded`, then last update, then id. */
function rank(row: Text): string {
  const p = JSON.parse(row.content) as { recorded?: string; meta?: { lastUpdated?: string } };
  const recorded = Date.parse(p.recorded ?? '') || 0;
  const updated = Date.parse(p.meta?.lastUpdated ?? '') || 0;
  return `${String(recorded).padStart(15, '0')}.${String(updated).padStart(15, '0')}.${row.id}`;
}

/**
 * `LatestProvenanceResources`, first pass: for every exported target, note the most recent Provenance
 * targeting it (kept in the database, so memory stays flat). Idempotent, so a resumed job rescans.
 * `joined`: the Provenance last updated at or before `_since` of the exported records of the members who
 * joined since (joinedProvenanceQuery), noted beside those the first scan found.
 */
export async function latestProvenanceScan(ctx: StepContext, joined = false): Promise<void> {
  let after: number | null = null;
  const select: TargetSelection = (c, refs) => exportedTargets(c, refs, joined);
  do {
    await ctx.control.check();
    const query = joined ? joinedProvenanceQuery(ctx, after, targetTypes(ctx.spec)) : provenanceQuery(ctx, after);
    const { page, texts, targets, kept } = await provenancePage(ctx, query, select);
    const notes = texts.flatMap((r) => targets.get(r)!.filter((t) => kept.has(t)).map((target) => ({ target, provenance: r.id, rank: rank(r) })));
    if (notes.length) await ctx.store.exports.scratch.noteProvenance(ctx.jobId, notes);
    after = page.next;
  } while (after !== null);
  const p = ctx.progress;
  Object.assign(p, { step: p.step + 1, after: null, part: 1, deletedPart: 1 });
  await ctx.control.checkpoint(p);
}

/**
 * `LatestProvenanceResources`, second pass: the noted Provenance, in id order, as of transactionTime. Read
 * without `_since`: the scans chose them (a joined member's may be older), and a deletion is never noted.
 */
export async function latestProvenanceEmitPage(ctx: StepContext, after: string | null): Promise<Chunk> {
  const ids = await ctx.store.exports.scratch.latestProvenance(ctx.jobId, after ?? '', ctx.pageSize);
  const next = ids.length < ctx.pageSize ? null : ids[ids.length - 1]!;
  if (ids.length === 0) return chunkOf(ctx, [], [], null);
  const texts: Text[] = [];
  let cursor: number | null = null;
  do {
    const q = provenanceQuery(ctx, cursor, ids);
    delete q.since;
    const page = await selectPage(ctx, q);
    texts.push(...pageTexts(page));
    cursor = page.next;
  } while (cursor !== null);
  return chunkOf(ctx, texts, [], next);
}
