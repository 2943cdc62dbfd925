import type { Store } from '../store/types.ts';
import { createDatabaseSink } from './sink-database.ts';
import { createFileSink } from './sink-file.ts';
import { createS3Sink, s3OptionsFromEnv } from './sink-s3.ts';

/** A file being written to export storage. `write` resolves once the chunk is handed on (backpressure). */
export interface SinkWriter {
  write(chunk: string | Uint8Array): Promise<void>;
  /** Finishes the file; it is complete and readable afterwards. */
  close(): Promise<void>;
  /** Gives up the file (best effort removal of what was written). */
  abort(): Promise<void>;
}

export interface ByteRange {
  start: number;
  /** Inclusive. */
  end: number;
}

/** Where export files live: the local disk, the database or an S3 bucket. Keys are relative paths (`tenant/job/.../file`). */
export interface ExportSink {
  readonly kind: 'file' | 'postgres' | 's3';
  open(key: string): SinkWriter;
  /** Size in bytes, or null when the file does not exist; throws when the storage cannot tell (unreachable, failing). */
  size(key: string): Promise<number | null>;
  read(key: string, range?: ByteRange): ReadableStream<Uint8Array>;
  /** Removes every file under `prefix` (a `tenant/job` path). */
  removePrefix(prefix: string): Promise<void>;
  /** A presigned download URL valid for `seconds` (S3 only). */
  presign?(key: string, seconds: number): string;
  /** Throws when the storage cannot be reached or written (for /readyz). */
  check(): Promise<void>;
}

/**
 * Opens `CINDER_EXPORT_STORAGE`: `file:<dir>`, `postgres` (in the store's database) or
 * `s3://bucket/prefix`, the latter with the standard S3_* / AWS_* variables from `env` (access key,
 * secret, session token, region, endpoint).
 */
export function openSink(storage: string, env: Record<string, string | undefined>, store?: Pick<Store, 'exportFiles'>): ExportSink {
  if (storage === 'postgres') {
    if (!store?.exportFiles) throw new Error('CINDER_EXPORT_STORAGE=postgres needs a PostgreSQL database (CINDER_DATABASE_URL=postgres://...)');
    return createDatabaseSink(store.exportFiles);
  }
  if (storage.startsWith('file:')) {
    const dir = storage.slice('file:'.length).replace(/^\/\/(?=\/)/, '');
    if (!dir) throw new Error('CINDER_EXPORT_STORAGE file: needs a directory');
    return createFileSink(dir);
  }
  const m = /^s3:\/\/([^/]+)\/?(.*)$/.exec(storage);
  if (!m) throw new Error(`CINDER_EXPORT_STORAGE: expected file:<dir>, postgres or s3://bucket/prefix, got ${storage}`);
  return createS3Sink({ ...s3OptionsFromEnv(env), bucket: m[1]! }, m[2]!.replace(/\/+$/, ''));
}
