/**
 * The small slice of FHIR R4 JSON shapes the generator produces. Resources are plain JSON
 * objects; only the fields every resource has are typed, the rest stay open.
 */

export interface Coding {
  system: string;
  code: string;
  display?: string;
}

export interface CodeableConcept {
  coding: Coding[];
  text?: string;
}

export interface Reference {
  reference: string;
  display?: string;
}

export interface FhirResource {
  resourceType: string;
  id: string;
  [element: string]: unknown;
}

/** The resource types the generator writes, in an order where references point backwards. */
export const GENERATED_TYPES = [
  "Organization",
  "Practitioner",
  "Patient",
  "Encounter",
  "AllergyIntolerance",
  "Condition",
  "Observation",
  "DiagnosticReport",
  "MedicationRequest",
  "Procedure",
  "Immunization",
] as const;

export type GeneratedType = (typeof GENERATED_TYPES)[number];

export const SNOMED = "http://snomed.info/sct";
export const LOINC = "http://loinc.org";
export const RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm";
export const CVX = "http://hl7.org/fhir/sid/cvx";
export const UCUM = "http://unitsofmeasure.org";
export const NPI = "http://hl7.org/fhir/sid/us-npi";

/** A CodeableConcept with one coding whose display doubles as the text. */
export function concept(system: string, code: string, display: string): CodeableConcept {
  return { coding: [{ system, code, display }], text: display };
}

/** A CodeableConcept with one coding and no text (status and category style). */
export function coded(system: string, code: string, display?: string): CodeableConcept {
  return { coding: display === undefined ? [{ system, code }] : [{ system, code, display }] };
}

/** A UCUM valueQuantity. */
export function quantity(value: number, unit: string): { value: number; unit: string; system: string; code: string } {
  return { value, unit, system: UCUM, code: unit };
}

/** Rounds to a fixed number of decimals (keeps JSON numbers short and stable). */
export function round(value: number, decimals: number): number {
  const f = 10 ** decimals;
  return Math.round(value * f) / f;
}

/** A heart rate of `subject` (a reference), as R4's heartrate profile, which a vital sign is held to claimed or not, wants it. */
export function heartRate(subject: string): { resourceType: "Observation"; [element: string]: unknown } {
  return {
    resourceType: "Observation",
    status: "final",
    category: [{ coding: [{ system: "http://terminology.hl7.org/CodeSystem/observation-category", code: "vital-signs" }] }],
    code: { coding: [{ system: LOINC, code: "8867-4" }] },
    subject: { reference: subject },
    effectiveDateTime: "2024-01-01",
    valueQuantity: { value: 70, unit: "/min", system: "http://unitsofmeasure.org", code: "/min" },
  };
}
