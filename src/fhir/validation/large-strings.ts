import { nextTurn, pacedTurns, WORK_SLICE_MS } from '../turns.ts';
import { NOT_CARRIED } from './characters.ts';

/**
 * Strings longer than this (UTF-16 code units) are read in slices before a resource is validated
 * (primeStrings), so that the character and base64 checks of a large value (a Binary's `data`: 67 Mi
 * characters for 50 MiB of content) let the event loop turn; shorter ones are checked as they are met.
 */
export const LARGE_STRING = 256 * 1024;

/** Characters below U+0020 other than tab, line feed and carriage return (datatypes.html#string). */
export const CONTROL_CHARACTER = /[\u0000-\u0008\u000B\u000C\u000E-\u001F]/;
/** Noncharacters XML 1.0 does not allow (section 2.2). */
export const NOT_IN_XML = /[\uFFFE\uFFFF]/;
/** Whitespace base64Binary allows between its characters (as the check has always read it: JavaScript's \s). */
export const WHITESPACE = /\s+/g;
const BASE64_HEAD = /^[A-Za-z0-9+/]*(=*)$/;
const PADDING = /^=*$/;

/** What the validator asks of a string, whatever its type: the answers of the checks in primitives.ts and codings.ts. */
export interface StringProfile {
  /** `isWellFormed()`: no unpaired surrogate. */
  wellFormed: boolean;
  /** NOT_IN_XML finds a character. */
  nonCharacter: boolean;
  /** CONTROL_CHARACTER finds a character. */
  control: boolean;
  /** The first character NOT_CARRIED finds (characters.ts), if any. */
  notCarried: string | undefined;
  /** Valid base64 (RFC 4648, padded): whitespace aside, the alphabet and at most two `=` at the end, a multiple of 4. */
  base64: boolean;
  /** base64Bytes's answer (codings.ts). */
  base64Bytes: number | undefined;
}

/** A string read in slices and what it holds. */
export interface Primed {
  value: string;
  profile: StringProfile;
}

/** The strings primed for the validation running now (withPrimed): a validation is synchronous, so it is the only one. */
let active: readonly Primed[] = [];

/**
 * The profile of `v` when it is one of the strings primed for the validation running now; undefined
 * otherwise (a short string, or a validation not primed), and the caller checks `v` itself. Strings are
 * compared by identity first, which costs nothing for the value the walk found.
 */
export function primed(v: string): StringProfile | undefined {
  if (v.length <= LARGE_STRING) return undefined;
  for (const p of active) if (p.value === v) return p.profile;
  return undefined;
}

/** Runs `validate` (synchronous) with `strings` primed. */
export function withPrimed<T>(strings: readonly Primed[], validate: () => T): T {
  if (strings.length === 0) return validate();
  const outer = active;
  active = strings;
  try {
    return validate();
  } finally {
    active = outer;
  }
}

/**
 * The number of bytes base64 text decodes to, counting its alphabet and padding alone (whitespace is
 * allowed between them; anything else is the primitive check's to refuse); undefined when they do not
 * make whole groups of four.
 */
export function base64Bytes(text: string): number | undefined {
  const { chars, padding } = base64Counts(text, 0, text.length, { chars: 0, padding: 0 });
  if ((chars + padding) % 4 !== 0 || padding > 2) return undefined;
  return ((chars + padding) / 4) * 3 - padding;
}

function base64Counts(text: string, from: number, to: number, counts: { chars: number; padding: number }): { chars: number; padding: number } {
  let { chars, padding } = counts;
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x3d) padding++;
    else if ((c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x2b || c === 0x2f) chars++;
  }
  return { chars, padding };
}

/** How many values a walk for large strings reads before it lets the event loop turn (or, at first, gives up being synchronous). */
const WALK_STEPS = 1024;

/**
 * The strings longer than LARGE_STRING in `value` (member names aside) when a walk of WALK_STEPS values finds
 * them all, undefined when there is more to walk: the walk of most resources, which holds none, costs no promise.
 */
function largeStringsNow(value: unknown): string[] | undefined {
  const found: string[] = [];
  let steps = 0;
  const visit = (v: unknown): boolean => {
    if (typeof v === 'string') {
      if (v.length > LARGE_STRING) found.push(v);
      return true;
    }
    return v === null || typeof v !== 'object' || walk(v);
  };
  const walk = (v: object): boolean => {
    if (++steps > WALK_STEPS) return false;
    if (Array.isArray(v)) {
      for (const item of v) if (!visit(item)) return false;
    } else {
      for (const key in v) if (!visit((v as Record<string, unknown>)[key])) return false;
    }
    return true;
  };
  return visit(value) ? found : undefined;
}

