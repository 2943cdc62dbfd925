/**
 * JSON numbers kept as they were written. FHIR R4 datatypes.html (decimal): "0.010 is regarded as
 * different to 0.01, and the original precision should be preserved", and json.html warns that a
 * JSON parser that reads numbers as binary floating point loses it. JSON.parse does: `98.60` reads as
 * 98.6, `12345678901234567890.5` as 12345678901234567000, `0.00000000000000000000000001` as 1e-26.
 *
 * The values stay numbers (validation, indexing, FHIRPath and search see doubles); the text of each
 * number whose literal is not what `String(value)` gives back is recorded beside it, in a Map for the
 * object or array that holds it (its member name or index to its literal: LITERALS), and written back as
 * that literal by stringifyExact (`JSON.rawJSON`). Every object or array that holds such a number at
 * any depth has a Map (an empty one when only its descendants hold them), so that a resource without
 * any costs one lookup on its way out. A copy of an object is a new object: code that copies a
 * resource between its parse and its stored text (`{ ...resource, id }`, a rest pattern) gives the
 * copy the original's literals (carryLiterals), and deep copies are made by cloneExact.
 *
 * Text is scanned once (scanJson: its characters outside strings, which also measures its nesting);
 * only text that holds such a literal is walked again, in step with what JSON.parse made of it, to
 * record them (recordLiterals). The common text pays for the scan alone.
 */

/**
 * The literals of each object or array that holds numbers written otherwise than String writes them,
 * by member name or index; an empty Map on one that holds such numbers only below it. A side table
 * keyed by the objects (as validation's cache of valid resources): it adds no member to them, so the
 * code that walks resources sees the same objects whether they hold literals or not (a symbol-keyed
 * member, tried first, made the validator and indexer slower for every resource once some held one).
 */
const LITERALS = new WeakMap<object, Map<string, string>>();

/** An object or array that may have literals in LITERALS. */
type Holder = object;

/** What a reviver's third argument carries (TC39 JSON.parse source text access). */
type ReviverContext = { source?: string };

const rawJSON = (JSON as unknown as { rawJSON(text: string): unknown }).rawJSON;

/** What scanJson finds in JSON text. */
export interface JsonScan {
  /** How deep objects and arrays nest (0: a lone value). */
  depth: number;
  /** Whether a number is written otherwise than String writes the value JSON.parse reads (`98.60`, `1e2`, `-0`). */
  literals: boolean;
  /** With `keys`: the index of the first member name an object gives twice (the opening quote of its second one), else -1. */
  duplicate: number;
}

/** The index of the quote that closes the string opened at `start`: the first one after an even number of backslashes (-1: none). */
export function stringEnd(text: string, start: number): number {
  let end = text.indexOf('"', start + 1);
  while (end > 0 && text.charCodeAt(end - 1) === 92) {
    let k = end - 2;
    while (text.charCodeAt(k) === 92) k--;
    if ((end - k) % 2 === 1) break;
    end = text.indexOf('"', end + 1);
  }
  return end;
}

/** The index after the number literal that starts at `start` (digits, `.`, `e`, `E`, `+`, `-`). */
function numberEnd(text: string, start: number): number {
  let end = start + 1;
  for (; end < text.length; end++) {
    const d = text.charCodeAt(end);
    if (!((d >= 48 && d <= 57) || d === 46 || d === 101 || d === 69 || d === 43 || d === 45)) break;
  }
  return end;
}

/** Whether a number literal is not what String writes of the value JSON.parse reads from it. */
const rewritten = (literal: string) => String(+literal) !== literal;

/**
 * One pass over JSON text, strings skipped: its nesting, and whether one of its number literals is
 * not String's text of its value; with `keys`, also the first member name an object gives twice (FHIR R4
 * json.html: "Property names SHALL be unique"; JSON.parse keeps the last silently). Text that is not JSON
 * gives some answer; JSON.parse is the judge of it.
 *
 * Names are found as the strings before a `:` and kept as positions in the text (start and length, in
 * typed arrays: no string is made), one stack for every open object, each object's part beginning where
 * its level says (`firsts`); a name is compared with its object's earlier ones by length, then character
 * by character. An object with more than NAMES_COMPARED names is checked through a Set of them from then
 * on, so a huge object costs linear time. Names are compared as written, which is exact for names without
 * escapes; should any name hold one (`"\\u0069d"` is `id`), the text is checked again by the names as
 * JSON.parse reads them (duplicateDecoded), which no FHIR JSON needs. The check is inline, not a method
 * per name: calls cost three times as much (ARCHITECTURE.md, Request bodies). A scan may also be read in
 * slices (startScan, scanTo, scanResult): the same answer.
 */
