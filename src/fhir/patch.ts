/**
 * FHIR R4 patch (http.html#patch): JSON Patch (`application/json-patch+json`) or FHIRPath Patch (a
 * Parameters in `application/fhir+json`) applied to the current version, whose result is written as the
 * next version through the update path (validation, indexing, history, referential integrity, access).
 */
import type { Clock } from '../clock.ts';
import { FhirError } from '../errors.ts';
import { conditionKey, criteriaNames, exclusively, hasCriteria, resolveCondition, writeToMatch } from './conditional.ts';
import { lookups } from './core-search.ts';
import { readResource, requireFilter, updateResource, type FhirDeps, type FhirRequest, type WriteResult } from './crud.ts';
import { requireAccess } from './access.ts';
import { applyFhirPathPatch, parseFhirPathPatch, type FhirPathPatchOperation } from './patch/fhirpath-patch.ts';
import { applyJsonPatch, parseJsonPatch, type JsonPatchOperation } from './patch/json-patch.ts';
import type { Store } from '../store/types.ts';
import { requireIfMatch, requireIfNoneMatch, type IfMatch } from './if-match.ts';
import { asResource, checkTypeAndId, parseJson, type Resource } from './resource.ts';
import { parseExact, refreshLiterals } from './exact-json.ts';
import { parseFhirXml } from './xml/from-xml.ts';

export type PatchDocument =
  | { kind: 'json-patch'; operations: JsonPatchOperation[] }
  | { kind: 'fhirpath-patch'; operations: FhirPathPatchOperation[] };

export const JSON_PATCH_TYPE = 'application/json-patch+json';
const FHIR_TYPES = ['application/fhir+json', 'application/json', 'application/json+fhir', 'application/fhir+xml'];

/** The Content-Types a PATCH takes (the CapabilityStatement's `patchFormat`): JSON Patch, and a FHIRPath Patch Parameters as FHIR JSON or XML. */
export const PATCH_FORMATS: readonly string[] = [JSON_PATCH_TYPE, ...FHIR_TYPES];

/** A FHIRPath Patch from a Parameters resource (400 when it is something else). */
function fhirPathPatch(body: unknown): PatchDocument {
  const params = asResource(body);
  if (params.resourceType !== 'Parameters') {
    throw new FhirError('invalid', `A FHIRPath Patch is a Parameters resource, not a ${params.resourceType}; send JSON Patch as ${JSON_PATCH_TYPE}`, { expression: ['resourceType'] });
  }
  return { kind: 'fhirpath-patch', operations: parseFhirPathPatch(params) };
}

/** The patch media types Cinder takes, as RFC 5789 2.2's `Accept-Patch` names them on a 415. */
const ACCEPT_PATCH = { 'Accept-Patch': `${JSON_PATCH_TYPE}, application/fhir+json, application/fhir+xml` };

/**
 * The patch in a request body of media type `mediaType` (parameters dropped); 415 with `Accept-Patch`
 * for other types (RFC 5789 2.2), and for a JSON Patch (an array) sent as FHIR JSON: a FHIR JSON body is
 * a resource, the FHIRPath Patch Parameters, so the array's media type is wrong, as HAPI FHIR also
 * refuses JSON Patch under application/json.
 */
export function parsePatch(mediaType: string, text: string): PatchDocument {
  const type = mediaType.split(';')[0]!.trim().toLowerCase();
  const isJsonPatch = type === JSON_PATCH_TYPE;
  if (!isJsonPatch && !FHIR_TYPES.includes(type)) {
    throw new FhirError('unsupported-media', `Content-Type '${type || '(none)'}' is not a patch: send ${JSON_PATCH_TYPE} (JSON Patch) or application/fhir+json or application/fhir+xml (a FHIRPath Patch Parameters)`, { headers: ACCEPT_PATCH });
  }
  if (text.trim() === '') throw new FhirError('structure', 'Request body is empty');
  const body = type === 'application/fhir+xml' ? parseFhirXml(text) : parseJson(text);
  if (!isJsonPatch && Array.isArray(body)) {
    throw new FhirError('unsupported-media', `The body is a JSON Patch (an array of operations), which is sent as Content-Type ${JSON_PATCH_TYPE} (RFC 6902), not '${type}': that type carries FHIR JSON, a FHIRPath Patch Parameters`, { headers: ACCEPT_PATCH });
  }
  return isJsonPatch ? { kind: 'json-patch', operations: parseJsonPatch(body) } : fhirPathPatch(body);
}

