/**
 * The options Cinder reads from a PostgreSQL URL's query (`?max=N&connect_timeout=N`), with nothing to
 * import: src/config.ts checks them at start, so that a bad one stops every command with a line naming
 * CINDER_DATABASE_URL, and db.ts opens the pools with them.
 */

/** The most connections `?max=N` may ask for. */
export const MAX_POOL_SIZE = 1000;

/**
 * The URL's `max` (the pool size), or undefined when it sets none. Decimal digits only, as every
 * number of the configuration (src/config.ts `whole`): `Number()` took `1e1` as 10 and `''` as 0.
 */
export function poolSizeFromUrl(url: string): number | undefined {
  const m = /[?&]max=([^&#]*)/.exec(url);
  if (!m) return undefined;
  const n = /^\d+$/.test(m[1]!) ? Number(m[1]) : NaN;
  if (!(n >= 1 && n <= MAX_POOL_SIZE)) {
    throw new RangeError(`invalid Postgres pool size '${m[1]}' in the database URL: expected a whole number from 1 to ${MAX_POOL_SIZE} (?max=N)`);
  }
  return n;
}

/**
 * The URL's `connect_timeout` in seconds (0: none). postgres.js would take a negative one as a timeout
 * at once (no connection ever made) and any other non-number as none (a start-up failing for ever left
 * its query waiting): both are refused, as a bad pool size is.
 */
export function connectTimeoutFromUrl(url: string): number | undefined {
  const m = /[?&]connect_timeout=([^&#]*)/.exec(url);
  if (!m) return undefined;
  if (!/^\d+(\.\d+)?$/.test(m[1]!)) throw new RangeError(`invalid connect_timeout '${m[1]}' in the database URL: expected seconds, 0 for none`);
  return Number(m[1]);
}