export function scanJson(text: string, keys = false): JsonScan {
  const scan = startScan(keys, false);
  scanTo(text, scan, text.length);
  return scanResult(text, scan);
}

/**
 * Where scanJson is in a text, between two calls of scanTo: a scan read in slices (src/fhir/json-paced.ts)
 * lets the event loop turn between them. A scan of its own (`own`) has stacks of its own, as a paused scan
 * must: the shared ones (NAME_STARTS...) are another scan's as soon as the loop turns.
 */
export interface ScanState {
  readonly keys: boolean;
  readonly own: boolean;
  /** The index of the next character to read (at least the text's length once the scan is done). */
  at: number;
  depth: number;
  deepest: number;
  literals: boolean;
  starts: Int32Array<ArrayBuffer>;
  lengths: Int32Array<ArrayBuffer>;
  firsts: Int32Array<ArrayBuffer>;
  /** The Sets of the open objects with many names, by level (few texts have any: never read while empty). */
  sets: Map<number, Set<string>>;
  named: number;
  found: number;
  escaped: boolean;
  /** -2: not looked for yet (the first slice looks). */
  backslash: number;
  stringStart: number;
  stringClose: number;
}

/** A scan at the start of a text; `own`: with stacks of its own, for a scan that pauses. */
export function startScan(keys: boolean, own: boolean): ScanState {
  const stacks = !keys ? [EMPTY, EMPTY, EMPTY] : own ? [new Int32Array(256), new Int32Array(256), new Int32Array(64)] : [NAME_STARTS, NAME_LENGTHS, LEVEL_FIRSTS];
  return {
    keys, own, at: 0, depth: 0, deepest: 0, literals: false, starts: stacks[0]!, lengths: stacks[1]!, firsts: stacks[2]!,
    sets: new Map(), named: 0, found: -1, escaped: false, backslash: -2, stringStart: -1, stringClose: -1,
  };
}

/**
 * Reads `text` from where `s` is to about `limit` (a string or number that crosses it is read whole);
 * returns whether the text is read to its end.
 */
export function scanTo(text: string, s: ScanState, limit: number): boolean {
  // The hot loop works on locals, written back once at the end of the slice.
  const keys = s.keys;
  let { depth, deepest, literals, starts, lengths, firsts, named, found, escaped, backslash, stringStart, stringClose } = s;
  const sets = s.sets;
  if (backslash === -2) backslash = keys ? text.indexOf('\\') : -1;
  const n = Math.min(limit, text.length);
  let i = s.at;
  for (; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 34) {
      stringStart = i;
      i = stringClose = stringEnd(text, i);
      if (i < 0) {
        i = text.length;
        break;
      }
    } else if (c > 44) {
      // Below 45: whitespace and `,`. Outside strings `-` and digits start numbers, and nothing else holds them.
      if (c <= 57) {
        if (c === 46 || c === 47) continue;
        const end = numberEnd(text, i);
        if (!literals) literals = rewritten(text.slice(i, end));
        i = end - 1;
      } else if (c === 58) {
        if (!keys || found >= 0 || depth <= 0 || depth >= firsts.length) continue;
        const start = stringStart + 1;
        const length = stringClose - start;
        if (backslash >= 0) {
          if (backslash < start) backslash = text.indexOf('\\', start);
          if (backslash >= 0 && backslash < stringClose) escaped = true;
        }
        const first = firsts[depth]!;
        // Once an object has NAMES_COMPARED names it keeps having them, and its Set holds them all.
        if (named - first >= NAMES_COMPARED) {
          let names = sets.get(depth);
          if (names === undefined) sets.set(depth, (names = namesOf(text, starts, lengths, first, named)));
          const name = text.slice(start, stringClose);
          if (names.has(name)) found = stringStart;
          names.add(name);
        } else {
          for (let k = first; k < named; k++) {
            if (lengths[k] !== length) continue;
            const other = starts[k]!;
            let j = 0;
            while (j < length && text.charCodeAt(other + j) === text.charCodeAt(start + j)) j++;
            if (j === length) {
              found = stringStart;
              break;
            }
          }
        }
        if (named === starts.length) {
          starts = grown(starts);
          lengths = grown(lengths);
        }
        starts[named] = start;
        lengths[named++] = length;
      } else if (c === 123 || c === 91) {
        if (++depth > deepest) deepest = depth;
        if (keys) {
          if (depth >= firsts.length && depth <= MAX_NAME_DEPTH) firsts = grown(firsts);
          if (depth < firsts.length) firsts[depth] = named;
          if (sets.size > 0) sets.delete(depth);
        }
      } else if (c === 125 || c === 93) {
        if (keys && depth > 0 && depth < firsts.length) named = firsts[depth]!;
        depth--;
      }
    }
  }
  s.at = i;
  s.depth = depth;
  s.deepest = deepest;
  s.literals = literals;
  s.starts = starts;
  s.lengths = lengths;
  s.firsts = firsts;
  s.named = named;
  s.found = found;
  s.escaped = escaped;
  s.backslash = backslash;
  s.stringStart = stringStart;
  s.stringClose = stringClose;
  return i >= text.length;
}

