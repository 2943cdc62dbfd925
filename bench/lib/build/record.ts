/** One patient's whole record: the Patient, then visit after visit with what happened at each. */
import type { ConditionDef } from "../catalog/clinical.ts";
import { ACUTE_CONDITIONS, APPENDICITIS, INJURIES, PROCEDURES } from "../catalog/clinical.ts";
import { BASIC_METABOLIC, CBC_PANEL, HBA1C, LIPID_PANEL } from "../catalog/measurements.ts";
import type { FhirResource } from "../fhir.ts";
import type { BuildContext } from "./context.ts";
import { DAY } from "./context.ts";
import { emitCondition, emitMedicationRequest, emitProcedure } from "./conditions.ts";
import type { Visit, VisitKind } from "./encounter.ts";
import { emitEncounter, planVisitTimes } from "./encounter.ts";
import { emitAllergies, emitImmunizations } from "./immunizations.ts";
import { emitLab, emitLabPanel, emitSmokingStatus, emitVitals } from "./observations.ts";
import type { ChronicCondition, PatientState } from "./patient.ts";
import { ageAt, buildPatient } from "./patient.ts";

const KINDS: readonly VisitKind[] = ["wellness", "followup", "symptom", "emergency", "inpatient"];

function chooseKind(ctx: BuildContext, patient: PatientState, at: number): VisitKind {
  const chronic = patient.chronic.some((c) => c.onset <= at);
  const child = ageAt(patient, at) < 18;
  return ctx.rng.weighted(KINDS, [child ? 45 : 32, chronic ? 30 : 0, 38, 8, 1.5]);
}

function pickCondition(ctx: BuildContext, defs: readonly ConditionDef[], age: number): ConditionDef {
  const eligible = defs.filter((d) => age >= d.minAge && age < d.maxAge);
  return ctx.rng.weighted(eligible, eligible.map((d) => d.weight));
}

/** Diagnoses chronic conditions whose onset has passed, starting their long-term medication. */
function diagnoseDue(ctx: BuildContext, patient: PatientState, visit: Visit): void {
  for (const chronic of patient.chronic) {
    if (chronic.resource !== undefined || chronic.onset > visit.start) continue;
    chronic.resource = emitCondition(ctx, patient, visit, chronic.def, chronic.onset);
    chronic.def.medications.forEach((med, i) => {
      if (i > 0 && !ctx.rng.chance(0.4)) return;
      chronic.prescriptions.set(med.code, emitMedicationRequest(ctx, patient, visit, med, chronic.resource, 0));
    });
    for (const proc of chronic.def.procedures) {
      if (ctx.rng.chance(0.5)) emitProcedure(ctx, patient, visit, proc, chronic.resource);
    }
  }
}

/** Renews long-term prescriptions (the previous one becomes `completed`) and orders monitoring labs. */
function manageChronic(ctx: BuildContext, patient: PatientState, visit: Visit, chronic: ChronicCondition): void {
  const reason = chronic.resource!;
  for (const [code, previous] of chronic.prescriptions) {
    if (!ctx.rng.chance(0.6)) continue;
    const med = chronic.def.medications.find((m) => m.code === code)!;
    previous["status"] = "completed";
    chronic.prescriptions.set(code, emitMedicationRequest(ctx, patient, visit, med, reason, 0));
  }
  if (chronic.def.code === "44054006") {
    emitLabPanel(ctx, patient, visit, BASIC_METABOLIC, { "2339-0": 55 });
    emitLab(ctx, patient, visit, HBA1C);
  }
  if (chronic.def.code === "55822004" && ctx.rng.chance(0.5)) {
    emitLabPanel(ctx, patient, visit, LIPID_PANEL, { "2093-3": 45, "18262-6": 40, "2571-8": 40 });
  }
  for (const proc of chronic.def.procedures) {
    if (ctx.rng.chance(0.2)) emitProcedure(ctx, patient, visit, proc, reason);
  }
}

