import { parseReference } from '../fhir/references.ts';
import type { SnapshotQuery } from '../store/types.ts';
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
      for (const r of pageTexts(page)) exported.add(`${type}/${r.id}`);
      after = page.next;
    } while (after !== null);
  }
  return exported;
}

/** A page of Provenance (live versions) with their targets, and which of those targets the job exports. */
async function provenancePage(ctx: StepContext, q: SnapshotQuery) {
  const page = await selectPage(ctx, q);
  const texts = pageTexts(page);
  const targets = new Map(texts.map((r) => [r, targetsOf(r, ctx.spec.fhirBase)]));
  const exported = await exportedTargets(ctx, new Set([...targets.values()].flat()));
  return { page, texts, targets, exported };
}

/** A chunk of the given Provenance texts (re-encoded; their lines already passed `pageTexts`). */
function chunkOf(ctx: StepContext, texts: Text[], deletions: SelectedPage['rows'], next: number | string | null): Chunk {
  const rows = [...texts.map((t) => ({ id: t.id, versionId: 0, lastUpdated: 0, deleted: false, content: t.content })), ...deletions];
  return toChunk(ctx, 'Provenance', { lines: new Uint8Array(0), count: 0, rows }, next);
}

/** `RelevantProvenanceResources` (and the Patient/Group default): every Provenance whose target was exported. */
export async function relevantProvenancePage(ctx: StepContext, after: number | null): Promise<Chunk> {
  const { page, texts, targets, exported } = await provenancePage(ctx, provenanceQuery(ctx, after));
  const kept = texts.filter((r) => targets.get(r)!.some((t) => exported.has(t)));
  const deletions = page.rows.filter((r) => r.deleted && targetsOf(r, ctx.spec.fhirBase).some((t) => exported.has(t)));
  return chunkOf(ctx, kept, deletions, page.next);
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
 */
export async function latestProvenanceScan(ctx: StepContext): Promise<void> {
  let after: number | null = null;
  do {
    await ctx.control.check();
    const { page, texts, targets, exported } = await provenancePage(ctx, provenanceQuery(ctx, after));
    const notes = texts.flatMap((r) => targets.get(r)!.filter((t) => exported.has(t)).map((target) => ({ target, provenance: r.id, rank: rank(r) })));
    if (notes.length) await ctx.store.exports.scratch.noteProvenance(ctx.jobId, notes);
    after = page.next;
  } while (after !== null);
  const p = ctx.progress;
  Object.assign(p, { step: p.step + 1, after: null, part: 1, deletedPart: 1 });
  await ctx.control.checkpoint(p);
}

/** `LatestProvenanceResources`, second pass: the noted Provenance, in id order. */
export async function latestProvenanceEmitPage(ctx: StepContext, after: string | null): Promise<Chunk> {
  const ids = await ctx.store.exports.scratch.latestProvenance(ctx.jobId, after ?? '', ctx.pageSize);
  const next = ids.length < ctx.pageSize ? null : ids[ids.length - 1]!;
  if (ids.length === 0) return chunkOf(ctx, [], [], null);
  const texts: Text[] = [];
  let cursor: number | null = null;
  do {
    const page = await selectPage(ctx, provenanceQuery(ctx, cursor, ids));
    texts.push(...pageTexts(page));
    cursor = page.next;
  } while (cursor !== null);
  return chunkOf(ctx, texts, [], next);
}
