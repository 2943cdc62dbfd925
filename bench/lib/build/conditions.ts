/** Conditions with the MedicationRequests and Procedures that treat them. */
import type { ConditionDef, MedicationDef, ProcedureDef } from "../catalog/clinical.ts";
import { RXNORM, SNOMED, coded, concept, quantity } from "../fhir.ts";
import type { FhirResource } from "../fhir.ts";
import type { BuildContext } from "./context.ts";
import { DAY, MINUTE, dateTime, emit, practitionerRef, refTo, start } from "./context.ts";
import type { Visit } from "./encounter.ts";
import { encounterRef } from "./encounter.ts";
import type { PatientState } from "./patient.ts";
import { patientRef } from "./patient.ts";

const CLINICAL = "http://terminology.hl7.org/CodeSystem/condition-clinical";
const VERIFICATION = "http://terminology.hl7.org/CodeSystem/condition-ver-status";
const CONDITION_CATEGORY = "http://terminology.hl7.org/CodeSystem/condition-category";

/** Emits a Condition diagnosed at a visit (FHIR R4 Condition); acute ones resolve after `def.days`. */
export function emitCondition(ctx: BuildContext, patient: PatientState, visit: Visit, def: ConditionDef, onset: number): FhirResource {
  const abatement = def.chronic ? undefined : visit.start + ctx.rng.int(def.days[0], def.days[1]) * DAY;
  const resolved = abatement !== undefined && abatement < ctx.now;
  const resource = start(ctx, "Condition");
  resource["clinicalStatus"] = coded(CLINICAL, resolved ? "resolved" : "active", resolved ? "Resolved" : "Active");
  resource["verificationStatus"] = coded(VERIFICATION, "confirmed", "Confirmed");
  resource["category"] = [
    def.chronic
      ? coded(CONDITION_CATEGORY, "problem-list-item", "Problem List Item")
      : coded(CONDITION_CATEGORY, "encounter-diagnosis", "Encounter Diagnosis"),
  ];
  resource["code"] = concept(SNOMED, def.code, def.display);
  resource["subject"] = patientRef(patient);
  resource["encounter"] = encounterRef(ctx, visit);
  resource["onsetDateTime"] = dateTime(Math.min(onset, visit.start), patient.offset);
  if (resolved) resource["abatementDateTime"] = dateTime(abatement, patient.offset);
  resource["recordedDate"] = dateTime(visit.start, patient.offset);
  resource["recorder"] = practitionerRef(ctx, visit.practitioner);
  return emit(ctx, resource);
}

function dosage(med: MedicationDef): Record<string, unknown> {
  const every = med.period === 1 ? `${med.doses} time${med.doses > 1 ? "s" : ""} a ${med.periodUnit === "d" ? "day" : "hour"}` : `every ${med.period} ${med.periodUnit === "d" ? "days" : "hours"}`;
  return {
    sequence: 1,
    text: `${med.doseValue} ${med.doseUnit.replace(/[{}]/g, "")} ${every}${med.asNeeded ? " as needed" : ""}`,
    timing: { repeat: { frequency: med.doses, period: med.period, periodUnit: med.periodUnit } },
    asNeededBoolean: med.asNeeded,
    doseAndRate: [
      {
        type: coded("http://terminology.hl7.org/CodeSystem/dose-rate-type", "ordered", "Ordered"),
        doseQuantity: quantity(med.doseValue, med.doseUnit),
      },
    ],
  };
}

/**
 * Emits a MedicationRequest (FHIR R4 MedicationRequest, RxNorm coded). Acute courses are
 * `completed` once `courseDays` have passed; chronic ones stay `active` until renewed.
 */
export function emitMedicationRequest(ctx: BuildContext, patient: PatientState, visit: Visit, med: MedicationDef, reason: FhirResource | undefined, courseDays: number): FhirResource {
  const authored = visit.start + ctx.rng.int(5, 15) * MINUTE;
  const resource = start(ctx, "MedicationRequest");
  resource["status"] = courseDays > 0 && authored + courseDays * DAY < ctx.now ? "completed" : "active";
  resource["intent"] = "order";
  resource["category"] = [coded("http://terminology.hl7.org/CodeSystem/medicationrequest-category", "community", "Community")];
  resource["medicationCodeableConcept"] = concept(RXNORM, med.code, med.display);
  resource["subject"] = patientRef(patient);
  resource["encounter"] = encounterRef(ctx, visit);
  resource["authoredOn"] = dateTime(authored, patient.offset);
  resource["requester"] = practitionerRef(ctx, visit.practitioner);
  if (reason !== undefined) resource["reasonReference"] = [refTo(ctx, reason, (reason["code"] as { text: string }).text)];
  resource["dosageInstruction"] = [dosage(med)];
  const days = courseDays > 0 ? courseDays : 90;
  resource["dispenseRequest"] = {
    numberOfRepeatsAllowed: courseDays > 0 ? 0 : 3,
    expectedSupplyDuration: { value: days, unit: "days", system: "http://unitsofmeasure.org", code: "d" },
  };
  return emit(ctx, resource);
}

/** Emits a completed Procedure performed during a visit (FHIR R4 Procedure, SNOMED CT coded). */
export function emitProcedure(ctx: BuildContext, patient: PatientState, visit: Visit, def: ProcedureDef, reason?: FhirResource): FhirResource {
  const begin = visit.start + ctx.rng.int(5, 20) * MINUTE;
  const resource = start(ctx, "Procedure");
  resource["status"] = "completed";
  resource["code"] = concept(SNOMED, def.code, def.display);
  resource["subject"] = patientRef(patient);
  resource["encounter"] = encounterRef(ctx, visit);
  resource["performedPeriod"] = {
    start: dateTime(begin, patient.offset),
    end: dateTime(begin + def.minutes * MINUTE, patient.offset),
  };
  resource["performer"] = [{ actor: practitionerRef(ctx, visit.practitioner) }];
  if (reason !== undefined) resource["reasonReference"] = [refTo(ctx, reason, (reason["code"] as { text: string }).text)];
  return emit(ctx, resource);
}
