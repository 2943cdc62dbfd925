/**
 * JSON numbers kept as they were written. FHIR R4 datatypes.html (decimal): "0.010 is regarded as
 * different to 0.01, and the original precision should be preserved", and json.html warns that a
 * JSON parser that reads numbers as binary floating point loses it. JSON.parse does: `98.60` reads as
 * 98.6, `12345678901234567890.5` as 12345678901234567000, `0.00000000000000000000000001` as 1e-26.
 *
 * The values stay numbers (validation, indexing, FHIRPath and search see doubles); the text of each
 * number whose literal is not what `String(value)` gives back is recorded beside it, in a Map under the
 * symbol LITERALS on the object or array that holds it (its member name or index to its literal), and
 * written back as that literal by stringifyExact (`JSON.rawJSON`). Every object or array that holds
 * such a number at any depth carries the Map (an empty one when only its descendants hold them), so
 * that a resource without any costs one property test on its way out. A symbol-keyed member is not
 * seen by JSON.stringify, `for...in`, Object.keys or structuredClone, and object spreads and rest
 * patterns copy it: `{ ...resource, id }` keeps the literals.
 *
 * Only text that holds such a literal (scanJson, one pass over its characters outside strings, which
 * also measures its nesting) is parsed with the reviver that records them (TC39 "JSON.parse source
 * text access"), several times slower than plain JSON.parse; the common text pays for the scan alone.
 */

const LITERALS: unique symbol = Symbol('cinder.numberLiterals');

/** An object or array that may carry the literals of its numbers. */
type Holder = { [LITERALS]?: Map<string, string> };

/** What the reviver's third argument carries (TC39 JSON.parse source text access). */
type ReviverContext = { source?: string };

const rawJSON = (JSON as unknown as { rawJSON(text: string): unknown }).rawJSON;

/** What scanJson finds in JSON text. */
export interface JsonScan {
  /** How deep objects and arrays nest (0: a lone value). */
  depth: number;
  /** Whether a number is written otherwise than String writes the value JSON.parse reads (`98.60`, `1e2`, `-0`). */
  literals: boolean;
}

/**
 * One pass over JSON text, strings skipped (to their closing quote, past escaped ones): its nesting,
 * and whether one of its number literals is not String's text of its value, the exact test the
 * reviver makes. Text that is not JSON gives some answer; JSON.parse is the judge of it.
 */
export function scanJson(text: string): JsonScan {
  let depth = 0;
  let deepest = 0;
  let literals = false;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 34) {
      // A string: its closing quote is the first one after an even number of backslashes.
      let end = text.indexOf('"', i + 1);
      while (end > 0 && text.charCodeAt(end - 1) === 92) {
        let k = end - 2;
        while (text.charCodeAt(k) === 92) k--;
        if ((end - k) % 2 === 1) break;
        end = text.indexOf('"', end + 1);
      }
      if (end < 0) break;
      i = end;
    } else if (c > 44) {
      // Below 45: whitespace and `,`. Outside strings `-` and digits start numbers, and nothing else holds them.
      if (c <= 57) {
        if (c === 46 || c === 47) continue;
        let end = i + 1;
        for (; end < n; end++) {
          const d = text.charCodeAt(end);
          if (!((d >= 48 && d <= 57) || d === 46 || d === 101 || d === 69 || d === 43 || d === 45)) break;
        }
        if (!literals) {
          const literal = text.slice(i, end);
          literals = String(+literal) !== literal;
        }
        i = end - 1;
      } else if (c === 123 || c === 91) {
        if (++depth > deepest) deepest = depth;
      } else if (c === 125 || c === 93) depth--;
    }
  }
  return { depth: deepest, literals };
}

function literalsOf(holder: Holder): Map<string, string> {
  return (holder[LITERALS] ??= new Map());
}

/** The reviver: records the literal of each number that String would write otherwise; marks the holders above. */
function record(this: unknown, key: string, value: unknown, context?: ReviverContext): unknown {
  if (typeof value === 'number') {
    const source = context?.source;
    if (source !== undefined && String(value) !== source) literalsOf(this as Holder).set(key, source);
  } else if (value !== null && typeof value === 'object' && (value as Holder)[LITERALS] !== undefined) {
    literalsOf(this as Holder);
  }
  return value;
}

/**
 * JSON.parse(text), the literals of its numbers recorded where String would not write them back
 * (`scan`: scanJson's of the text, when the caller has it). Throws as JSON.parse does.
 */
export function parseExact(text: string, scan: JsonScan = scanJson(text)): unknown {
  return scan.literals ? JSON.parse(text, record as (key: string, value: unknown) => unknown) : JSON.parse(text);
}

/** Whether `value` (an object or array) holds a recorded literal, itself or below. */
export function holdsLiterals(value: unknown): boolean {
  return value !== null && typeof value === 'object' && (value as Holder)[LITERALS] !== undefined;
}

