/**
 * Regenerates src/export/element-table.json (top-level elements of every R4 resource type and the
 * mandatory ones, for `_elements`) from the official R4 4.0.1 StructureDefinitions (npm
 * hl7.fhir.r4.examples):
 *   bun scripts/gen-element-table.ts
 */
import { elementTableFromDefinitions } from '../test/helpers/element-table.ts';

const path = new URL('../src/export/element-table.json', import.meta.url);
await Bun.write(path, JSON.stringify(await elementTableFromDefinitions()) + '\n');
console.log(`wrote ${path.pathname}`);
