/**
 * Regenerates src/fhir/validation/profile/r4-base-definitions.json.gz, HL7's R4 resource and datatype
 * definitions (snapshots only) that snapshot generation stands on, from npm hl7.fhir.r4.examples:
 *   bun scripts/gen-base-definitions.ts
 * The snapshot reference test derives it again and requires its content to equal the file's.
 */
import { baseDefinitionsText } from '../test/helpers/base-definitions.ts';

const path = new URL('../src/fhir/validation/profile/r4-base-definitions.json.gz', import.meta.url);
await Bun.write(path, Bun.gzipSync(new TextEncoder().encode(baseDefinitionsText()), { level: 9 }));
console.log(`wrote ${path.pathname}`);