/** The strings longer than LARGE_STRING in `value` (member names aside), found with turns every WORK_SLICE_MS. */
async function largeStrings(value: unknown, pace: () => Promise<void> | undefined): Promise<string[]> {
  const found: string[] = [];
  const stack: unknown[] = [value];
  let steps = 0;
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') {
      if (v.length > LARGE_STRING) found.push(v);
    } else if (Array.isArray(v)) {
      for (const item of v) if (item !== null && typeof item !== 'number' && typeof item !== 'boolean') stack.push(item);
    } else if (v !== null && typeof v === 'object') {
      for (const key in v) {
        const item = (v as Record<string, unknown>)[key];
        if (item !== null && typeof item !== 'number' && typeof item !== 'boolean') stack.push(item);
      }
    }
    if (++steps % WALK_STEPS === 0) {
      const turn = pace();
      if (turn) await turn;
    }
  }
  return found;
}

/** Reads `v` in slices of LARGE_STRING, letting the loop turn between them as `pace` says. */
async function profileOf(v: string, pace: () => Promise<void> | undefined): Promise<StringProfile> {
  const p: StringProfile = { wellFormed: true, nonCharacter: false, control: false, notCarried: undefined, base64: true, base64Bytes: undefined };
  let compact = 0;
  let pads = 0;
  for (let at = 0; at < v.length; ) {
    let end = Math.min(at + LARGE_STRING, v.length);
    // A surrogate pair is never split between slices: each slice is well formed when the whole is.
    const last = v.charCodeAt(end - 1);
    if (end < v.length && last >= 0xd800 && last <= 0xdbff) end++;
    const slice = v.slice(at, end);
    if (p.wellFormed && !slice.isWellFormed()) p.wellFormed = false;
    if (!p.nonCharacter && NOT_IN_XML.test(slice)) p.nonCharacter = true;
    if (!p.control && CONTROL_CHARACTER.test(slice)) p.control = true;
    if (p.notCarried === undefined) p.notCarried = NOT_CARRIED.exec(slice)?.[0];
    if (p.base64) {
      // The text without whitespace is the alphabet then `=`: `=` alone once a slice has ended with one.
      const text = slice.replace(WHITESPACE, '');
      compact += text.length;
      if (pads === 0) {
        const m = BASE64_HEAD.exec(text);
        if (m === null) p.base64 = false;
        else pads = m[1]!.length;
      } else if (PADDING.test(text)) pads += text.length;
      else p.base64 = false;
    }
    at = end;
    const turn = pace();
    if (turn) await turn;
  }
  if (p.base64 && (pads > 2 || compact % 4 !== 0)) p.base64 = false;
  if (p.base64) p.base64Bytes = (compact / 4) * 3 - pads;
  else {
    // Not base64: base64Bytes counts the alphabet and `=` wherever they are, a slice at a time too.
    let counts = { chars: 0, padding: 0 };
    for (let at = 0; at < v.length; at += LARGE_STRING) {
      counts = base64Counts(v, at, Math.min(at + LARGE_STRING, v.length), counts);
      const turn = pace();
      if (turn) await turn;
    }
    p.base64Bytes = (counts.chars + counts.padding) % 4 !== 0 || counts.padding > 2 ? undefined : ((counts.chars + counts.padding) / 4) * 3 - counts.padding;
  }
  return p;
}

/** How primeStrings paces its work (the defaults: WORK_SLICE_MS, a macrotask). */
export interface StringPacing {
  budgetMs?: number;
  turn?: () => Promise<void>;
}

/**
 * The strings of `resource` longer than LARGE_STRING, each read in slices with turns of the event loop every
 * WORK_SLICE_MS, for a validation run withPrimed to answer from: the same answers as the checks give of the
 * whole string (test/unit/large-strings.test.ts), without holding the loop for one pass of a regular
 * expression over tens of megabytes (a 50 MiB Binary's checks held it about 160 ms).
 */
export function primeStrings(resource: unknown, pacing: StringPacing = {}): Primed[] | Promise<Primed[]> {
  const now = largeStringsNow(resource);
  // Most resources: a few hundred values, no large string, nothing to wait for.
  if (now !== undefined && now.length === 0) return [];
  return primeSlowly(resource, now, pacing);
}

async function primeSlowly(resource: unknown, found: string[] | undefined, pacing: StringPacing): Promise<Primed[]> {
  const pace = pacedTurns(pacing.budgetMs ?? WORK_SLICE_MS, pacing.turn ?? nextTurn);
  const strings = found ?? (await largeStrings(resource, pace));
  const out: Primed[] = [];
  for (const value of strings) out.push({ value, profile: await profileOf(value, pace) });
  return out;
}
