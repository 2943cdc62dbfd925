/**
 * The urls of a resource's Attachments (R4 Attachment.url: "where the data can be accessed"), found by
 * the R4 type model wherever an Attachment stands: an element, a backbone element's, an extension's
 * `valueAttachment`, a contained resource's. `$everything` follows those naming this server's Binaries
 * (patient-operation-everything.html: "any resource referenced from those, including binaries and attachments").
 */
import { typeModel } from './validation/model.ts';

type Json = Record<string, unknown>;

/** A quick test on a resource's text: whether it may name a Binary in a url at all. */
export function mayNameBinary(content: string): boolean {
  return content.includes('"url"') && content.includes('Binary/');
}

/** The `url` of every Attachment in `resource` (parsed JSON), in document order. */
export function attachmentUrls(resource: Json): string[] {
  const out: string[] = [];
  walk(resource, String(resource.resourceType), out);
  return out;
}

function walk(value: unknown, type: string, out: string[]): void {
  if (Array.isArray(value)) {
    for (const item of value) walk(item, type, out);
    return;
  }
  if (value === null || typeof value !== 'object') return;
  const v = value as Json;
  if (type === 'Attachment' && typeof v.url === 'string') out.push(v.url);
  const model = typeModel(type === 'Resource' ? String(v.resourceType) : type);
  if (model === null) return;
  for (const key in v) {
    const slot = model.slots.get(key);
    if (slot === undefined || slot.primitive) continue;
    const child = v[key];
    if (slot.type === 'Resource') {
      for (const r of Array.isArray(child) ? child : [child]) if (r !== null && typeof r === 'object') walk(r, String((r as Json).resourceType), out);
    } else walk(child, slot.type, out);
  }
}
