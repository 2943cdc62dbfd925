/** Export files kept in the database. */

/** A file being written into the database's export file storage; readable once closed. */
export interface ExportFileWriter {
  write(bytes: Uint8Array): Promise<void>;
  close(): Promise<void>;
  abort(): Promise<void>;
}

/** Export files kept in the database (PostgreSQL only), so that every process sharing it serves every file. */
export interface ExportFileRepo {
  create(key: string): ExportFileWriter;
  /** Size of a complete file, or null when there is none under `key`. */
  size(key: string): Promise<number | null>;
  /** The bytes of a complete file, or of the inclusive range `start`..`end`; streamed a chunk at a time. */
  read(key: string, range?: { start: number; end: number }): ReadableStream<Uint8Array>;
  /** Removes every file whose key starts with `prefix/`. */
  removePrefix(prefix: string): Promise<void>;
}