/**
 * What a scan read to the end of `text` found; a shared scan hands its stacks, grown perhaps, to the next.
 * `decoded`: duplicateDecoded's answer, when the caller found it (in slices: startDecoded, decodedTo).
 */
export function scanResult(text: string, s: ScanState, decoded?: number): JsonScan {
  const duplicate = s.escaped ? (decoded ?? duplicateDecoded(text)) : s.found;
  if (s.keys && !s.own) {
    NAME_STARTS = s.starts;
    NAME_LENGTHS = s.lengths;
    LEVEL_FIRSTS = s.firsts;
  }
  return { depth: s.deepest, literals: s.literals, duplicate };
}

/** An object's names are compared one by one up to this many; from it on, through a Set of them. */
const NAMES_COMPARED = 32;

/**
 * The deepest level whose names scanJson checks: a text nested deeper is refused for its depth anyway
 * (MAX_JSON_DEPTH in src/fhir/resource.ts), so the stacks need not grow with a hostile nesting.
 */
const MAX_NAME_DEPTH = 4096;

const EMPTY = new Int32Array(0);
/** scanJson's stacks of names (positions and lengths) and of where each level's names begin, reused. */
let NAME_STARTS = new Int32Array(1024);
let NAME_LENGTHS = new Int32Array(1024);
let LEVEL_FIRSTS = new Int32Array(256);

/** A copy of `a` twice its size. */
function grown(a: Int32Array<ArrayBuffer>): Int32Array<ArrayBuffer> {
  const b = new Int32Array(a.length * 2);
  b.set(a);
  return b;
}

/** The names from `first` to `named` on scanJson's stack, as strings. */
function namesOf(text: string, starts: Int32Array, lengths: Int32Array, first: number, named: number): Set<string> {
  const names = new Set<string>();
  for (let k = first; k < named; k++) names.add(text.slice(starts[k]!, starts[k]! + lengths[k]!));
  return names;
}

/** A member name as JSON.parse reads it: the text between its quotes, its escapes read when it has any. */
function nameAt(text: string, start: number, end: number): string {
  const raw = text.slice(start + 1, end);
  if (!raw.includes('\\')) return raw;
  try {
    return JSON.parse(text.slice(start, end + 1)) as string;
  } catch {
    return raw;
  }
}

/**
 * The opening quote of the first member name an object gives twice, names read as JSON.parse reads them
 * (escapes and all), or -1: scanJson's check for text whose names hold escapes, one Set per open object.
 */
function duplicateDecoded(text: string): number {
  const s = startDecoded();
  decodedTo(text, s, text.length);
  return s.found;
}

/** Where duplicateDecoded is in a text, for a check read in slices (src/fhir/json-paced.ts): `found` once `done`. */
export interface DecodedState {
  at: number;
  depth: number;
  sets: (Set<string> | undefined)[];
  stringStart: number;
  stringClose: number;
  found: number;
  done: boolean;
}

export function startDecoded(): DecodedState {
  return { at: 0, depth: 0, sets: [], stringStart: -1, stringClose: -1, found: -1, done: false };
}

