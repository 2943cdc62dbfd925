/**
 * No false rejections: every resource the benchmark generator writes, real Synthea data
 * (test/fixtures/validation), and every example of the FHIR R4 specification (npm
 * hl7.fhir.r4.examples 4.0.1) except the ones with known defects listed here, passes validation. The table of the validator is also rebuilt from the definitions and compared.
 */
import { describe, expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { generatePatients } from '../../../bench/lib/generator.ts';
import { validateResource } from '../../../src/fhir/validation/validate.ts';
import { validationTableFromDefinitions } from '../../helpers/validation-table.ts';

type Json = Record<string, unknown>;

/**
 * Examples of the R4 specification that are not valid R4, each with the element at fault: the
 * validator must find exactly these problems and no others.
 */
const KNOWN_DEFECTS: Record<string, string[]> = {
  // Questionnaire.item.linkId is 1..1; the example's nested display items have none.
  'Questionnaire-qs1.json': ['Questionnaire.item[].item[].item[].linkId', 'Questionnaire.item[].item[].item[].item[].linkId', 'Questionnaire.item[].item[].linkId'],
  // SearchParameter.base is 1..*; the generated extension SearchParameters have none.
  ...Object.fromEntries(
    ['valueset-extensions-ValueSet-author', 'valueset-extensions-ValueSet-end', 'valueset-extensions-ValueSet-keyword', 'valueset-extensions-ValueSet-workflow',
      'valueset-extensions-ValueSet-effective', 'codesystem-extensions-CodeSystem-author', 'codesystem-extensions-CodeSystem-effective',
      'codesystem-extensions-CodeSystem-end', 'codesystem-extensions-CodeSystem-keyword', 'codesystem-extensions-CodeSystem-workflow']
      .map((id) => [`SearchParameter-${id}.json`, ['SearchParameter.base']]),
  ),
  // An id longer than 64 characters.
  'SearchParameter-questionnaireresponse-extensions-QuestionnaireResponse-item-subject.json': ['SearchParameter.id'],
  // ImplementationGuide.name and status are 1..1.
  'ImplementationGuide-fhir.json': ['ImplementationGuide.name', 'ImplementationGuide.status'],
  'ig-r4.json': ['ImplementationGuide.name', 'ImplementationGuide.status'],
  // Narratives without content (txt-2).
  'ActivityDefinition-heart-valve-replacement.json': ['ActivityDefinition.text.div'],
  'ActivityDefinition-blood-tubes-supply.json': ['ActivityDefinition.text.div'],
  'Questionnaire-zika-virus-exposure-assessment.json': ['Questionnaire.text.div'],
  'EventDefinition-example.json': ['EventDefinition.text.div'],
  // Two entries with one fullUrl (bdl-7).
  'Bundle-dataelements.json': ['Bundle'],
  // fullUrls that disagree with their resource's id (Bundle.entry.fullUrl): pat12 for pat2, lri-gramstain1 for gramstain1, ...
  'Bundle-10bb101f-a121-4264-a920-67be9cb82c74.json': ['Bundle.entry[].fullUrl'],
  'Bundle-3a0707d3-549e-4467-b8b8-5a2ab3800efe.json': ['Bundle.entry[].fullUrl'],
  'Bundle-lri-example.json': ['Bundle.entry[].fullUrl'],
  // Two properties with the code 'Laterality' (a concept's property names its definition by code).
  'CodeSystem-snomedct.json': ['CodeSystem.property[].code'],
  'Bundle-valuesets.json': ['Bundle.entry[].resource.property[].code'],
  // SNOMED CT codes that can be no concept's: `T-15460` (a SNOMED RT code, no SCTID), and an SCTID whose
  // partition (11) is a description's (HL7's validator reports both as unknown codes).
  'ImagingStudy-example-xr.json': ['ImagingStudy.series[].bodySite.code'],
  'NutritionOrder-enteralcontinuous.json': ['NutritionOrder.enteralFormula.baseFormulaType.coding[].code'],
  // A Quantity's SNOMED CT unit `415818005`, whose check digit is wrong: HL7's
  // validator checks a Quantity's code as a Coding's and reports it unknown.
  'MedicationDispense-meddisp0314.json': ['MedicationDispense.quantity.code'],
  'MedicationDispense-meddisp0317.json': ['MedicationDispense.quantity.code'],
  // Logical models that are not abstract and have no baseDefinition (sdf-4).
  ...Object.fromEntries(['Definition', 'Event', 'FiveWs', 'Request'].map((id) => [`StructureDefinition-${id}.json`, ['StructureDefinition']])),
  // A placeholder `urn:oid:X.Y.Z` for a value set's canonical: no OID.
  'Library-zika-virus-intervention-logic.json': ['Library.dataRequirement[].codeFilter[].valueSet'],
  // References to types the element does not allow.
  'Observation-clinical-gender.json': ['Observation.performer[].reference'],
  'DeviceUseStatement-example.json': ['DeviceUseStatement.reasonReference[].reference'],
  'MedicationRequest-medrx0301.json': ['MedicationRequest.dispenseRequest.performer.reference'],
  'DeviceMetric-example.json': ['DeviceMetric.parent.reference'],
  // Quantities whose system is UCUM but whose code is no UCUM unit (HL7's validator reports them too):
  // `ea`, `TAB`, `tbl`, `drop` are no units of UCUM (its annotations `{tbl}`, `{drop}` are), `mcg` is `ug`,
  // `mEq` is `meq`, `hr` is `h`, `month` is `mo`.
  'Bundle-father.json': ['Bundle.entry[].resource.dosageInstruction[].doseAndRate[].dose.ofType(Quantity).code'], // "tbl"
  'Claim-760151.json': ['Claim.item[].quantity.code'], // "TAB"
  'Claim-760152.json': ['Claim.item[].quantity.code'], // "TAB"
  'MedicationDispense-meddisp0309.json': ['MedicationDispense.dosageInstruction[].doseAndRate[].dose.ofType(Quantity).code'], // "drop"
  'MedicationDispense-meddisp0313.json': ['MedicationDispense.contained[].ingredient[].strength.numerator.code', 'MedicationDispense.dosageInstruction[].doseAndRate[].dose.ofType(Quantity).code'], // "mEq"
  'MedicationDispense-meddisp0318.json': ['MedicationDispense.dosageInstruction[].doseAndRate[].dose.ofType(Quantity).code'], // "mcg"
  'MedicationDispense-meddisp0324.json': ['MedicationDispense.dosageInstruction[].doseAndRate[].dose.ofType(Quantity).code'], // "ea"
  'MedicationDispense-meddisp0327.json': ['MedicationDispense.dosageInstruction[].doseAndRate[].dose.ofType(Quantity).code'], // "ea"
  'MedicationDispense-meddisp0328.json': ['MedicationDispense.dosageInstruction[].doseAndRate[].dose.ofType(Quantity).code'], // "ea"
  'MedicationDispense-meddisp0329.json': ['MedicationDispense.dosageInstruction[].doseAndRate[].dose.ofType(Quantity).code'], // "ea"
  'MedicationRequest-medrx0304.json': ['MedicationRequest.dosageInstruction[].doseAndRate[].dose.ofType(Quantity).code'], // "drop"
  'MedicationRequest-medrx0314.json': ['MedicationRequest.dosageInstruction[].doseAndRate[].dose.ofType(Quantity).code'], // "mcg"
  'MedicationRequest-medrx0319.json': ['MedicationRequest.dosageInstruction[].doseAndRate[].rate.ofType(Quantity).code'], // "ml/hr"
  'MedicationRequest-medrx0322.json': ['MedicationRequest.contained[].ingredient[].strength.numerator.code', 'MedicationRequest.dosageInstruction[].doseAndRate[].dose.ofType(Quantity).code'], // "mEq"
  'MedicationRequest-medrx0325.json': ['MedicationRequest.dosageInstruction[].doseAndRate[].dose.ofType(Quantity).code'], // "ea"
  'MedicationRequest-medrx0326.json': ['MedicationRequest.dosageInstruction[].doseAndRate[].dose.ofType(Quantity).code'], // "ea"
  'MedicationRequest-medrx0328.json': ['MedicationRequest.dosageInstruction[].doseAndRate[].dose.ofType(Quantity).code'], // "ea"
  'MedicationRequest-medrx0329.json': ['MedicationRequest.dosageInstruction[].doseAndRate[].dose.ofType(Quantity).code'], // "ea"
  'MedicationRequest-medrx0334.json': ['MedicationRequest.dosageInstruction[].doseAndRate[].dose.ofType(Quantity).code'], // "ea"
  'MedicationRequest-medrx0335.json': ['MedicationRequest.dosageInstruction[].doseAndRate[].dose.ofType(Quantity).code'], // "ea"
  'VisionPrescription-33124.json': ['VisionPrescription.lensSpecification[].duration.code'], // "month"
};

const EXAMPLES = new URL('../../../node_modules/hl7.fhir.r4.examples/', import.meta.url);

describe('valid resources pass', () => {
  test("every resource of bench/generate.ts's generator", () => {
    const problems: string[] = [];
    let count = 0;
    for (const r of generatePatients({ patients: 40, seed: 'corpus' })) {
      count++;
      for (const i of validateResource(r as Json, 'strict')) problems.push(`${r.resourceType}/${r.id} ${i.expression}: ${i.text}`);
    }
    expect(count).toBeGreaterThan(2000);
    expect(problems).toEqual([]);
  });

  test('real Synthea data and the Synthea-shaped import fixtures, and each Bundle entry of them', () => {
    const fixtures = new URL('../../fixtures/', import.meta.url);
    const resources: Json[] = [];
    // Files only: validation/fhir-test-cases/ holds HL7's validator test cases, invalid by design.
    for (const dir of ['validation/', 'import/synthea/']) {
      for (const file of readdirSync(new URL(dir, fixtures), { withFileTypes: true }).filter((f) => f.isFile()).map((f) => f.name).sort()) {
        const text = readFileSync(new URL(dir + file, fixtures), 'utf8');
        if (file.endsWith('.ndjson')) resources.push(...text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Json));
        else if (file.endsWith('.json')) resources.push(JSON.parse(text) as Json);
      }
    }
    const entries = resources.flatMap((r) => (r.resourceType === 'Bundle' ? ((r.entry ?? []) as { resource: Json }[]).map((e) => e.resource) : []));
    const all = [...resources, ...entries];
    expect(all.length).toBeGreaterThan(300);
    expect(new Set(all.map((r) => r.resourceType)).size).toBeGreaterThan(15);
    const problems = all.flatMap((r) => validateResource(r, 'strict').filter((i) => i.severity === 'error').map((i) => `${r.resourceType}/${r.id} ${i.expression}: ${i.text}`));
    expect(problems).toEqual([]);
  }, 30_000);

  test('every example of the FHIR R4 specification, except the known defects', () => {
    const found: Record<string, string[]> = {};
    let count = 0;
    for (const file of readdirSync(EXAMPLES).sort()) {
      if (!file.endsWith('.json') || file === 'package.json') continue;
      const r = JSON.parse(readFileSync(new URL(file, EXAMPLES), 'utf8')) as Json;
      if (typeof r.resourceType !== 'string') continue;
      count++;
      const errors = validateResource(r, 'strict').filter((i) => i.severity === 'error');
      if (errors.length) found[file] = [...new Set(errors.map((i) => i.expression.replace(/\[\d+\]/g, '[]')))].sort();
    }
    expect(count).toBeGreaterThan(2500);
    const expected = Object.fromEntries(Object.entries(KNOWN_DEFECTS).map(([f, e]) => [f, [...e].sort()]));
    expect(found).toEqual(expected);
  }, 60_000);
});

test('r4-table.json is what the definitions and the terminology engine give today', async () => {
  const file = JSON.parse(readFileSync(new URL('../../../src/fhir/validation/r4-table.json', import.meta.url), 'utf8'));
  expect(await validationTableFromDefinitions()).toEqual(file);
}, 30_000);
