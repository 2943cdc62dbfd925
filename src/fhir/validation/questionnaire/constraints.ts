/**
 * The constraints a Questionnaire item states in R4 core extensions (R4 extensibility registry; SDC
 * relies on them), read once when the Questionnaire is prepared: `minValue`/`maxValue` (integer, decimal,
 * date, dateTime, time answers, and the value of a quantity answer), `minLength` and `regex` (string
 * answers; the pattern matches the whole answer, as XML Schema's and HL7's validator's do, and runs only in
 * its linear-time form, linear-regex.ts, never in the backtracking engine), `maxDecimalPlaces` (decimal and
 * quantity answers), `mimeType` and `maxSize` (attachment answers; maxSize in MB), `questionnaire-unitOption` and, on a
 * quantity item, `questionnaire-unit` (the units a quantity answer may have), and
 * `questionnaire-minOccurs`/`questionnaire-maxOccurs` (answers of a question, repetitions of a group;
 * check.ts counts them). `questionnaire-hidden` only says how a form shows the item: a hidden item is
 * answered (a calculated value) and checked as any other. A malformed value (a minValue of a type the item
 * cannot compare, a regex that is no pattern) is a problem of the Questionnaire, reported once per
 * response as a warning, and the constraint is left out.
 */
import { linearRegex, MAX_STEPS, type LinearRegex } from '../../../linear-regex.ts';
import { literalOf } from '../../exact-json.ts';
import type { ValidationIssue } from '../validate.ts';
import { compare, type EnableBudget } from './enable-when.ts';

type Json = Record<string, unknown>;

const EXT = 'http://hl7.org/fhir/StructureDefinition/';

export interface Bound {
  /** The `value[x]` type (`Instant` read as `DateTime`). */
  type: string;
  value: unknown;
}

export interface UnitCoding {
  system?: string;
  code?: string;
  display?: string;
}

export interface ItemConstraints {
  minValue?: Bound;
  maxValue?: Bound;
  minLength?: number;
  regex?: { pattern: string; linear: LinearRegex };
  maxDecimalPlaces?: number;
  mimeTypes?: string[];
  maxSize?: number;
  units?: UnitCoding[];
  minOccurs?: number;
  maxOccurs?: number;
}

/**
 * The state visits the regex tests of one response may cost at most (about half a second): each test is
 * charged, before it runs, the most it can cost (its input's length times its pattern's states, at most
 * linear-regex.ts's own cap), so 10,000 long answers against a large pattern cannot hold a request for
 * minutes. Past it the rest are not tested and the check has one too-costly error (check.ts).
 */
export const REGEX_VISITS = 100_000_000;

/** What is left of REGEX_VISITS for one response (the shape of enableWhen's budget). */
export type RegexBudget = EnableBudget;

/** `linear.test(input)` charged to `budget`: null once the budget cannot pay for it (then exhausted), undefined past the test's own cap. */
function testRegex(linear: LinearRegex, input: string, budget: RegexBudget): boolean | undefined | null {
  if (budget.exhausted) return null;
  budget.left -= Math.min((input.length + 1) * linear.states, MAX_STEPS);
  if (budget.left < 0) {
    budget.exhausted = true;
    return null;
  }
  return linear.test(input);
}

/** The bound types each item type can compare its answers with. */
const BOUND_TYPES: Record<string, readonly string[]> = {
  integer: ['Integer', 'Decimal'],
  decimal: ['Integer', 'Decimal'],
  quantity: ['Integer', 'Decimal', 'Quantity'],
  date: ['Date', 'DateTime'],
  dateTime: ['Date', 'DateTime'],
  time: ['Time'],
};

const DATE = /^\d{4}(-\d{2}(-\d{2})?)?$/;
const DATE_TIME = /^\d{4}(-\d{2}(-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})?)?)?)?$/;
const TIME = /^\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/;
/** The bytes of maxSize's megabyte. */
const MIB = 1024 * 1024;
const MIME = /^[A-Za-z0-9][\w!#$&^.+-]*\/(\*|[A-Za-z0-9][\w!#$&^.+-]*)$/;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0;
}

