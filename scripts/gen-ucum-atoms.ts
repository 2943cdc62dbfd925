/**
 * Regenerates src/fhir/ucum-atoms.json (UCUM's prefixes and atoms, for checking unit codes) from the
 * UCUM essence as @lhncbc/ucum-lhc ships it:
 *   bun scripts/gen-ucum-atoms.ts
 */
import { ucumAtomTableFromEssence } from '../test/helpers/ucum-atoms.ts';

const path = new URL('../src/fhir/ucum-atoms.json', import.meta.url);
await Bun.write(path, JSON.stringify(ucumAtomTableFromEssence()) + '\n');
console.log(`wrote ${path.pathname}`);
