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

/**
 * Thrown by adapters when the database cancelled a statement: it ran past the database's own time
 * limit (PostgreSQL's `statement_timeout`, which an operator may set) or an administrator cancelled it.
 * The database is up, so no outage is signalled; nothing of the failed call was written. The edge
 * answers 503 with an OperationOutcome `timeout`.
 */
export class StoreTimeoutError extends Error {
  override name = 'StoreTimeoutError';
}

/**
 * Thrown by adapters when the database cannot hold a value the request gave: PostgreSQL's text holds
 * no U+0000 and no unpaired surrogate. No stored value can equal such a value, and nothing of the
 * failed call was written; the edge answers 400 with the message, which is written for the client.
 */
export class StoreValueError extends Error {
  override name = 'StoreValueError';
}

/** StoreValueError's message for U+0000. */
export const UNHOLDABLE_NUL = 'The request holds the character U+0000, which no stored value can hold';
