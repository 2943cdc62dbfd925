/** Immunizations (CVX) given at wellness visits, and AllergyIntolerances recorded at the first visit. */
import type { AllergyDef, VaccineDef } from "../catalog/immunization-allergy.ts";
import { ALLERGIES, INFLUENZA, VACCINES } from "../catalog/immunization-allergy.ts";
import { CVX, SNOMED, coded, concept, quantity } from "../fhir.ts";
import type { FhirResource } from "../fhir.ts";
import type { BuildContext } from "./context.ts";
import { DAY, MINUTE, YEAR, dateTime, emit, practitionerRef, start } from "./context.ts";
import type { Visit } from "./encounter.ts";
import { encounterRef } from "./encounter.ts";
import type { PatientState } from "./patient.ts";
import { ageAt, patientRef } from "./patient.ts";

function emitImmunization(ctx: BuildContext, patient: PatientState, visit: Visit, vaccine: VaccineDef): void {
  const rng = ctx.rng;
  const at = visit.start + rng.int(10, 25) * MINUTE;
  const resource = start(ctx, "Immunization");
  resource["status"] = "completed";
  resource["vaccineCode"] = concept(CVX, vaccine.code, vaccine.display);
  resource["patient"] = patientRef(patient);
  resource["encounter"] = encounterRef(ctx, visit);
  resource["occurrenceDateTime"] = dateTime(at, patient.offset);
  resource["recorded"] = dateTime(at + 5 * MINUTE, patient.offset);
  resource["primarySource"] = true;
  resource["lotNumber"] = `${String.fromCharCode(65 + rng.int(0, 25))}${rng.digits(6)}`;
  resource["site"] = rng.chance(0.5)
    ? coded("http://terminology.hl7.org/CodeSystem/v3-ActSite", "LA", "left arm")
    : coded("http://terminology.hl7.org/CodeSystem/v3-ActSite", "RA", "right arm");
  resource["route"] = coded("http://terminology.hl7.org/CodeSystem/v3-RouteOfAdministration", "IM", "Injection, intramuscular");
  resource["doseQuantity"] = quantity(0.5, "mL");
  resource["performer"] = [
    { function: coded("http://terminology.hl7.org/CodeSystem/v2-0443", "AP", "Administering Provider"), actor: practitionerRef(ctx, visit.practitioner) },
  ];
  emit(ctx, resource);
}

/** Emits the vaccines given at a wellness visit: influenza most years, plus the age-appropriate schedule. */
export function emitImmunizations(ctx: BuildContext, patient: PatientState, visit: Visit): void {
  const age = ageAt(patient, visit.start);
  if (age >= INFLUENZA.minAge && ctx.rng.chance(0.6)) emitImmunization(ctx, patient, visit, INFLUENZA);
  const due = VACCINES.filter((v) => age >= v.minAge && age < v.maxAge);
  const chance = age < 7 ? 0.6 : 0.15;
  for (const vaccine of due) {
    if (ctx.rng.chance(chance)) emitImmunization(ctx, patient, visit, vaccine);
  }
}

const CLINICAL = "http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical";
const VERIFICATION = "http://terminology.hl7.org/CodeSystem/allergyintolerance-verification";

function emitAllergy(ctx: BuildContext, patient: PatientState, visit: Visit, def: AllergyDef): void {
  const rng = ctx.rng;
  const reaction = rng.pick(def.reactions);
  const severe = reaction.code === "39579001";
  const onset = Math.min(visit.start, Math.max(patient.birth + YEAR / 2, visit.start - rng.int(1, 3650) * DAY));
  const resource = start(ctx, "AllergyIntolerance");
  resource["clinicalStatus"] = coded(CLINICAL, "active", "Active");
  resource["verificationStatus"] = coded(VERIFICATION, "confirmed", "Confirmed");
  resource["type"] = "allergy";
  resource["category"] = [def.category];
  resource["criticality"] = severe ? "high" : "low";
  resource["code"] = concept(SNOMED, def.code, def.display);
  resource["patient"] = patientRef(patient);
  resource["encounter"] = encounterRef(ctx, visit);
  resource["onsetDateTime"] = dateTime(onset, patient.offset);
  resource["recordedDate"] = dateTime(visit.start, patient.offset);
  resource["recorder"] = practitionerRef(ctx, visit.practitioner);
  resource["reaction"] = [
    { manifestation: [concept(SNOMED, reaction.code, reaction.display)], severity: severe ? "severe" : rng.pick(["mild", "moderate"]) },
  ];
  emit(ctx, resource);
}

/** Emits 0-3 AllergyIntolerances recorded at a visit (FHIR R4 AllergyIntolerance, SNOMED CT substances). */
export function emitAllergies(ctx: BuildContext, patient: PatientState, visit: Visit): void {
  if (!ctx.rng.chance(0.3)) return;
  const count = ctx.rng.weighted([1, 2, 3], [70, 22, 8]);
  const seen = new Set<string>();
  for (let i = 0; i < count; i++) {
    const def = ctx.rng.pick(ALLERGIES);
    if (!seen.has(def.code)) emitAllergy(ctx, patient, visit, def);
    seen.add(def.code);
  }
}