/** Reads `text` from where `s` is to about `limit` (a string that crosses it is read whole); returns whether the check is done. */
export function decodedTo(text: string, s: DecodedState, limit: number): boolean {
  const sets = s.sets;
  let { depth, stringStart, stringClose } = s;
  const n = Math.min(limit, text.length);
  let i = s.at;
  for (; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 34) {
      stringStart = i;
      i = stringClose = stringEnd(text, i);
      if (i < 0) {
        s.done = true;
        return true;
      }
    } else if (c === 123 || c === 91) {
      sets[++depth] = undefined;
    } else if (c === 125 || c === 93) {
      depth--;
    } else if (c === 58 && depth > 0) {
      const name = nameAt(text, stringStart, stringClose);
      const names = (sets[depth] ??= new Set());
      if (names.has(name)) {
        s.found = stringStart;
        s.done = true;
        return true;
      }
      names.add(name);
    }
  }
  Object.assign(s, { at: i, depth, stringStart, stringClose });
  if (i >= text.length) s.done = true;
  return s.done;
}

/**
 * Where in `text` the member name whose opening quote is at `at` is, as a path of names and indexes
 * (`entry[2].resource.id`), and the name: the walk of scanJson up to it, remembering each open container's current
 * name or item. For an error message, so it runs only once a duplicate is found.
 */
export function memberPath(text: string, at: number): { path: string; name: string } {
  const where = new JsonSteps();
  for (let i = 0; i < at; i++) {
    const c = text.charCodeAt(i);
    if (c === 34) {
      const end = stringEnd(text, i);
      if (end < 0) break;
      if (where.expectName) where.named(nameAt(text, i, end));
      i = end;
    } else where.structural(c);
  }
  const name = nameAt(text, at, stringEnd(text, at));
  where.steps[where.level] = name;
  return { path: where.path(), name };
}

/**
 * Where a scan of JSON text has come to: the steps to it (members' names, arrays' positions) by level, moved by the
 * structural characters outside strings and by the names read (memberPath, openStringPath).
 */
class JsonSteps {
  readonly steps: (string | number)[] = [];
  private readonly arrays: boolean[] = [];
  level = -1;
  /** Whether the next string is a member's name (after `{` or a member's `,`). */
  expectName = false;

  /** Moves past `c` when it is `{`, `[`, `}`, `]` or `,`; any other character leaves it where it is. */
  structural(c: number): void {
    if (c === 123 || c === 91) {
      this.level++;
      this.arrays[this.level] = c === 91;
      this.steps[this.level] = 0;
      this.expectName = c === 123;
    } else if (c === 125 || c === 93) {
      this.level--;
      this.expectName = false;
    } else if (c === 44) {
      if (this.arrays[this.level]) (this.steps[this.level] as number)++;
      else this.expectName = true;
    }
  }

  /** A member's name read where one was expected. */
  named(name: string): void {
    this.steps[this.level] = name;
    this.expectName = false;
  }

  /** Whether the scan is in the root object's value of `member`. */
  atRootMember(member: string): boolean {
    return this.level === 0 && !this.arrays[0] && this.steps[0] === member;
  }

  /** The path of the steps: names joined by dots, array positions in brackets (`name[0].family`). */
  path(): string {
    let path = '';
    for (let l = 0; l <= this.level; l++) {
      const step = this.steps[l]!;
      path += typeof step === 'number' ? `[${step}]` : path === '' ? step : `.${step}`;
    }
    return path;
  }
}

/**
 * The element whose string `text` ends inside (the text of a JSON document cut at some character of a string):
 * its path (`name[0].family`, a member's name or an array's item), led by the root's resourceType when that was
 * given before (`Patient.name[0].family`); undefined when `text` does not end inside a string. For an error
 * message (a byte that is not UTF-8), so it runs only once one is found.
 */
export function openStringPath(text: string): string | undefined {
  const where = new JsonSteps();
  let type: string | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 34) {
      const end = stringEnd(text, i);
      if (end < 0) {
        if (where.expectName || where.level < 0) return undefined;
        const path = where.path();
        return type !== undefined && /^[A-Z][A-Za-z]*$/.test(type) ? `${type}.${path}` : path;
      }
      if (where.expectName) where.named(nameAt(text, i, end));
      else if (where.atRootMember('resourceType')) type = nameAt(text, i, end);
      i = end;
    } else where.structural(c);
  }
  return undefined;
}

