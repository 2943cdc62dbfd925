import { ID_PATTERN, isResourceType } from './resource-types.ts';
import { typeModel, type TypeModel } from './validation/model.ts';

export interface ParsedReference {
  type: string;
  id: string;
  version?: string;
}

const TAIL = /(?:^|\/)([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})(?:\/_history\/([A-Za-z0-9\-.]{1,64}))?$/;

/** An absolute URL (a scheme, `http://...`). */
const ABSOLUTE = /^[a-z][a-z0-9+.-]*:/i;

/**
 * Parses a literal reference to a resource of this tenant into its parts: relative (`Type/id`,
 * `Type/id/_history/v`), or absolute under `base`, the tenant's FHIR base (`{base}/Type/id`; search.html:
 * a relative reference and the absolute URL it resolves to are the same reference). Another server's
 * URL (any absolute URL when `base` is not given), a contained (`#x`), `urn:` or conditional reference
 * gives null.
 */
export function parseReference(reference: string, base?: string): ParsedReference | null {
  const slash = reference.indexOf('/');
  if (slash > 0 && reference.indexOf('/', slash + 1) < 0) {
    // `Type/id`, the common form: what TAIL would find, without running it.
    const type = reference.slice(0, slash);
    const id = reference.slice(slash + 1);
    return isResourceType(type) && ID_PATTERN.test(id) ? { type, id } : null;
  }
  if (reference.startsWith('#') || reference.startsWith('urn:') || reference.includes('?')) return null;
  if (ABSOLUTE.test(reference)) {
    if (base === undefined || !reference.startsWith(`${base}/`)) return null;
    const rest = reference.slice(base.length + 1);
    return ABSOLUTE.test(rest) ? null : parseReference(rest);
  }
  const m = TAIL.exec(reference);
  if (!m || !isResourceType(m[1]!) || !ID_PATTERN.test(m[2]!)) return null;
  const parsed: ParsedReference = { type: m[1]!, id: m[2]! };
  if (m[3]) parsed.version = m[3];
  return parsed;
}

/** Whether a reference is an absolute URL (of this server or another). */
export function isAbsoluteReference(reference: string): boolean {
  return ABSOLUTE.test(reference);
}

/** The type an absolute URL names in its path (`http://other.org/fhir/Patient/1`: Patient), if any. */
export function absoluteType(url: string): string | undefined {
  const path = /^[a-z][a-z0-9+.-]*:\/\/[^/]*\/(.*)$/i.exec(url)?.[1];
  return path === undefined ? undefined : parseReference(path)?.type;
}

/** An id in a URL's path (ID_PATTERN). */
const URL_ID = '[A-Za-z0-9.-]{1,64}';

/**
 * A regular expression, as text, matching exactly the URLs that absoluteType gives `type` (a resource
 * type, letters alone): a scheme, `//`, a host, then a path that starts with neither a scheme nor `#`,
 * holds no `?` (nor a line break, which absoluteType's `.` does not match), and ends `type/id` or
 * `type/id/_history/version`. Written so that JavaScript's RegExp and PostgreSQL's `~` read it alike
 * (lookahead, bounds, bracket expressions of literal characters); SQLite's REGEXP runs the former
 * (src/store/sqlite/db.ts). A search's `:missing` of a parameter restricted to `type` counts another
 * server's URLs that name it by this test, as the parameter's value search finds them.
 */
export function urlNamingPattern(type: string): string {
  return `^[A-Za-z][A-Za-z0-9+.-]*://[^/]*/(?![A-Za-z][A-Za-z0-9+.-]*:|#)(?:[^?\n\r\u2028\u2029]*/)?${type}/${URL_ID}(?:/_history/${URL_ID})?$`;
}

/** A `urn:uuid:` or `urn:oid:` reference: it can only name a Bundle entry by its fullUrl. */
export function isUrnReference(reference: string): boolean {
  return reference.startsWith('urn:uuid:') || reference.startsWith('urn:oid:');
}

/**
 * Calls `visit` for every object with a string `reference` property anywhere in `node`, but inside the
 * entries of a Bundle it holds or is (a document or message stored as a resource): those resolve
 * against that Bundle's own fullUrls (FHIR R4 bundle.html, "Resolving references in Bundles"), not
 * against the Bundle that carries it.
 */
export function walkReferences(node: unknown, visit: (holder: { reference: string }) => void): void {
  if (Array.isArray(node)) {
    for (const item of node) walkReferences(item, visit);
    return;
  }
  if (node === null || typeof node !== 'object') return;
  const obj = node as Record<string, unknown>;
  if (typeof obj.reference === 'string') visit(obj as { reference: string });
  const bundle = obj.resourceType === 'Bundle';
  for (const key in obj) {
    const value = obj[key];
    if (value !== null && typeof value === 'object' && !(bundle && key === 'entry')) walkReferences(value, visit);
  }
}

