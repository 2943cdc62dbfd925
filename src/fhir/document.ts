/**
 * `Composition/{id}/$document` and `Composition/$document?id=` (R4 OperationDefinition
 * Composition-document, documents.html "Document Content"): a Bundle of type `document`, the
 * Composition first, then the resources it refers to, each once, with an absolute `fullUrl`, a fresh
 * `identifier` (`urn:uuid:`, never reused) and `timestamp`.
 *
 * What is gathered (documents.html): every resource the Composition refers to by a literal reference,
 * wherever the reference stands (subject, encounter, author, attester.party, custodian, relatesTo,
 * event.detail, section.author, section.focus, section.entry, nested sections: "Resources referenced by
 * the Composition ... SHALL be included"), and the items of a List so referred to ("resources referenced
 * from the List that represent the section.content SHOULD be in the bundle"). Resources those refer to
 * further ("may also be included") are not. A version-specific reference gives that version. Contained
 * (`#x`) references stay inside their resource.
 *
 * A document must be complete: each resource is read as a read of it would be, and one the token may not
 * read is a 403, one that is unknown or deleted a 422, as is a reference Cinder cannot resolve (another
 * server's URL, a `urn:` or conditional reference); each names the reference's path. At most
 * MAX_INCLUDES resources (the budget of a search's includes), or a 422. The resources of one level (the
 * Composition's references, then the Lists' items) are read together, one store query per type
 * (read-many.ts); only a reference that query did not find is read alone, for its error (or a core
 * resource), and a version-specific one by its vread. The first problem in the Composition's order is
 * the one answered, as if each were read in turn.
 *
 * `persist=true` stores the document as a Bundle (the token needs create on Bundle; R4: "at the bundle
 * end-point") and answers 201 with its Location, by POST alone (a GET changes nothing: 405); `graph` (GraphDefinition) is refused with a 400.
 * Another parameter is ignored, or a 400 under `Prefer: handling=strict` (operation-params.ts).
 */
import { FhirError } from '../errors.ts';
import type { ResourceVersion } from '../store/types.ts';
import type { CapabilityContribution } from './capability.ts';
import { createResource, readResource, vreadResource, type FhirDeps, type FhirRequest, type WriteResult } from './crud.ts';
import { parseExact } from './exact-json.ts';
import { isAbsoluteReference, parseReference, pathTo, walkReferences, type ParsedReference } from './references.ts';
import { ID_PATTERN } from './resource-types.ts';
import { readableVersions } from './read-many.ts';
import { MAX_INCLUDES } from './search.ts';
import { unknownParameters } from './operation-params.ts';

/** `Composition/$document` in the CapabilityStatement. */
export const documentCapability: CapabilityContribution = {
  operations: [{ name: 'document', definition: 'http://hl7.org/fhir/OperationDefinition/Composition-document', types: ['Composition'] }],
};

/** The parameters `$document` takes (R4 Composition-document), and the format ones every interaction takes. */
const PARAMETERS = ['id', 'persist', 'graph'];

export interface DocumentResult {
  /** The document Bundle as JSON text (stored text spliced in, never re-serialised). */
  text: string;
  /** With `persist=true`: the stored Bundle. */
  stored?: WriteResult;
}

/** The one value of `name`, if any; a repeated one is a 400 naming it. */
function single(params: URLSearchParams, name: string): string | undefined {
  const values = params.getAll(name);
  if (values.length > 1) throw new FhirError('invalid', `$document takes at most one '${name}' parameter`, { expression: [name] });
  return values[0];
}

/** The Composition's id from the `id` parameter: a plain id, or a URL under the tenant's FHIR base. */
function compositionId(raw: string, base: string): string {
  if (ID_PATTERN.test(raw)) return raw;
  const parsed = isAbsoluteReference(raw) ? parseReference(raw, base) : parseReference(raw);
  if (parsed?.type === 'Composition' && parsed.version === undefined) return parsed.id;
  if (isAbsoluteReference(raw) && !raw.startsWith(`${base}/`)) {
    throw new FhirError('not-supported', `The Composition '${raw}' is on another server; $document generates documents of this server's Compositions`, { expression: ['id'] });
  }
  throw new FhirError('invalid', `Invalid id '${raw}': expected a Composition's id or its URL`, { expression: ['id'] });
}

