import type { Context } from 'hono';

interface ConnInfoSource {
  requestIP?: (req: Request) => { address: string } | null;
}

/**
 * The client's IP address for rate limiting: with `trustProxy`, the last `X-Forwarded-For` entry (the
 * address the one trusted reverse proxy saw, without a port it may add); otherwise the socket's address (Bun passes the server as
 * the Hono env). `unknown` when neither is available (in-process requests).
 */
export function clientIp(c: Context, trustProxy: boolean): string {
  return requestIp(c.req.raw, c.env, trustProxy);
}

/**
 * An `X-Forwarded-For` entry's address without the port some proxies add (Azure Application Gateway:
 * `203.0.113.9:50123`, `[2001:db8::1]:50123`): with it, every connection of one client (a new source port
 * each) was an address of its own to the per-IP limits.
 */
function withoutPort(entry: string): string {
  const v4 = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(entry);
  if (v4) return v4[1]!;
  const v6 = /^\[([0-9A-Fa-f:.]+(?:%[^\]]*)?)\](?::\d{1,5})?$/.exec(entry);
  return v6 ? v6[1]! : entry;
}

/** clientIp() on a plain Request and the server Bun passed beside it. */
export function requestIp(req: Request, server: unknown, trustProxy: boolean): string {
  if (trustProxy) {
    const xff = req.headers.get('x-forwarded-for');
    const last = xff?.split(',').map((s) => s.trim()).filter(Boolean).pop();
    if (last) return withoutPort(last);
  }
  return (server as ConnInfoSource | undefined)?.requestIP?.(req)?.address ?? 'unknown';
}
