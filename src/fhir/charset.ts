/**
 * Character encodings of request bodies. FHIR bodies are UTF-8 (R4 http.html, "UTF-8 SHALL be used");
 * US-ASCII is the one other declared encoding whose text reads the same as UTF-8, as long as every byte
 * is within it: some HTTP clients and XML writers declare it for plain-ASCII content.
 */

/** The IANA names and aliases of US-ASCII (the IANA character-set registry; RFC 2046's `us-ascii`). */
const ASCII_LABELS = new Set([
  'us-ascii', 'ascii', 'us', 'ansi_x3.4-1968', 'ansi_x3.4-1986', 'iso-ir-6', 'iso_646.irv:1991', 'iso646-us', 'ibm367', 'cp367', 'csascii',
]);

/** Whether a charset or XML encoding label names US-ASCII (in any case). */
export function isAsciiLabel(label: string): boolean {
  return ASCII_LABELS.has(label.trim().toLowerCase());
}

/** The first character outside US-ASCII in `text` (its offset and code point), or undefined when there is none. */
export function firstNonAscii(text: string, from = 0): { at: number; code: string } | undefined {
  const found = /[^\x00-\x7f]/.exec(from === 0 ? text : text.slice(from));
  if (!found) return undefined;
  return { at: from + found.index, code: `U+${found[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}` };
}

/** Whether a charset label names UTF-8 (the WHATWG Encoding labels a decoder takes: `utf-8`, `UTF8`, `unicode-1-1-utf-8`...). */
export function isUtf8Label(label: string): boolean {
  try {
    return new TextDecoder(label).encoding === 'utf-8';
  } catch {
    return false;
  }
}

/** The `charset` parameter of a media type (a Content-Type, an `$import` inputFormat), as written; undefined without one. */
export function charsetOf(mediaType: string | undefined): string | undefined {
  return /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(mediaType ?? '')?.[1];
}
