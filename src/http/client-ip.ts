import type { Context } from 'hono';

interface ConnInfoSource {
  requestIP?: (req: Request) => { address: string } | null;
}

/**
 * The client's IP address for rate limiting: with `trustProxy`, the last `X-Forwarded-For` entry (the
 * address the one trusted reverse proxy saw); otherwise the socket's address (Bun passes the server as
 * the Hono env). `unknown` when neither is available (in-process requests).
 */
export function clientIp(c: Context, trustProxy: boolean): string {
  return requestIp(c.req.raw, c.env, trustProxy);
}

/** clientIp() on a plain Request and the server Bun passed beside it. */
export function requestIp(req: Request, server: unknown, trustProxy: boolean): string {
  if (trustProxy) {
    const xff = req.headers.get('x-forwarded-for');
    const last = xff?.split(',').map((s) => s.trim()).filter(Boolean).pop();
    if (last) return last;
  }
  return (server as ConnInfoSource | undefined)?.requestIP?.(req)?.address ?? 'unknown';
}
