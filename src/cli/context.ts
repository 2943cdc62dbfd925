import { createKeyRing } from '../auth/keys.ts';
import { MAX_TOKEN_TTL } from '../auth/tokens.ts';
import { systemClock } from '../clock.ts';
import { loadConfig, type Config } from '../config.ts';
import { createLogger } from '../log.ts';
import { openStore } from '../store/open.ts';
import type { Store } from '../store/types.ts';
import type { CliIO } from './command.ts';

/** Config from the environment (and flags), and a migrated store: what most commands start with. */
export async function openContext(io: CliIO, flags: Record<string, string> = {}, migrate = true) {
  const config: Config = loadConfig(io.env, flags);
  const log = createLogger(config.logLevel);
  const store: Store = openStore(config.databaseUrl, {
    onAvailabilityChange: (down, err) => (down ? log.warn('database unreachable: answering 503 until it is back', { err }) : log.info('database reachable again')),
  });
  if (migrate) await store.migrate();
  const keys = createKeyRing(store, systemClock, MAX_TOKEN_TTL);
  return { config, log, store, keys, clock: systemClock };
}

/** Prints `data` as JSON with --json, otherwise as `key: value` lines. */
export function printData(io: CliIO, json: boolean, data: Record<string, unknown>): void {
  if (json) {
    io.stdout(JSON.stringify(data, null, 2) + '\n');
    return;
  }
  for (const [k, v] of Object.entries(data)) {
    if (v === undefined || v === null) continue;
    io.stdout(`${k}: ${Array.isArray(v) ? v.join(' ') : String(v)}\n`);
  }
}
