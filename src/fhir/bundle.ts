import type { FhirIssue } from '../errors.ts';
import type { ResourceVersion, WriteMethod } from '../store/types.ts';
import { operationOutcome } from './outcome.ts';
import type { PageLinks } from './search.ts';

export interface BundleLink {
  relation: string;
  url: string;
}

/**
 * A search page's links below `path` (from the FHIR base `base`): `self` (with the page's own cursor),
 * `first` and `previous` for a page after the first (PageLinks), and `next` with its cursor.
 */
export function searchLinks(base: string, path: string, self: URLSearchParams, next?: string, page?: PageLinks): BundleLink[] {
  const at = (cursor: string | null, offset?: number) => {
    const q = new URLSearchParams(self);
    if (cursor !== null) q.set('_cursor', cursor);
    if (offset !== undefined) q.set('_offset', String(offset));
    return `${base}${path}${q.size ? '?' + q : ''}`;
  };
  const offset = page?.offset;
  // A page asked with a cursor links itself with it, the first page, and (by offset) the previous one;
  // one asked by `_offset` itself with it, the first page, and the page `_count` before.
  const out: BundleLink[] = [{ relation: 'self', url: offset ? at(null, offset.at) : at(page?.cursor ?? null) }];
  if (page) out.push({ relation: 'first', url: at(null) });
  if (offset?.previous !== undefined) out.push({ relation: 'previous', url: offset.previous === null ? at(null) : at(null, offset.previous) });
  else if (page?.previous !== undefined) out.push({ relation: 'previous', url: at(page.previous) });
  else if (page?.previousOffset !== undefined) out.push({ relation: 'previous', url: page.previousOffset === null ? at(null) : at(null, page.previousOffset) });
  if (next) out.push({ relation: 'next', url: at(next) });
  return out;
}

/** ETag of a version, as FHIR R4 http 3.1.0.4.3 prescribes. */
export function etag(versionId: number): string {
  return `W/"${versionId}"`;
}