function literalsOf(holder: Holder): Map<string, string> {
  let own = LITERALS.get(holder);
  if (own === undefined) LITERALS.set(holder, (own = new Map()));
  return own;
}

/**
 * Records on `root`, what JSON.parse made of `text`, the literal of each number that String would not
 * write back, walking the text in step with the values: the containers entered are levels, each
 * reached from the one around it by the member its last key named (or the item its commas count), and
 * looked up only when a number in them needs it. The holders around a recorded number are marked. A key
 * given twice (JSON.parse keeps the last) is told by the value: a literal is recorded only where the
 * value held reads as it, and once any is recorded a number written as String writes it forgets what an
 * earlier one of its key recorded.
 */
export function recordLiterals(text: string, root: Holder): void {
  // Per level (0: the root's container): whether an array, its current item or the current key's quotes, and the container once looked up.
  const arrays: boolean[] = [];
  const items: number[] = [];
  const keyStarts: number[] = [];
  const keyEnds: number[] = [];
  const holders: (Holder | undefined)[] = [];
  let level = -1;
  let expectKey = false;
  let recorded = false;
  const keyAt = (l: number): string => {
    if (arrays[l]) return String(items[l]);
    const raw = text.slice(keyStarts[l]!, keyEnds[l]! + 1);
    return raw.includes('\\') ? (JSON.parse(raw) as string) : raw.slice(1, -1);
  };
  const holderAt = (l: number): Holder | undefined => {
    let h = holders[l];
    if (h === undefined) {
      const outer = l === 0 ? undefined : holderAt(l - 1);
      h = l === 0 ? root : ((outer as Record<string, unknown> | undefined)?.[keyAt(l - 1)] as Holder | undefined);
      if (h === null || typeof h !== 'object') return undefined;
      holders[l] = h;
    }
    return h;
  };
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c <= 32 || c === 58) continue;
    if (c === 34) {
      const end = stringEnd(text, i);
      if (end < 0) return;
      if (expectKey) {
        keyStarts[level] = i;
        keyEnds[level] = end;
        expectKey = false;
      }
      i = end;
    } else if (c === 123 || c === 91) {
      level++;
      arrays[level] = c === 91;
      items[level] = 0;
      holders[level] = undefined;
      expectKey = c === 123;
    } else if (c === 125 || c === 93) {
      level--;
      expectKey = false;
    } else if (c === 44) {
      if (arrays[level]) items[level]!++;
      else expectKey = true;
    } else if (c === 45 || (c >= 48 && c <= 57)) {
      const end = numberEnd(text, i);
      const literal = text.slice(i, end);
      i = end - 1;
      if (level < 0) continue;
      const change = rewritten(literal);
      if (!change && !recorded) continue;
      const holder = holderAt(level);
      if (holder === undefined) continue;
      const key = keyAt(level);
      if (!change) {
        LITERALS.get(holder)?.delete(key);
      } else if (Object.is((holder as Record<string, unknown>)[key], +literal)) {
        recorded = true;
        literalsOf(holder).set(key, literal);
        // Whatever holds a Map has every holder around it marked, so the marking stops at the first.
        for (let l = level - 1; l >= 0; l--) {
          const h = holderAt(l)!;
          if (LITERALS.has(h)) break;
          LITERALS.set(h, new Map());
        }
      }
    }
  }
}

/**
 * JSON.parse(text), the literals of its numbers recorded where String would not write them back
 * (`scan`: scanJson's of the text, when the caller has it). Throws as JSON.parse does.
 */
export function parseExact(text: string, scan: JsonScan = scanJson(text)): unknown {
  const value: unknown = JSON.parse(text);
  if (scan.literals && value !== null && typeof value === 'object') recordLiterals(text, value as Holder);
  return value;
}

/** Whether `value` (an object or array) holds a recorded literal, itself or below. */
export function holdsLiterals(value: unknown): boolean {
  return value !== null && typeof value === 'object' && LITERALS.has(value);
}

/** Whether `value` or, for a Bundle assembled from parsed resources, one of its entries holds a literal. */
function needsLiterals(value: unknown): boolean {
  if (holdsLiterals(value)) return true;
  const entry = value !== null && typeof value === 'object' ? (value as { entry?: unknown }).entry : undefined;
  return Array.isArray(entry) && entry.some((e) => holdsLiterals(e) || holdsLiterals((e as { resource?: unknown } | null)?.resource));
}

