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
  if (trustProxy) {
    const xff = c.req.header('x-forwarded-for');
    const last = xff?.split(',').map((s) => s.trim()).filter(Boolean).pop();
    if (last) return last;
  }
  const env = c.env as ConnInfoSource | undefined;
  return env?.requestIP?.(c.req.raw)?.address ?? 'unknown';
}
