/**
 * UCUM unit expressions (https://ucum.org/ucum, the case-sensitive form FHIR uses) reduced to a
 * canonical unit: a factor times base units with exponents. Quantities whose units reduce to the same
 * base units are commensurable, and their values compare once each is converted (5.4 mg and 0.0054 g;
 * 150 [lb_av] and 68.04 kg; 120 mm[Hg] and 16 kPa; 37 Cel and 98.6 [degF]). Search indexes and tests
 * a UCUM quantity a second time in its canonical unit (search.html 3.1.1.4.6, quantity).
 *
 * The grammar is UCUM's (§2): terms of components joined by `.` and `/`, a leading `/`, parentheses,
 * integer exponents (`m2`, `s-1`, `10*3`), integer factors, `{annotations}` (the unit 1), and one prefix
 * before a metric atom. The atoms are those of the table below: the SI base and derived units, time,
 * volume, pressure, energy, the customary length, mass and volume units, enzyme and radiation units,
 * and the arbitrary `[iU]`; an expression with another atom has no canonical form and is compared by
 * its code alone, as before. Where UCUM reduces a unit to a number, this keeps it as its own base, as
 * the LHC UCUM library does for the same reason: `mol` (a count of 6.0221367e23), `eq` (equivalents
 * need a charge to become moles) and an arbitrary unit (commensurable with its prefixed forms only,
 * `m[iU]/mL` and `[iU]/L`). `Cel` and `[degF]` (not proportional to kelvin) only as a whole unit.
 */
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

const PREFIXES: Record<string, number> = {
  Y: 1e24, Z: 1e21, E: 1e18, P: 1e15, T: 1e12, G: 1e9, M: 1e6, k: 1e3, h: 1e2, da: 1e1,
  d: 1e-1, c: 1e-2, m: 1e-3, u: 1e-6, n: 1e-9, p: 1e-12, f: 1e-15, a: 1e-18, z: 1e-21, y: 1e-24,
};

/** The base units: UCUM's seven, and the three kept apart (see above). All take prefixes. */
const BASES = ['m', 's', 'g', 'rad', 'K', 'C', 'cd', 'mol', 'eq', '[iU]', "[arb'U]"];

/** [symbol, takes a prefix, value, in units of] — UCUM's definitions, in dependency order. */
const DEFINED: [string, boolean, number, string][] = [
  ['10*', false, 10, '1'], ['10^', false, 10, '1'], ['[pi]', false, Math.PI, '1'],
  ['%', false, 1, '10*-2'], ['[ppth]', false, 1, '10*-3'], ['[ppm]', false, 1, '10*-6'], ['[ppb]', false, 1, '10*-9'], ['[pptr]', false, 1, '10*-12'],
  // SI derived units
  ['sr', true, 1, 'rad2'], ['Hz', true, 1, 's-1'], ['N', true, 1, 'kg.m/s2'], ['Pa', true, 1, 'N/m2'], ['J', true, 1, 'N.m'],
  ['W', true, 1, 'J/s'], ['A', true, 1, 'C/s'], ['V', true, 1, 'J/C'], ['F', true, 1, 'C/V'], ['Ohm', true, 1, 'V/A'],
  ['S', true, 1, 'Ohm-1'], ['Wb', true, 1, 'V.s'], ['T', true, 1, 'Wb/m2'], ['H', true, 1, 'Wb/A'], ['lm', true, 1, 'cd.sr'],
  ['lx', true, 1, 'lm/m2'], ['Bq', true, 1, 's-1'], ['Gy', true, 1, 'J/kg'], ['Sv', true, 1, 'J/kg'],
  ['deg', false, 2, '[pi].rad/360'], ['gon', false, 0.9, 'deg'],
  // volume, area, time, mass
  ['l', true, 1, 'dm3'], ['L', true, 1, 'l'], ['ar', true, 100, 'm2'],
  ['min', false, 60, 's'], ['h', false, 60, 'min'], ['d', false, 24, 'h'], ['wk', false, 7, 'd'],
  ['a_t', false, 365.24219, 'd'], ['a_j', false, 365.25, 'd'], ['a_g', false, 365.2425, 'd'], ['a', false, 1, 'a_j'],
  ['mo_s', false, 29.53059, 'd'], ['mo_j', false, 1, 'a_j/12'], ['mo_g', false, 1, 'a_g/12'], ['mo', false, 1, 'mo_j'],
  ['t', true, 1e3, 'kg'], ['u', true, 1.6605402e-24, 'g'],
  // pressure, energy, force (SI and CGS)
  ['bar', true, 1e5, 'Pa'], ['atm', false, 101325, 'Pa'], ['m[H2O]', true, 9.80665, 'kPa'], ['m[Hg]', true, 133.322, 'kPa'],
  ['[g]', false, 9.80665, 'm/s2'], ['gf', true, 1, 'g.[g]'], ['dyn', true, 1, 'g.cm/s2'], ['erg', true, 1, 'dyn.cm'],
  ['P', true, 1, 'dyn.s/cm2'], ['St', true, 1, 'cm2/s'], ['G', true, 1e-4, 'T'], ['Ao', false, 0.1, 'nm'], ['b', true, 100, 'fm2'],
  ['eV', true, 1.60217733e-19, 'J'], ['cal_th', true, 4.184, 'J'], ['cal_IT', true, 4.1868, 'J'], ['cal', true, 1, 'cal_th'],
  ['[Cal]', false, 1, 'kcal_th'],
  // chemistry, enzymes, radiation, arbitrary units
  ['osm', true, 1, 'mol'], ['kat', true, 1, 'mol/s'], ['U', true, 1, 'umol/min'], ['g%', true, 1, 'g/dl'],
  ['Ci', true, 3.7e10, 'Bq'], ['R', true, 2.58e-4, 'C/kg'], ['RAD', true, 100, 'erg/g'], ['REM', true, 1, 'RAD'],
  ['[IU]', true, 1, '[iU]'],
  // customary length, area, volume and mass (international, US, British, avoirdupois)
  ['[in_i]', false, 2.54, 'cm'], ['[ft_i]', false, 12, '[in_i]'], ['[yd_i]', false, 3, '[ft_i]'], ['[mi_i]', false, 5280, '[ft_i]'],
  ['[nmi_i]', false, 1852, 'm'], ['[mil_i]', false, 1e-3, '[in_i]'], ['[sin_i]', false, 1, '[in_i]2'], ['[sft_i]', false, 1, '[ft_i]2'],
  ['[syd_i]', false, 1, '[yd_i]2'], ['[cin_i]', false, 1, '[in_i]3'], ['[cft_i]', false, 1, '[ft_i]3'], ['[cyd_i]', false, 1, '[yd_i]3'],
  ["[in_i'H2O]", false, 1, 'm[H2O].[in_i]/m'], ["[in_i'Hg]", false, 1, 'm[Hg].[in_i]/m'],
  ['[gal_us]', false, 231, '[in_i]3'], ['[bbl_us]', false, 42, '[gal_us]'], ['[qt_us]', false, 1 / 4, '[gal_us]'],
  ['[pt_us]', false, 1 / 2, '[qt_us]'], ['[gil_us]', false, 1 / 4, '[pt_us]'], ['[foz_us]', false, 1 / 4, '[gil_us]'],
  ['[fdr_us]', false, 1 / 8, '[foz_us]'], ['[min_us]', false, 1 / 60, '[fdr_us]'], ['[tbs_us]', false, 1 / 2, '[foz_us]'],
  ['[tsp_us]', false, 1 / 3, '[tbs_us]'], ['[cup_us]', false, 16, '[tbs_us]'],
  ['[foz_m]', false, 30, 'mL'], ['[cup_m]', false, 240, 'mL'], ['[tsp_m]', false, 5, 'mL'], ['[tbs_m]', false, 15, 'mL'], ['[drp]', false, 1 / 20, 'mL'],
  ['[gal_br]', false, 4.54609, 'l'], ['[pt_br]', false, 1 / 8, '[gal_br]'], ['[qt_br]', false, 1 / 4, '[gal_br]'],
  ['[gil_br]', false, 1 / 4, '[pt_br]'], ['[foz_br]', false, 1 / 5, '[gil_br]'],
  ['[gr]', false, 64.79891, 'mg'], ['[lb_av]', false, 7000, '[gr]'], ['[oz_av]', false, 1 / 16, '[lb_av]'], ['[dr_av]', false, 1 / 16, '[oz_av]'],
  ['[scwt_av]', false, 100, '[lb_av]'], ['[lcwt_av]', false, 112, '[lb_av]'], ['[ston_av]', false, 20, '[scwt_av]'],
  ['[lton_av]', false, 20, '[lcwt_av]'], ['[stone_av]', false, 14, '[lb_av]'],
  ['[degR]', false, 5, 'K/9'],
];

