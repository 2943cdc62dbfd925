/**
 * UCUM unit expressions (https://ucum.org/ucum, the case-sensitive form FHIR uses) reduced to a
 * canonical unit: a factor times base units with exponents. Quantities whose units reduce to the same
 * base units are commensurable, and their values compare once each is converted (5.4 mg and 0.0054 g;
 * 150 [lb_av] and 68.04 kg; 120 mm[Hg] and 16 kPa; 37 Cel and 98.6 [degF]). Search indexes and tests
 * a UCUM quantity a second time in its canonical unit (search.html 3.1.1.4.6, quantity); FHIRPath's
 * comparisons (`rng-2`, `<`, `=`) convert by it too.
 *
 * The grammar is UCUM's (§2): terms of components joined by `.` and `/`, each operator applying to the
 * component after it, left to right (a leading `/` to the first alone: `/s.m` is m/s), parentheses,
 * integer exponents (`m2`, `s-1`, `10*3`), integer factors, `{annotations}` (the unit 1; after a number or a
 * parenthesis too, `/100{WBCs}`), and one prefix before a metric atom. The atoms and prefixes are all of UCUM's essence (`ucum-units.json`, generated from
 * it by scripts/gen-ucum-atoms.ts): each unit defined as a value times a unit expression, which this reduces
 * by the same grammar on first use. Where UCUM reduces a unit to a number, this keeps it as its own base, as
 * the LHC UCUM library does for the same reason: `mol` (a count of 6.0221367e23), `eq` (equivalents need a
 * charge to become moles) and each arbitrary unit (`[CFU]`, `[iU]`: commensurable with its prefixed forms
 * only, `m[iU]/mL` and `[iU]/L`; `[IU]` is `[iU]`). Of the special units (a function of a value, not a
 * multiple), the temperatures `Cel`, `[degF]` and `[degRe]` convert by their offsets as a whole unit; the
 * others (`[pH]`, the logarithmic `Np`, `B`, `B[SPL]`..., `bit_s`, `%[slope]`, `[p'diop]`, the homeopathic
 * potencies) and any special unit inside an expression (`Cel/h`, `mCel`) have no canonical form: a quantity
 * in one compares only with one of the same code.
 */
import definitions from './ucum-units.json' with { type: 'json' };
import { numberRational, type Rational } from './rational.ts';

export const UCUM_SYSTEM = 'http://unitsofmeasure.org';

/** A unit as a factor of base units with exponents (kelvin and mole are bases, as is each arbitrary unit). */
interface Reduced {
  factor: number;
  dims: Record<string, number>;
}

/** An atom: its value in other units, and whether it takes a prefix. */
interface Atom extends Reduced {
  metric: boolean;
}

/** A unit's canonical form: its base units' code, and the conversion of a value into them. */
export interface CanonicalUnit {
  /** The base units, sorted, joined by `.` with their exponents (`g.m-3`); `1` for a number. */
  code: string;
  /** `value` in the canonical unit, to 15 significant digits (so that 5400 ug and 5.4 mg agree). */
  convert(value: number): number;
}

const PREFIXES = new Map<string, number>(definitions.prefixes as [string, number][]);

/** UCUM's seven base units, and the two kept apart (see above); every arbitrary unit is a base of its own too. All take prefixes. */
const BASES = ['m', 's', 'g', 'rad', 'K', 'C', 'cd', 'mol', 'eq'];

/** The units a definition gives (`1 code = value unit`), by code, until each is reduced on first use. */
const DEFINED = new Map<string, [metric: boolean, value: number, unit: string]>();

/**
 * The temperatures as kelvin = a * value + b, exactly (UCUM's functions Cel, degF, degRe): temperatureOf converts by
 * these where a comparison must be exact. SPECIAL below is the same conversion in binary, for search's index.
 */
const TEMPERATURES: Record<string, [a: Rational, b: Rational]> = {
  Cel: [{ n: 1n, d: 1n }, { n: 27315n, d: 100n }],
  '[degF]': [{ n: 5n, d: 9n }, { n: 45967n * 5n, d: 900n }],
  '[degRe]': [{ n: 5n, d: 4n }, { n: 27315n, d: 100n }],
};

/** A temperature unit's exact conversion into kelvin: kelvin = a * value + b. */
export interface Temperature {
  readonly a: Rational;
  readonly b: Rational;
}

/**
 * The exact conversion into kelvin of a UCUM temperature unit: Cel, [degF], [degRe], and the units that reduce to
 * kelvin alone (`K`, `mK`: their factor read as the decimal it is written as, 0.001). Undefined for any other unit.
 */
export function temperatureOf(code: string): Temperature | undefined {
  const special = TEMPERATURES[code];
  if (special) return { a: special[0], b: special[1] };
  const unit = canonicalUnit(code);
  if (unit?.code !== 'K' || SPECIAL[code]) return undefined;
  const a = numberRational(unit.convert(1));
  return a === undefined ? undefined : { a, b: { n: 0n, d: 1n } };
}

