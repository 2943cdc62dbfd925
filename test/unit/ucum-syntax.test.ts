/**
 * UCUM unit codes (src/fhir/ucum-syntax.ts): the grammar as HL7's UCUM library (the reference
 * validator's) reads it, the table of atoms and prefixes against the UCUM essence, and a differential
 * run against the LHC UCUM library (@lhncbc/ucum-lhc) over every unit expression it lists.
 */
import { expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import ucum from '@lhncbc/ucum-lhc';
import { ucumCodeProblem } from '../../src/fhir/ucum-syntax.ts';
import { ucumAtomTableFromEssence } from '../helpers/ucum-atoms.ts';

test('ucum-atoms.json is the UCUM essence as the LHC library ships it (regenerate: bun scripts/gen-ucum-atoms.ts)', () => {
  const file = JSON.parse(readFileSync(new URL('../../src/fhir/ucum-atoms.json', import.meta.url), 'utf8'));
  expect(ucumAtomTableFromEssence()).toEqual(file);
  expect(file.prefixes).toHaveLength(24);
  expect(file.metric.length + file.nonMetric.length).toBe(311);
});

test('valid codes: atoms, prefixes on base and metric units, exponents, factors, annotations, parentheses, division', () => {
  for (const code of ['m', 'kg', 'ug', 'dam', 'mL', 'uL', 'kPa', 'mm[Hg]', 'cm[H2O]', '[in_i]', '[lb_av]', "[arb'U]", "'", "''", '%', '10*3', '10^6', '10*-3', '/min', 'm2', 's-1', 's+1', 'm.s-2',
    'kg/m2', 'mg/dL', 'mL/min/{1.73_m2}', '{cells}/uL', '{cells}', '{}', '{a b}', 'mg{total}', '10{x}', '(kg)', '((m))', 'm/(s.s)', 'umol/(24.h)', 'B[10.nV]', 'dB[SPL]', '1', '100', '1000/L',
    // What HL7's UCUM library also reads: a term may begin with `/` after an operator, annotations may follow one another.
    '//m', 'm./s', '{a}{b}', 'm{a}{b}', '(m){x}']) {
    expect([code, ucumCodeProblem(code)]).toEqual([code, undefined]);
  }
});

test('invalid codes, each with where it fails', () => {
  const cases: [string, string][] = [
    ['mgg', "The unit 'mgg' is unknown at character 1"],
    ['kg/mgg', "The unit 'mgg' is unknown at character 4"],
    ['21612-7', "The unit '21612-7' is unknown at character 1"],
    ['mcg', "The unit 'mcg' is unknown"],
    ['k[in_i]', "The unit 'k[in_i]' is unknown"], // [in_i] is not metric: no prefix
    ['Mmo', "The unit 'Mmo' is unknown"],
    ["m'", "The unit 'm'' is unknown"],
    ['2mg', "The unit '2mg' is unknown"],
    ['m-', "The unit 'm-' is unknown"],
    ['kg ', 'no whitespace'],
    ['k g', 'no whitespace'],
    ['m/', 'but the code ends'],
    ['m.', 'but the code ends'],
    ['.m', "not '.'"],
    ['(m', "Expected ')'"],
    ['m)', "Expected '/' or '.'"],
    ['(m)2', "Expected '/' or '.'"],
    ['{cells', "Missing '}'"],
    ['m{a}s', "Expected '/' or '.'"],
    ['[in_i', "Missing ']'"],
    ['in_i]', "Unexpected ']'"],
    ['m{é}', 'printable ASCII'],
    ['é', 'printable ASCII'],
  ];
  for (const [code, why] of cases) expect([code, ucumCodeProblem(code)]).toEqual([code, expect.stringContaining(why)]);
  // Deep nesting is refused without a stack overflow.
  expect(ucumCodeProblem('('.repeat(100_000) + 'm' + ')'.repeat(100_000))).toContain('nested parentheses');
  expect(ucumCodeProblem('m.'.repeat(50_000) + 'm')).toBeUndefined();
});

test('the same verdict as the LHC UCUM library on every unit expression it lists, but where it departs from UCUM', () => {
  const file = createRequire(import.meta.url).resolve('@lhncbc/ucum-lhc/data/ucumDefs.min.json');
  const defs = JSON.parse(readFileSync(file, 'utf8'));
  const code = defs.units.config.indexOf('csCode_');
  const codes: string[] = defs.units.data.map((row: unknown[]) => String(row[code]));
  const lhc = ucum.UcumLhcUtils.getInstance();
  const disagree: string[] = [];
  for (const c of codes) {
    const theirs = lhc.validateUnitString(c).status === 'valid';
    if (theirs !== (ucumCodeProblem(c) === undefined)) disagree.push(c);
  }
  expect(codes.length).toBeGreaterThan(700);
  // The library trims the whitespace two of its LOINC unit strings end with; UCUM has none (and HL7's library refuses it).
  expect(disagree.sort()).toEqual(['L/(min.m2) ', 'g/kg ']);
});
