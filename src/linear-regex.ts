/**
 * `RegExp.prototype.test` in time linear in the input, for the patterns clients write (a ValueSet's
 * `regex` filter, FHIRPath `matches()` in a FHIRPath Patch): a pattern is compiled to a Thompson NFA and
 * run by keeping the set of states every prefix of the input can reach (as RE2 and Go's regexp do), so
 * `(a+)+$` costs the input's length times the pattern's size, where JavaScript's backtracking engine
 * takes exponential time and gives up (regex-guard.ts). Only what a finite automaton can decide is
 * compiled: literals and escapes, `.`, classes, `^` and `$` (not multiline), groups, alternation, and
 * every quantifier (lazy ones match the same strings); flags `u` and `s`. A pattern using anything else
 * (back references, lookaround, `\b`, `\p{...}`, other flags, Annex B's lenient syntax) has no linear
 * form, and its caller keeps the backtracking engine under the guard.
 *
 * The engine is slower than JavaScript's on benign patterns, so regex-guard.ts runs it from the first
 * run only for a pattern that repeats an ambiguous part (`nested`), and otherwise once the backtracking
 * engine proved too costly on the pattern.
 */

/** A compiled pattern: `test` answers as `RegExp.prototype.test` would, or undefined past `MAX_STEPS`. */
export interface LinearRegex {
  test(input: string): boolean | undefined;
  /**
   * Whether the pattern repeats something that can match in more than one way (`(a+)+`, `(a|ab)*`,
   * `(\w+\s?)*`): the shape that makes a backtracking engine take exponential time, so the linear form
   * should answer from the first run on.
   */
  readonly nested: boolean;
  /** The automaton's states: a test visits at most this many per character of its input. */
  readonly states: number;
}

/** At most this many NFA states a pattern (counted repetitions are copies): beyond, no linear form. */
const MAX_STATES = 5_000;
/** At most this many state visits a test (about 0.1 s): a long input against a large pattern gives up. */
export const MAX_STEPS = 20_000_000;

const compiled = new WeakMap<RegExp, LinearRegex | null>();

/** `re`'s linear form, or undefined when its pattern or flags have none (compiled once per RegExp). */
export function linearRegex(re: RegExp): LinearRegex | undefined {
  let lin = compiled.get(re);
  if (lin === undefined) compiled.set(re, (lin = compile(re.source, re.flags) ?? null));
  return lin ?? undefined;
}

// ---- Character sets: sorted, disjoint, inclusive [lo, hi] ranges of code points (or code units). ----

type Ranges = number[];

function normalise(r: Ranges): Ranges {
  const pairs: [number, number][] = [];
  for (let i = 0; i < r.length; i += 2) pairs.push([r[i]!, r[i + 1]!]);
  pairs.sort((a, b) => a[0] - b[0]);
  const out: Ranges = [];
  for (const [lo, hi] of pairs) {
    const n = out.length;
    if (n > 0 && lo <= out[n - 1]! + 1) out[n - 1] = Math.max(out[n - 1]!, hi);
    else out.push(lo, hi);
  }
  return out;
}

function complement(r: Ranges, max: number): Ranges {
  const out: Ranges = [];
  let next = 0;
  for (let i = 0; i < r.length; i += 2) {
    if (r[i]! > next) out.push(next, r[i]! - 1);
    next = r[i + 1]! + 1;
  }
  if (next <= max) out.push(next, max);
  return out;
}

function contains(r: Ranges, c: number): boolean {
  let lo = 0;
  let hi = r.length / 2 - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (c < r[2 * mid]!) hi = mid - 1;
    else if (c > r[2 * mid + 1]!) lo = mid + 1;
    else return true;
  }
  return false;
}

const DIGIT: Ranges = [0x30, 0x39];
const WORD: Ranges = [0x30, 0x39, 0x41, 0x5a, 0x5f, 0x5f, 0x61, 0x7a];
/** What `\s` matches: ECMAScript's WhiteSpace and LineTerminator. */
const SPACE: Ranges = normalise([
  0x09, 0x0d, 0x20, 0x20, 0xa0, 0xa0, 0x1680, 0x1680, 0x2000, 0x200a, 0x2028, 0x2029, 0x202f, 0x202f, 0x205f, 0x205f,
  0x3000, 0x3000, 0xfeff, 0xfeff,
]);
const LINE_TERMINATORS: Ranges = [0x0a, 0x0a, 0x0d, 0x0d, 0x2028, 0x2029];

// ---- The pattern's syntax tree. ----

type Node =
  | { kind: 'set'; ranges: Ranges }
  | { kind: 'seq'; items: Node[] }
  | { kind: 'alt'; items: Node[] }
  | { kind: 'repeat'; item: Node; min: number; max: number }
  | { kind: 'begin' }
  | { kind: 'end' };

