import { partWriter, type Chunk, type Rollover } from './part-writer.ts';
import { latestProvenanceEmitPage, latestProvenanceScan, provenanceByTargetsPage } from './provenance.ts';
import { selectPage, snapshotQuery } from './select.ts';
import { MAX_RUNTIME_ISSUES, type FileRecord, type JobProgress, type Step } from './spec.ts';
import { issue } from '../fhir/outcome.ts';
import { fileKey, toChunk, type PageSource, type StepContext } from './step-context.ts';

/**
 * Streams one step's pages (Web Streams, one page ahead) into its split NDJSON files, checkpointing at
 * every file boundary. Resumes from the step's checkpoint.
 */
export async function streamStep(ctx: StepContext, type: string, source: PageSource): Promise<void> {
  const p = ctx.progress;
  // A step starting afresh numbers its files after those an earlier step wrote of the type (two steps write Provenance).
  if (p.after === null) Object.assign(p, { part: nextPart(p, 'output', type), deletedPart: nextPart(p, 'deleted', type) });
  let after = p.after;
  let done = false;
  const base = p.exported;
  let read = 0;
  const pages = new ReadableStream<Chunk>(
    {
      async pull(controller) {
        await ctx.control.check();
        const chunk = await source(after);
        after = chunk.next;
        read += chunk.count;
        ctx.onProgress?.(base + read, type);
        controller.enqueue(chunk);
        if (chunk.next === null) controller.close();
      },
    },
    new CountQueuingStrategy({ highWaterMark: 1 }),
  );
  const onRollover = async (r: Rollover) => {
    p.files.push(...r.files);
    p.exported += r.files.filter((f) => f.kind === 'output').reduce((n, f) => n + f.count, 0);
    if (r.done) Object.assign(p, { step: p.step + 1, after: null, part: 1, deletedPart: 1 });
    else Object.assign(p, { after: r.after, part: r.part, deletedPart: r.deletedPart });
    done = r.done;
    // A step that wrote nothing is redone for free after a crash: no need to persist its end.
    if (r.files.length) await ctx.control.checkpoint(p);
  };
  const name = (kind: 'output' | 'deleted', part: number) => {
    const file = kind === 'output' ? `${type}-${part}.ndjson` : `${type}-deleted-${part}.ndjson`;
    return { name: file, key: fileKey(ctx, file) };
  };
  await pages.pipeTo(partWriter({ sink: ctx.sink, type, name, maxBytes: ctx.fileMaxBytes, part: p.part, deletedPart: p.deletedPart, onRollover }));
  if (!done) throw new Error(`step for ${type} ended without its final checkpoint`);
}

/** The part number after the finished `kind` files of `type` (1 when there are none). */
function nextPart(p: JobProgress, kind: 'output' | 'deleted', type: string): number {
  return p.files.filter((f) => f.kind === kind && f.subject === type).length + 1;
}

/** Page bytes after which an export worker collects its heap (see typeSource). */
const COLLECT_BYTES = 16 << 20;

/** A type's own scan: its snapshot selection, page by page. */
function typeSource(ctx: StepContext, type: string): PageSource {
  let sinceCollect = 0;
  return async (after) => {
    const page = await selectPage(ctx, snapshotQuery(ctx, type, after as number | null, ctx.pageSize));
    // A page's row buffers are garbage as soon as it is written, but the collector lets tens of
    // megabytes of them pile up first; collecting this worker's heap every COLLECT_BYTES keeps the
    // export's memory flat (peak RSS of a 1M export on PostgreSQL 132-140 MB instead of 158-166 MB)
    // for a few milliseconds each time, on the worker's thread, not the HTTP one.
    sinceCollect += page.lines.byteLength;
    if (sinceCollect >= COLLECT_BYTES) {
      sinceCollect = 0;
      Bun.gc(true);
    }
    return toChunk(ctx, type, page, page.next);
  };
}

/** The error file: one OperationOutcome per issue (Bulk Data 2.0 manifest `error`). */
async function writeErrors(ctx: StepContext): Promise<void> {
  const p = ctx.progress;
  const issues = [...ctx.spec.issues, ...p.issues];
  if (p.unlisted) {
    issues.push(issue('error', 'incomplete', `${p.unlisted} more problems were met than this file lists (it lists the first ${MAX_RUNTIME_ISSUES}); like those listed, each left a resource out of the output (one that is not valid FHIR R4, that _elements could not subset, or whose version as of transactionTime may have been expunged: cinder validate lists the invalid ones)`));
  }
  if (issues.length) {
    const name = 'errors-1.ndjson';
    const key = fileKey(ctx, name);
    const text = issues.map((i) => JSON.stringify({ resourceType: 'OperationOutcome', issue: [i] })).join('\n') + '\n';
    const writer = ctx.sink.open(key);
    await writer.write(text);
    await writer.close();
    const record: FileRecord = { kind: 'error', type: 'OperationOutcome', subject: 'OperationOutcome', name, key, count: issues.length, bytes: Buffer.byteLength(text) };
    p.files.push(record);
  }
  Object.assign(p, { step: p.step + 1, after: null, part: 1, deletedPart: 1 });
  await ctx.control.checkpoint(p);
}

/** Runs one step of a job's plan. */
export async function runStep(ctx: StepContext, step: Step): Promise<void> {
  switch (step.kind) {
    case 'type':
      return streamStep(ctx, step.type, typeSource(ctx, step.type));
    case 'provenance':
      return streamStep(ctx, 'Provenance', (after) => provenanceByTargetsPage(ctx, step.mode, after as number | null));
    case 'provenance-joined':
      return streamStep(ctx, 'Provenance', (after) => provenanceByTargetsPage(ctx, step.mode, after as number | null, true));
    case 'provenance-scan':
      return latestProvenanceScan(ctx);
    case 'provenance-scan-joined':
      return latestProvenanceScan(ctx, true);
    case 'provenance-emit':
      return streamStep(ctx, 'Provenance', (after) => latestProvenanceEmitPage(ctx, after as string | null));
    case 'errors':
      return writeErrors(ctx);
  }
}