/** A bound's value checked against its type; undefined when it is not one. */
function bound(type: string, value: unknown): Bound | undefined {
  switch (type) {
    case 'Integer':
      return Number.isInteger(value) ? { type, value } : undefined;
    case 'Decimal':
      return typeof value === 'number' && Number.isFinite(value) ? { type, value } : undefined;
    case 'Date':
      return typeof value === 'string' && DATE.test(value) ? { type, value } : undefined;
    case 'DateTime':
    case 'Instant':
      return typeof value === 'string' && DATE_TIME.test(value) ? { type: 'DateTime', value } : undefined;
    case 'Time':
      return typeof value === 'string' && TIME.test(value) ? { type, value } : undefined;
    case 'Quantity':
      return isObject(value) && typeof value.value === 'number' ? { type, value } : undefined;
    default:
      return undefined;
  }
}

/** The one `value[x]` of an extension: its type and value. */
function extensionValue(e: Json): { type: string; value: unknown } | undefined {
  const keys = Object.keys(e).filter((k) => k.startsWith('value') && k.length > 5);
  return keys.length === 1 ? { type: keys[0]!.slice(5), value: e[keys[0]!] } : undefined;
}

/** An extension's value as a message shows it: `valueString "ten"`. */
function shown(v: { type: string; value: unknown } | undefined): string {
  if (v === undefined) return 'no value[x]';
  const json = JSON.stringify(v.value) ?? '';
  return `value${v.type} ${json.length > 60 ? `${json.slice(0, 60)}...` : json}`;
}

/** `pattern` anchored at both ends, compiled to its linear-time form; a string saying why not otherwise. */
function compileRegex(pattern: string): LinearRegex | string {
  let lastError = '';
  for (const flags of ['u', '']) {
    let re: RegExp;
    try {
      re = new RegExp(`^(?:${pattern})$`, flags);
    } catch (e) {
      lastError = `is not a valid regular expression (${(e as Error).message})`;
      continue;
    }
    const linear = linearRegex(re);
    if (linear !== undefined) return linear;
    lastError = 'uses what a linear-time matcher cannot decide (back references, lookaround, word boundaries, property classes), so answers are not checked against it';
  }
  return lastError;
}

/**
 * The constraints of the Questionnaire item `item` (of type `type`) states in its extensions; each value
 * that cannot be used adds a sentence to `problems`.
 */
