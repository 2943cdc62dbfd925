/**
 * The error file of an `$import` input: one OperationOutcome per failed line (and per line kept unchanged though
 * validation refuses it, its issues warnings: ImportIssue.severity), as NDJSON (the Bulk Data
 * convention for error files), written to the export storage (src/export/sink.ts) as the input is imported.
 * The status lists the first failures inline and links this file, which holds every one.
 */
import type { ExportSink, SinkWriter } from '../export/sink.ts';

/** Where a job's files live in the export storage: beside, never under, an export job's `tenant/job` prefix. */
export const importPrefix = (job: { tenant: string; id: string }) => `${job.tenant}/import-${job.id}`;

/** A written error file: its key in the export storage and its size. */
export interface ErrorFileRecord {
  key: string;
  bytes: number;
}

export interface ErrorFile {
  /** Appends one line (written in order behind the ones before; an error opening or writing the file is thrown by `finish`). */
  add(outcome: Record<string, unknown>): void;
  /** Waits for the lines, closes the file and returns it; undefined when no line was added. */
  finish(): Promise<ErrorFileRecord | undefined>;
  /** Gives the file up (an interrupted input: it is read again, and its file written again, by the next attempt). */
  abort(): Promise<void>;
}

/** Opens (on its first line) the error file `key`. */
export function openErrorFile(sink: Pick<ExportSink, 'open'>, key: string): ErrorFile {
  let writer: SinkWriter | undefined;
  let bytes = 0;
  let chain: Promise<void> = Promise.resolve();
  let failed: unknown;
  return {
    add(outcome) {
      const text = JSON.stringify(outcome) + '\n';
      bytes += Buffer.byteLength(text);
      if (failed !== undefined) return;
      try {
        // A storage that cannot open the file (a file sink's directory on a failing disk throws at once) fails it as a write would.
        writer ??= sink.open(key);
      } catch (err) {
        failed = err;
        return;
      }
      const w = writer;
      chain = chain.then(() => (failed === undefined ? w.write(text) : undefined)).catch((err: unknown) => void (failed ??= err));
    },
    async finish() {
      await chain;
      if (failed !== undefined) {
        await writer?.abort().catch(() => undefined);
        throw failed;
      }
      if (!writer) return undefined;
      await writer.close();
      return { key, bytes };
    },
    async abort() {
      await chain;
      await writer?.abort().catch(() => undefined);
    },
  };
}
