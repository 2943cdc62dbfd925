import { isDeepStrictEqual } from 'node:util';
import type { FhirIssue } from '../errors.ts';
import type { CurrentVersion, IndexRows, MeasuredVersion, ResourceWriter, VersionToWrite, WriteMethod } from '../store/types.ts';
import { parseLiterally } from './exact-json.ts';
import { compartmentsOf, storedIndex, storedIndexPaced } from './indexer.ts';
import { pacedTurns } from './turns.ts';
import { stampHead, stampTail, type Resource } from './resource.ts';
import { R4_RESOURCE_TYPES } from './resource-types.ts';

/** The interaction that writes content (a deletion is a DELETE): what the version's history entry names. */
export type PutMethod = Exclude<WriteMethod, 'DELETE'>;

/**
 * What a new version of a resource stores that does not depend on its version number or time: the
 * stored text after the stamp head, the search index entries and the patient compartments. Bulk
 * import prepares these on a worker thread; the writer completes them once the version is known.
 */
export interface PreparedVersion {
  type: string;
  id: string;
  /** The stored text after stampHead (see stampTail). */
  tail: string;
  index: IndexRows;
  compartments: string[];
  /** The 1-based NDJSON line it was read from, when it was (an import reports a line it did not write by it). */
  line?: number;
  /**
   * Validation refused the resource (an import's line or entry): it is written only as the update that changes
   * nothing it may be, kept unchanged with these problems as warnings, and otherwise fails with them
   * (import/batches.ts); such a version has no index entries or compartments (refusedVersion).
   */
  refusal?: Refusal;
  /**
   * A refused version (`refusal`) found equal to this stored version before it was queued (the importer's look at the
   * committed state): its batch's transaction keeps it unchanged if that version is still current, told by its number
   * and time alone (a stored version never changes), without reading and comparing its text a second time.
   */
  sameAs?: { versionId: number; lastUpdated: number };
}

/** Why validation refused an imported resource, and where it was read (ImportIssue: its file, line or Bundle entry). */
export interface Refusal {
  message: string;
  issues?: FhirIssue[];
  file?: string;
  entry?: number;
}

/** A resource id (R4 datatypes.html#id): another was never stored, so a resource refused with it changes something. */
const ID = /^[A-Za-z0-9\-.]{1,64}$/;
const R4_TYPES = new Set<string>(R4_RESOURCE_TYPES);

/** Whether a resource validation refused may be stored already (an R4 type, a well-formed id): only then is it compared with its current version. */
export function mayBeStored(resource: { resourceType: string; id?: unknown }): resource is Resource & { id: string } {
  return typeof resource.id === 'string' && ID.test(resource.id) && R4_TYPES.has(resource.resourceType);
}

/**
 * A resource validation refused, as `type/id`, prepared only to be compared with the current version
 * (storesSame): its stored text, no index entries and no compartments (it is never written).
 */
export function refusedVersion(resource: Resource, id: string, refusal: Refusal): PreparedVersion {
  return { type: resource.resourceType, id, tail: stampTail(resource), index: { tokens: [], strings: [], ranges: [], composites: [] }, compartments: [], refusal };
}

/**
 * Prepares `resource` for storage as `type/id` (the id in the body, if any, is replaced by `id`); `base`
 * is the tenant's FHIR base, under which absolute references are the tenant's (FhirDeps.fhirBase).
 */
export function prepareVersion(resource: Resource, id: string, base: string | undefined): PreparedVersion {
  const withId = resource.id === id ? resource : ({ ...resource, id } as Resource);
  return { type: resource.resourceType, id, tail: stampTail(resource), index: storedIndex(withId, base), compartments: compartmentsOf(withId, base) };
}

/**
 * prepareVersion with the event loop let turn between the pieces of its search index as `pace` says
 * (storedIndexPaced; by default every WORK_SLICE_MS): a promise only once a turn was taken, which a resource of
 * a few thousand values never needs. The writes of the REST API and transactions prepare so; bulk import, which
 * prepares on worker threads, does not.
 */
export function prepareVersionPaced(resource: Resource, id: string, base: string | undefined, pace = pacedTurns()): PreparedVersion | Promise<PreparedVersion> {
  const withId = resource.id === id ? resource : ({ ...resource, id } as Resource);
  const tail = stampTail(resource);
  const make = (index: IndexRows): PreparedVersion => ({ type: resource.resourceType, id, tail, index, compartments: compartmentsOf(withId, base) });
  const index = storedIndexPaced(withId, base, pace);
  return index instanceof Promise ? index.then(make) : make(index);
}

/**
 * Whether updating `type/id` with `resource` would store `current` again (storesSame), judged from the
 * stored text alone: no search index is made for it.
 */
export function wouldStoreSame(current: CurrentVersion | null, resource: Resource, id: string): boolean {
  return current !== null && storesSame(current, { type: resource.resourceType, id, tail: stampTail(resource) });
}

