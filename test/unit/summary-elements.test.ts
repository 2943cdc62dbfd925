import { expect, test } from 'bun:test';
import choices from '../../src/fhir/choice-elements.json' with { type: 'json' };
import summary from '../../src/fhir/summary-elements.json' with { type: 'json' };
import { choiceElementsFromDefinitions, summaryElementsFromDefinitions } from '../helpers/summary-elements.ts';

test('summary-elements.json and choice-elements.json match the R4 StructureDefinitions (regenerate: bun scripts/summary-elements.ts)', async () => {
  expect(summary as unknown).toEqual(await summaryElementsFromDefinitions());
  expect(choices as unknown).toEqual(await choiceElementsFromDefinitions());
});
