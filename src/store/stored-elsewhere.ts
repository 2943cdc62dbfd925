/**
 * Index rows that schema migration 4 removes, by parameter: search parameters that, from then on, keep
 * no rows of their own because another parameter of the same type reaches the same elements
 * (ParamDefinition.storedAs, derived from the R4 definitions; a unit test holds the two equal). Frozen
 * with the migration: a later change to the definitions needs a migration of its own.
 */
export const ROWS_STORED_ELSEWHERE: Readonly<Record<string, readonly string[]>> = {
  patient: [
    'Account', 'Basic', 'CarePlan', 'CareTeam', 'ChargeItem', 'ClinicalImpression', 'Communication', 'CommunicationRequest',
    'Composition', 'Condition', 'Contract', 'DeviceRequest', 'DeviceUseStatement', 'DiagnosticReport', 'DocumentManifest',
    'DocumentReference', 'Encounter', 'Flag', 'Goal', 'GuidanceResponse', 'ImagingStudy', 'Invoice', 'List', 'MeasureReport',
    'Media', 'MedicationAdministration', 'MedicationDispense', 'MedicationRequest', 'MedicationStatement', 'Observation',
    'Procedure', 'QuestionnaireResponse', 'RequestGroup', 'RiskAssessment', 'ServiceRequest', 'Specimen', 'Task',
  ],
  subject: ['EnrollmentRequest'],
};

/** The DELETE statements of migration 4, with their comment (the same SQL on both adapters). */
export function deleteRowsStoredElsewhere(): string {
  const comment =
    "-- Search parameters whose rows another parameter already holds (R4 patient = subject.where(resolve() is\n" +
    "-- Patient)) are searched in that parameter's rows: their own copies go.";
  const deletes = Object.entries(ROWS_STORED_ELSEWHERE).map(
    ([param, types]) => `DELETE FROM search_index WHERE param = '${param}' AND type IN (${types.map((t) => `'${t}'`).join(', ')});`,
  );
  return [comment, ...deletes].join('\n');
}