/**
 * The FHIRPath of the object `target` within `node` (`subject`, `performer[1]`, `contained[0].target[0]`),
 * found as walkReferences finds references; undefined when it is not there. For error locations only.
 */
export function pathTo(node: unknown, target: object, path = ''): string | undefined {
  if (node === target) return path;
  if (Array.isArray(node)) {
    for (const [i, item] of node.entries()) {
      const found = pathTo(item, target, `${path}[${i}]`);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (node === null || typeof node !== 'object') return undefined;
  const obj = node as Record<string, unknown>;
  const bundle = obj.resourceType === 'Bundle';
  for (const key in obj) {
    const value = obj[key];
    if (value === null || typeof value !== 'object' || (bundle && key === 'entry')) continue;
    const found = pathTo(value, target, path === '' ? key : `${path}.${key}`);
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * The element types whose values a transaction's fullUrls are replaced in, beside references (FHIR R4 http
 * 3.1.0.11.2). Not `canonical`: R4 says "Elements of type canonical are not replaced"; nor IDENTITIES.
 */
const LINK_TYPES = new Set(['uri', 'url', 'oid', 'uuid']);

/**
 * uri elements that identify rather than link, beside those R4 defines as absolute URIs (`ElementModel.absolute`:
 * a canonical resource's `url`, a ValueSet's include system, a ConceptMap group's source and target): a
 * Coding's and an Identifier's system, an Extension's url and a MessageDefinition's url (the one canonical
 * resource's url R4 does not define as absolute). A fullUrl equal to one (an IG or terminology
 * Bundle gives a CodeSystem, ValueSet or StructureDefinition its canonical URL as fullUrl) names the code
 * system, namespace or definition, and the entry's `Type/id` in its place would be a relative URI, which
 * none of them may be: they are kept as written.
 */
const IDENTITIES: ReadonlyMap<string, string> = new Map([['Coding', 'system'], ['Identifier', 'system'], ['Extension', 'url'], ['MessageDefinition', 'url']]);

/** Whether `model`'s element `key` identifies rather than links: IDENTITIES, or an absolute URI by R4's definition. */
export function isIdentity(model: TypeModel, key: string): boolean {
  return IDENTITIES.get(model.name) === key || model.slots.get(key)?.element.absolute === true;
}

/** `href` and `src` attributes of a narrative's XHTML. */
const XHTML_LINK = /(\s(?:href|src)\s*=\s*)(["'])(.*?)\2/g;

/**
 * Replaces, in place, the values of `resource`'s uri, url, oid and uuid elements and the `href` / `src`
 * attributes of its narratives for which `map` gives a replacement: a transaction "SHALL replace all
 * matching links in the bundle" (FHIR R4 http 3.1.0.11.2), not only its references (walkReferences).
 * Identities are not links and are left alone: a canonical resource's `url` and the other elements R4
 * defines as absolute URIs, a Coding's and an Identifier's system, an Extension's url (IDENTITIES).
 * Element types come from the R4 model; contained resources are walked, the entries of a Bundle it
 * holds or is are not (see walkReferences).
 */
export function replaceLinks(resource: Record<string, unknown>, map: (value: string) => string | undefined): void {
  const model = typeof resource.resourceType === 'string' ? typeModel(resource.resourceType) : null;
  if (model) linksOf(resource, model, map);
}

function linksOf(obj: Record<string, unknown>, model: TypeModel, map: (value: string) => string | undefined): void {
  const bundle = obj.resourceType === 'Bundle';
  for (const key in obj) {
    const slot = model.slots.get(key);
    if (slot === undefined || (bundle && key === 'entry')) continue;
    const value = obj[key];
    if (LINK_TYPES.has(slot.type)) {
      if (isIdentity(model, key)) continue;
      if (typeof value === 'string') obj[key] = map(value) ?? value;
      else if (Array.isArray(value)) value.forEach((v, i) => typeof v === 'string' && (value[i] = map(v) ?? v));
    } else if (slot.type === 'xhtml') {
      if (typeof value === 'string') obj[key] = value.replace(XHTML_LINK, (all, lead: string, quote: string, url: string) => {
        const to = map(url);
        return to === undefined ? all : `${lead}${quote}${to}${quote}`;
      });
    } else if (!slot.primitive) {
      for (const item of Array.isArray(value) ? value : [value]) {
        if (item === null || typeof item !== 'object' || Array.isArray(item)) continue;
        const child = item as Record<string, unknown>;
        const childModel = slot.type === 'Resource' ? (typeof child.resourceType === 'string' ? typeModel(child.resourceType) : null) : typeModel(slot.type);
        if (childModel) linksOf(child, childModel, map);
      }
    }
  }
}
