import type { ExportFileRepo } from '../store/types.ts';
import type { ExportSink, SinkWriter } from './sink.ts';

const encoder = new TextEncoder();
/** Bytes written between two collections of the worker's heap (the scan collects every 16 MB read, steps.ts). */
const COLLECT_BYTES = 8 << 20;

/**
 * Export files in the database itself (`CINDER_EXPORT_STORAGE=postgres`): every process sharing the
 * database serves every file, with no shared disk and no S3. The SQL lives in the store adapter.
 */
export function createDatabaseSink(files: ExportFileRepo): ExportSink {
  return {
    kind: 'postgres',
    open(key): SinkWriter {
      const w = files.create(key);
      let sinceCollect = 0;
      return {
        write: (chunk) => {
          const bytes = typeof chunk === 'string' ? encoder.encode(chunk) : chunk;
          // Each chunk is copied on its way to the server (CopyData framing, socket buffers): collect
          // that garbage at the scan's pace too, or it piles up between the scan's collections.
          sinceCollect += bytes.byteLength;
          if (sinceCollect >= COLLECT_BYTES) {
            sinceCollect = 0;
            Bun.gc(true);
          }
          return w.write(bytes);
        },
        close: () => w.close(),
        abort: () => w.abort(),
      };
    },
    size: (key) => files.size(key),
    read: (key, range) => files.read(key, range),
    removePrefix: (prefix) => files.removePrefix(prefix),
    // The database is what /readyz checks first; nothing more to reach.
    async check() {},
  };
}
