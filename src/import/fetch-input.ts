/**
 * Fetching an `$import` input: an http(s) GET without the caller's token, streamed to a file in the import spool
 * (never held in memory) with its size and time bounded. Redirects are followed by hand, each hop checked
 * as the first (a public host must not redirect the server to a private one), and each is sent to the
 * address its host resolved to when checked (src/http/outbound.ts: no DNS rebinding). A gzip file (by its magic
 * bytes; a `Content-Encoding: gzip` answer is decoded by fetch itself) is decompressed as it arrives, and
 * the limit holds for the decompressed bytes. A credential (`storageDetail.credentialHttpBasic`) goes as Basic
 * authorization to the input's origin only: a redirect to another origin is followed without it.
 */
import { open, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { endpointUrl, type ResolveHost } from '../fhir/subscriptions/endpoint.ts';
import { outboundFetch, RefusedAddress } from '../http/outbound.ts';
import { remakeSpoolDir } from './spool.ts';

export interface FetchInputDeps {
  fetch: typeof fetch;
  /** CINDER_IMPORT_ALLOW_PRIVATE. */
  allowPrivate: boolean;
  resolve: ResolveHost;
  /** CINDER_IMPORT_MAX_INPUT_BYTES: the most (decompressed) bytes of one input. */
  maxBytes: number;
  /** CINDER_IMPORT_FETCH_TIMEOUT: the longest one input's download may take. */
  timeoutMs: number;
  /** Where the downloaded input is kept while it is imported: this runner's directory in the spool (spool.ts). */
  spoolDir: string;
}

/** An input that could not be fetched: reported in its result, the job goes on with the next input. */
export class InputError extends Error {
  override name = 'InputError';
}

/**
 * The server could not keep an input's download on its own disk (the import spool full, unwritable, failing):
 * the server's failure, never the input's. It fails the job's attempt (run-job.ts: retried, then failed with a
 * reason that names no path); the cause, with the path, is the operator's, in the log.
 */
export class SpoolError extends Error {
  override name = 'SpoolError';
  constructor(path: string, cause: unknown) {
    super(`the download of an input could not be written to ${path}: ${(cause as Error)?.message ?? String(cause)}`, { cause });
  }
}

const MAX_REDIRECTS = 5;

/** `raw` as an http(s) URL a request may go to (its address is checked by the request itself). */
function checkUrl(raw: string): URL {
  const url = endpointUrl(raw);
  if (typeof url === 'string') throw new InputError(`${raw} ${url}`);
  return url;
}

/**
 * One GET of `url`: its host resolved once, its addresses checked, and the request sent to the address
 * checked (src/http/outbound.ts: DNS rebinding).
 */
async function fetchChecked(deps: FetchInputDeps, url: URL, signal: AbortSignal, authorization: string | undefined): Promise<Response> {
  const headers: Record<string, string> = { Accept: 'application/fhir+ndjson, application/ndjson, */*' };
  if (authorization !== undefined) headers.Authorization = authorization;
  try {
    return await outboundFetch(deps, url, { headers, redirect: 'manual', signal });
  } catch (err) {
    if (!(err instanceof RefusedAddress)) throw err;
    throw new InputError(`${url.href} is refused: ${err.message}${deps.allowPrivate || err.unresolved ? '' : ' (CINDER_IMPORT_ALLOW_PRIVATE=true allows it)'}`);
  }
}

/** The Authorization header of `credential` (`user:password`, RFC 7617, UTF-8). */
function basic(credential: string): string {
  return `Basic ${Buffer.from(credential, 'utf8').toString('base64')}`;
}

/**
 * GETs `raw`, following up to MAX_REDIRECTS redirects; the answer is a 2xx. `credential` is sent to `raw`'s
 * origin (scheme, host and port) only: a hop to another origin, an http one from https included, goes without it.
 */
async function get(deps: FetchInputDeps, raw: string, signal: AbortSignal, credential: string | undefined): Promise<Response> {
  let url = checkUrl(raw);
  const origin = url.origin;
  const authorization = credential === undefined ? undefined : basic(credential);
  for (let hop = 0; ; hop++) {
    const res = await fetchChecked(deps, url, signal, url.origin === origin ? authorization : undefined);
    const location = res.headers.get('location');
    if (res.status >= 300 && res.status < 400 && location !== null) {
      await res.body?.cancel().catch(() => undefined);
      if (hop >= MAX_REDIRECTS) throw new InputError(`GET ${raw} was redirected more than ${MAX_REDIRECTS} times`);
      url = checkUrl(new URL(location, url).href);
      continue;
    }
    if (res.status < 200 || res.status > 299) {
      await res.body?.cancel().catch(() => undefined);
      throw new InputError(`GET ${url.href} answered ${res.status}${res.statusText ? ` ${res.statusText}` : ''}`);
    }
    return res;
  }
}

/** The body, decompressed when it is a gzip file (RFC 1952 magic bytes 1f 8b). */
async function* bytesOf(body: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = body.getReader();
  const first = await reader.read();
  if (first.done) return;
  const head = first.value;
  const rest = new ReadableStream<Uint8Array>({
    start: (c) => c.enqueue(head),
    pull: async (c) => {
      const next = await reader.read();
      if (next.done) c.close();
      else c.enqueue(next.value);
    },
    cancel: (why) => reader.cancel(why),
  });
  const gzip = head.byteLength >= 2 && head[0] === 0x1f && head[1] === 0x8b;
  yield* gzip ? rest.pipeThrough(new DecompressionStream('gzip') as unknown as ReadableWritablePair<Uint8Array, Uint8Array>) : rest;
}

/** The start of the name of every download of job `jobId` (downloadName). */
const downloadPrefix = (jobId: string) => `cinder-import-${jobId}-`;

/** A token of one attempt at a job (random), which the names of its downloads hold (downloadName). */
export const attemptToken = (): string => crypto.randomUUID().slice(0, 8);

/**
 * The name of the download of input `index` of job `jobId` by the attempt `attempt` (attemptToken): one of its own
 * per attempt, so that a job taken over after a lost lease never shares its file with the process that lost it.
 */
export function downloadName(jobId: string, attempt: string, index: number): string {
  return `${downloadPrefix(jobId)}${attempt}-${index}`;
}

/**
 * Removes the downloads of job `jobId` left in the spool `spoolRoot` (any runner's directory of it, spool.ts) by other
 * attempts than `attempt`, whose process ended without removing them (a crash, a kill: each up to
 * CINDER_IMPORT_MAX_INPUT_BYTES). Run as the job is claimed, beside the attempt (whose own files it leaves), when no
 * earlier attempt may still want them: one that lost its lease stops at its next renewal, and reads a file it holds
 * open even once removed.
 */
export async function removeLeftDownloads(spoolRoot: string, jobId: string, attempt: string): Promise<number> {
  const prefix = downloadPrefix(jobId);
  let removed = 0;
  for (const entry of await readdir(spoolRoot, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue;
    const dir = join(spoolRoot, entry.name);
    // A runner's directory removed meanwhile (its runner stopped, or was found ended) holds nothing more.
    const names = (await readdir(dir).catch(() => [] as string[])).filter((name) => name.startsWith(prefix) && !name.startsWith(`${prefix}${attempt}-`));
    await Promise.all(names.map((name) => rm(join(dir, name), { force: true })));
    removed += names.length;
  }
  return removed;
}

/** A downloaded input: its file (remove it with `remove`) and size. */
export interface Downloaded {
  path: string;
  bytes: number;
  remove(): Promise<void>;
}

/**
 * Downloads `raw` to a file under `deps.spoolDir` (readable by the server's user only) named after `name`. Throws InputError when it cannot be
 * fetched, is larger than `maxBytes` or takes longer than `timeoutMs`, and SpoolError when the file cannot be
 * written (the server's disk, not the input); rethrows `signal`'s abort. `credential` (`user:password`) is sent
 * as Basic authorization to `raw`'s origin (see get).
 */
export async function downloadInput(deps: FetchInputDeps, raw: string, name: string, signal: AbortSignal, credential?: string): Promise<Downloaded> {
  const path = join(deps.spoolDir, `${name}.ndjson`);
  const remove = () => rm(path, { force: true });
  const timeout = AbortSignal.timeout(deps.timeoutMs);
  const spooled = <T>(write: Promise<T>) => write.catch((err: unknown) => Promise.reject(new SpoolError(path, err)));
  // The runner's directory removed while the server runs (an operator freeing disk, a neighbour of an older release
  // taking it for an ended one's): made again, rather than failing every import till a restart.
  const opened = open(path, 'w', 0o600).catch(async (err: unknown) => {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    await remakeSpoolDir(deps.spoolDir);
    return open(path, 'w', 0o600);
  });
  const file = await spooled(opened);
  let bytes = 0;
  try {
    const res = await get(deps, raw, AbortSignal.any([signal, timeout]), credential);
    const declared = Number(res.headers.get('content-length') ?? NaN);
    if (declared > deps.maxBytes && !res.headers.get('content-encoding')) {
      await res.body?.cancel().catch(() => undefined);
      throw new InputError(`${raw} is ${declared} bytes, more than the ${deps.maxBytes} an input may hold (CINDER_IMPORT_MAX_INPUT_BYTES)`);
    }
    if (res.body) {
      for await (const chunk of bytesOf(res.body)) {
        bytes += chunk.byteLength;
        if (bytes > deps.maxBytes) throw new InputError(`${raw} holds more than the ${deps.maxBytes} bytes an input may hold (CINDER_IMPORT_MAX_INPUT_BYTES)`);
        await spooled(file.write(chunk));
      }
    }
    // A write the disk failed late (a full or remote file system) is told by the close: the file is not imported half.
    await spooled(file.close());
    return { path, bytes, remove };
  } catch (err) {
    await file.close().catch(() => undefined);
    // A file that cannot be removed either (the same failing disk) is only disk: the first error is the one told.
    await remove().catch(() => undefined);
    if (signal.aborted) throw signal.reason;
    if (err instanceof InputError || err instanceof SpoolError) throw err;
    if (timeout.aborted) throw new InputError(`GET ${raw} did not finish within ${deps.timeoutMs / 1000} s (CINDER_IMPORT_FETCH_TIMEOUT)`);
    const cause = (err as Error).message ?? String(err);
    throw new InputError(`GET ${raw} failed: ${cause}`);
  } finally {
    await file.close().catch(() => undefined);
  }
}
