import type { SnapshotRow } from '../store/types.ts';
import { absoluteAttachmentUrls, mayHoldRelativeUrl, textMayHoldRelativeUrl } from './attachment-urls.ts';
import { subsetResource } from './elements.ts';
import type { JobControl } from './job-control.ts';
import type { Chunk } from './part-writer.ts';
import { splitLines, type SelectContext, type SelectedPage } from './select.ts';
import type { ExportSink } from './sink.ts';
import { noteIssue, type JobProgress } from './spec.ts';
import { parseExact } from '../fhir/exact-json.ts';
import { issue } from '../fhir/outcome.ts';
import type { Resource } from '../fhir/resource.ts';
import { validationErrors } from '../fhir/validation/check.ts';
import { securityContextTarget } from '../fhir/binary.ts';

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
  /**
   * The tenant may hold resources that were never validated strictly (TenantRepo.validationDebt):
   * each one is validated as it is read, and an invalid one goes to the error file instead of the output.
   */
  validate?: boolean;
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
 * `_elements`, relative Attachment urls made absolute), the rechecked versions appended, deletions as
 * transaction Bundles.
 */
export function toChunk(ctx: StepContext, type: string, page: Pick<SelectedPage, 'lines' | 'count' | 'rows'>, next: number | string | null): Chunk {
  const kept = ctx.spec.elements?.[type];
  const live = page.rows.filter((r) => !r.deleted).map((r) => r.content);
  let deletions = page.rows.filter((r) => r.deleted);
  // A Binary out of reach is not told deleted either (its type history leaves it out): judged by its last live version.
  if (type === 'Binary' && ctx.spec.binaryContexts) deletions = deletions.filter((r) => inContextReach(ctx.spec.binaryContexts!, [r.content], ctx.spec.fhirBase).length > 0);
  const deleted = deletions.map((r) => deletionBundle(type, r));
  let texts = ctx.validate ? validOnly(ctx, type, [...splitLines(page.lines), ...live]) : undefined;
  if (type === 'Binary' && ctx.spec.binaryContexts) texts = inContextReach(ctx.spec.binaryContexts, texts ?? [...splitLines(page.lines), ...live], ctx.spec.fhirBase);
  // Relative Attachment urls made absolute (Bulk Data 2.0, Attachments); a page holding none goes out as it is.
  const base = ctx.spec.fhirBase;
  if (base !== undefined && (texts !== undefined || mayHoldRelativeUrl(page.lines) || live.some(textMayHoldRelativeUrl))) {
    texts = (texts ?? [...splitLines(page.lines), ...live]).map((c) => absoluteAttachmentUrls(c, base));
  }
  if (kept) texts = subsetAll(ctx, type, texts ?? [...splitLines(page.lines), ...live], kept);
  const output = texts ? joinLines(texts) : concat(page.lines, joinLines(live));
  return { output, count: texts ? texts.length : page.count + live.length, deleted: joinLines(deleted), deletedCount: deleted.length, next };
}

/**
 * The Binaries whose securityContext names none of this tenant's resources, or one of a type in
 * `readable` (ExportSpec.binaryContexts): the others are out of the kick-off token's reach, as a read
 * of them would be (403), and are left out.
 */
function inContextReach(readable: readonly string[], contents: string[], base: string | undefined): string[] {
  const types = new Set(readable);
  return contents.filter((content) => {
    const target = securityContextTarget(JSON.parse(content) as Resource, base);
    return !target || types.has(target.type);
  });
}

/**
 * The resources that are valid R4, or undefined when all of them are (the page's bytes then go out as
 * they are); each invalid one is named in the error file instead.
 */
function validOnly(ctx: StepContext, type: string, contents: string[]): string[] | undefined {
  const out: string[] = [];
  for (const content of contents) {
    const r = parseExact(content) as Resource;
    const errors = validationErrors(r, 'strict');
    if (errors.length === 0) {
      out.push(content);
      continue;
    }
    const first = errors[0]!;
    const more = errors.length > 1 ? ` (and ${errors.length - 1} more problems: cinder validate lists them)` : '';
    const text = `${type}/${r.id} (version ${String(r.meta?.versionId)}) is not valid FHIR R4 and was left out: ${first.expression}: ${first.text}${more}`;
    noteIssue(ctx.progress, issue('error', first.code, text, [first.expression]));
  }
  return out.length === contents.length ? undefined : out;
}

/** `_elements` subsets; a resource that cannot be subset is left out and reported in the error file. */
function subsetAll(ctx: StepContext, type: string, contents: string[], kept: string[]): string[] {
  const out: string[] = [];
  for (const content of contents) {
    try {
      out.push(subsetResource(content, kept));
    } catch (err) {
      const text = `A ${type} resource could not be exported with _elements: ${(err as Error).message}`;
      noteIssue(ctx.progress, issue('error', 'exception', text, ['_elements']));
    }
  }
  return out;
}

/** Storage key of a file of this attempt. */
export function fileKey(ctx: StepContext, file: string): string {
  return ctx.keyPrefix ? `${ctx.keyPrefix}/${file}` : file;
}