/**
 * The checked input of a `$document`: the Composition and whether to store the document. `safe`: invoked by
 * GET, which must change nothing (operations.html: GET for an idempotent operation), so `persist=true`,
 * a new Bundle at each call, is a 405 naming it.
 */
function documentInput(params: URLSearchParams, instanceId: string | undefined, base: string, strict: boolean, safe: boolean): { id: string; persist: boolean } {
  unknownParameters(params, PARAMETERS, '$document', strict);
  if (single(params, 'graph') !== undefined) {
    throw new FhirError('not-supported', 'GraphDefinitions are not supported: $document gathers what documents.html requires', { expression: ['graph'] });
  }
  const rawPersist = single(params, 'persist');
  if (rawPersist !== undefined && rawPersist !== 'true' && rawPersist !== 'false') {
    throw new FhirError('invalid', `Invalid persist '${rawPersist}': expected true or false`, { expression: ['persist'] });
  }
  if (safe && rawPersist === 'true') {
    throw new FhirError('method-not-allowed', 'persist=true stores a new Bundle at each call: invoke $document by POST to store the document (by GET it changes nothing)', {
      expression: ['persist'], headers: { Allow: 'POST' },
    });
  }
  const rawId = single(params, 'id');
  if (instanceId !== undefined && rawId !== undefined) {
    throw new FhirError('invalid', "'id' is not allowed when $document is invoked on a Composition (R4 Composition-document)", { expression: ['id'] });
  }
  if (instanceId === undefined && rawId === undefined) throw new FhirError('required', '$document needs the Composition: its id', { expression: ['id'] });
  const id = instanceId ?? compositionId(rawId!, base);
  if (!ID_PATTERN.test(id)) throw new FhirError('invalid', `Invalid id '${id}'`, { expression: ['id'] });
  return { id, persist: rawPersist === 'true' };
}

/** A reference to gather: what it names, and where it stands (a FHIRPath, for errors). */
interface Wanted {
  ref: ParsedReference;
  at: string;
}

/** The literal references in `content` (the resource `type`), each with its path; contained ones left where they are. */
function referencesOf(type: string, content: unknown, base: string, within?: (holder: object) => boolean): Wanted[] {
  const out: Wanted[] = [];
  walkReferences(content, (holder) => {
    if (within && !within(holder)) return;
    const raw = holder.reference;
    if (raw.startsWith('#')) return;
    const at = `${type}.${pathTo(content, holder) ?? ''}`;
    const ref = parseReference(raw, base);
    if (ref === null) {
      const why = isAbsoluteReference(raw) && !raw.startsWith('urn:') ? "another server's resource, which Cinder does not retrieve" : 'no resource of this server';
      throw new FhirError('unprocessable', `The document cannot be complete: ${at} refers to '${raw}', ${why}`, { expression: [at] });
    }
    out.push({ ref, at });
  });
  return out;
}

/** The references a List holds as its items (`entry.item`). */
function listItems(list: unknown, base: string): Wanted[] {
  const entries = (list as { entry?: { item?: object }[] }).entry ?? [];
  const items = new Set<object>(entries.map((e) => e.item).filter((i): i is object => i !== undefined));
  return referencesOf('List', list, base, (holder) => items.has(holder));
}

/** One resource of the document, read as a read of it would be: 403 stays 403, unknown or deleted is a 422. */
async function gather(deps: FhirDeps, req: FhirRequest, w: Wanted): Promise<ResourceVersion> {
  const { type, id, version } = w.ref;
  try {
    return version === undefined ? await readResource(deps, req, type, id) : await vreadResource(deps, req, type, id, version);
  } catch (err) {
    if (!(err instanceof FhirError)) throw err;
    const name = `${type}/${id}${version === undefined ? '' : `/_history/${version}`}`;
    if (err.category === 'forbidden') {
      throw new FhirError('forbidden', `The document needs ${name} (${w.at}), which the access token may not read`, { expression: [w.at], cause: err });
    }
    if (err.category === 'not-found' || err.category === 'gone') {
      throw new FhirError('unprocessable', `The document cannot be complete: ${w.at} refers to ${name}, which ${err.category === 'gone' ? 'was deleted' : 'is not known'}`, { expression: [w.at], cause: err });
    }
    throw err;
  }
}