/** The opaque part of an entity tag, weak or strong (`W/"3"` and `"3"` are both `"3"`). */
const opaque = (tag: string) => tag.trim().replace(/^W\//, '');

/** Whether an `If-None-Match` value (a list of ETags, weak or strong, or `*`) names version `versionId` (RFC 9110 13.1.2, weak comparison). */
export function etagMatches(ifNoneMatch: string, versionId: number): boolean {
  const current = opaque(etag(versionId));
  return ifNoneMatch.trim() === '*' || ifNoneMatch.split(',').some((t) => opaque(t) === current);
}

/**
 * A searchset Bundle as JSON text. Stored resource text is spliced in as is, never re-serialised.
 */
export function searchsetJson(
  fhirBase: string, rows: ResourceVersion[], links: BundleLink[], total: number | undefined, warnings: FhirIssue[], now: number,
  extra: {
    included?: ResourceVersion[]; shape?: (content: string) => string; includedShape?: (content: string) => string;
    /** A match's `search` element in full (`Patient/$match`: its score and match-grade); `{mode: 'match'}` when absent. */
    matchSearch?: (r: ResourceVersion, i: number) => Record<string, unknown>;
  } = {},
): string {
  const whole = (content: string) => content;
  // A contained resource (`_containedType=contained`) carries its own: its container's, with `#id`.
  const entry = (r: ResourceVersion & { fullUrl?: string }, mode: string, shape: (content: string) => string, search?: Record<string, unknown>) =>
    `{"fullUrl":${JSON.stringify(`${fhirBase}/${r.fullUrl ?? `${r.type}/${r.id}`}`)},"resource":${shape(r.content)},"search":${search ? JSON.stringify(search) : `{"mode":"${mode}"}`}}`;
  const entries = [
    ...rows.map((r, i) => entry(r, 'match', extra.shape ?? whole, extra.matchSearch?.(r, i))),
    ...(extra.included ?? []).map((r) => entry(r, 'include', extra.includedShape ?? whole)),
  ];
  if (warnings.length > 0) {
    entries.push(`{"resource":${JSON.stringify(operationOutcome(warnings))},"search":{"mode":"outcome"}}`);
  }
  const head: Record<string, unknown> = {
    resourceType: 'Bundle',
    id: crypto.randomUUID(),
    meta: { lastUpdated: new Date(now).toISOString() },
    type: 'searchset',
  };
  if (total !== undefined) head.total = total;
  head.link = links;
  return withEntries(JSON.stringify(head), entries);
}

/**
 * A Bundle's head (its JSON text) with `entry` holding `entries`, or without `entry` when there are none:
 * "JSON objects and arrays are never empty ... Omit a property if it is empty" (FHIR R4 json.html).
 */
function withEntries(head: string, entries: string[]): string {
  return entries.length === 0 ? head : `${head.slice(0, -1)},"entry":[${entries.join(',')}]}`;
}

/**
 * The interaction that wrote `r` (FHIR R4 http 3.1.0.11, bundle.html: a history entry's request is the
 * one that made the version): as recorded with the version, else (a version written before it was
 * recorded) inferred from it: a deletion DELETE, version 1 POST, a later one PUT.
 */
function interactionOf(r: ResourceVersion): WriteMethod {
  return r.method ?? (r.deleted ? 'DELETE' : r.versionId === 1 ? 'POST' : 'PUT');
}

/**
 * Whether the interaction that wrote live version `r` created the resource, and was answered 201: the
 * store says so for history rows (version 1, or one after a deletion: a PUT that re-creates); else version 1.
 */
function createdBy(r: ResourceVersion): boolean {
  return r.created ?? r.versionId === 1;
}

/**
 * A history Bundle (FHIR R4 3.1.0.11) as JSON text; deletions carry a request but no resource; `shape`:
 * `_summary` / `_elements`. `request.url` is the type for a POST, `Type/id` otherwise: the resource the
 * interaction wrote (the search of a conditional one is not kept).
 */
export function historyJson(fhirBase: string, rows: ResourceVersion[], links: BundleLink[], now: number, shape?: (content: string) => string): string {
  return withEntries(historyHead(links, now), rows.map((r) => historyEntry(fhirBase, r, shape).join('')));
}

/**
 * historyJson in parts, whose concatenation is its text, for an answer written a part at a time
 * (src/http/streamed-text.ts): each version's stored text is a part of its own, never copied into a text of the
 * whole page. It consumes `rows`: each version is taken out of it as its entry is given, so that a version written
 * is let go before the next is.
 */
export function* historyParts(fhirBase: string, rows: ResourceVersion[], links: BundleLink[], now: number, shape?: (content: string) => string): Generator<string> {
  const head = historyHead(links, now);
  if (rows.length === 0) {
    yield head;
    return;
  }
  yield `${head.slice(0, -1)},"entry":[`;
  for (let first = true; rows.length > 0; first = false) {
    const [open, resource, close] = historyEntry(fhirBase, rows.shift()!, shape);
    yield first ? open : `,${open}`;
    yield resource;
    yield close;
  }
  yield ']}';
}

function historyHead(links: BundleLink[], now: number): string {
  return JSON.stringify({ resourceType: 'Bundle', id: crypto.randomUUID(), meta: { lastUpdated: new Date(now).toISOString() }, type: 'history', link: links });
}

/** A history entry's JSON in three parts: what comes before the resource's text, that text (shaped; '' for a deletion), what follows. */
function historyEntry(fhirBase: string, r: ResourceVersion, shape?: (content: string) => string): [string, string, string] {
  const fullUrl = JSON.stringify(`${fhirBase}/${r.type}/${r.id}`);
  const lastModified = new Date(r.lastUpdated).toISOString();
  const method = interactionOf(r);
  const url = JSON.stringify(method === 'POST' ? r.type : `${r.type}/${r.id}`);
  const status = r.deleted ? '204' : createdBy(r) ? '201' : '200';
  const after = `"request":{"method":"${method}","url":${url}},"response":{"status":"${status}","etag":"W/\\"${r.versionId}\\"","lastModified":"${lastModified}"}}`;
  if (r.deleted) return [`{"fullUrl":${fullUrl},${after}`, '', ''];
  return [`{"fullUrl":${fullUrl},"resource":`, shape ? shape(r.content) : r.content, `,${after}`];
}