/** The special units converted, as a whole unit only: a value's conversion into kelvin (UCUM's functions Cel, degF, degRe). */
const SPECIAL: Record<string, { base: string; toBase: (v: number) => number }> = {
  Cel: { base: 'K', toBase: (v) => v + 273.15 },
  '[degF]': { base: 'K', toBase: (v) => ((v + 459.67) * 5) / 9 },
  '[degRe]': { base: 'K', toBase: (v) => v * 1.25 + 273.15 },
};

class UnitError extends Error {}

const ONE: Reduced = { factor: 1, dims: {} };

function multiply(a: Reduced, b: Reduced, exponent = 1): Reduced {
  const dims = { ...a.dims };
  for (const [k, e] of Object.entries(b.dims)) {
    const sum = (dims[k] ?? 0) + e * exponent;
    if (sum === 0) delete dims[k];
    else dims[k] = sum;
  }
  return { factor: a.factor * b.factor ** exponent, dims };
}

/** The atoms by symbol, reduced: the bases (filled by fillAtoms before the first unit is read), then each defined one as it is first named. */
const ATOMS = new Map<string, Atom>();

/** The atom `symbol` names, reduced (a defined one on first use), or undefined when UCUM has none of that code. */
function known(symbol: string): Atom | undefined {
  const reduced = ATOMS.get(symbol);
  if (reduced !== undefined) return reduced;
  const definition = DEFINED.get(symbol);
  if (definition === undefined) return undefined;
  // Taken out first: a definition that named itself, directly or not, would find no atom rather than loop.
  DEFINED.delete(symbol);
  const [metric, value, unit] = definition;
  const r = unit === '1' ? ONE : reduce(unit);
  const a: Atom = { factor: value * r.factor, dims: r.dims, metric };
  ATOMS.set(symbol, a);
  return a;
}

/** The atom `symbol` names, with its prefix if any (the whole symbol first: `cd`, `Pa`, `min` are atoms). */
function atom(symbol: string): Reduced {
  const whole = known(symbol);
  if (whole) return whole;
  for (const prefix of [symbol.slice(0, 2), symbol.slice(0, 1)]) {
    const scale = PREFIXES.get(prefix);
    const a = scale === undefined ? undefined : known(symbol.slice(prefix.length));
    if (a?.metric) return { factor: a.factor * scale!, dims: a.dims };
  }
  throw new UnitError(`unknown unit '${symbol}'`);
}

/** UCUM §2.1's grammar, reading `text` from the start; each component reduced as it is read. */
class UnitParser {
  private at = 0;
  constructor(private readonly text: string) {}

  /**
   * A leading `/` divides the first component alone, as the operators after it apply each to the component
   * that follows (left to right): `/s.m` is m/s and `/kg/d` 1/(kg.d), as the LHC library and HL7's read them.
   */
  main(): Reduced {
    const r = this.text[this.at] === '/' ? (this.at++, this.term(multiply(ONE, this.component(), -1))) : this.term();
    if (this.at !== this.text.length) throw new UnitError(`unexpected '${this.text[this.at]}'`);
    return r;
  }

  private term(first = this.component()): Reduced {
    let r = first;
    for (let op = this.text[this.at]; op === '.' || op === '/'; op = this.text[this.at]) {
      this.at++;
      r = multiply(r, this.component(), op === '.' ? 1 : -1);
    }
    return r;
  }

  private component(): Reduced {
    const s = this.text;
    if (s[this.at] === '(') {
      this.at++;
      const r = this.term();
      if (s[this.at++] !== ')') throw new UnitError('unclosed parenthesis');
      if (s[this.at] === '{') this.annotation();
      return r;
    }
    if (s[this.at] === '{') return this.annotation(), ONE;
    const factor = /^\d+(?![\d*^])/.exec(s.slice(this.at));
    if (factor && !/^[^./(){}]/.test(s.slice(this.at + factor[0].length))) {
      this.at += factor[0].length;
      // An annotated number (`/100{WBCs}`, LOINC's per hundred leukocytes) is the number.
      if (s[this.at] === '{') this.annotation();
      return { factor: Number(factor[0]), dims: {} };
    }
    const start = this.at;
    while (this.at < s.length && !'./(){}'.includes(s[this.at]!)) {
      if (s[this.at] === '[') {
        const close = s.indexOf(']', this.at);
        if (close < 0) throw new UnitError('unclosed bracket');
        this.at = close + 1;
      } else this.at++;
    }
    const m = /^(.+?)([+-]?\d+)?$/.exec(s.slice(start, this.at));
    if (!m) throw new UnitError('empty unit');
    if (s[this.at] === '{') this.annotation();
    return multiply(ONE, atom(m[1]!), m[2] === undefined ? 1 : Number(m[2]));
  }

