import { isIPv6 } from 'node:net';
import { loadConfig, type Config } from '../config.ts';
import { UsageError, type Command } from './command.ts';

/**
 * The /healthz of the server this configuration starts: its port, and its host unless that is every
 * address (`0.0.0.0`, `::`), where the loopback reaches it. A server told to listen on one address
 * (CINDER_HOST=10.0.0.5, `::1`) does not answer on 127.0.0.1.
 */
function localHealthz(config: Config): string {
  const host = config.host === '0.0.0.0' || config.host === '::' || config.host === '[::]' ? '127.0.0.1' : config.host;
  const authority = isIPv6(host) ? `[${host}]` : host;
  return `http://${authority}:${config.port}/healthz`;
}

/** `cinder healthcheck`: GETs the local /healthz (or --url) and exits 0 when it answers 200, else 1. */
export const healthcheckCommand: Command = {
  name: 'healthcheck',
  summary: 'Check that a local server answers /healthz (for container HEALTHCHECKs)',
  usage:
    'cinder healthcheck [--url <url>] [--timeout <ms>]\n\n' +
    'Default URL: http://127.0.0.1:$CINDER_PORT/healthz (else $PORT, else 8080, as serve listens; at $CINDER_HOST instead of\n' +
    '127.0.0.1 when serve listens on one address). Exit 0 when it answers 200, 1 otherwise.',
  options: { url: { type: 'string' }, timeout: { type: 'string' } },
  async run(args, io) {
    const timeout = args.values.timeout === undefined ? 3000 : Number(args.values.timeout);
    if (!Number.isInteger(timeout) || timeout < 1) throw new UsageError('--timeout takes a number of milliseconds');
    const url = typeof args.values.url === 'string' ? args.values.url : localHealthz(loadConfig(io.env));
    if (!URL.canParse(url)) throw new UsageError(`--url ${url} is not a URL`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(timeout) });
      await res.body?.cancel();
      if (res.status === 200) return 0;
      io.stderr(`cinder healthcheck: ${url} answered ${res.status}\n`);
    } catch (err) {
      io.stderr(`cinder healthcheck: ${url}: ${(err as Error).message}\n`);
    }
    return 1;
  },
};
