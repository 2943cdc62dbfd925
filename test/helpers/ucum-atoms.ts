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