/** Thrown inside the parser for anything without a linear form. */
class NoLinearForm extends Error {}
const none = (): never => {
  throw new NoLinearForm();
};

/** The syntax characters, which an identity escape may name (in either mode) and a literal may not be. */
const SYNTAX = new Set('^$\\.*+?()[]{}|/');

/** Whether a node can match one string in more than one way: it holds a repetition or an alternation. */
function ambiguous(node: Node): boolean {
  switch (node.kind) {
    case 'alt': return true;
    case 'repeat': return node.max > 1 || ambiguous(node.item);
    case 'seq': return node.items.some(ambiguous);
    default: return false;
  }
}

class Parser {
  at = 0;
  /** Whether a repetition repeats an ambiguous node (LinearRegex.nested). */
  nested = false;
  readonly max: number;
  constructor(readonly src: string, readonly unicode: boolean, readonly dotAll: boolean) {
    this.max = unicode ? 0x10ffff : 0xffff;
  }

  parse(): Node {
    const node = this.alternation();
    if (this.at < this.src.length) none();
    return node;
  }

  private peek(): string | undefined {
    return this.src[this.at];
  }

  private alternation(): Node {
    const items = [this.sequence()];
    while (this.peek() === '|') {
      this.at++;
      items.push(this.sequence());
    }
    return items.length === 1 ? items[0]! : { kind: 'alt', items };
  }

  private sequence(): Node {
    const items: Node[] = [];
    for (let c = this.peek(); c !== undefined && c !== '|' && c !== ')'; c = this.peek()) {
      const atom = this.atom();
      items.push(this.quantified(atom));
    }
    return items.length === 1 ? items[0]! : { kind: 'seq', items };
  }

  private quantified(atom: Node): Node {
    let min: number;
    let max: number;
    const c = this.peek();
    if (c === '*') [min, max] = [0, Infinity];
    else if (c === '+') [min, max] = [1, Infinity];
    else if (c === '?') [min, max] = [0, 1];
    else if (c === '{') {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(this.src.slice(this.at));
      if (m === null) return none(); // Annex B reads a lone `{` as a literal: left to the backtracking engine.
      min = Number(m[1]);
      max = m[2] === undefined ? min : m[3] === '' ? Infinity : Number(m[3]);
      if (!(min <= max) || min > MAX_STATES) none();
      this.at += m[0].length - 1;
    } else return atom;
    this.at++;
    if (this.peek() === '?') this.at++; // lazy: the same strings match
    if (atom.kind === 'begin' || atom.kind === 'end') none(); // a quantified assertion (Annex B)
    const q = this.peek();
    if (q === '*' || q === '+' || q === '?' || q === '{') none(); // `a**` is a syntax error
    if (max > 1 && ambiguous(atom)) this.nested = true;
    return { kind: 'repeat', item: atom, min, max };
  }

  private atom(): Node {
    const c = this.src[this.at++]!;
    switch (c) {
      case '^':
        return { kind: 'begin' };
      case '$':
        return { kind: 'end' };
      case '.':
        return { kind: 'set', ranges: this.dotAll ? [0, this.max] : complement(LINE_TERMINATORS, this.max) };
      case '(':
        return this.group();
      case '[':
        return { kind: 'set', ranges: this.characterClass() };
      case '\\':
        return { kind: 'set', ranges: this.escape(false) };
      case '*': case '+': case '?': case '{': case '}': case ']': case ')':
        return none();
      default:
        return { kind: 'set', ranges: this.literal(c) };
    }
  }

  /** The character at `at - 1` (a surrogate pair as one code point in unicode mode), as a set. */
  private literal(c: string): Ranges {
    const code = this.codeAt(c);
    return [code, code];
  }

  private codeAt(c: string): number {
    const code = c.charCodeAt(0);
    if (this.unicode && code >= 0xd800 && code <= 0xdbff) {
      const low = this.src.charCodeAt(this.at);
      if (low >= 0xdc00 && low <= 0xdfff) {
        this.at++;
        return (code - 0xd800) * 0x400 + (low - 0xdc00) + 0x10000;
      }
    }
    return code;
  }

  private group(): Node {
    if (this.peek() === '?') {
      const next = this.src[this.at + 1];
      if (next === ':') this.at += 2;
      else if (next === '<' && /^\?<[A-Za-z_$][\w$]*>/.test(this.src.slice(this.at))) this.at = this.src.indexOf('>', this.at) + 1;
      else none(); // lookaround, modifiers
    }
    const inner = this.alternation();
    if (this.src[this.at++] !== ')') none();
    // A group holding an assertion may be quantified (`(^)*`), which a bare assertion may not be.
    return inner.kind === 'begin' || inner.kind === 'end' ? { kind: 'seq', items: [inner] } : inner;
  }

