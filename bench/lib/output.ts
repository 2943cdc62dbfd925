/**
 * File output for generated data with backpressure: writes are buffered per file and the
 * producer awaits each flush, so memory stays flat however much data is generated.
 */
import type { FileHandle } from "node:fs/promises";
import { mkdir, open, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { TransactionBundle } from "./bundle.ts";
import type { FhirResource } from "./fhir.ts";

export interface FileStats {
  count: number;
  bytes: number;
}

/** One output file with a write buffer; `write` returns a promise only when it flushes. */
class BufferedFile {
  private parts: string[] = [];
  private pending = 0;
  readonly stats: FileStats = { count: 0, bytes: 0 };

  constructor(
    private readonly handle: FileHandle,
    private readonly highWaterMark: number,
  ) {}

  write(text: string): Promise<void> | undefined {
    this.parts.push(text);
    this.pending += text.length;
    this.stats.count++;
    return this.pending >= this.highWaterMark ? this.flush() : undefined;
  }

  async flush(): Promise<void> {
    if (this.parts.length === 0) return;
    const buffer = Buffer.from(this.parts.join(""), "utf8");
    this.parts = [];
    this.pending = 0;
    for (let offset = 0; offset < buffer.length; ) {
      const { bytesWritten } = await this.handle.write(buffer, offset, buffer.length - offset);
      offset += bytesWritten;
    }
    this.stats.bytes += buffer.length;
  }

  async close(): Promise<void> {
    await this.flush();
    await this.handle.close();
  }
}

export interface NdjsonSink {
  /** Appends one resource as a line of `<dir>/<resourceType>.ndjson`; await the result when it is a promise. */
  write(resource: FhirResource): Promise<void> | undefined;
  /** Flushes and closes every file; returns count and bytes per resource type. */
  close(): Promise<Map<string, FileStats>>;
}

/**
 * Opens (truncating) one NDJSON file per resource type in `dir`, created up front so that
 * a type with no resources leaves an empty file rather than a stale one from an earlier run.
 */
export async function openNdjsonSink(dir: string, types: readonly string[], highWaterMark = 1 << 20): Promise<NdjsonSink> {
  if (!(highWaterMark > 0)) throw new RangeError("highWaterMark must be positive");
  await mkdir(dir, { recursive: true });
  const files = new Map<string, BufferedFile>();
  for (const type of types) files.set(type, new BufferedFile(await open(join(dir, `${type}.ndjson`), "w"), highWaterMark));
  return {
    write(resource) {
      const file = files.get(resource.resourceType);
      if (file === undefined) throw new Error(`no output file for resource type ${resource.resourceType}`);
      return file.write(`${JSON.stringify(resource)}\n`);
    },
    async close() {
      const stats = new Map<string, FileStats>();
      for (const [type, file] of files) {
        await file.close();
        stats.set(type, file.stats);
      }
      return stats;
    },
  };
}

const BUNDLE_FILE = /^bundle-\d+\.json$/;

/** The file name of the `index`-th Bundle (0 is the shared Bundle), zero-padded so names sort in order. */
export function bundleFileName(index: number, total: number): string {
  return `bundle-${String(index).padStart(Math.max(6, String(total).length), "0")}.json`;
}

/**
 * Writes each Bundle to its own file `<dir>/bundle-NNNNNN.json`, one at a time, after removing
 * Bundle files an earlier run left behind. Returns the number of files and bytes written.
 */
export async function writeBundleFiles(dir: string, bundles: Iterable<TransactionBundle>, total: number): Promise<FileStats> {
  await mkdir(dir, { recursive: true });
  for (const name of await readdir(dir)) {
    if (BUNDLE_FILE.test(name)) await rm(join(dir, name));
  }
  const stats: FileStats = { count: 0, bytes: 0 };
  for (const bundle of bundles) {
    const handle = await open(join(dir, bundleFileName(stats.count, total)), "w");
    const file = new BufferedFile(handle, Number.POSITIVE_INFINITY);
    file.write(JSON.stringify(bundle));
    await file.close();
    stats.count++;
    stats.bytes += file.stats.bytes;
  }
  return stats;
}
