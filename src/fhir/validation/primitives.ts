import { CONTROL_CHARACTER, NOT_IN_XML, primed, WHITESPACE, type StringProfile } from './large-strings.ts';

/**
 * The FHIR R4 primitive types in JSON (datatypes.html, json.html): the JSON type each one takes and
 * the rule its value follows. A check returns undefined when the value is valid, or why it is not.
 */

const YEAR = '([0-9]([0-9]([0-9][1-9]|[1-9]0)|[1-9]00)|[1-9]000)';
const MONTH = '(0[1-9]|1[0-2])';
const DAY = '(0[1-9]|[1-2][0-9]|3[0-1])';
const TIME = '([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?';
const ZONE = '(Z|(\\+|-)((0[0-9]|1[0-3]):[0-5][0-9]|14:00))';

const DATE = new RegExp(`^${YEAR}(-${MONTH}(-${DAY})?)?$`);
const DATE_TIME = new RegExp(`^${YEAR}(-${MONTH}(-${DAY}(T${TIME}${ZONE})?)?)?$`);
const INSTANT = new RegExp(`^${YEAR}-${MONTH}-${DAY}T${TIME}${ZONE}$`);
const TIME_OF_DAY = new RegExp(`^${TIME}$`);
// FHIR's patterns are XML Schema's, whose \s is only space, tab, CR and LF (a no-break space is content).
const CODE = /^[^ \t\r\n]+([ \t\r\n][^ \t\r\n]+)*$/;
const ID = /^[A-Za-z0-9\-.]{1,64}$/;
const URI = /^[^ \t\r\n]+$/;
const OID = /^urn:oid:[0-2](\.(0|[1-9][0-9]*))+$/;
const UUID = /^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
/** Characters below U+0020 other than tab, line feed and carriage return (datatypes.html#string). */
export { CONTROL_CHARACTER } from './large-strings.ts';
/** FHIR's limit on a string's size (datatypes.html#string). */
const MAX_STRING = 1024 * 1024;

const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;

