import type { ExportFileRepo } from '../store/types.ts';
import type { ExportSink, SinkWriter } from './sink.ts';

const encoder = new TextEncoder();

/**
 * Export files in the database itself (`CINDER_EXPORT_STORAGE=postgres`): every process sharing the
 * database serves every file, with no shared disk and no S3. The SQL lives in the store adapter.
 */
export function createDatabaseSink(files: ExportFileRepo): ExportSink {
  return {
    kind: 'postgres',
    open(key): SinkWriter {
      const w = files.create(key);
      return {
        write: (chunk) => w.write(typeof chunk === 'string' ? encoder.encode(chunk) : chunk),
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
