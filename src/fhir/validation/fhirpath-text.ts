/**
 * FHIRPath 2.0's string functions for encodings (STU, http://hl7.org/fhirpath/#additional-string-functions):
 * `encode(format)` and `decode(format)` between a string (its UTF-8 bytes) and `hex`, `base64` or `urlbase64` (base64's
 * URL-safe alphabet, `-` and `_`, padding kept); `escape(target)` and `unescape(target)` for `html` (content and
 * attribute values) and `json` (a JSON string's contents). A text that does not decode (odd hex digits, a character
 * outside the alphabet, bytes that are no UTF-8) gives undefined, which the engine gives as nothing, as N1's
 * conversions do; a format or target outside these is the caller's error (EncodingFormatError).
 */

/** A format or target the functions do not define. */
export class EncodingFormatError extends Error {}

const utf8 = new TextEncoder();
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** `s` in `format`: its UTF-8 bytes in hex (lower case), base64 or urlbase64. */
export function encodeText(s: string, format: string): string {
  const bytes = utf8.encode(s);
  switch (format) {
    case 'hex': return Buffer.from(bytes).toString('hex');
    case 'base64': return Buffer.from(bytes).toString('base64');
    case 'urlbase64': return Buffer.from(bytes).toString('base64').replaceAll('+', '-').replaceAll('/', '_');
    default: throw new EncodingFormatError(`encode() takes 'hex', 'base64' or 'urlbase64', not '${format}'`);
  }
}

const HEX = /^(?:[0-9a-fA-F]{2})*$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2,3})?$/;
const URL_BASE64 = /^(?:[A-Za-z0-9_-]{4})*(?:[A-Za-z0-9_-]{2}==|[A-Za-z0-9_-]{3}=|[A-Za-z0-9_-]{2,3})?$/;

/** The string whose UTF-8 bytes `s` encodes in `format`; undefined where `s` is no such encoding or its bytes no UTF-8. */
export function decodeText(s: string, format: string): string | undefined {
  let bytes: Buffer;
  switch (format) {
    case 'hex':
      if (!HEX.test(s)) return undefined;
      bytes = Buffer.from(s, 'hex');
      break;
    case 'base64':
      if (!BASE64.test(s)) return undefined;
      bytes = Buffer.from(s, 'base64');
      break;
    case 'urlbase64':
      if (!URL_BASE64.test(s)) return undefined;
      bytes = Buffer.from(s, 'base64url');
      break;
    default: throw new EncodingFormatError(`decode() takes 'hex', 'base64' or 'urlbase64', not '${format}'`);
  }
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return undefined;
  }
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
/** The named references HTML's escaping writes and the common ones text holds, by name. */
const HTML_ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00a0' };
const JSON_UNESCAPES: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };

/** `s` escaped for `target`: `html` (`&`, `<`, `>`, and both quotes as references) or `json` (as inside a JSON string). */
export function escapeText(s: string, target: string): string {
  switch (target) {
    case 'html': return s.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
    case 'json': return JSON.stringify(s).slice(1, -1);
    default: throw new EncodingFormatError(`escape() takes 'html' or 'json', not '${target}'`);
  }
}

/**
 * `s` unescaped from `target`: `html` reads the named references above and numeric ones (`&#60;`, `&#x3C;`), leaving any
 * other `&` as it is; `json` reads a JSON string's backslash escapes (`\"`, `\n`, `\u00e9`), leaving a character not
 * escaped (a bare `"`) as it is.
 */
export function unescapeText(s: string, target: string): string {
  switch (target) {
    case 'html':
      return s.replace(/&(?:#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6})|([A-Za-z]+));/g, (whole, dec: string | undefined, hex: string | undefined, name: string | undefined) => {
        if (name !== undefined) return HTML_ENTITIES[name] ?? whole;
        const code = dec !== undefined ? Number(dec) : Number.parseInt(hex!, 16);
        return code <= 0x10ffff && (code < 0xd800 || code > 0xdfff) ? String.fromCodePoint(code) : whole;
      });
    case 'json':
      return s.replace(/\\(?:u([0-9a-fA-F]{4})|(["\\/bfnrt]))/g, (whole, hex: string | undefined, c: string | undefined) => (hex !== undefined ? String.fromCharCode(Number.parseInt(hex, 16)) : JSON_UNESCAPES[c!]!));
    default: throw new EncodingFormatError(`unescape() takes 'html' or 'json', not '${target}'`);
  }
}
