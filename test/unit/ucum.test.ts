/**
 * UCUM canonical units (src/fhir/ucum.ts), differentially against the LHC UCUM library
 * (@lhncbc/ucum-lhc, the NLM's implementation of the same specification): for every pair of the units
 * below, both agree whether the two are commensurable, and when they are, on the converted value.
 */
import { describe, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import ucum from '@lhncbc/ucum-lhc';
import { canonicalUnit } from '../../src/fhir/ucum.ts';
import { ucumUnitDefinitionsFromEssence } from '../helpers/ucum-atoms.ts';

const lhc = ucum.UcumLhcUtils.getInstance();

/** Units clinical data uses, every atom of the table once, prefixed forms and compound expressions. */
const UNITS = [
  // SI and prefixes
  'm', 'cm', 'mm', 'um', 'nm', 'km', 'dam', 's', 'ms', 'us', 'g', 'kg', 'mg', 'ug', 'ng', 'pg', 'K', 'C', 'cd', 'rad', 'sr',
  'mol', 'mmol', 'umol', 'nmol', 'pmol', 'Hz', 'kHz', 'N', 'Pa', 'kPa', 'hPa', 'J', 'kJ', 'W', 'mW', 'A', 'mA', 'V', 'mV', 'F',
  'Ohm', 'S', 'Wb', 'T', 'H', 'lm', 'lx', 'Bq', 'MBq', 'Gy', 'mGy', 'Sv', 'mSv', 'deg', 'gon',
  // volume, time, mass, pressure, energy
  'l', 'L', 'dL', 'mL', 'uL', 'fL', 'ar', 'min', 'h', 'd', 'wk', 'a', 'a_t', 'a_j', 'a_g', 'mo', 'mo_s', 'mo_j', 'mo_g', 't', 'u',
  'bar', 'mbar', 'atm', 'm[H2O]', 'cm[H2O]', 'm[Hg]', 'mm[Hg]', '[g]', 'gf', 'kgf', 'dyn', 'erg', 'P', 'cP', 'St', 'G', 'Ao', 'b',
  'eV', 'keV', 'cal_th', 'cal_IT', 'cal', 'kcal', '[Cal]',
  // chemistry, enzymes, radiation
  'osm', 'mosm', 'kat', 'ukat', 'U', 'mU', 'g%', 'Ci', 'mCi', 'R', 'RAD', 'REM', 'eq', 'meq',
  // customary
  '[in_i]', '[ft_i]', '[yd_i]', '[mi_i]', '[nmi_i]', '[mil_i]', '[sin_i]', '[sft_i]', '[syd_i]', '[cin_i]', '[cft_i]', '[cyd_i]',
  "[in_i'H2O]", "[in_i'Hg]", '[gal_us]', '[bbl_us]', '[qt_us]', '[pt_us]', '[gil_us]', '[foz_us]', '[fdr_us]', '[min_us]',
  '[tbs_us]', '[tsp_us]', '[cup_us]', '[foz_m]', '[cup_m]', '[tsp_m]', '[tbs_m]', '[drp]', '[gal_br]', '[pt_br]', '[qt_br]',
  '[gil_br]', '[foz_br]', '[gr]', '[lb_av]', '[oz_av]', '[dr_av]', '[scwt_av]', '[lcwt_av]', '[ston_av]', '[lton_av]',
  '[stone_av]', '[degR]',
  // numbers
  '1', '%', '[ppth]', '[ppm]', '[ppb]', '[pptr]', '[pi]', '10*3', '10*6', '10*-3', '10^3',
  // compound
  'mg/dL', 'g/L', 'g/dL', 'ug/mL', 'ng/mL', 'mmol/L', 'umol/L', 'mol/m3', 'mmol/mol', 'kg/m2', 'g/m2', 'mL/min', 'L/min',
  'mL/min/{1.73_m2}', 'mL/(min.{1.73_m2})', '/min', '{beats}/min', 's-1', '/h', '10*9/L', '10*3/uL', '10*12/L', '/uL', '{cells}/uL',
  'm/s', 'km/h', 'm/s2', 'kg.m/s2', 'mg/(kg.d)', 'ug/kg/min', 'U/L', 'ukat/L', 'mosm/kg', 'meq/L', 'cm2', 'm3', 'dm3',
  'g.m-3', 'kg.m-3', 'J/kg', 'W/m2', 'L/s', '[lb_av]/[in_i]2', '[in_i]/s', '[ft_i]/min', 'mm[Hg]/s', 'kcal/d', '[Cal]/d',
];

/** One UCUM amount as the LHC library converts it, or undefined where it refuses. */
function lhcConvert(from: string, value: number, to: string): number | undefined {
  const r = lhc.convertUnitTo(from, value, to);
  return r.status === 'succeeded' ? r.toVal : undefined;
}

const close = (a: number, b: number) => Math.abs(a - b) <= 1e-9 * Math.max(Math.abs(a), Math.abs(b));

describe('UCUM canonical units against the LHC UCUM library', () => {
  test('every unit of the list has a canonical form, and the library reads it too', () => {
    const unread = UNITS.filter((u) => canonicalUnit(u) === undefined);
    expect(unread).toEqual([]);
    const lhcUnread = UNITS.filter((u) => lhc.validateUnitString(u).status !== 'valid');
    expect(lhcUnread).toEqual([]);
  });

  test('each pair: commensurable for both or for neither, and the same value converted', () => {
    const disagreements: string[] = [];
    let compared = 0;
    for (const a of UNITS) {
      const ca = canonicalUnit(a)!;
      for (const b of UNITS) {
        const cb = canonicalUnit(b)!;
        const value = 37.5;
        const theirs = lhcConvert(a, value, b);
        if ((theirs !== undefined) !== (ca.code === cb.code)) {
          disagreements.push(`${a} -> ${b}: ours ${ca.code} / ${cb.code}, theirs ${theirs === undefined ? 'refused' : theirs}`);
          continue;
        }
        if (theirs === undefined) continue;
        compared++;
        // The library's value in b, made canonical here, is this value in a made canonical.
        if (!close(ca.convert(value), cb.convert(theirs))) disagreements.push(`${a} -> ${b}: ${ca.convert(value)} against ${cb.convert(theirs)}`);
      }
    }
    expect(disagreements).toEqual([]);
    expect(compared).toBeGreaterThan(1000);
  });

  test('temperatures: Cel and [degF] through kelvin, as the library converts them', () => {
    for (const [from, to] of [['Cel', '[degF]'], ['[degF]', 'Cel'], ['Cel', 'K'], ['[degF]', 'K'], ['K', 'Cel'], ['[degR]', '[degF]']]) {
      for (const v of [-40, 0, 36.6, 98.6, 451]) {
        const theirs = lhcConvert(from!, v, to!);
        expect(theirs).toBeDefined();
        expect(close(canonicalUnit(from!)!.convert(v), canonicalUnit(to!)!.convert(theirs!))).toBe(true);
      }
    }
    expect(canonicalUnit('Cel')!.code).toBe('K');
  });
});

describe("every unit of UCUM's essence", () => {
  const file = JSON.parse(readFileSync(new URL('../../src/fhir/ucum-units.json', import.meta.url), 'utf8'));
  /** Units of every dimension the essence's units have, to convert each of them into. */
  const PROBES = ['1', 'm', 'g', 's', 'K', 'rad', 'C', 'cd', 'mol', 'eq', 'm2', 'm3', 'm-1', 's-1', 'm/s', 'm/s2', 'N', 'Pa', 'J', 'W', 'A', 'V',
    'Ohm', 'S', 'F', 'T', 'Wb', 'H', 'sr', 'cd.sr', 'lx', 'g/m', 'g/L', 'mol/s', 'm2/s', 'C/kg', 'J/K', 'J.s', 'A/m', 'g.m-1.s-1', 'Gy',
    'm3.kg-1.s-2', 'F/m', 'N/A2', 'cd/m2', 'mL/min/kg', 'Pa.s/m3'];

  test('ucum-units.json is the UCUM essence as the LHC library ships it (regenerate: bun scripts/gen-ucum-atoms.ts)', () => {
    expect(ucumUnitDefinitionsFromEssence()).toEqual(file);
    expect(file.prefixes).toHaveLength(24);
    // 7 base units and 304 others: defined as multiples, arbitrary, or special.
    expect(file.units.length + file.arbitrary.length + file.special.length).toBe(304);
  });

  test('each defined unit, and its prefixed form, has a canonical form; the LHC library converts it into the same units, to the same value', () => {
    const disagreements: string[] = [];
    let compared = 0;
    // [LPF] is 100 (UCUM: the low power field is a hundred high power fields); the library converts it as 1.
    const units = (file.units as [string, boolean][]).filter(([code]) => code !== '[LPF]');
    for (const code of units.flatMap(([code, metric]) => (metric ? [code, `k${code}`, `m${code}`] : [code]))) {
      const ours = canonicalUnit(code);
      if (ours === undefined) {
        disagreements.push(`${code}: no canonical form`);
        continue;
      }
      let commensurable = 0;
      for (const probe of PROBES) {
        const p = canonicalUnit(probe)!;
        const theirs = lhcConvert(code, 2.5, probe);
        if ((theirs !== undefined) !== (ours.code === p.code)) disagreements.push(`${code} -> ${probe}: ours ${ours.code} / ${p.code}, theirs ${theirs ?? 'refused'}`);
        else if (theirs !== undefined) {
          commensurable++;
          compared++;
          if (!close(ours.convert(2.5), p.convert(theirs))) disagreements.push(`${code} -> ${probe}: ${ours.convert(2.5)} against ${p.convert(theirs)}`);
        }
      }
      if (commensurable === 0) disagreements.push(`${code}: no probe of its dimension, ${ours.code}`);
    }
    expect(disagreements).toEqual([]);
    expect(compared).toBeGreaterThan(350);
    expect(canonicalUnit('[LPF]')!.convert(1)).toBe(100);
    expect(canonicalUnit('[HPF]')!.convert(1)).toBe(1);
  });

  test('compound units of the newly read atoms: psi, Torr, the US survey and troy units, binary prefixes, bytes', () => {
    const same = (a: string, va: number, b: string, vb: number) => {
      const [x, y] = [canonicalUnit(a)!, canonicalUnit(b)!];
      expect([a, b, x.code]).toEqual([a, b, y.code]);
      expect(close(x.convert(va), y.convert(vb))).toBe(true);
      expect(lhcConvert(a, va, b)).toBeCloseTo(vb, 6);
    };
    same('[psi]', 1, 'kPa', 6.894757293168361);
    same('Torr', 760, 'atm', 0.9999972366148532);
    same('[mi_us]', 1, 'km', 1.6093472186944373);
    same('[lb_tr]', 1, 'g', 373.2417216);
    same('KiBy', 1, 'bit', 8192);
    same('mg/[HPF]', 3, 'mg', 3);
  });

  test("arbitrary units: each commensurable with its own prefixed forms only; special units other than the temperatures with nothing", () => {
    expect(canonicalUnit('[CFU]/mL')!.code).toBe(canonicalUnit('[CFU]/L')!.code);
    expect(canonicalUnit('[CFU]/mL')!.convert(2)).toBe(canonicalUnit('[CFU]/L')!.convert(2000));
    expect(canonicalUnit('[CFU]')!.code).not.toBe(canonicalUnit('[PFU]')!.code);
    expect(canonicalUnit('[CFU]')!.code).not.toBe(canonicalUnit('1')!.code);
    expect(canonicalUnit('[IU]/L')!.code).toBe(canonicalUnit('[iU]/L')!.code);
    for (const code of file.arbitrary.map((a: [string]) => a[0])) expect([code, canonicalUnit(code)?.code]).toEqual([code, expect.stringContaining('[')]);
    const converted = ['Cel', '[degF]', '[degRe]'];
    for (const code of file.special as string[]) {
      expect([code, canonicalUnit(code)?.code]).toEqual([code, converted.includes(code) ? 'K' : undefined]);
      expect([code, canonicalUnit(`${code}/h`)]).toEqual([code, undefined]);
    }
    // Réaumur: water freezes at 0 and boils at 80.
    expect(canonicalUnit('[degRe]')!.convert(80)).toBe(canonicalUnit('Cel')!.convert(100));
    expect(canonicalUnit('[degRe]')!.convert(0)).toBe(273.15);
  });
});

describe('UCUM canonical units', () => {
  test("a leading '/' divides the first component alone, and a number may be annotated, as the LHC library reads them", () => {
    // [unit, commensurable unit, its amount for 2 of the first, as the operators apply left to right]
    const cases: [string, string, number][] = [
      ['/s.m', 'm/s', 2], ['/kg/d', '/(kg.d)', 2], ['/L/h', 'L-1.h-1', 2], ['/18/10', '1', 2 / 180], ['/[HPF]/h', '/([HPF].h)', 2],
      ['/min.{1.73_m2}', '/min', 2], ['/100{WBCs}', '%', 2], ['{#}/100{WBCs}', '%', 2], ['(2){x}', '1', 4], ['10*3{copies}/mL', '/L', 2e6],
    ];
    for (const [unit, other, amount] of cases) {
      const [a, b] = [canonicalUnit(unit), canonicalUnit(other)!];
      expect([unit, a?.code]).toEqual([unit, b.code]);
      expect([unit, close(a!.convert(2), b.convert(amount))]).toEqual([unit, true]);
      const theirs = lhcConvert(unit, 2, other);
      expect([unit, theirs !== undefined && close(theirs, amount)]).toEqual([unit, true]);
    }
  });

  test('one amount written in different prefixes converts to the same number (15 significant digits)', () => {
    const mg = canonicalUnit('mg')!;
    const ug = canonicalUnit('ug')!;
    const g = canonicalUnit('g')!;
    expect(mg.convert(5.4)).toBe(0.0054);
    expect(ug.convert(5400)).toBe(0.0054);
    expect(g.convert(0.0054)).toBe(0.0054);
    expect(canonicalUnit('kg')!.convert(Infinity)).toBe(Infinity);
    expect(canonicalUnit('Cel')!.convert(-Infinity)).toBe(-Infinity);
  });

  test('annotations are the unit 1; the canonical code names base units with exponents', () => {
    expect(canonicalUnit('{beats}/min')!.code).toBe(canonicalUnit('/min')!.code);
    expect(canonicalUnit('{rbc}')!.code).toBe('1');
    expect(canonicalUnit('mg/dL')!.code).toBe('g.m-3');
    expect(canonicalUnit('mmol/L')!.code).toBe('m-3.mol');
    expect(canonicalUnit('kPa')!.code).toBe(canonicalUnit('mm[Hg]')!.code);
  });

  test('an arbitrary unit is commensurable with its own prefixed forms only', () => {
    const a = canonicalUnit('m[IU]/mL')!;
    const b = canonicalUnit('[IU]/L')!;
    expect(a.code).toBe(b.code);
    expect(a.convert(2)).toBe(b.convert(2));
    expect(canonicalUnit("[arb'U]/L")!.code).not.toBe(b.code);
    expect(canonicalUnit('[iU]')!.code).not.toBe(canonicalUnit('1')!.code);
  });

  test('what is not a unit this reads has no canonical form', () => {
    for (const code of ['', 'mcg', 'mEq/L', 'Cel/h', 'mCel', '2[degF]', 'm(', '(m', 'm)', '[in_i', '{x', 'kg..m', '/', 'g/', '.g', 'xyz', 'dam2x', 'x'.repeat(300)]) {
      expect(canonicalUnit(code)).toBeUndefined();
    }
  });

  test('a metric atom takes one prefix, a customary one none', () => {
    expect(canonicalUnit('kkg')).toBeUndefined();
    expect(canonicalUnit('k[lb_av]')).toBeUndefined();
    expect(canonicalUnit('kmin')).toBeUndefined();
    expect(canonicalUnit('cd')!.code).toBe('cd');
    expect(canonicalUnit('Pa')!.code).toBe('g.m-1.s-2');
  });
});