export function readConstraints(item: Json, linkId: string, type: string | undefined, problems: string[]): ItemConstraints {
  const out: ItemConstraints = {};
  const extensions = Array.isArray(item.extension) ? item.extension.filter(isObject) : [];
  const problem = (name: string, what: string) => problems.push(`The ${name} extension of the item '${linkId}' ${what}`);
  const seen = new Set<string>();
  for (const e of extensions) {
    if (typeof e.url !== 'string' || !e.url.startsWith(EXT)) continue;
    const name = e.url.slice(EXT.length);
    const v = extensionValue(e);
    const single = (ok: () => boolean): void => {
      if (seen.has(name)) problem(name, 'is given more than once: the first is used');
      else if ((seen.add(name), v === undefined || !ok())) problem(name, `has a value that cannot be used (${shown(v)}): it is not checked`);
    };
    switch (name) {
      case 'minValue':
      case 'maxValue':
        single(() => {
          const b = bound(v!.type, v!.value);
          if (b === undefined) return false;
          const allowed = type === undefined ? undefined : BOUND_TYPES[type];
          if (allowed === undefined || !allowed.includes(b.type)) problem(name, `(value${v!.type}) cannot bound the answers of a ${type ?? 'typeless'} item: it is not checked`);
          else out[name] = b;
          return true;
        });
        break;
      case 'minLength':
      case 'maxDecimalPlaces':
        single(() => v!.type === 'Integer' && isCount(v!.value) && ((out[name] = v!.value), true));
        break;
      case 'questionnaire-minOccurs':
      case 'questionnaire-maxOccurs':
        single(() => v!.type === 'Integer' && isCount(v!.value) && ((out[name === 'questionnaire-minOccurs' ? 'minOccurs' : 'maxOccurs'] = v!.value), true));
        break;
      case 'maxSize':
        single(() => (v!.type === 'Decimal' || v!.type === 'Integer') && typeof v!.value === 'number' && v!.value >= 0 && ((out.maxSize = v!.value), true));
        break;
      case 'regex':
        single(() => {
          if (v!.type !== 'String' || typeof v!.value !== 'string') return false;
          const linear = compileRegex(v!.value);
          if (typeof linear === 'string') problem(name, `'${v!.value}' ${linear}`);
          else out.regex = { pattern: v!.value, linear };
          return true;
        });
        break;
      case 'mimeType':
        if (v?.type === 'Code' && typeof v.value === 'string' && MIME.test(v.value)) (out.mimeTypes ??= []).push(v.value.toLowerCase());
        else problem(name, `has a value that is not a mime type code (${shown(v)}): it is not checked`);
        break;
      case 'questionnaire-unitOption':
      case 'questionnaire-unit': {
        const c = v?.type === 'Coding' && isObject(v.value) ? v.value : undefined;
        const coding = c && (typeof c.code === 'string' || typeof c.display === 'string') ? unitCoding(c) : undefined;
        if (coding === undefined) problem(name, `has a value that is not a Coding with a code (${shown(v)}): it is not checked`);
        // questionnaire-unit on an integer or decimal item names the unit of a bare number: nothing to check.
        else if (type === 'quantity') (out.units ??= []).push(coding);
        break;
      }
      case 'questionnaire-hidden':
        single(() => v!.type === 'Boolean' && typeof v!.value === 'boolean');
        break;
    }
  }
  return out;
}

function unitCoding(c: Json): UnitCoding {
  const out: UnitCoding = {};
  if (typeof c.system === 'string') out.system = c.system;
  if (typeof c.code === 'string') out.code = c.code;
  if (typeof c.display === 'string') out.display = c.display;
  return out;
}

/**
 * How many digits follow the decimal point of `n` as it was written (`literal`, exact-json.ts: `1.50` has 2,
 * as R4 holds a decimal's precision significant), else as JSON writes it (`1.25`: 2, `1e-7`: 7).
 */
function decimalPlaces(n: number, literal: string | undefined): number {
  const [mantissa, exponent] = (literal ?? String(Math.abs(n))).toLowerCase().split('e');
  const fraction = mantissa!.split('.')[1]?.length ?? 0;
  return Math.max(0, fraction - Number(exponent ?? 0));
}

function describe(b: Bound): string {
  if (b.type !== 'Quantity') return String(b.value);
  const q = b.value as Json;
  return `${String(q.value)} ${String(q.code ?? q.unit ?? '')}`.trim();
}

/** Whether the quantity `q` has one of the `units`: by system and code, or by its text when it has no code. */
function unitAllowed(q: Json, units: UnitCoding[]): boolean {
  return units.some((u) => {
    if (typeof q.code === 'string') return u.code === q.code && (u.system === undefined || q.system === undefined || u.system === q.system);
    return typeof q.unit === 'string' && (q.unit === u.code || q.unit === u.display);
  });
}

/** The byte length of base64 `data` (its padding left out). */
function base64Bytes(data: string): number {
  const clean = data.replace(/[\s=]/g, '');
  return Math.floor((clean.length * 3) / 4);
}

/**
 * The problems of the answer value `v` (already of a type the item takes; at `path`) against the item's
 * extension constraints `c`, added to `issues` as the module's other answer checks add theirs.
 */