function wellness(ctx: BuildContext, patient: PatientState, visit: Visit): void {
  const rng = ctx.rng;
  const age = ageAt(patient, visit.start);
  diagnoseDue(ctx, patient, visit);
  emitVitals(ctx, patient, visit, { full: true, acute: false, fever: false, pain: [0, 2] });
  if (age >= 18) emitSmokingStatus(ctx, patient, visit);
  if (age >= 30 && rng.chance(0.4)) emitLabPanel(ctx, patient, visit, LIPID_PANEL);
  if (age >= 18 && rng.chance(0.3)) emitLabPanel(ctx, patient, visit, BASIC_METABOLIC);
  emitImmunizations(ctx, patient, visit);
  if (age >= 18 && rng.chance(0.5)) emitProcedure(ctx, patient, visit, PROCEDURES.assessment);
  if (age >= 12 && rng.chance(0.3)) emitProcedure(ctx, patient, visit, PROCEDURES.depressionScreening);
  if (age >= 50 && rng.chance(0.04)) emitProcedure(ctx, patient, visit, PROCEDURES.colonoscopy);
  if (age >= 40 && patient.gender === "female" && rng.chance(0.35)) emitProcedure(ctx, patient, visit, PROCEDURES.mammography);
}

function followup(ctx: BuildContext, patient: PatientState, visit: Visit): void {
  diagnoseDue(ctx, patient, visit);
  emitVitals(ctx, patient, visit, { full: false, acute: false, fever: false, pain: [0, 3] });
  for (const chronic of patient.chronic) {
    if (chronic.resource !== undefined) manageChronic(ctx, patient, visit, chronic);
  }
  if (ctx.rng.chance(0.7)) emitProcedure(ctx, patient, visit, PROCEDURES.medicationReconciliation);
}

/** Symptom, emergency and inpatient visits: one acute problem, examined, treated and resolved. */
function acute(ctx: BuildContext, patient: PatientState, visit: Visit, def: ConditionDef): void {
  const rng = ctx.rng;
  const condition: FhirResource = emitCondition(ctx, patient, visit, def, visit.start - rng.int(0, 3) * DAY);
  const injury = visit.kind === "emergency";
  emitVitals(ctx, patient, visit, { full: false, acute: true, fever: !injury && rng.chance(0.5), pain: injury ? [4, 9] : [1, 6] });
  if (visit.kind === "inpatient" || (injury && rng.chance(0.3))) emitLabPanel(ctx, patient, visit, CBC_PANEL);
  if (visit.kind === "inpatient") emitLabPanel(ctx, patient, visit, BASIC_METABOLIC);
  for (const proc of def.procedures) {
    if (rng.chance(0.85)) emitProcedure(ctx, patient, visit, proc, condition);
  }
  for (const med of def.medications) {
    if (rng.chance(0.75)) emitMedicationRequest(ctx, patient, visit, med, condition, def.days[0]);
  }
  if (visit.kind === "symptom") diagnoseDue(ctx, patient, visit);
}

function reasonFor(ctx: BuildContext, kind: VisitKind, age: number): ConditionDef | undefined {
  if (kind === "wellness" || kind === "followup") return undefined;
  // Injuries and appendicitis need a minimum age; younger children come in with an infection.
  if (age < 5 || kind === "symptom") return pickCondition(ctx, ACUTE_CONDITIONS, age);
  return kind === "emergency" ? pickCondition(ctx, INJURIES, age) : APPENDICITIS;
}

/** Builds one patient's record into `ctx.out` (Patient first; references always point backwards). */
export function buildPatientRecord(ctx: BuildContext, scale: number): void {
  const patient = buildPatient(ctx);
  const times = planVisitTimes(ctx, patient, scale);
  times.forEach((at, index) => {
    const kind = chooseKind(ctx, patient, at);
    const reason = reasonFor(ctx, kind, ageAt(patient, at));
    const visit = emitEncounter(ctx, patient, kind, at, reason);
    if (index === 0) emitAllergies(ctx, patient, visit);
    if (reason !== undefined) acute(ctx, patient, visit, reason);
    else if (kind === "wellness") wellness(ctx, patient, visit);
    else followup(ctx, patient, visit);
  });
}
