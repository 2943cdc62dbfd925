/**
 * Regenerates src/fhir/validation/r4-table.json, the compact form of the R4 StructureDefinitions that
 * the validator walks, from the official R4 4.0.1 definitions (npm hl7.fhir.r4.examples):
 *   bun scripts/gen-validation-table.ts
 * A unit test derives the table again and requires it to equal the file.
 */
import { validationTableFromDefinitions } from '../test/helpers/validation-table.ts';

const path = new URL('../src/fhir/validation/r4-table.json', import.meta.url);
await Bun.write(path, JSON.stringify(await validationTableFromDefinitions()) + '\n');
console.log(`wrote ${path.pathname}`);