/** Units not proportional to their base (UCUM's special units): a value's conversion into it. */
const SPECIAL: Record<string, { base: string; toBase: (v: number) => number }> = {
  Cel: { base: 'K', toBase: (v) => v + 273.15 },
  '[degF]': { base: 'K', toBase: (v) => ((v + 459.67) * 5) / 9 },
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

/** The atoms by symbol (filled by fillAtoms before the first unit is reduced). */
const ATOMS = new Map<string, Atom>();

/** The atom `symbol` names, with its prefix if any (the whole symbol first: `cd`, `Pa`, `min` are atoms). */
function atom(symbol: string): Reduced {
  const whole = ATOMS.get(symbol);
  if (whole) return whole;
  for (const prefix of [symbol.slice(0, 2), symbol.slice(0, 1)]) {
    const scale = PREFIXES[prefix];
    const a = scale === undefined ? undefined : ATOMS.get(symbol.slice(prefix.length));
    if (a?.metric) return { factor: a.factor * scale!, dims: a.dims };
  }
  throw new UnitError(`unknown unit '${symbol}'`);
}

/** UCUM §2.1's grammar, reading `text` from the start; each component reduced as it is read. */
class UnitParser {
  private at = 0;
  constructor(private readonly text: string) {}

  main(): Reduced {
    const r = this.text[this.at] === '/' ? (this.at++, multiply(ONE, this.term(), -1)) : this.term();
    if (this.at !== this.text.length) throw new UnitError(`unexpected '${this.text[this.at]}'`);
    return r;
  }

  private term(): Reduced {
    let r = this.component();
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
      return r;
    }
    if (s[this.at] === '{') return this.annotation(), ONE;
    const factor = /^\d+(?![\d*^])/.exec(s.slice(this.at));
    if (factor && !/^[^./(){}]/.test(s.slice(this.at + factor[0].length))) {
      this.at += factor[0].length;
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
 * Fills ATOMS from BASES and DEFINED (each reduced by the parser, in dependency order), on the first unit
 * read rather than when the module loads: every process loads it, few read a quantity's unit at once.
 */
function fillAtoms(): void {
  if (filled) return;
  filled = true;
  for (const b of BASES) ATOMS.set(b, { factor: 1, dims: { [b]: 1 }, metric: true });
  for (const [symbol, metric, value, unit] of DEFINED) {
    const r = unit === '1' ? ONE : reduce(unit);
    ATOMS.set(symbol, { factor: value * r.factor, dims: r.dims, metric });
  }
}
