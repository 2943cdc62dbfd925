/** The 146 resource types of FHIR R4 (4.0.1). */
export const R4_RESOURCE_TYPES: readonly string[] = [
  "Account", "ActivityDefinition", "AdverseEvent", "AllergyIntolerance", "Appointment", "AppointmentResponse",
  "AuditEvent", "Basic", "Binary", "BiologicallyDerivedProduct", "BodyStructure", "Bundle",
  "CapabilityStatement", "CarePlan", "CareTeam", "CatalogEntry", "ChargeItem", "ChargeItemDefinition",
  "Claim", "ClaimResponse", "ClinicalImpression", "CodeSystem", "Communication", "CommunicationRequest",
  "CompartmentDefinition", "Composition", "ConceptMap", "Condition", "Consent", "Contract",
  "Coverage", "CoverageEligibilityRequest", "CoverageEligibilityResponse", "DetectedIssue", "Device", "DeviceDefinition",
  "DeviceMetric", "DeviceRequest", "DeviceUseStatement", "DiagnosticReport", "DocumentManifest", "DocumentReference",
  "EffectEvidenceSynthesis", "Encounter", "Endpoint", "EnrollmentRequest", "EnrollmentResponse", "EpisodeOfCare",
  "EventDefinition", "Evidence", "EvidenceVariable", "ExampleScenario", "ExplanationOfBenefit", "FamilyMemberHistory",
  "Flag", "Goal", "GraphDefinition", "Group", "GuidanceResponse", "HealthcareService",
  "ImagingStudy", "Immunization", "ImmunizationEvaluation", "ImmunizationRecommendation", "ImplementationGuide", "InsurancePlan",
  "Invoice", "Library", "Linkage", "List", "Location", "Measure",
  "MeasureReport", "Media", "Medication", "MedicationAdministration", "MedicationDispense", "MedicationKnowledge",
  "MedicationRequest", "MedicationStatement", "MedicinalProduct", "MedicinalProductAuthorization", "MedicinalProductContraindication", "MedicinalProductIndication",
  "MedicinalProductIngredient", "MedicinalProductInteraction", "MedicinalProductManufactured", "MedicinalProductPackaged", "MedicinalProductPharmaceutical", "MedicinalProductUndesirableEffect",
  "MessageDefinition", "MessageHeader", "MolecularSequence", "NamingSystem", "NutritionOrder", "Observation",
  "ObservationDefinition", "OperationDefinition", "OperationOutcome", "Organization", "OrganizationAffiliation", "Parameters",
  "Patient", "PaymentNotice", "PaymentReconciliation", "Person", "PlanDefinition", "Practitioner",
  "PractitionerRole", "Procedure", "Provenance", "Questionnaire", "QuestionnaireResponse", "RelatedPerson",
  "RequestGroup", "ResearchDefinition", "ResearchElementDefinition", "ResearchStudy", "ResearchSubject", "RiskAssessment",
  "RiskEvidenceSynthesis", "Schedule", "SearchParameter", "ServiceRequest", "Slot", "Specimen",
  "SpecimenDefinition", "StructureDefinition", "StructureMap", "Subscription", "Substance", "SubstanceNucleicAcid",
  "SubstancePolymer", "SubstanceProtein", "SubstanceReferenceInformation", "SubstanceSourceMaterial", "SubstanceSpecification", "SupplyDelivery",
  "SupplyRequest", "Task", "TerminologyCapabilities", "TestReport", "TestScript", "ValueSet",
  "VerificationResult", "VisionPrescription",
];

const KNOWN = new Set(R4_RESOURCE_TYPES);

/** Whether `type` is an R4 resource type. */
export function isResourceType(type: string): boolean {
  return KNOWN.has(type);
}

/**
 * The R4 resource types without a RESTful endpoint. Parameters is "a non-persisted resource used to
 * pass information into and back from an operation. It has no other use, and there is no RESTful
 * endpoint associated with it" (FHIR R4 parameters.html).
 */
const NO_ENDPOINT: ReadonlySet<string> = new Set(['Parameters']);

/** The R4 resource types Cinder serves RESTfully (stores, reads, searches, exports): every one but Parameters. */
export const REST_RESOURCE_TYPES: readonly string[] = R4_RESOURCE_TYPES.filter((t) => !NO_ENDPOINT.has(t));

/** Whether `type` is an R4 resource type with a RESTful endpoint (not Parameters). */
export function hasEndpoint(type: string): boolean {
  return KNOWN.has(type) && !NO_ENDPOINT.has(type);
}

/** FHIR R4 `id` datatype: 1-64 of [A-Za-z0-9.-]. */
export const ID_PATTERN = /^[A-Za-z0-9\-.]{1,64}$/;

/** Cinder's version ids as it writes them: 1, 2, 3... in decimal, without a sign or leading zeros. */
const VERSION_ID = /^[1-9]\d{0,14}$/;

/**
 * The version a version id names (`meta.versionId`, a `_history/vid`, an ETag's tag), or undefined. A
 * versionId is a FHIR id, a string: `01`, `+1`, `1.0` and `1e0` are other ids than `1`, and name no version.
 */
export function versionNumber(versionId: string): number | undefined {
  return VERSION_ID.test(versionId) ? Number(versionId) : undefined;
}
