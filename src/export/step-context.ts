import type { SnapshotRow } from '../store/types.ts';
import { subsetResource } from './elements.ts';
import type { JobControl } from './job-control.ts';
import type { Chunk } from './part-writer.ts';
import type { SelectContext } from './select.ts';
import type { ExportSink } from './sink.ts';
import type { JobProgress } from './spec.ts';

/** Everything a step needs; `progress` is the job's checkpoint, updated at every rollover. */
export interface StepContext extends SelectContext {
  sink: ExportSink;
  control: JobControl;
  progress: JobProgress;
  fileMaxBytes: number;
  pageSize: number;
  /** Storage key prefix of this attempt's files (`tenant/job/aN`). */
  keyPrefix: string;
  onProgress?: (exported: number, label: string) => void;
}

/** A page source: the next chunk after `after`. */
export type PageSource = (after: number | string | null) => Promise<Chunk>;

function deletionBundle(type: string, row: SnapshotRow): string {
  return JSON.stringify({
    resourceType: 'Bundle',
    meta: { lastUpdated: new Date(row.lastUpdated).toISOString() },
    type: 'transaction',
    entry: [{ request: { method: 'DELETE', url: `${type}/${row.id}` } }],
  });
}

/** Turns selected rows into NDJSON: resources as stored (or subset for `_elements`), deletions as Bundles. */
export function toChunk(ctx: StepContext, type: string, rows: SnapshotRow[], next: number | string | null): Chunk {
  const kept = ctx.spec.elements?.[type];
  const out: string[] = [];
  const del: string[] = [];
  for (const r of rows) {
    if (r.deleted) del.push(deletionBundle(type, r));
    else out.push(kept ? subsetResource(r.content, kept) : r.content);
  }
  return {
    output: out.length ? out.join('\n') + '\n' : '',
    count: out.length,
    deleted: del.length ? del.join('\n') + '\n' : '',
    deletedCount: del.length,
    next,
  };
}

/** Storage key of a file of this attempt. */
export function fileKey(ctx: StepContext, file: string): string {
  return ctx.keyPrefix ? `${ctx.keyPrefix}/${file}` : file;
}