/**
 * The patch of a transaction or batch entry (FHIR R4 http 3.1.0.11): a Parameters (FHIRPath Patch) or a
 * Binary of content type application/json-patch+json holding the JSON Patch in base64 `data`.
 */
export function entryPatch(resource: Resource): PatchDocument {
  if (resource.resourceType === 'Parameters') return fhirPathPatch(resource);
  if (resource.resourceType !== 'Binary') {
    throw new FhirError('invalid', `a PATCH entry's resource must be a Parameters (FHIRPath Patch) or a Binary holding a JSON Patch, not a ${resource.resourceType}`, { expression: ['Binary'] });
  }
  // The media type decides; its parameters (`; charset=utf-8`) do not.
  if (typeof resource.contentType !== 'string' || resource.contentType.split(';')[0]!.trim().toLowerCase() !== JSON_PATCH_TYPE) {
    throw new FhirError('invalid', `a PATCH entry's Binary must have contentType ${JSON_PATCH_TYPE}, not ${JSON.stringify(resource.contentType)}`, { expression: ['Binary.contentType'] });
  }
  if (typeof resource.data !== 'string') throw new FhirError('invalid', "a PATCH entry's Binary has no data (the base64 JSON Patch)", { expression: ['Binary.data'] });
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(resource.data, 'base64'));
  } catch (err) {
    throw new FhirError('invalid', "a PATCH entry's Binary data is not base64 of UTF-8 text", { cause: err, expression: ['Binary.data'] });
  }
  return { kind: 'json-patch', operations: parseJsonPatch(parseJson(text)) };
}

/**
 * Applies `patch` to a copy of `current`; the result must still be a resource of the same type and id
 * (400 otherwise, as HAPI FHIR refuses such patches). Validation is the caller's (the update path's).
 * `clock`: the time a FHIRPath Patch's `now()`, `today()` and `timeOfDay()` read (the app's).
 */
export function applyPatch(current: Resource, patch: PatchDocument, clock?: Clock): Resource {
  const out = patch.kind === 'json-patch' ? applyJsonPatch(current, patch.operations) : applyFhirPathPatch(current, patch.operations, clock);
  if (out === null || typeof out !== 'object' || Array.isArray(out)) throw new FhirError('invalid', 'The patch does not leave a resource (a JSON object)', { issueCode: 'processing' });
  // Numbers the patch put in keep their literals on the way to the stored text (exact-json.ts).
  refreshLiterals(out);
  const r = out as Record<string, unknown>;
  if (r.resourceType !== current.resourceType) {
    throw new FhirError('invalid', `A patch may not change resourceType (${current.resourceType} to ${JSON.stringify(r.resourceType)})`, { issueCode: 'processing', expression: ['resourceType'] });
  }
  if (r.id !== current.id) {
    throw new FhirError('invalid', `A patch may not change the id (${current.id} to ${JSON.stringify(r.id)})`, { issueCode: 'processing', expression: [`${current.resourceType}.id`] });
  }
  return r as Resource;
}

/**
 * A change of the current version other than a patch document (`$meta-add`, `$meta-delete`): the resource
 * it becomes, of the same type and id, written as a patch's result is.
 */
export type Change = (current: Resource) => Resource;

