import type { ParseArgsConfig } from 'node:util';
import { decodeUtf8, NotUtf8Error } from '../fhir/utf8.ts';

export type Options = NonNullable<ParseArgsConfig['options']>;

/** IO a command uses; injected so tests can run commands in-process. */
export interface CliIO {
  env: Record<string, string | undefined>;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** Standard input as text (for --password-stdin), decoded from UTF-8 (stdinText). */
  stdin: () => Promise<string>;
  isTTY: boolean;
}

/**
 * Standard input's bytes as text: UTF-8, a leading BOM dropped; bytes that are not are a UsageError naming the first,
 * never U+FFFD (a password of Latin-1 bytes read so would be matched by any other of its length and shape).
 */
export function stdinText(bytes: Uint8Array): string {
  try {
    return decodeUtf8(bytes);
  } catch (err) {
    if (!(err instanceof NotUtf8Error)) throw err;
    throw new UsageError(`standard input is not valid UTF-8: ${err.message}; send it in UTF-8`);
  }
}

export interface ParsedArgs {
  values: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
}

/** One `cinder` subcommand. */
export interface Command {
  /** Words after `cinder`, e.g. `client create`. */
  name: string;
  summary: string;
  usage: string;
  options: Options;
  allowPositionals?: boolean;
  /**
   * Positionals are ids that may begin with `-` (client and user ids are base64url): an argument that is not one of
   * `options` is taken as a positional even so, with no `--` needed before it.
   */
  dashedPositionals?: boolean;
  /** Returns the process exit code. */
  run(args: ParsedArgs, io: CliIO): Promise<number>;
}

/** Thrown for a usage mistake: printed with the command's usage, exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/**
 * Thrown when CINDER_DATA_DIR or CINDER_DATABASE_URL finds no Cinder database for a command that works on the
 * server's (src/cli/context.ts): printed without the usage, since the command line was right; exit code 2.
 */
export class NoDatabaseError extends Error {
  override name = 'NoDatabaseError';
}
