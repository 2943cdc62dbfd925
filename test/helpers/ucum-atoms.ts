/**
 * The table of UCUM's prefixes and atoms Cinder checks unit codes against (src/fhir/ucum-atoms.json),
 * read from the UCUM essence as the LHC UCUM library (@lhncbc/ucum-lhc, a development dependency)
 * ships it: its units whose source is UCUM (the essence's base units and units, not the LOINC unit
 * expressions the library adds), each with whether it takes a prefix (a base unit, or a metric unit).
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

export interface UcumAtomTable {
  /** The prefixes' case-sensitive codes. */
  prefixes: string[];
  /** The case-sensitive codes of the base units and metric atoms (they take a prefix). */
  metric: string[];
  /** The other atoms' codes. */
  nonMetric: string[];
}

export function ucumAtomTableFromEssence(): UcumAtomTable {
  const file = createRequire(import.meta.url).resolve('@lhncbc/ucum-lhc/data/ucumDefs.min.json');
  const defs = JSON.parse(readFileSync(file, 'utf8')) as { prefixes: { config: string[]; data: unknown[][] }; units: { config: (string | string[])[]; data: unknown[][] } };
  const p = defs.prefixes.config.indexOf('code_');
  const prefixes = defs.prefixes.data.map((row) => String(row[p])).sort();
  const u = defs.units.config;
  const [code, metric, base, source] = [u.indexOf('csCode_'), u.indexOf('isMetric_'), u.indexOf('isBase_'), u.indexOf('source_')];
  const atoms = defs.units.data.filter((row) => row[source] === 'UCUM');
  // A base unit takes a prefix (kg, mm), though the library marks base units as not metric.
  const takesPrefix = (row: unknown[]) => row[metric] === true || row[base] === true;
  return {
    prefixes,
    metric: atoms.filter(takesPrefix).map((row) => String(row[code])).sort(),
    nonMetric: atoms.filter((row) => !takesPrefix(row)).map((row) => String(row[code])).sort(),
  };
}

/**
 * UCUM's definitions of its units (src/fhir/ucum-units.json, which src/fhir/ucum.ts reduces to base units), read
 * from the same essence: the prefixes with their values, and each unit that is not a base unit as the essence
 * defines it, `value` times the unit expression `unit` (in the essence's order), with whether it takes a prefix.
 * Arbitrary units (`[CFU]`, `[iU]`: defined as 1 only to say they have none) and special units (`Cel`, `[pH]`,
 * `B[SPL]`, `[diop]`: a function of a value, not a multiple) are listed apart, for ucum.ts to keep each arbitrary
 * unit a base of its own and to convert only the special units it knows.
 */
export interface UcumUnitDefinitions {
  prefixes: [code: string, value: number][];
  /** [code, takes a prefix, value, unit]: `1 code = value unit`. */
  units: [string, boolean, number, string][];
  /** [code, takes a prefix, unit]: `unit` '1' for one that is its own base, else the arbitrary unit it equals (`[IU]`, `[iU]`). */
  arbitrary: [string, boolean, string][];
  /** Codes of units whose conversion is a function (UCUM's special units). */
  special: string[];
}

export function ucumUnitDefinitionsFromEssence(): UcumUnitDefinitions {
  const file = createRequire(import.meta.url).resolve('@lhncbc/ucum-lhc/data/ucumDefs.min.json');
  const defs = JSON.parse(readFileSync(file, 'utf8')) as { prefixes: { config: string[]; data: unknown[][] }; units: { config: (string | string[])[]; data: unknown[][] } };
  const p = defs.prefixes.config;
  const prefixes = defs.prefixes.data
    .map((row): [string, number] => [String(row[p.indexOf('code_')]), Number(row[p.indexOf('value_')])])
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const u = defs.units.config;
  const col = (name: string) => u.indexOf(name);
  const [code, metric, base, source, special, arbitrary, unit, factor, cnv] = ['csCode_', 'isMetric_', 'isBase_', 'source_', 'isSpecial_', 'isArbitrary_', 'csUnitString_', 'baseFactor_', 'cnv_'].map(col) as number[];
  const atoms = defs.units.data.filter((row) => row[source] === 'UCUM' && row[base] !== true);
  // A conversion function marks a special unit too: the library's `inv` of the reciprocals ([diop], [mesh_i], Bd), which
  // UCUM's editions define as `/m` (proportional) or as the function (a focal length's inverse): converted by neither.
  const isSpecial = (row: unknown[]) => row[special] === true || (row[cnv] !== null && row[cnv] !== undefined);
  return {
    prefixes,
    units: atoms.filter((row) => !isSpecial(row) && row[arbitrary] !== true)
      .map((row) => [String(row[code]), row[metric] === true, Number(row[factor]), String(row[unit])]),
    arbitrary: atoms.filter((row) => !isSpecial(row) && row[arbitrary] === true).map((row) => [String(row[code]), row[metric] === true, String(row[unit])]),
    special: atoms.filter(isSpecial).map((row) => String(row[code])),
  };
}