  private characterClass(): Ranges {
    let negated = false;
    if (this.peek() === '^') {
      negated = true;
      this.at++;
    }
    const ranges: Ranges = [];
    for (;;) {
      const c = this.src[this.at++];
      if (c === undefined) return none();
      if (c === ']') break;
      const from = c === '\\' ? this.escape(true) : this.literal(c);
      if (this.peek() === '-' && this.src[this.at + 1] !== ']' && this.src[this.at + 1] !== undefined) {
        this.at++;
        const d = this.src[this.at++]!;
        const to = d === '\\' ? this.escape(true) : this.literal(d);
        // A range's ends must be single characters (`[\d-z]` is Annex B's).
        if (from.length !== 2 || to.length !== 2 || from[0] !== from[1] || to[0] !== to[1] || from[0]! > to[0]!) none();
        ranges.push(from[0]!, to[0]!);
      } else ranges.push(...from);
    }
    const set = normalise(ranges);
    return negated ? complement(set, this.max) : set;
  }

  /** The escape after a `\` (inside a class when `inClass`), as a set. */
  private escape(inClass: boolean): Ranges {
    const c = this.src[this.at++];
    if (c === undefined) return none();
    const single = (code: number): Ranges => [code, code];
    switch (c) {
      case 'd': return DIGIT;
      case 'D': return complement(DIGIT, this.max);
      case 'w': return WORD;
      case 'W': return complement(WORD, this.max);
      case 's': return SPACE;
      case 'S': return complement(SPACE, this.max);
      case 't': return single(0x09);
      case 'n': return single(0x0a);
      case 'v': return single(0x0b);
      case 'f': return single(0x0c);
      case 'r': return single(0x0d);
      case 'b': return inClass ? single(0x08) : none(); // a word boundary outside a class
      case '0': return /[0-9]/.test(this.peek() ?? '') ? none() : single(0);
      case 'x': {
        const m = /^[0-9A-Fa-f]{2}/.exec(this.src.slice(this.at));
        if (m === null) return none();
        this.at += 2;
        return single(parseInt(m[0], 16));
      }
      case 'u': {
        const braced = this.unicode ? /^\{([0-9A-Fa-f]{1,6})\}/.exec(this.src.slice(this.at)) : null;
        if (braced !== null) {
          this.at += braced[0].length;
          const code = parseInt(braced[1]!, 16);
          return code > 0x10ffff ? none() : single(code);
        }
        const m = /^[0-9A-Fa-f]{4}/.exec(this.src.slice(this.at));
        if (m === null) return none();
        this.at += 4;
        const code = parseInt(m[0], 16);
        // A surrogate pair written as two escapes is one code point in unicode mode: not read here.
        return this.unicode && code >= 0xd800 && code <= 0xdfff ? none() : single(code);
      }
      case '-':
        return inClass ? single(0x2d) : this.unicode ? none() : single(0x2d);
      default:
        // Identity escapes of syntax characters mean the character in both modes, and of any other
        // character but a letter, digit or `_` without `u` (Annex B: R4's own patterns write `\@`);
        // other escapes (back references, \p, \c, \k) have no linear form.
        if (SYNTAX.has(c) || (!this.unicode && !/[A-Za-z0-9_]/.test(c))) return single(c.charCodeAt(0));
        return none();
    }
  }
}

// ---- The automaton: states in parallel arrays, built right to left (each node given its successor). ----

const CHAR = 0;
const SPLIT = 1;
const BEGIN = 2;
const END = 3;
const MATCH = 4;

class Automaton {
  kind: number[] = [];
  out1: number[] = [];
  out2: number[] = [];
  sets: (Ranges | undefined)[] = [];

  state(kind: number, out1 = -1, out2 = -1, set?: Ranges): number {
    if (this.kind.length >= MAX_STATES) none();
    this.kind.push(kind);
    this.out1.push(out1);
    this.out2.push(out2);
    this.sets.push(set);
    return this.kind.length - 1;
  }

  build(node: Node, next: number): number {
    switch (node.kind) {
      case 'set':
        return this.state(CHAR, next, -1, node.ranges);
      case 'begin':
        return this.state(BEGIN, next);
      case 'end':
        return this.state(END, next);
      case 'seq': {
        let at = next;
        for (let i = node.items.length - 1; i >= 0; i--) at = this.build(node.items[i]!, at);
        return at;
      }
      case 'alt': {
        let at = this.build(node.items[node.items.length - 1]!, next);
        for (let i = node.items.length - 2; i >= 0; i--) at = this.state(SPLIT, this.build(node.items[i]!, next), at);
        return at;
      }
      case 'repeat': {
        let at = next;
        if (node.max === Infinity) {
          const loop = this.state(SPLIT, -1, next);
          this.out1[loop] = this.build(node.item, loop);
          at = loop;
        } else {
          // x{n,m}: n copies, then m - n optional ones (x?x? matches what (x(x)?)? does).
          for (let i = node.min; i < node.max; i++) at = this.state(SPLIT, this.build(node.item, at), at);
        }
        for (let i = 0; i < node.min; i++) at = this.build(node.item, at);
        return at;
      }
    }
  }
}

