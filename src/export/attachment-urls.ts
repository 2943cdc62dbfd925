/**
 * Bulk Data 2.0 (Attachments): "When populated, the url element SHALL be an absolute url that can be
 * de-referenced to the attachment's content". R4 lets a stored Attachment.url be relative
 * (`Binary/b1`, relative to the server's base, as a relative reference is), so an export makes each
 * relative one absolute under the tenant's FHIR base: in any Attachment of the resource, an extension's
 * `valueAttachment` and a contained resource's too. The stored bytes of a page go out untouched unless
 * a quick scan of them finds a `"url"` member whose value has no scheme; only the lines holding one are
 * parsed, walked by the R4 type model, and written again (numbers as written: exact-json.ts).
 */
import { parseExact, stringifyExact } from '../fhir/exact-json.ts';
import { typeModel } from '../fhir/validation/model.ts';

type Json = Record<string, unknown>;

const URL_KEY = new TextEncoder().encode('"url"');
/** RFC 3986's scheme, which an absolute URI starts with. */
const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:/;
/** mayHoldRelativeUrl's test on text: a `"url"` member whose string value has no scheme and is no `#` fragment. */
const RELATIVE_URL = /"url"\s*:\s*"(?![A-Za-z][A-Za-z0-9+.-]*:|#)/;

/** Whether one resource's JSON text may hold a relative url (mayHoldRelativeUrl, on a string). */
export function textMayHoldRelativeUrl(content: string): boolean {
  return RELATIVE_URL.test(content);
}

/** Whether `bytes` (NDJSON, or one resource's JSON) hold a `"url"` member whose string value has no scheme (and is no `#` fragment). */
export function mayHoldRelativeUrl(bytes: Uint8Array): boolean {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let at = buf.indexOf(URL_KEY); at >= 0; at = buf.indexOf(URL_KEY, at + URL_KEY.length)) {
    let i = at + URL_KEY.length;
    while (isSpace(buf[i])) i++;
    if (buf[i] !== 0x3a) continue;
    i++;
    while (isSpace(buf[i])) i++;
    if (buf[i] !== 0x22) continue;
    if (!hasScheme(buf, i + 1) && buf[i + 1] !== 0x23) return true;
  }
  return false;
}

function isSpace(b: number | undefined): boolean {
  return b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
}

/** Whether the string starting at `i` starts with a scheme and `:` (RFC 3986 3.1). */
function hasScheme(buf: Buffer, i: number): boolean {
  const first = buf[i];
  if (first === undefined || !((first >= 0x41 && first <= 0x5a) || (first >= 0x61 && first <= 0x7a))) return false;
  for (let j = i + 1; j < buf.length; j++) {
    const b = buf[j]!;
    if (b === 0x3a) return true;
    const ok = (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || (b >= 0x30 && b <= 0x39) || b === 0x2b || b === 0x2e || b === 0x2d;
    if (!ok) return false;
  }
  return false;
}

/**
 * The resource's JSON with each relative Attachment.url made absolute under `base` (the tenant's FHIR
 * base: `Binary/b1` is `{base}/Binary/b1`); the same text when it holds none.
 */
export function absoluteAttachmentUrls(content: string, base: string): string {
  if (!textMayHoldRelativeUrl(content)) return content;
  const resource = parseExact(content) as Json;
  const root = base.endsWith('/') ? base : `${base}/`;
  return walk(resource, String(resource.resourceType), root) ? stringifyExact(resource) : content;
}

/** Rewrites relative Attachment urls in `value` (of type `type`); true when one changed. */
function walk(value: unknown, type: string, root: string): boolean {
  if (Array.isArray(value)) {
    let changed = false;
    for (const item of value) changed = walk(item, type, root) || changed;
    return changed;
  }
  if (value === null || typeof value !== 'object') return false;
  const v = value as Json;
  let changed = false;
  if (type === 'Attachment' && typeof v.url === 'string' && !SCHEME.test(v.url) && !v.url.startsWith('#')) {
    try {
      v.url = new URL(v.url, root).href;
      changed = true;
    } catch {
      // Not a URL reference at all: left as it is.
    }
  }
  const model = typeModel(type === 'Resource' ? String(v.resourceType) : type);
  if (model === null) return changed;
  for (const key in v) {
    const slot = model.slots.get(key);
    if (slot === undefined || slot.primitive) continue;
    const child = v[key];
    if (slot.type === 'Resource') {
      for (const r of Array.isArray(child) ? child : [child]) {
        if (r !== null && typeof r === 'object') changed = walk(r, String((r as Json).resourceType), root) || changed;
      }
    } else changed = walk(child, slot.type, root) || changed;
  }
  return changed;
}
