/**
 * Regenerates src/fhir/ucum-atoms.json (UCUM's prefixes and atoms, for checking unit codes) and
 * src/fhir/ucum-units.json (UCUM's definitions of its units, for converting between them) from the
 * UCUM essence as @lhncbc/ucum-lhc ships it:
 *   bun scripts/gen-ucum-atoms.ts
 */
import { ucumAtomTableFromEssence, ucumUnitDefinitionsFromEssence } from '../test/helpers/ucum-atoms.ts';

const atoms = new URL('../src/fhir/ucum-atoms.json', import.meta.url);
await Bun.write(atoms, JSON.stringify(ucumAtomTableFromEssence()) + '\n');
console.log(`wrote ${atoms.pathname}`);
const units = new URL('../src/fhir/ucum-units.json', import.meta.url);
await Bun.write(units, JSON.stringify(ucumUnitDefinitionsFromEssence()) + '\n');
console.log(`wrote ${units.pathname}`);
