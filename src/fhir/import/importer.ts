import type { FhirDeps } from '../crud.ts';
import type { Resource } from '../resource.ts';
import { createBatchWriter } from './batches.ts';
import { importDocument, parseResource, type DocumentContext } from './document.ts';
import { readLines } from './lines.ts';

/** A resource that could not be imported: file, 1-based line (NDJSON) and why. */
export interface ImportIssue {
  file: string;
  line?: number;
  message: string;
}

/** Running totals; `bytesRead` counts the input files' bytes consumed so far. */
export interface ImportProgress {
  imported: number;
  failed: number;
  bytesRead: number;
}

export interface ImportOptions {
  tenant: string;
  /** The tenant's FHIR base URL (resolves absolute request URLs in transaction Bundles). */
  fhirBase: string;
  /** Resources per write transaction. */
  batchSize: number;
  onIssue(issue: ImportIssue): void;
  /** Called after each committed batch and each finished file. */
  onProgress(progress: Readonly<ImportProgress>): void;
}

type ImportFormat = 'ndjson' | 'json';

/** A named input, e.g. `Bun.file(path)`. */
export interface ImportSource {
  name: string;
  blob: Blob;
}

/**
 * `.ndjson`/`.jsonl` are NDJSON, `.json` one JSON document; otherwise NDJSON when the first line
 * holds a complete JSON value by itself (a pretty-printed document's first line does not).
 */
async function detectFormat(source: ImportSource): Promise<ImportFormat> {
  if (/\.(ndjson|jsonl)$/i.test(source.name)) return 'ndjson';
  if (/\.json$/i.test(source.name)) return 'json';
  const head = await source.blob.slice(0, 1 << 16).text();
  const nl = head.indexOf('\n');
  if (nl < 0) return 'json';
  try {
    JSON.parse(head.slice(0, nl));
    return 'ndjson';
  } catch {
    return 'json';
  }
}

/**
 * Bulk import into one tenant (the `cinder import` domain logic): NDJSON streamed line by line, JSON
 * documents (a resource, or a transaction, batch or collection Bundle) read whole. Each resource is
 * validated before it joins a batch, so a bad line is reported and never rolls back good ones.
 */
export function createImporter(deps: FhirDeps, opts: ImportOptions) {
  const progress: ImportProgress = { imported: 0, failed: 0, bytesRead: 0 };
  const report = () => opts.onProgress(progress);
  const writer = createBatchWriter(deps, opts.tenant, opts.batchSize, (n) => {
    progress.imported += n;
    report();
  });
  const fail = (issue: ImportIssue, count = 1) => {
    progress.failed += count;
    opts.onIssue(issue);
  };

  async function importNdjson(source: ImportSource): Promise<void> {
    for await (const lines of readLines(source.blob.stream(), (n) => (progress.bytesRead += n))) {
      for (const { number, text } of lines) {
        if (text.trim() === '') continue;
        let resource: Resource;
        try {
          resource = parseResource(text);
        } catch (err) {
          fail({ file: source.name, line: number, message: (err as Error).message });
          continue;
        }
        await writer.add(resource);
      }
    }
  }

  return {
    progress: progress as Readonly<ImportProgress>,
    /** Imports one source; resolves when its resources are queued (call `finish` to commit the rest). */
    async add(source: ImportSource): Promise<void> {
      if ((await detectFormat(source)) === 'ndjson') {
        await importNdjson(source);
      } else {
        const text = await source.blob.text();
        progress.bytesRead += source.blob.size;
        const ctx: DocumentContext = {
          tenant: opts.tenant, fhirBase: opts.fhirBase, writer,
          fail: (message, count) => fail({ file: source.name, message }, count),
          imported: (n) => void (progress.imported += n),
        };
        await importDocument(deps, ctx, text);
      }
      report();
    },
    /** Commits every queued resource. */
    async finish(): Promise<void> {
      await writer.drain();
      report();
    },
  };
}