  private annotation(): void {
    const close = this.text.indexOf('}', this.at);
    if (close < 0) throw new UnitError('unclosed annotation');
    this.at = close + 1;
  }
}

/** `text` reduced to base units (UCUM §2); throws UnitError for what it cannot read. */
function reduce(text: string): Reduced {
  return new UnitParser(text).main();
}

/** 15 significant digits: the conversions of one amount written two ways (5400 ug, 5.4 mg) agree. */
const tidy = (x: number) => (Number.isFinite(x) ? Number(x.toPrecision(15)) : x);

const MAX_CODE = 200;
const CACHED = 4096;
const cache = new Map<string, CanonicalUnit | null>();

/**
 * The canonical form of the UCUM unit `code` (see the module's comment), or undefined where the code
 * is not a unit this reads: an unknown atom, a special unit inside an expression, a malformed code.
 */
export function canonicalUnit(code: string): CanonicalUnit | undefined {
  const known = cache.get(code);
  if (known !== undefined) return known ?? undefined;
  const unit = code.length > MAX_CODE ? undefined : canonicalOf(code);
  if (cache.size >= CACHED) cache.clear();
  cache.set(code, unit ?? null);
  return unit;
}

function canonicalOf(code: string): CanonicalUnit | undefined {
  const special = SPECIAL[code];
  if (special) return { code: special.base, convert: (v) => tidy(special.toBase(v)) };
  fillAtoms();
  let r: Reduced;
  try {
    r = reduce(code);
  } catch (err) {
    if (err instanceof UnitError) return undefined;
    throw err;
  }
  if (!Number.isFinite(r.factor) || r.factor <= 0) return undefined;
  const dims = Object.keys(r.dims).sort();
  const name = dims.map((d) => (r.dims[d] === 1 ? d : `${d}${r.dims[d]}`)).join('.') || '1';
  const factor = r.factor;
  return { code: name, convert: (v) => tidy(v * factor) };
}

let filled = false;

/**
 * Fills ATOMS with the bases and each arbitrary unit that is its own, and DEFINED with the other units'
 * definitions (reduced as each is first named), on the first unit read rather than when the module loads:
 * every process loads it, few read a quantity's unit at once.
 */
function fillAtoms(): void {
  if (filled) return;
  filled = true;
  for (const b of BASES) ATOMS.set(b, { factor: 1, dims: { [b]: 1 }, metric: true });
  for (const [symbol, metric, unit] of definitions.arbitrary as [string, boolean, string][]) {
    if (unit === '1') ATOMS.set(symbol, { factor: 1, dims: { [symbol]: 1 }, metric });
    else DEFINED.set(symbol, [metric, 1, unit]);
  }
  for (const [symbol, metric, value, unit] of definitions.units as [string, boolean, number, string][]) {
    if (!ATOMS.has(symbol)) DEFINED.set(symbol, [metric, value, unit]);
  }
}

/** UCUM's special units (a function of a value, not a multiple of a unit: Cel, [degF], [pH], the logarithmic B and Np...). */
const SPECIAL_UNITS = new Set(definitions.special as string[]);

/**
 * Whether the UCUM unit `code` is, or holds, one of UCUM's special units: alone (`Cel`), prefixed (`mCel`) or as an atom
 * of an expression (`Cel/h`). Such a unit is an offset or a logarithm, so a value in it does not multiply or divide
 * (`1 'Cel' * 2` is no temperature: 2 Cel is not twice 1 Cel in kelvin). Atoms are read as the grammar writes them:
 * separated by `.`, `/` and parentheses, a bracketed atom whole (`B[10.nV]`), annotations and exponents aside.
 */
export function hasSpecialUnit(code: string): boolean {
  if (SPECIAL_UNITS.has(code)) return true;
  let atom = '';
  const check = (): boolean => {
    const text = atom.replace(/[+-]?\d+$/, '');
    atom = '';
    if (text === '') return false;
    if (SPECIAL_UNITS.has(text)) return true;
    for (const prefix of PREFIXES.keys()) if (text.length > prefix.length && text.startsWith(prefix) && SPECIAL_UNITS.has(text.slice(prefix.length))) return true;
    return false;
  };
  for (let i = 0; i < code.length; i++) {
    const c = code[i]!;
    if (c === '[') {
      const end = code.indexOf(']', i);
      if (end < 0) return false;
      atom += code.slice(i, end + 1);
      i = end;
    } else if (c === '{') {
      const end = code.indexOf('}', i);
      if (end < 0) return false;
      i = end;
    } else if (c === '.' || c === '/' || c === '(' || c === ')') {
      if (check()) return true;
    } else atom += c;
  }
  return check();
}