export function checkConstraints(c: ItemConstraints, linkId: string, v: { type: string; value: unknown }, path: string, issues: ValidationIssue[], budget: RegexBudget, answer?: Json): void {
  const error = (text: string) => issues.push({ severity: 'error', code: 'value', expression: path, text: `The answer to the item '${linkId}' ${text}` });
  for (const [b, sign, word] of [[c.minValue, -1, 'less than its minValue'], [c.maxValue, 1, 'more than its maxValue']] as const) {
    if (b === undefined) continue;
    // A quantity against a number compares the quantity's value; against a quantity, in the same unit only.
    const answer = v.type === 'Quantity' && b.type !== 'Quantity' ? { type: 'Decimal', value: (v.value as Json).value } : v;
    const order = compare(answer, b);
    if (order === undefined) {
      if (v.type === 'Quantity') issues.push({ severity: 'warning', code: 'not-supported', expression: path, text: `The answer to the item '${linkId}' was not compared with its ${word.split(' ').pop()} ${describe(b)}: its unit differs` });
    } else if (Math.sign(order) === sign) error(`is ${word} of ${describe(b)}`);
  }
  if (v.type === 'String' && typeof v.value === 'string') {
    if (c.minLength !== undefined && [...v.value].length < c.minLength) error(`is shorter than its minLength of ${c.minLength} characters`);
    if (c.regex !== undefined) {
      const matched = testRegex(c.regex.linear, v.value, budget);
      if (matched === undefined) issues.push({ severity: 'warning', code: 'too-costly', expression: path, text: `The answer to the item '${linkId}' was not checked against its regex '${c.regex.pattern}': matching took too long` });
      else if (matched === false) error(`does not match its regex '${c.regex.pattern}'`);
    }
  }
  const number = v.type === 'Decimal' ? v.value : v.type === 'Quantity' ? (v.value as Json).value : undefined;
  const literal = v.type === 'Decimal' ? literalOf(answer, 'valueDecimal') : v.type === 'Quantity' ? literalOf(v.value, 'value') : undefined;
  if (c.maxDecimalPlaces !== undefined && typeof number === 'number' && decimalPlaces(number, literal) > c.maxDecimalPlaces) error(`has more than its maxDecimalPlaces of ${c.maxDecimalPlaces} decimal places`);
  if (v.type === 'Quantity' && c.units !== undefined && isObject(v.value) && !unitAllowed(v.value, c.units)) {
    const given = v.value.code ?? v.value.unit;
    const allowed = c.units.map((u) => u.code ?? u.display).join(', ');
    error(given === undefined ? `has no unit, but must have one of ${allowed}` : `has the unit '${String(given)}', which is not one of its unit options (${allowed})`);
  }
  if (v.type === 'Attachment' && isObject(v.value)) checkAttachment(c, v.value, error);
}

function checkAttachment(c: ItemConstraints, a: Json, error: (text: string) => void): void {
  if (c.mimeTypes !== undefined) {
    const type = typeof a.contentType === 'string' ? a.contentType.split(';')[0]!.trim().toLowerCase() : undefined;
    const allowed = (m: string) => type !== undefined && (m === type || (m.endsWith('/*') && type.startsWith(m.slice(0, -1))));
    if (type === undefined) error(`has no contentType, but must be one of ${c.mimeTypes.join(', ')}`);
    else if (!c.mimeTypes.some(allowed)) error(`has the contentType '${type}', which is not one of its mimeTypes (${c.mimeTypes.join(', ')})`);
  }
  if (c.maxSize !== undefined) {
    // maxSize is in MB ("Max size in MB"), read as MiB, the larger (the lenient) reading; the size stated and the data's are both held to it.
    const sizes = [typeof a.size === 'number' ? a.size : 0, typeof a.data === 'string' ? base64Bytes(a.data) : 0];
    const size = Math.max(...sizes);
    if (size > c.maxSize * MIB) error(`is an attachment of ${size} bytes, more than its maxSize of ${c.maxSize} MB`);
  }
}