/**
 * For a reader that builds values itself (FHIR XML, src/fhir/xml/from-xml.ts) rather than through
 * parseExact: records `literal` as the text of the number at `holder[key]`, or, without them, marks
 * `holder` as one whose descendants hold literals. For new values only, that no copy shares yet; the
 * reader marks every holder on the way up, as recordLiterals does.
 */
export function recordLiteral(holder: object, key?: string | number, literal?: string): void {
  const own = literalsOf(holder);
  if (key !== undefined && literal !== undefined) own.set(String(key), literal);
}

/** The replacer: a number with its recorded literal, when that literal still reads as the number held. */
function restore(this: Holder, key: string, value: unknown): unknown {
  if (typeof value !== 'number') return value;
  const literal = LITERALS.get(this)?.get(key);
  return literal !== undefined && Object.is(Number(literal), value) ? rawJSON(literal) : value;
}

/**
 * JSON.stringify(value, null, space), writing recorded numbers as their literals. A literal whose
 * number was changed since (a patch) is dropped: the number is written as String writes it.
 */
export function stringifyExact(value: unknown, space?: number): string {
  return needsLiterals(value) ? JSON.stringify(value, restore as (key: string, value: unknown) => unknown, space) : JSON.stringify(value, null, space);
}

/**
 * stringifyExact with every string that `swap` answers for written as its answer instead (a marker standing for a large
 * string: resource.ts membersText). The replacer runs for every value, so only for values known to need it.
 */
export function stringifyExactSwapping(value: unknown, swap: (s: string) => string | undefined): string {
  const literals = needsLiterals(value);
  return JSON.stringify(value, function (this: Holder, key: string, v: unknown): unknown {
    if (typeof v === 'string') return swap(v) ?? v;
    return literals ? restore.call(this, key, v) : v;
  });
}

/** The recorded literal of the number at `holder[key]`, if any (none: String(value) is its text). */
export function literalOf(holder: unknown, key: string | number): string | undefined {
  return holder !== null && typeof holder === 'object' ? LITERALS.get(holder)?.get(String(key)) : undefined;
}

/**
 * Records `literal` as the text of the number at `holder[key]`, or forgets the one recorded there
 * (undefined). The Map is replaced, not changed: copies given it by carryLiterals share it. The holders
 * above learn of it through refreshLiterals.
 */
export function setLiteral(holder: object, key: string | number, literal: string | undefined): void {
  const own = LITERALS.get(holder);
  const k = String(key);
  if (literal === undefined && !own?.has(k)) return;
  const next = new Map(own);
  if (literal === undefined) next.delete(k);
  else next.set(k, literal);
  LITERALS.set(holder, next);
}

/** Gives `to`, a copy of some of `from`'s members (a spread, a rest pattern), the literals of `from`'s own numbers, and returns it. */
export function carryLiterals<T extends object>(from: unknown, to: T): T {
  const own = from !== null && typeof from === 'object' ? LITERALS.get(from) : undefined;
  if (own !== undefined) LITERALS.set(to, own);
  return to;
}

/**
 * `array.splice(start, deleteCount, ...items)` with the literals of the array's numbers kept at their
 * items as they move; `literals[i]` is the literal of `items[i]` (a number's), if any.
 */
export function spliceExact(array: unknown[], start: number, deleteCount: number, items: unknown[] = [], literals: (string | undefined)[] = []): unknown[] {
  const own = LITERALS.get(array);
  const removed = array.splice(start, deleteCount, ...items);
  if (own === undefined && literals.every((l) => l === undefined)) return removed;
  const next = new Map<string, string>();
  for (const [k, literal] of own ?? []) {
    const i = Number(k);
    if (i < start) next.set(k, literal);
    else if (i >= start + deleteCount) next.set(String(i - deleteCount + items.length), literal);
  }
  literals.forEach((literal, j) => literal !== undefined && next.set(String(start + j), literal));
  LITERALS.set(array, next);
  return removed;
}

/** A deep copy of a JSON value with its recorded literals (structuredClone's copy has none). */
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
  const own = LITERALS.get(value);
  if (own !== undefined) LITERALS.set(out, new Map(own));
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
  const own = LITERALS.get(value);
  if (own !== undefined && own.size > 0) return true;
  if (below) literalsOf(value);
  else if (own !== undefined) LITERALS.delete(value);
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
