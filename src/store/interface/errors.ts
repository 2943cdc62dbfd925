/** Thrown by adapters for a unique-key clash that callers may turn into 409 or retry. */
export class StoreConflictError extends Error {
  override name = 'StoreConflictError';
}

/**
 * Thrown by adapters when the database cannot serve the request for now (unreachable, restarting, locked
 * past the busy timeout, disk full, I/O error). Nothing of the failed call was written; the edge answers
 * 503 with `Retry-After`.
 */
export class StoreUnavailableError extends Error {
  override name = 'StoreUnavailableError';
}
