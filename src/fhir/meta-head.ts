/**
 * The meta of a stored version read from the start of its text alone (ResourceRepo.readHead): every stored text opens
 * with `resourceType`, `id` and `meta` (stampHead), so an instance `$meta` of a resource of tens of MiB reads its first
 * characters, not the whole text and a parse of it, where the read's reach needs no more of it.
 */
import { requireAccess } from './access.ts';
import { judgedByCompartment, type FhirDeps, type FhirRequest } from './crud.ts';
import { versionNumber } from './resource-types.ts';
import { checkTypeAndId } from './resource.ts';

/** Characters of a stored text read for its meta; a meta longer than this (thousands of tags) is read with the whole text. */
export const META_HEAD_CHARS = 64 * 1024;

/**
 * `type/id`'s meta (version `vid`'s, given one) as a read or vread would show it, from the start of its stored text,
 * where the token's read of the type does not depend on the content (no scope filter, not a Binary's securityContext)
 * or a patient's compartment alone decides it and the version is the current one (judgedByCompartment: a 403 outside
 * it). Undefined when it cannot tell: nothing stored (a core resource, a 404), a deletion (410), a meta past
 * META_HEAD_CHARS, another rule of reach; the read or vread then decides, on the whole text.
 */
export async function storedMeta(deps: FhirDeps, req: FhirRequest, type: string, id: string, vid?: string): Promise<Record<string, unknown> | undefined> {
  checkTypeAndId(type, id);
  requireAccess(req.access, type, 'r');
  const { access } = req;
  if (type === 'Binary' || access.filters?.(type, 'r') !== undefined) return undefined;
  const n = vid === undefined ? undefined : versionNumber(vid);
  if (vid !== undefined && n === undefined) return undefined;
  const v = await deps.store.resources.readHead(req.tenant, type, id, META_HEAD_CHARS, n);
  if (v === null || v.deleted) return undefined;
  const meta = metaInHead(v.content, type, id);
  if (meta === undefined) return undefined;
  if (access.patientLimit(type, 'r') !== undefined && !(await judgedByCompartment(deps, req, type, id, v.versionId))) return undefined;
  return meta;
}

/** The `meta` object opening `text` after stampHead's `resourceType` and `id` (undefined when `text` ends first, or opens otherwise). */
export function metaInHead(text: string, type: string, id: string): Record<string, unknown> | undefined {
  const start = `{"resourceType":"${type}","id":"${id}","meta":{`;
  if (!text.startsWith(start)) return undefined;
  let depth = 0;
  for (let i = start.length - 1; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // A string: on to its closing quote, past escapes.
      for (i++; i < text.length && text.charCodeAt(i) !== 0x22; i++) if (text.charCodeAt(i) === 0x5c) i++;
    } else if (c === 0x7b || c === 0x5b) depth++;
    else if ((c === 0x7d || c === 0x5d) && --depth === 0) return JSON.parse(text.slice(start.length - 1, i + 1)) as Record<string, unknown>;
  }
  return undefined;
}