function compile(source: string, flags: string): LinearRegex | undefined {
  if (!/^[us]*$/.test(flags)) return undefined;
  const unicode = flags.includes('u');
  try {
    const parser = new Parser(source, unicode, flags.includes('s'));
    const tree = parser.parse();
    const nfa = new Automaton();
    const start = nfa.build(tree, nfa.state(MATCH));
    return new Runner(nfa, start, unicode, parser.nested);
  } catch (e) {
    if (e instanceof NoLinearForm) return undefined;
    throw e;
  }
}

/** Runs the automaton over an input, keeping the set of states each prefix reaches (no backtracking). */
class Runner implements LinearRegex {
  private readonly kind: Int8Array;
  private readonly out1: Int32Array;
  private readonly out2: Int32Array;
  private readonly sets: (Ranges | undefined)[];
  /** The generation in which each state was last added to a list, so a state is listed once a step. */
  private readonly mark: Int32Array;
  private generation = 0;
  readonly states: number;

  constructor(nfa: Automaton, private readonly start: number, private readonly unicode: boolean, readonly nested: boolean) {
    this.kind = Int8Array.from(nfa.kind);
    this.states = this.kind.length;
    this.out1 = Int32Array.from(nfa.out1);
    this.out2 = Int32Array.from(nfa.out2);
    this.sets = nfa.sets;
    this.mark = new Int32Array(nfa.kind.length);
  }

  test(input: string): boolean | undefined {
    let current: number[] = [];
    let next: number[] = [];
    const stack: number[] = [];
    const length = input.length;
    let steps = 0;
    let generation = this.newGeneration();
    /** Adds `s` and what it reaches without reading (splits, assertions holding at `pos`) to `list`; true at MATCH. */
    const add = (list: number[], s: number, pos: number): boolean => {
      stack.push(s);
      while (stack.length > 0) {
        const t = stack.pop()!;
        if (this.mark[t] === generation) continue;
        this.mark[t] = generation;
        steps++;
        switch (this.kind[t]) {
          case MATCH:
            return true;
          case CHAR:
            list.push(t);
            break;
          case SPLIT:
            stack.push(this.out2[t]!, this.out1[t]!);
            break;
          case BEGIN:
            if (pos === 0) stack.push(this.out1[t]!);
            break;
          case END:
            if (pos === length) stack.push(this.out1[t]!);
            break;
        }
      }
      return false;
    };
    for (let pos = 0; ; ) {
      // A match may start at any position (test() searches): the start joins every step's list.
      if (add(current, this.start, pos)) return true;
      if (pos >= length || current.length === 0 && this.startsAnchored()) return false;
      let code = input.charCodeAt(pos);
      let width = 1;
      if (this.unicode && code >= 0xd800 && code <= 0xdbff && pos + 1 < length) {
        const low = input.charCodeAt(pos + 1);
        if (low >= 0xdc00 && low <= 0xdfff) {
          code = (code - 0xd800) * 0x400 + (low - 0xdc00) + 0x10000;
          width = 2;
        }
      }
      pos += width;
      generation = this.newGeneration();
      stack.length = 0;
      for (const s of current) {
        if (contains(this.sets[s]!, code) && add(next, this.out1[s]!, pos)) return true;
      }
      steps += current.length;
      if (steps > MAX_STEPS) return undefined;
      [current, next] = [next, current];
      next.length = 0;
    }
  }

  /** Whether no match can start after position 0 (the pattern begins with `^` on every path). */
  private startsAnchored(): boolean {
    return this.anchored ??= this.computeAnchored();
  }
  private anchored: boolean | undefined;

  private computeAnchored(): boolean {
    // Every path from the start reaches a BEGIN before reading or matching.
    const seen = new Set<number>();
    const stack = [this.start];
    while (stack.length > 0) {
      const s = stack.pop()!;
      if (seen.has(s)) continue;
      seen.add(s);
      const k = this.kind[s];
      if (k === CHAR || k === MATCH) return false;
      if (k === SPLIT) stack.push(this.out1[s]!, this.out2[s]!);
      else if (k === END) stack.push(this.out1[s]!);
    }
    return true;
  }

  private newGeneration(): number {
    if (++this.generation === 0x7fffffff) {
      this.mark.fill(0);
      this.generation = 1;
    }
    return this.generation;
  }
}
