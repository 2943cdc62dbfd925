import { OperationParameters, P } from './parameters.ts';

/** Inputs of ValueSet/$validate-code (FHIR R4 ValueSet-validate-code). */
export const valueSetValidateCodeParams = new OperationParameters('ValueSet/$validate-code', {
  url: { kind: P.uri },
  valueSetVersion: { kind: P.string },
  valueSet: { kind: P.valueSet },
  code: { kind: P.code },
  system: { kind: P.uri },
  systemVersion: { kind: P.string },
  display: { kind: P.string },
  coding: { kind: P.coding },
  codeableConcept: { kind: P.codeableConcept },
  abstract: { kind: P.boolean },
  date: { kind: P.dateTime },
  displayLanguage: { kind: P.language },
  // Not R4's (its $expand has them): the HL7 reference servers take them here too, as its validator sends them.
  'system-version': { kind: P.uri, repeats: true },
  'check-system-version': { kind: P.uri, repeats: true },
  'force-system-version': { kind: P.uri, repeats: true },
});

/** Inputs of CodeSystem/$validate-code (FHIR R4 CodeSystem-validate-code). */
export const codeSystemValidateCodeParams = new OperationParameters('CodeSystem/$validate-code', {
  url: { kind: P.uri },
  codeSystem: { kind: P.codeSystem },
  version: { kind: P.string },
  code: { kind: P.code },
  display: { kind: P.string },
  coding: { kind: P.coding },
  codeableConcept: { kind: P.codeableConcept },
  abstract: { kind: P.boolean },
  date: { kind: P.dateTime },
  displayLanguage: { kind: P.language },
});

/** Inputs of CodeSystem/$lookup (FHIR R4 CodeSystem-lookup). */
export const lookupParams = new OperationParameters('CodeSystem/$lookup', {
  code: { kind: P.code },
  system: { kind: P.uri },
  version: { kind: P.string },
  coding: { kind: P.coding },
  date: { kind: P.dateTime },
  displayLanguage: { kind: P.language },
  property: { kind: P.code, repeats: true },
});

/** Inputs of CodeSystem/$find-matches (FHIR R4 CodeSystem-find-matches). */
export const findMatchesParams = new OperationParameters('CodeSystem/$find-matches', {
  system: { kind: P.uri },
  version: { kind: P.string },
  property: { kind: P.findProperty, repeats: true },
  exact: { kind: P.boolean },
  compositional: { kind: P.boolean },
});

/** Inputs of CodeSystem/$subsumes (FHIR R4 CodeSystem-subsumes). */
export const subsumesParams = new OperationParameters('CodeSystem/$subsumes', {
  codeA: { kind: P.code },
  codeB: { kind: P.code },
  system: { kind: P.uri },
  version: { kind: P.string },
  codingA: { kind: P.coding },
  codingB: { kind: P.coding },
});

/** Inputs of ValueSet/$expand (FHIR R4 ValueSet-expand). */
export const expandParams = new OperationParameters('ValueSet/$expand', {
  url: { kind: P.uri },
  valueSetVersion: { kind: P.string },
  valueSet: { kind: P.valueSet },
  filter: { kind: P.string },
  count: { kind: P.integer },
  offset: { kind: P.integer },
  activeOnly: { kind: P.boolean },
  date: { kind: P.dateTime },
  displayLanguage: { kind: P.language },
  includeDesignations: { kind: P.boolean },
  designation: { kind: P.string, repeats: true },
  excludeNested: { kind: P.boolean },
  excludeNotForUI: { kind: P.boolean },
  'exclude-system': { kind: P.uri, repeats: true },
  'system-version': { kind: P.uri, repeats: true },
  'check-system-version': { kind: P.uri, repeats: true },
  'force-system-version': { kind: P.uri, repeats: true },
});

/** Inputs of ConceptMap/$translate (FHIR R4 ConceptMap-translate). */
export const translateParams = new OperationParameters('ConceptMap/$translate', {
  url: { kind: P.uri },
  conceptMap: { kind: P.conceptMap },
  conceptMapVersion: { kind: P.string },
  code: { kind: P.code },
  system: { kind: P.uri },
  version: { kind: P.string },
  source: { kind: P.uri },
  coding: { kind: P.coding },
  codeableConcept: { kind: P.codeableConcept },
  target: { kind: P.uri },
  targetsystem: { kind: P.uri },
  dependency: { kind: P.dependency, repeats: true },
  reverse: { kind: P.boolean },
});