/** Whether `value` or, for a Bundle assembled from parsed resources, one of its entries holds a literal. */
function needsLiterals(value: unknown): boolean {
  if (holdsLiterals(value)) return true;
  const entry = value !== null && typeof value === 'object' ? (value as { entry?: unknown }).entry : undefined;
  return Array.isArray(entry) && entry.some((e) => holdsLiterals(e) || holdsLiterals((e as { resource?: unknown } | null)?.resource));
}

/** The replacer: a number with its recorded literal, when that literal still reads as the number held. */
function restore(this: Holder, key: string, value: unknown): unknown {
  if (typeof value !== 'number') return value;
  const literal = this[LITERALS]?.get(key);
  return literal !== undefined && Object.is(Number(literal), value) ? rawJSON(literal) : value;
}

/**
 * JSON.stringify(value, null, space), writing recorded numbers as their literals. A literal whose
 * number was changed since (a patch) is dropped: the number is written as String writes it.
 */
export function stringifyExact(value: unknown, space?: number): string {
  return needsLiterals(value) ? JSON.stringify(value, restore as (key: string, value: unknown) => unknown, space) : JSON.stringify(value, null, space);
}

/** The recorded literal of the number at `holder[key]`, if any (none: String(value) is its text). */
export function literalOf(holder: unknown, key: string | number): string | undefined {
  return holder !== null && typeof holder === 'object' ? (holder as Holder)[LITERALS]?.get(String(key)) : undefined;
}

/**
 * Records `literal` as the text of the number at `holder[key]`, or forgets the one recorded there
 * (undefined). The Map is replaced, not changed: copies made by spreads share it. The holders above
 * learn of it through refreshLiterals.
 */
export function setLiteral(holder: object, key: string | number, literal: string | undefined): void {
  const h = holder as Holder;
  const own = h[LITERALS];
  const k = String(key);
  if (literal === undefined && !own?.has(k)) return;
  const next = new Map(own);
  if (literal === undefined) next.delete(k);
  else next.set(k, literal);
  h[LITERALS] = next;
}

/** Gives `to` (a copy of some of `from`'s members) the literals of `from`'s own numbers. */
export function carryLiterals(from: unknown, to: object): void {
  const own = (from as Holder | null)?.[LITERALS];
  if (own !== undefined) (to as Holder)[LITERALS] = own;
}

/**
 * `array.splice(start, deleteCount, ...items)` with the literals of the array's numbers kept at their
 * items as they move; `literals[i]` is the literal of `items[i]` (a number's), if any.
 */
export function spliceExact(array: unknown[], start: number, deleteCount: number, items: unknown[] = [], literals: (string | undefined)[] = []): unknown[] {
  const own = (array as Holder)[LITERALS];
  const removed = array.splice(start, deleteCount, ...items);
  if (own === undefined && literals.every((l) => l === undefined)) return removed;
  const next = new Map<string, string>();
  for (const [k, literal] of own ?? []) {
    const i = Number(k);
    if (i < start) next.set(k, literal);
    else if (i >= start + deleteCount) next.set(String(i - deleteCount + items.length), literal);
  }
  literals.forEach((literal, j) => literal !== undefined && next.set(String(start + j), literal));
  (array as Holder)[LITERALS] = next;
  return removed;
}

/** A deep copy of a JSON value with its recorded literals (structuredClone drops symbol-keyed members). */
export function cloneExact<T>(value: T): T {
  if (value === null || typeof value !== 'object') return value;
  let out: Record<string, unknown> | unknown[];
  if (Array.isArray(value)) out = value.map(cloneExact);
  else {
    out = {};
    for (const key in value) {
      const v = cloneExact((value as Record<string, unknown>)[key]);
      // A member named `__proto__` (JSON.parse makes it an own member) stays one.
      if (key === '__proto__') Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true });
      else out[key] = v;
    }
  }
  const own = (value as Holder)[LITERALS];
  if (own !== undefined) (out as Holder)[LITERALS] = new Map(own);
  return out as T;
}

/**
 * Marks every object and array of `value` that holds a recorded literal below it (after values were
 * moved in: a patch), as parseExact marks them; returns whether `value` holds any.
 */
export function refreshLiterals(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  let below = false;
  if (Array.isArray(value)) {
    for (const item of value) if (refreshLiterals(item)) below = true;
  } else {
    for (const key in value) if (refreshLiterals((value as Record<string, unknown>)[key])) below = true;
  }
  const own = (value as Holder)[LITERALS];
  if (own !== undefined && own.size > 0) return true;
  if (below) literalsOf(value as Holder);
  else if (own !== undefined) delete (value as Holder)[LITERALS];
  return below;
}

/**
 * JSON text parsed with every number as its literal (a JSON.rawJSON object, compared by its text), for
 * comparing two texts as JSON values whose numbers differ when written differently (`1.0` and `1`).
 */
export function parseLiterally(text: string): unknown {
  return JSON.parse(text, ((_key: string, value: unknown, context?: ReviverContext) =>
    typeof value === 'number' && context?.source !== undefined ? rawJSON(context.source) : value) as (key: string, value: unknown) => unknown);
}
