import { parseReference } from '../fhir/references.ts';
import type { SnapshotQuery, SnapshotRow } from '../store/types.ts';
import type { Chunk } from './part-writer.ts';
import { selectPage, snapshotQuery } from './select.ts';
import { targetTypes } from './spec.ts';
import { toChunk, type StepContext } from './step-context.ts';

/** Provenance is chosen by what it targets, not by compartment. */
function provenanceQuery(ctx: StepContext, after: number | null, ids?: string[]): SnapshotQuery {
  const q = snapshotQuery(ctx, 'Provenance', after, ctx.pageSize, ids);
  delete q.compartment;
  delete q.joinedSince;
  return q;
}

function targetsOf(row: SnapshotRow): string[] {
  const p = JSON.parse(row.content) as { target?: { reference?: unknown }[] };
  const out: string[] = [];
  for (const t of Array.isArray(p.target) ? p.target : []) {
    const ref = typeof t?.reference === 'string' ? parseReference(t.reference) : null;
    if (ref) out.push(`${ref.type}/${ref.id}`);
  }
  return out;
}

/** Which of `refs` (`Type/id`) this job exports: the same selection as the type scans, limited to those ids. */
async function exportedTargets(ctx: StepContext, refs: Iterable<string>): Promise<Set<string>> {
  const types = new Set(targetTypes(ctx.spec));
  const byType = new Map<string, Set<string>>();
  for (const ref of refs) {
    const [type, id] = ref.split('/') as [string, string];
    if (types.has(type)) (byType.get(type) ?? byType.set(type, new Set()).get(type)!).add(id);
  }
  const exported = new Set<string>();
  for (const [type, ids] of byType) {
    let after: number | null = null;
    do {
      const page = await selectPage(ctx, snapshotQuery(ctx, type, after, ctx.pageSize, [...ids]));
      for (const r of page.rows) if (!r.deleted) exported.add(`${type}/${r.id}`);
      after = page.next;
    } while (after !== null);
  }
  return exported;
}

/** A page of Provenance with targets, and which of those targets the job exports. */
async function provenancePage(ctx: StepContext, q: SnapshotQuery) {
  const page = await selectPage(ctx, q);
  const targets = new Map(page.rows.map((r) => [r, targetsOf(r)]));
  const exported = await exportedTargets(ctx, new Set([...targets.values()].flat()));
  return { page, targets, exported };
}

/** `RelevantProvenanceResources` (and the Patient/Group default): every Provenance whose target was exported. */
export async function relevantProvenancePage(ctx: StepContext, after: number | null): Promise<Chunk> {
  const { page, targets, exported } = await provenancePage(ctx, provenanceQuery(ctx, after));
  const rows = page.rows.filter((r) => targets.get(r)!.some((t) => exported.has(t)));
  return toChunk(ctx, 'Provenance', rows, page.next);
}

/** Orders Provenance for "most recent": `recorded`, then last update, then id. */
function rank(row: SnapshotRow): string {
  const recorded = Date.parse((JSON.parse(row.content) as { recorded?: string }).recorded ?? '') || 0;
  return `${String(recorded).padStart(15, '0')}.${String(row.lastUpdated).padStart(15, '0')}.${row.id}`;
}

/**
 * `LatestProvenanceResources`, first pass: for every exported target, note the most recent Provenance
 * targeting it (kept in the database, so memory stays flat). Idempotent, so a resumed job rescans.
 */
export async function latestProvenanceScan(ctx: StepContext): Promise<void> {
  let after: number | null = null;
  do {
    ctx.control.check();
    const { page, targets, exported } = await provenancePage(ctx, provenanceQuery(ctx, after));
    const notes = page.rows
      .filter((r) => !r.deleted)
      .flatMap((r) => targets.get(r)!.filter((t) => exported.has(t)).map((target) => ({ target, provenance: r.id, rank: rank(r) })));
    if (notes.length) await ctx.store.exports.noteProvenance(ctx.jobId, notes);
    after = page.next;
  } while (after !== null);
  const p = ctx.progress;
  Object.assign(p, { step: p.step + 1, after: null, part: 1, deletedPart: 1 });
  await ctx.control.checkpoint(p);
}

/** `LatestProvenanceResources`, second pass: the noted Provenance, in id order. */
export async function latestProvenanceEmitPage(ctx: StepContext, after: string | null): Promise<Chunk> {
  const ids = await ctx.store.exports.latestProvenance(ctx.jobId, after ?? '', ctx.pageSize);
  const next = ids.length < ctx.pageSize ? null : ids[ids.length - 1]!;
  if (ids.length === 0) return toChunk(ctx, 'Provenance', [], null);
  const rows: SnapshotRow[] = [];
  let cursor: number | null = null;
  do {
    const page = await selectPage(ctx, provenanceQuery(ctx, cursor, ids));
    rows.push(...page.rows.filter((r) => !r.deleted));
    cursor = page.next;
  } while (cursor !== null);
  return toChunk(ctx, 'Provenance', rows, next);
}