/** A patch applied to the current version, ready to be written against it. */
export interface Patched {
  /** The result, not yet validated (the write path validates it). */
  resource: Resource;
  /**
   * The version patched, which the write must still find current (a core CodeSystem or ValueSet the
   * tenant never stored is the core's version, 1, which the write judges as current: crud.ts coreCurrent).
   */
  base: number;
}

/**
 * Reads `type/id` as a read does (read permission, 404/410, compartment and scope filters), checks
 * If-Match and If-None-Match (412) and update permission, and applies `patch` (FHIR R4 http 3.1.0.6). `at` prefixes the
 * errors of a Bundle entry.
 */
export async function patchCurrent(
  deps: FhirDeps, req: FhirRequest, type: string, id: string, patch: PatchDocument | Change, ifMatch?: IfMatch, at?: string, ifNoneMatch?: IfMatch,
): Promise<Patched> {
  requireAccess(req.access, type, 'u');
  const current = await readResource(deps, req, type, id);
  // The stored version must meet the token's update filters too, whatever the patch makes of it.
  if (req.access.filters?.(type, 'u')) await requireFilter(req.access, 'u', JSON.parse(current.content) as Resource, current.lastUpdated, lookups(deps, req.tenant));
  requireIfMatch(ifMatch, `${type}/${id}`, current);
  requireIfNoneMatch(ifNoneMatch, `${type}/${id}`, current);
  let resource: Resource;
  try {
    const content = parseExact(current.content) as Resource;
    resource = typeof patch === 'function' ? patch(content) : applyPatch(content, patch, deps.clock);
  } catch (err) {
    if (!(err instanceof FhirError) || at === undefined) throw err;
    throw underEntry(err, at);
  }
  return { resource, base: current.versionId };
}

/**
 * A write of a patch's result found that another write came first: 409 (retry) when the client did
 * not ask for a version, the 412 itself when it did.
 */
export function patchRace(err: unknown, type: string, id: string, clientIfMatch: IfMatch | undefined): unknown {
  if (clientIfMatch !== undefined || !isRace(err)) return err;
  return new FhirError('conflict', `${type}/${id} changed while it was being patched; retry the request`, { cause: err });
}

/** Whether a patch's write failed because the version it patched is no longer current. */
function isRace(err: unknown): boolean {
  return err instanceof FhirError && err.category === 'precondition';
}

/**
 * How many times a patch is read, applied and written when writes of other processes (or PUTs) keep
 * landing between its read and its write; then 409.
 */
export const PATCH_ATTEMPTS = 5;

/** A random wait before attempt `attempt` + 1, growing with it, so that writes that met once spread out. */
const retryDelay = (attempt: number) => Bun.sleep(Math.random() * 4 * 2 ** attempt);

/** The patch under way in this process per store and resource (`tenant type/id`), which the next one waits for. */
const underWay = new WeakMap<Store, Map<string, Promise<void>>>();

/**
 * Runs `fn` once the patches of the same resource that came before it in this process have finished, so
 * that those never meet each other between read and write; writes from elsewhere are left to the retry.
 */
async function afterOthers<T>(store: Store, key: string, fn: () => Promise<T>): Promise<T> {
  let queue = underWay.get(store);
  if (!queue) underWay.set(store, (queue = new Map()));
  const before = queue.get(key);
  let release!: () => void;
  const mine = new Promise<void>((resolve) => (release = resolve));
  queue.set(key, mine);
  try {
    if (before) await before;
    return await fn();
  } finally {
    release();
    if (queue.get(key) === mine) queue.delete(key);
  }
}

/**
 * The answer of a REST patch that lost its last race, judged on the version that won it as the next attempt would
 * have judged it: 410 when that deleted the resource, 412 when the client's If-Match no longer holds (a list not
 * naming it); otherwise (none, `*`, a list naming it) the precondition held throughout and only contention stopped
 * the patch: 409, as an update or a Bundle's PATCH entry answers then.
 */