/**
 * The current versions `wanted` name (those without a version), read with one store query per type; a
 * reference left out (unknown, deleted, out of reach, a core resource, a type the token may not read) is
 * for gather() to read alone, which answers it as a read would.
 */
async function readTogether(deps: FhirDeps, req: FhirRequest, wanted: Wanted[]): Promise<Map<Wanted, ResourceVersion>> {
  const byType = new Map<string, Wanted[]>();
  for (const w of wanted) if (w.ref.version === undefined) byType.set(w.ref.type, [...(byType.get(w.ref.type) ?? []), w]);
  const found = new Map<Wanted, ResourceVersion>();
  await Promise.all([...byType].map(async ([type, list]) => {
    let versions: Map<string, ResourceVersion>;
    try {
      versions = await readableVersions(deps, req, type, list.map((w) => w.ref.id));
    } catch (err) {
      // A type the token may not read (or no type of this server): gather() answers its first reference
      // as the document does (its 403 or 422, naming the reference's path).
      if (err instanceof FhirError) return;
      throw err;
    }
    for (const w of list) {
      const v = versions.get(w.ref.id);
      if (v) found.set(w, v);
    }
  }));
  return found;
}

/** The Composition and the resources of its document, in order, each once. */
async function documentResources(deps: FhirDeps, req: FhirRequest, id: string, base: string): Promise<ResourceVersion[]> {
  const composition = await readResource(deps, req, 'Composition', id); // 404 / 410 / 403 as a read would
  const content = JSON.parse(composition.content) as unknown;
  const out: ResourceVersion[] = [composition];
  const seen = new Set([`Composition/${id}`]);
  const add = async (wanted: Wanted[]) => {
    // The level's new references, in order, each once; the first beyond the budget ends them.
    const fresh: Wanted[] = [];
    let over: Wanted | undefined;
    for (const w of wanted) {
      const key = `${w.ref.type}/${w.ref.id}`;
      if (seen.has(key)) continue;
      if (out.length + fresh.length > MAX_INCLUDES) {
        over = w;
        break;
      }
      seen.add(key);
      fresh.push(w);
    }
    const found = await readTogether(deps, req, fresh);
    const added: ResourceVersion[] = [];
    for (const w of fresh) {
      const v = found.get(w) ?? (await gather(deps, req, w));
      out.push(v);
      added.push(v);
    }
    if (over) {
      throw new FhirError('unprocessable', `The document would hold more than ${MAX_INCLUDES} resources beside its Composition`, { expression: [over.at], issueCode: 'too-costly' });
    }
    return added;
  };
  const direct = await add(referencesOf('Composition', content, base));
  for (const list of direct.filter((v) => v.type === 'List')) await add(listItems(JSON.parse(list.content), base));
  return out;
}

/** The document Bundle's text: the head, then each resource's stored text as its entry. */
function documentText(base: string, rows: ResourceVersion[], now: number): string {
  const head = {
    resourceType: 'Bundle',
    meta: { lastUpdated: new Date(now).toISOString() },
    identifier: { system: 'urn:ietf:rfc:3986', value: `urn:uuid:${crypto.randomUUID()}` },
    type: 'document',
    timestamp: new Date(now).toISOString(),
  };
  const entries = rows.map((r) => `{"fullUrl":${JSON.stringify(`${base}/${r.type}/${r.id}`)},"resource":${r.content}}`);
  return `${JSON.stringify(head).slice(0, -1)},"entry":[${entries.join(',')}]}`;
}

/**
 * Generates the document of Composition `instanceId` (or the `id` parameter's, at the type level);
 * `base`: the tenant's FHIR base, for `fullUrl` and absolute references.
 */
export async function generateDocument(deps: FhirDeps, req: FhirRequest, params: URLSearchParams, instanceId: string | undefined, base: string, strict: boolean, safe = false): Promise<DocumentResult> {
  const input = documentInput(params, instanceId, base, strict, safe);
  const rows = await documentResources(deps, req, input.id, base);
  const text = documentText(base, rows, deps.clock.now());
  if (!input.persist) return { text };
  const stored = await createResource(deps, req, 'Bundle', parseExact(text));
  return { text: stored.version.content, stored };
}
