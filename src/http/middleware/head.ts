import type { MiddlewareHandler } from 'hono';
import { describeCoding } from '../content-coding.ts';
import type { AppEnv } from '../env.ts';

/**
 * HEAD (RFC 9110 9.3.2): "the server SHOULD send the same header fields in response to a HEAD request
 * as it would have sent if the request method had been GET". Hono answers HEAD by running the GET
 * route and dropping its body (`new Response(null, res)`), and Bun's server then writes
 * `content-length: 0` for the empty body, which RFC 9110 8.6 forbids ("MUST NOT send Content-Length in
 * such a response unless its field value equals the decimal number of octets that would have been sent
 * in the content of a response if the same request had used the GET method").
 *
 * So the last step of every HEAD answer puts on it what GET would send:
 * - a Content-Length the route set stays (a route whose body is a stream, such as native Binary content
 *   or an export file, answers HEAD itself with the length it knows, never opening the stream);
 * - content in a Content-Encoding (a compressed stream; or an answer GET would compress, whose coding
 *   describeCoding sets without compressing anything) gets no length, which RFC 9110 9.3.2 allows for
 *   a field "determined only while generating the content": Transfer-Encoding: chunked stops the
 *   server from claiming 0, as RFC 9112 6.1 lets a HEAD answer say;
 * - any other body is in memory (JSON, text, HTML): its length in bytes.
 * 204, 304 and 1xx answers carry no content and are left alone.
 */
export function headAnswers(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    await next();
    if (c.req.method !== 'HEAD') return;
    describeCoding(c.req.raw, c.res);
    const res = await asHead(c.res);
    if (res !== c.res) c.res = res;
  };
}

/** `res` (a GET answer) with the length fields of its content set, as a HEAD answer carries them; see headAnswers. */
export async function asHead(res: Response): Promise<Response> {
  if (res.status === 204 || res.status === 304 || res.status < 200) return res;
  const headers = res.headers;
  let field: [string, string] | null = null;
  const known = headers.has('content-length');
  if (known || headers.has('content-encoding')) {
    if (!known) field = ['Transfer-Encoding', 'chunked'];
    // Nothing of the content is sent: a stream a route opened anyway is let go.
    if (res.body && !res.bodyUsed) await res.body.cancel();
  } else {
    field = ['Content-Length', String(res.body ? (await res.arrayBuffer()).byteLength : 0)];
  }
  if (field === null) return res;
  try {
    headers.set(...field);
    return res;
  } catch {
    // Immutable headers (a response passed through from fetch): a copy.
    const copy = new Response(null, res);
    copy.headers.set(...field);
    return copy;
  }
}
