/**
 * Regenerates, from the official R4 4.0.1 StructureDefinitions (npm hl7.fhir.r4.examples):
 * - src/fhir/summary-elements.json: per resource type, its summary elements, within its backbone
 *   elements too, and its top-level mandatory elements (`_summary`, `_elements`);
 * - src/fhir/choice-elements.json: the names of every choice element, for the FHIRPath evaluator.
 *   bun scripts/summary-elements.ts
 * A unit test derives both again and requires them to equal the files.
 */
import { choiceElementsFromDefinitions, summaryElementsFromDefinitions } from '../test/helpers/summary-elements.ts';

const summary = await summaryElementsFromDefinitions();
await Bun.write(new URL('../src/fhir/summary-elements.json', import.meta.url), JSON.stringify(summary) + '\n');
await Bun.write(new URL('../src/fhir/choice-elements.json', import.meta.url), JSON.stringify(await choiceElementsFromDefinitions()) + '\n');
console.log(`${Object.keys(summary).length} types`);