/** `p` as version `versionId`, updated at `lastUpdated` (epoch ms) by the interaction `method` (what its history names). */
export function versionToWrite(p: PreparedVersion, versionId: number, lastUpdated: number, method: PutMethod): VersionToWrite {
  return {
    type: p.type,
    id: p.id,
    versionId,
    lastUpdated,
    deleted: false,
    content: stampHead(p.type, p.id, versionId, lastUpdated) + p.tail,
    index: p.index,
    compartments: p.compartments,
    method,
  };
}

/**
 * Whether storing `p` would store `current` again: its text as it would be stored (`id`, the `meta`
 * it keeps, references as rewritten, everything after stampHead) equals the stored text apart from
 * `meta.versionId` and `meta.lastUpdated`, which is what an update that changes nothing looks like
 * (FHIR R4 http 3.1.0.4: those two are the server's; HAPI FHIR and Medplum then keep the current
 * version). Both texts are JSON.stringify's, so equal resources make texts of equal length, whatever
 * the order of their keys: the common cases cost a length test (a change) or one string comparison (the
 * same text); equal lengths with other text cost a sum of their characters (a change that keeps the length
 * changes them, mostly); only texts of the same characters (keys in another order, or characters moved) are
 * parsed and compared as JSON values, numbers by their literals (`1.0` is no `1`:
 * datatypes.html, decimal). A deletion is never the same.
 *
 * `written`, when given, is the text the write would store (versionToWrite's `content`: another head, then `p.tail`):
 * the tail is then read as the end of it. A tail holding a large string put in as it is (stampTail) is a rope that
 * reading its characters flattens: flattened as part of `written`, it is one copy, which the store's statement then
 * binds as it is, not a second.
 */
export function storesSame(current: CurrentVersion, p: Pick<PreparedVersion, 'type' | 'id' | 'tail'>, written?: string): boolean {
  if (current.deleted) return false;
  const head = stampHead(p.type, p.id, current.versionId, current.lastUpdated);
  const stored = current.content;
  if (stored.length !== head.length + p.tail.length) return false;
  const tail = written === undefined ? p.tail : written.slice(written.length - p.tail.length);
  return (stored.startsWith(head) && stored.endsWith(tail)) || sameValue(stored, head, tail);
}

/**
 * storesSame for the current version as ResourceWriter.measured() found it: the current version with its text when
 * storing `p` would store it again, otherwise undefined. A text measured() gave by its length in UTF-8 alone (a large
 * one) is read, by current(), only when that length is the one `p` would store with the current version's head: texts
 * of one value hold the same characters (storesSame), so of one length in any encoding, and a text of another length is
 * a change told without reading the stored one (50 MiB of base64 on PostgreSQL: 0.4-1 s and its size twice in memory).
 * `written` as for storesSame: measured from it, the tail is not flattened a second time.
 */
export async function storesSameMeasured(
  w: Pick<ResourceWriter, 'current'>, found: MeasuredVersion, p: Pick<PreparedVersion, 'type' | 'id' | 'tail'>, written?: string,
): Promise<CurrentVersion | undefined> {
  if (found.deleted) return undefined;
  let current: CurrentVersion | null = found.content === undefined ? null : { ...found, content: found.content };
  if (current === null) {
    // Heads are ASCII (an id's and a type's patterns, an ISO date): their bytes are their characters.
    const tailBytes = written === undefined ? Buffer.byteLength(p.tail, 'utf8') : Buffer.byteLength(written, 'utf8') - (written.length - p.tail.length);
    if (found.bytes !== stampHead(p.type, p.id, found.versionId, found.lastUpdated).length + tailBytes) return undefined;
    current = await w.current(p.type, p.id);
  }
  return current !== null && storesSame(current, p, written) ? current : undefined;
}

/**
 * Whether `stored` and `head + tail`, texts of equal length that differ, are the texts of one value: only texts of the same
 * characters are. The texts of one value with its members in other orders hold the same characters, only elsewhere: texts
 * whose characters differ are of different values, found without parsing (an update of a 2.4 MB List that kept its
 * text's length held the event loop 0.9 s in the two parses and their comparison).
 */
function sameValue(stored: string, head: string, tail: string): boolean {
  const [sum, squares] = characterSums(stored, 0, 0);
  const [newSum, newSquares] = characterSums(tail, ...characterSums(head, 0, 0));
  if (sum !== newSum || squares !== newSquares) return false;
  return isDeepStrictEqual(parseLiterally(stored), parseLiterally(head + tail));
}

/** `sum` and `squares` (mod 2^32) plus the sums of `text`'s UTF-16 code units and of their squares: the same whatever their order. */
function characterSums(text: string, sum: number, squares: number): [number, number] {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    sum += c;
    squares = (squares + c * c) | 0;
  }
  return [sum, squares];
}
