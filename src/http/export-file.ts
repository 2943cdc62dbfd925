import { readFailure, type Download } from '../export/download.ts';
import type { ByteRange } from '../export/sink.ts';
import { prefersGzip } from './content-coding.ts';

const NDJSON = 'application/fhir+ndjson';
const KEEP_ALIVE_MS = 20_000;

/**
 * A single `bytes=` range (RFC 9110 14.1.2); null when absent or not one range (then the whole file is sent). The
 * unit is matched without regard to case and the range may have blanks around it (14.1: "Range unit names are
 * case-insensitive"; a range-set is a list, whose elements OWS may surround): `Bytes=0-9` and `bytes= 0-9` were
 * sent the whole file, a resumed download started again.
 */
export function parseRange(header: string | null, size: number): ByteRange | 'unsatisfiable' | null {
  if (!header) return null;
  const m = /^bytes=[ \t]*(\d*)-(\d*)[ \t]*$/i.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return null;
  let start: number;
  let end: number;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0) return 'unsatisfiable';
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
    if (m[2] !== '' && Number(m[2]) < start) return null;
  }
  return start >= size ? 'unsatisfiable' : { start, end };
}

/** Passes bytes through, renews the download's hold on its files while it streams and ends it after. */
function keepingAlive(stream: ReadableStream<Uint8Array>, download: Omit<Download, 'file'>): ReadableStream<Uint8Array> {
  let last = Date.now();
  return stream.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      async transform(chunk, controller) {
        controller.enqueue(chunk);
        if (Date.now() - last > KEEP_ALIVE_MS) {
          last = Date.now();
          await download.keepAlive().catch(() => undefined);
        }
      },
      async flush() {
        await download.release().catch(() => undefined);
      },
    }),
  );
}

/**
 * `stream` with its first chunk read already, so that a file that cannot be read at all (its storage or database
 * unreachable, the connection lost) fails before the status is chosen and is answered as such (readFailure: 503 with
 * Retry-After), where its 200 broke off with no byte; the download's hold is released then. A failure after the first
 * chunk can only end the body early (a client sees fewer bytes than Content-Length and resumes with a Range).
 */
async function started(stream: ReadableStream<Uint8Array>, download: Omit<Download, 'file'>): Promise<ReadableStream<Uint8Array>> {
  const reader = stream.getReader();
  let head: Awaited<ReturnType<typeof reader.read>> | undefined;
  try {
    head = await reader.read();
  } catch (err) {
    await download.release().catch(() => undefined);
    throw readFailure(err);
  }
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const next = head ?? (await reader.read());
        head = undefined;
        if (next.done) controller.close();
        else controller.enqueue(next.value);
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  );
}

/**
 * Serves an export file (Bulk Data 2.0 output file request): `application/fhir+ndjson`, streamed,
 * with ETag / If-None-Match, single byte ranges (206 / 416, honouring If-Range), and gzip when the
 * client prefers it (content-coding.ts prefersGzip) and asked for the whole file, its ETag then weak
 * (the same file in other bytes, RFC 9110 8.8.3). HEAD (RFC 9110 9.3.2) answers the headers of the GET
 * without reading the file: its Content-Length, or with gzip none (GET streams it chunked); a Range is
 * ignored there, GET being the only method it is defined for (RFC 9110 14.2).
 */
export async function fileResponse(req: Request, download: Omit<Download, 'file'>): Promise<Response> {
  const base: Record<string, string> = {
    'Content-Type': NDJSON,
    ETag: download.etag,
    'Accept-Ranges': 'bytes',
    'Cache-Control': 'private, no-store',
    Vary: 'Accept-Encoding',
  };
  const gzip = prefersGzip(req.headers.get('accept-encoding'));
  const whole = gzip ? { ...base, 'Content-Encoding': 'gzip', ETag: `W/${download.etag}` } : base;
  // If-None-Match compares weakly (RFC 9110 13.1.2): the gzip form's W/ tag names the file as well.
  const opaque = (tag: string) => tag.trim().replace(/^W\//, '');
  const inm = req.headers.get('if-none-match');
  if (inm && inm.split(',').some((t) => opaque(t) === download.etag || t.trim() === '*')) {
    await download.release();
    return new Response(null, { status: 304, headers: { ...base, ETag: whole.ETag } });
  }
  if (req.method === 'HEAD') {
    await download.release();
    // With gzip the length is unknown until it is sent (headAnswers then marks it chunked, as GET sends it).
    return new Response(null, { status: 200, headers: gzip ? whole : { ...base, 'Content-Length': String(download.size) } });
  }
  const ifRange = req.headers.get('if-range');
  const range = ifRange && ifRange !== download.etag ? null : parseRange(req.headers.get('range'), download.size);
  if (range === 'unsatisfiable') {
    await download.release();
    return new Response(null, { status: 416, headers: { ...base, 'Content-Range': `bytes */${download.size}` } });
  }
  if (range) {
    const headers = { ...base, 'Content-Range': `bytes ${range.start}-${range.end}/${download.size}`, 'Content-Length': String(range.end - range.start + 1) };
    return new Response(keepingAlive(await started(download.read(range), download), download), { status: 206, headers });
  }
  if (gzip) {
    const compress = new CompressionStream('gzip') as unknown as ReadableWritablePair<Uint8Array, Uint8Array>;
    return new Response(keepingAlive(await started(download.read(), download), download).pipeThrough(compress), { status: 200, headers: whole });
  }
  return new Response(keepingAlive(await started(download.read(), download), download), { status: 200, headers: { ...base, 'Content-Length': String(download.size) } });
}
