import type { SnapshotRow } from '../store/types.ts';
import { subsetResource } from './elements.ts';
import type { JobControl } from './job-control.ts';
import type { Chunk } from './part-writer.ts';
import { splitLines, type SelectContext, type SelectedPage } from './select.ts';
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

const encoder = new TextEncoder();

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (b.byteLength === 0) return a;
  if (a.byteLength === 0) return b;
  const out = new Uint8Array(a.byteLength + b.byteLength);
  out.set(a);
  out.set(b, a.byteLength);
  return out;
}

const joinLines = (texts: string[]) => (texts.length ? encoder.encode(texts.join('\n') + '\n') : new Uint8Array(0));

/**
 * Turns a selected page into NDJSON: the database's lines passed through as bytes (or subset for
 * `_elements`), the rechecked versions appended, deletions as transaction Bundles.
 */
export function toChunk(ctx: StepContext, type: string, page: Pick<SelectedPage, 'lines' | 'count' | 'rows'>, next: number | string | null): Chunk {
  const kept = ctx.spec.elements?.[type];
  const live = page.rows.filter((r) => !r.deleted).map((r) => r.content);
  const deleted = page.rows.filter((r) => r.deleted).map((r) => deletionBundle(type, r));
  const output = kept
    ? joinLines([...splitLines(page.lines), ...live].map((c) => subsetResource(c, kept)))
    : concat(page.lines, joinLines(live));
  return { output, count: page.count + live.length, deleted: joinLines(deleted), deletedCount: deleted.length, next };
}

/** Storage key of a file of this attempt. */
export function fileKey(ctx: StepContext, file: string): string {
  return ctx.keyPrefix ? `${ctx.keyPrefix}/${file}` : file;
}