async function racesLost(deps: FhirDeps, req: FhirRequest, type: string, id: string, ifMatch: IfMatch | undefined, err: unknown): Promise<unknown> {
  requireIfMatch(ifMatch, `${type}/${id}`, await readResource(deps, req, type, id));
  return patchRace(err, type, id, undefined);
}

/**
 * FHIR R4 patch (3.1.0.6) of `type/id`: needs read and update permission; 404/410 like a read; If-Match
 * is 412 when it does not hold. The result is written by updateResource against the version patched,
 * never over a write that came in between. A patch is defined on the current version, as a PUT
 * replaces it, so it is not refused for such a write: patches of one resource run one after another in
 * this process, and one that still meets another write (another process's, a PUT) is read and applied
 * again to the new current version, up to PATCH_ATTEMPTS times, then 409. The client's If-Match is
 * checked again on each attempt, so a version it named that is no longer current is its 412 (racesLost).
 */
export async function patchResource(
  deps: FhirDeps, req: FhirRequest, type: string, id: string, patch: PatchDocument | Change, ifMatch?: IfMatch, ifNoneMatch?: IfMatch,
): Promise<WriteResult> {
  if (id.startsWith('$')) throw new FhirError('not-found', `Operation ${id} is not supported on ${type}`);
  checkTypeAndId(type, id);
  return afterOthers(deps.store, `${req.tenant} ${type}/${id}`, async () => {
    for (let attempt = 1; ; attempt++) {
      const { resource, base } = await patchCurrent(deps, req, type, id, patch, ifMatch, undefined, ifNoneMatch);
      try {
        return await updateResource(deps, req, type, id, resource, { ifMatch: [base] }, undefined, false, 'PATCH');
      } catch (err) {
        if (!isRace(err)) throw err;
        if (attempt === PATCH_ATTEMPTS) throw await racesLost(deps, req, type, id, ifMatch, err);
      }
      await retryDelay(attempt);
    }
  });
}

/**
 * FHIR R4 conditional patch (`PATCH [type]?query`): no match is 404, several are 412, one is patched,
 * as the search found it (writeToMatch): a match another request changed or deleted in between is
 * searched for again, as conditional updates and deletes are, rather than patched as it is now.
 */
export async function conditionalPatch(
  deps: FhirDeps, req: FhirRequest, type: string, query: URLSearchParams, patch: PatchDocument, ifMatch?: IfMatch, ifNoneMatch?: IfMatch,
): Promise<WriteResult> {
  checkTypeAndId(type);
  if (!hasCriteria(query)) throw new FhirError('invalid', 'Conditional patch needs search criteria in the URL (e.g. ?identifier=...)');
  return exclusively(deps, req.tenant, [conditionKey(type, query)], async () => {
    const match = await resolveCondition(deps, req, type, query, 'Conditional patch');
    if (!match) throw new FhirError('not-found', `Conditional patch: no ${type} matches '${query}'`, { expression: criteriaNames(query) });
    return writeToMatch(deps, req, type, match, ifMatch, (held) => patchResource(deps, req, type, match.id, patch, held, ifNoneMatch));
  });
}

/** A patch error located in a Bundle entry: its text prefixed, `Parameters.parameter[1]` as `Bundle.entry[2].resource.parameter[1]` (a Binary's elements likewise). */
export function underEntry(err: FhirError, at: string): FhirError {
  const outcome = err.issues.map((i) => {
    const text = `${at}: ${i.diagnostics ?? ''}`;
    const expression = (i.expression ?? []).map((e) => e.replace(/^(?:Parameters|Binary)(?=\.|$)/, `${at}.resource`));
    return { ...i, diagnostics: text, details: { text }, ...(expression.length > 0 ? { expression } : {}) };
  });
  return new FhirError(err.category, `${at}: ${err.message}`, { outcome, cause: err });
}
