/**
 * `If-Match` (RFC 9110 13.1.1) on FHIR writes (R4 http.html "Managing Resource Contention"): `*`, or a
 * list of entity tags, `W/"<versionId>"` as Cinder's ETags are (the weak prefix is accepted, as FHIR
 * clients send the ETag they were given). The same value in a Bundle entry's `request.ifMatch`.
 * `If-None-Match` (13.1.2) on an update, patch or delete, and a PUT, PATCH or DELETE entry's
 * `request.ifNoneMatch`: the same syntax, the opposite condition.
 */
import { FhirError } from '../errors.ts';
import { versionNumber } from './resource-types.ts';

/** `*` (the resource has a current version), or the version ids of which the current one must be one. */
export type IfMatch = '*' | readonly number[];

/**
 * One list element (RFC 9110 5.6.1: elements separated by commas, empty ones allowed): an entity-tag
 * (8.8.3: `W/` optional, an opaque tag in double quotes, which may itself hold commas) or nothing.
 */
const ELEMENT = /[ \t]*(?:((?:W\/)?"([\x21\x23-\x7E\x80-\xFF]*)")[ \t]*)?(?:,|$)/y;

/**
 * Parses `If-Match` (or a Bundle entry's `request.ifMatch`): `*`, or one or more entity tags. A tag that
 * is well formed but names no version (`"abc"`) never matches; a value that is neither is a 400.
 */
export function parseIfMatch(value: string | undefined, what = 'If-Match header', expression = 'If-Match'): IfMatch | undefined {
  if (value === undefined) return undefined;
  if (value.trim() === '*') return '*';
  const versions: number[] = [];
  let tags = 0;
  for (let at = 0; at < value.length; at = ELEMENT.lastIndex) {
    ELEMENT.lastIndex = at;
    const m = ELEMENT.exec(value);
    if (!m) {
      tags = 0;
      break;
    }
    if (m[1] === undefined) continue;
    tags++;
    // A version id as Cinder's ETags carry it (`W/"3"`); any other opaque tag (`"abc"`, `"01"`) names no version.
    const version = versionNumber(m[2]!);
    if (version !== undefined) versions.push(version);
  }
  if (tags === 0) throw new FhirError('invalid', `Malformed ${what} '${value}': expected * or entity tags such as W/"<versionId>"`, { expression: [expression] });
  return versions;
}

/** Parses `If-None-Match` on a write (or a write entry's `request.ifNoneMatch`), as parseIfMatch. */
export function parseIfNoneMatch(value: string | undefined, what = 'If-None-Match header', expression = 'If-None-Match'): IfMatch | undefined {
  return parseIfMatch(value, what, expression);
}

/** The preconditions of an update, patch or delete (RFC 9110 13.1): If-Match and If-None-Match, each `*` or versions. */
export interface UpdatePreconditions {
  ifMatch?: IfMatch | undefined;
  ifNoneMatch?: IfMatch | undefined;
}

/** An update's preconditions from its request's headers (`header` reads one by its lower-case name). */
export function updatePreconditions(header: (name: string) => string | undefined): UpdatePreconditions {
  return { ifMatch: parseIfMatch(header('if-match')), ifNoneMatch: parseIfNoneMatch(header('if-none-match')) };
}

/** Whether `m` holds for the current version (null or deleted: the resource has none). */
export function ifMatchHolds(m: IfMatch, current: { versionId: number; deleted: boolean } | null): boolean {
  if (current === null || current.deleted) return false;
  return m === '*' || m.includes(current.versionId);
}

/**
 * The 412 of an If-Match that does not hold (RFC 9110 13.1.1; FHIR R4 http.html#concurrency); `target`
 * names the resource (`Patient/1`, or a conditional write's `Patient?identifier=x`).
 */
export function ifMatchFailed(m: IfMatch, target: string, current: { versionId: number; deleted: boolean } | null): FhirError {
  const now = current === null ? 'none exists' : current.deleted ? 'it was deleted' : `current is ${current.versionId}`;
  const expected = m === '*' ? 'any current version' : m.length === 0 ? 'a version this server never gave (no such ETag)' : `version ${m.join(' or ')}`;
  return new VersionConflict(`Version conflict: If-Match expects ${expected} of ${target}; ${now}`);
}

/**
 * The 412 of an If-Match that did not hold (ifMatchFailed), told apart from other 412s by the writes that set If-Match themselves.
 * Its issue names the header (a Bundle entry's is placed at its `request.ifMatch`).
 */
export class VersionConflict extends FhirError {
  override name = 'VersionConflict';
  constructor(message: string) {
    super('precondition', message, { expression: ['If-Match'] });
  }
}

/**
 * The 412 of an If-None-Match that does not hold (requireIfNoneMatch), told apart so that a Bundle entry's
 * is placed at its `request.ifNoneMatch`. Not a VersionConflict: no write of Cinder's own sets it, so it is
 * never retried.
 */
export class NoneMatchFailed extends FhirError {
  override name = 'NoneMatchFailed';
  constructor(message: string) {
    super('precondition', message, { expression: ['If-None-Match'] });
  }
}

/**
 * Throws a 412 (NoneMatchFailed) unless `If-None-Match` `m` is absent or holds (RFC 9110 13.1.2): `*` holds
 * when the resource has no current version (none, or deleted), a list of tags when none names the current version.
 */
export function requireIfNoneMatch(m: IfMatch | undefined, target: string, current: { versionId: number; deleted: boolean } | null): void {
  if (m === undefined || current === null || current.deleted) return;
  if (m === '*') throw new NoneMatchFailed(`If-None-Match: * forbids writing over ${target}, which exists (version ${current.versionId})`);
  if (m.includes(current.versionId)) throw new NoneMatchFailed(`If-None-Match names version ${current.versionId}, the current version of ${target}`);
}

/** Throws ifMatchFailed unless `m` is absent or holds. */
export function requireIfMatch(m: IfMatch | undefined, target: string, current: { versionId: number; deleted: boolean } | null): void {
  if (m !== undefined && !ifMatchHolds(m, current)) throw ifMatchFailed(m, target, current);
}