function daysIn(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/** A day of a month that the calendar does not have (`2020-02-30`), given a matched date's text. */
function badDay(text: string): string | undefined {
  if (text.length < 10) return undefined;
  const year = Number(text.slice(0, 4));
  const month = Number(text.slice(5, 7));
  const day = Number(text.slice(8, 10));
  return day > daysIn(year, month) ? `${quote(text)} is not a valid date: ${text.slice(0, 10)} is not a day of the calendar` : undefined;
}

function checkString(v: string, profile?: StringProfile): string | undefined {
  if (v.length === 0) return 'empty strings are not allowed (leave the element out)';
  if (v.length > MAX_STRING) return 'longer than the 1 MB FHIR allows for a string';
  return checkCharacters(v, profile);
}

function checkCharacters(v: string, profile?: StringProfile): string | undefined {
  if (profile ? profile.control : CONTROL_CHARACTER.test(v)) return 'holds a control character (below U+0020 other than tab, CR, LF)';
  return undefined;
}

function pattern(re: RegExp, what: string): (v: string) => string | undefined {
  return (v) => (re.test(v) ? undefined : `${quote(v)} is not a valid ${what}`);
}

/** Whether `v` is base64 (RFC 4648, padded), whitespace aside. */
function isBase64(v: string): boolean {
  const compact = v.replace(WHITESPACE, '');
  return compact.length % 4 === 0 && BASE64.test(compact);
}

function checkBase64(v: string, profile?: StringProfile): string | undefined {
  if (!(profile ? profile.base64 : isBase64(v))) return `${quote(v)} is not valid base64 (RFC 4648, padded to a multiple of 4 characters)`;
  return undefined;
}

/**
 * A uri, url or canonical: no whitespace (XML Schema's anyURI as FHIR restricts it), and what HL7's
 * validator also refuses in one: the schemes `oid:` and `uuid:`, which are no URIs of OIDs or UUIDs
 * (R4 datatypes.html: an OID is `urn:oid:...`, a UUID `urn:uuid:...`), and a `urn:oid:` URI whose OID
 * does not have the form of R4's oid type (RFC 3001). A `urn:uuid:` URI is not held to R4's uuid form:
 * transactions name their new resources so, and clients write other text there (`urn:uuid:patient-1`).
 */
function checkUri(what: string): (v: string) => string | undefined {
  return (v) => {
    if (!URI.test(v)) return `${quote(v)} is not a valid ${what} (no whitespace)`;
    if (v.startsWith('oid:') || v.startsWith('uuid:')) return `${quote(v)} is not a valid ${what}: write an OID or a UUID as urn:oid:... or urn:uuid:..., not ${v.slice(0, v.indexOf(':') + 1)}...`;
    // A canonical, and R4's `system|version` in a uri (an expansion's parameters), name a version after `|`.
    if (v.startsWith('urn:oid:') && !OID.test(v.includes('|') ? v.slice(0, v.indexOf('|')) : v)) return `${quote(v)} is not a valid ${what}: urn:oid: must be followed by an OID (digits separated by dots, starting 0, 1 or 2, such as urn:oid:2.16.840.1.113883.4.1)`;
    return undefined;
  };
}

function dated(re: RegExp, what: string): (v: string) => string | undefined {
  return (v) => (re.test(v) ? badDay(v) : `${quote(v)} is not a valid ${what}`);
}

/** The rule of each string type; those taking a profile answer a large string from it (large-strings.ts). */
const STRING_RULES: Record<string, (v: string, profile?: StringProfile) => string | undefined> = {
  string: checkString,
  markdown: checkString,
  // The 1 MB limit is the string type's; a narrative may be longer.
  xhtml: (v, profile) => (v.length === 0 ? 'empty strings are not allowed (leave the element out)' : checkCharacters(v, profile)),
  code: pattern(CODE, 'code (no leading, trailing or repeated whitespace)'),
  id: pattern(ID, 'id (1-64 of A-Z a-z 0-9 - .)'),
  uri: checkUri('uri'),
  url: checkUri('url'),
  canonical: checkUri('canonical'),
  oid: pattern(OID, 'oid (urn:oid:...)'),
  uuid: pattern(UUID, 'uuid (urn:uuid: and lower-case hex)'),
  base64Binary: checkBase64,
  date: dated(DATE, 'date (YYYY, YYYY-MM or YYYY-MM-DD)'),
  dateTime: dated(DATE_TIME, 'dateTime (YYYY, YYYY-MM, YYYY-MM-DD or YYYY-MM-DDThh:mm:ss with a time zone)'),
  instant: dated(INSTANT, 'instant (YYYY-MM-DDThh:mm:ss[.sss] with a time zone)'),
  time: pattern(TIME_OF_DAY, 'time (hh:mm:ss)'),
};

/** The R4 primitive type names. */
export const PRIMITIVES = new Set([...Object.keys(STRING_RULES), 'boolean', 'integer', 'positiveInt', 'unsignedInt', 'decimal']);

/**
 * The JSON forms of the integer types (datatypes.html: `-?([0]|([1-9][0-9]*))`, `[0]|([1-9][0-9]*)`,
 * `+?[1-9][0-9]*`, the `+` being no JSON): digits without a fraction or an exponent, so `1.0` and `1e2`
 * are no integers, though JSON.parse reads them as 1 and 100.
 */
const INTEGER_FORMS: Record<string, RegExp> = {
  integer: /^-?(0|[1-9][0-9]*)$/,
  unsignedInt: /^(0|[1-9][0-9]*)$/,
  positiveInt: /^[1-9][0-9]*$/,
};

/**
 * undefined when `v` is a valid JSON value of primitive `type`, or what is wrong with it. `literal`: a
 * number's text as written, when it is not String(v) (src/fhir/exact-json.ts literalOf).
 */
export function checkPrimitive(type: string, v: unknown, literal?: string): string | undefined {
  switch (type) {
    case 'boolean':
      return typeof v === 'boolean' ? undefined : `must be a JSON boolean, not ${describe(v)}`;
    case 'decimal':
      return typeof v === 'number' && Number.isFinite(v) ? undefined : `must be a JSON number within the range of a double, not ${describe(v, literal)}`;
    case 'integer':
    case 'positiveInt':
    case 'unsignedInt': {
      if (typeof v !== 'number' || !Number.isInteger(v)) return `must be a JSON integer, not ${describe(v, literal)}`;
      const min = type === 'integer' ? INT32_MIN : type === 'positiveInt' ? 1 : 0;
      if (v < min || v > INT32_MAX) return `${literal ?? v} is outside the range of ${type} (${min} to ${INT32_MAX})`;
      if (literal !== undefined && !INTEGER_FORMS[type]!.test(literal)) return `must be a JSON integer written as digits alone (no fraction, exponent or minus zero), not ${literal}`;
      return undefined;
    }
  }
  if (typeof v !== 'string') return `must be a JSON string, not ${describe(v)}`;
  // A large string read in slices before this validation (primeStrings): its answers, not a pass over it here.
  const profile = primed(v);
  // JSON's `\ud800` escape alone, in a value of any type: no Unicode character, and no UTF-8 text holds it.
  if (!(profile ? profile.wellFormed : v.isWellFormed())) return 'holds an unpaired surrogate (U+D800 to U+DFFF alone), which is no Unicode character';
  // Noncharacters XML 1.0 does not allow (section 2.2), not even as references: such a value could not be answered in FHIR XML.
  if (profile ? profile.nonCharacter : NOT_IN_XML.test(v)) return 'holds U+FFFE or U+FFFF, which are no Unicode characters and which XML cannot carry (FHIR XML)';
  const rule = STRING_RULES[type];
  if (rule === undefined) return undefined;
  if (type !== 'string' && type !== 'markdown' && type !== 'xhtml') {
    if (v.length === 0) return 'empty strings are not allowed (leave the element out)';
  }
  return rule(v, profile);
}

/** A JSON value's kind, for messages (a number as written, when `literal` gives its text). */
export function describe(v: unknown, literal?: string): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'object') return 'an object';
  if (typeof v === 'string') return `the string ${quote(v)}`;
  return `${typeof v} ${typeof v === 'number' && literal !== undefined ? literal : String(v)}`;
}

/** A value in a message: quoted, and cut short when long. */
function quote(v: string): string {
  return JSON.stringify(v.length > 60 ? v.slice(0, 57) + '...' : v);
}
