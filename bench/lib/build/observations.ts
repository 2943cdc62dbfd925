/** Observations (vital signs, laboratory, social history) and laboratory DiagnosticReports. */
import type { LabPanel, LabTest, VitalSign } from "../catalog/measurements.ts";
import { DIASTOLIC, PAIN_SCORE, SMOKING_STATUS, SYSTOLIC, VITALS } from "../catalog/measurements.ts";
import { LOINC, SNOMED, concept, quantity, round } from "../fhir.ts";
import type { FhirResource } from "../fhir.ts";
import type { BuildContext } from "./context.ts";
import { MINUTE, dateTime, emit, organizationRef, practitionerRef, refTo, start } from "./context.ts";
import type { Visit } from "./encounter.ts";
import { encounterRef } from "./encounter.ts";
import type { PatientState } from "./patient.ts";
import { ageAt, patientRef } from "./patient.ts";

const CATEGORY = "http://terminology.hl7.org/CodeSystem/observation-category";
const INTERPRETATION = "http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation";

type Category = "vital-signs" | "laboratory" | "social-history";
const CATEGORY_DISPLAY: Record<Category, string> = {
  "vital-signs": "Vital Signs",
  laboratory: "Laboratory",
  "social-history": "Social History",
};

/** An Observation with everything but its value (FHIR R4 Observation, vital signs profile for vitals). */
function observation(ctx: BuildContext, patient: PatientState, visit: Visit, category: Category, code: { code: string; display: string }, profile?: string): FhirResource {
  const at = visit.start + (category === "laboratory" ? 20 : 5) * MINUTE;
  const resource = start(ctx, "Observation");
  if (profile !== undefined) resource["meta"] = { profile: [profile] };
  resource["status"] = "final";
  resource["category"] = [{ coding: [{ system: CATEGORY, code: category, display: CATEGORY_DISPLAY[category] }] }];
  resource["code"] = concept(LOINC, code.code, code.display);
  resource["subject"] = patientRef(patient);
  resource["encounter"] = encounterRef(ctx, visit);
  resource["effectiveDateTime"] = dateTime(at, patient.offset);
  resource["issued"] = dateTime(at + (category === "laboratory" ? 180 : 1) * MINUTE, patient.offset);
  resource["performer"] = [practitionerRef(ctx, visit.practitioner)];
  return resource;
}

function vital(ctx: BuildContext, patient: PatientState, visit: Visit, sign: VitalSign, value: number): FhirResource {
  const resource = observation(ctx, patient, visit, "vital-signs", sign, sign.profile);
  if (sign.also !== undefined) (resource["code"] as { coding: unknown[] }).coding.push({ system: LOINC, code: sign.also.code, display: sign.also.display });
  resource["valueQuantity"] = quantity(value, sign.unit);
  return emit(ctx, resource);
}

function bloodPressure(ctx: BuildContext, patient: PatientState, visit: Visit, age: number): void {
  const hypertensive = patient.chronic.some((c) => c.def.code === "59621000" && c.onset <= visit.start);
  const adult = Math.max(0, age - 25);
  const systolic = age < 18 ? 95 + age : 112 + 0.45 * adult + (hypertensive ? 16 : 0);
  const diastolic = age < 18 ? 58 + age : 72 + 0.15 * adult + (hypertensive ? 8 : 0);
  const resource = observation(ctx, patient, visit, "vital-signs", VITALS.bloodPressure, VITALS.bloodPressure.profile);
  resource["component"] = [
    { code: concept(LOINC, SYSTOLIC.code, SYSTOLIC.display), valueQuantity: quantity(Math.round(ctx.rng.normal(systolic, 9)), "mm[Hg]") },
    { code: concept(LOINC, DIASTOLIC.code, DIASTOLIC.display), valueQuantity: quantity(Math.round(ctx.rng.normal(diastolic, 6)), "mm[Hg]") },
  ];
  emit(ctx, resource);
}

/** Height for age: the adult height scaled by a simple growth curve. */
function heightAt(patient: PatientState, age: number): number {
  return age >= 18 ? patient.adultHeight : patient.adultHeight * (0.3 + 0.7 * (age / 18) ** 0.7);
}

export interface VitalsOptions {
  /** Wellness visits measure height and BMI too; acute visits measure temperature and SpO2. */
  full: boolean;
  acute: boolean;
  fever: boolean;
  pain: [number, number];
}

/** Emits the vital signs taken at a visit. */
export function emitVitals(ctx: BuildContext, patient: PatientState, visit: Visit, options: VitalsOptions): void {
  const rng = ctx.rng;
  const age = ageAt(patient, visit.start);
  const height = heightAt(patient, age);
  const bmi = age >= 18 ? patient.bmi : 16 + ((patient.bmi - 16) * age) / 18;
  const weight = bmi * (height / 100) ** 2 * rng.normal(1, 0.02);
  if (options.full) vital(ctx, patient, visit, VITALS.height, round(height, 1));
  vital(ctx, patient, visit, VITALS.weight, round(weight, 1));
  if (options.full) vital(ctx, patient, visit, VITALS.bmi, round(weight / (height / 100) ** 2, 2));
  bloodPressure(ctx, patient, visit, age);
  const child = Math.max(0, 10 - age);
  vital(ctx, patient, visit, VITALS.heartRate, Math.round(rng.normal(72 + child * 4, 8)));
  vital(ctx, patient, visit, VITALS.respiratoryRate, Math.round(rng.normal(15 + child * 1.2, 2)));
  if (options.acute) {
    vital(ctx, patient, visit, VITALS.temperature, round(rng.normal(options.fever ? 38.3 : 36.8, 0.3), 1));
    vital(ctx, patient, visit, VITALS.oxygenSaturation, Math.min(100, Math.round(rng.normal(97.5, 1.2))));
  }
  const pain = observation(ctx, patient, visit, "vital-signs", PAIN_SCORE);
  pain["valueQuantity"] = quantity(rng.int(options.pain[0], options.pain[1]), PAIN_SCORE.unit);
  emit(ctx, pain);
}

/** Emits the tobacco smoking status (social history). */
export function emitSmokingStatus(ctx: BuildContext, patient: PatientState, visit: Visit): void {
  const resource = observation(ctx, patient, visit, "social-history", SMOKING_STATUS);
  resource["valueCodeableConcept"] = concept(SNOMED, patient.smoking.code, patient.smoking.display);
  emit(ctx, resource);
}

function interpretation(value: number, test: LabTest): [string, string] {
  if (value > test.high) return ["H", "High"];
  if (value < test.low) return ["L", "Low"];
  return ["N", "Normal"];
}

/** Emits one laboratory result; `shift` moves the population mean (e.g. glucose in diabetes). */
export function emitLab(ctx: BuildContext, patient: PatientState, visit: Visit, test: LabTest, shift = 0): FhirResource {
  const value = round(Math.max(test.mean / 20, ctx.rng.normal(test.mean + shift, test.sd)), test.decimals);
  const [code, display] = interpretation(value, test);
  const resource = observation(ctx, patient, visit, "laboratory", test);
  resource["valueQuantity"] = quantity(value, test.unit);
  resource["interpretation"] = [{ coding: [{ system: INTERPRETATION, code, display }], text: display }];
  resource["referenceRange"] = [
    test.low > 0 ? { low: quantity(test.low, test.unit), high: quantity(test.high, test.unit) } : { high: quantity(test.high, test.unit) },
  ];
  return emit(ctx, resource);
}

/** Emits a panel's results, then the DiagnosticReport that lists them (FHIR R4 DiagnosticReport). */
export function emitLabPanel(ctx: BuildContext, patient: PatientState, visit: Visit, panel: LabPanel, shifts: Record<string, number> = {}): FhirResource {
  const results = panel.tests.map((test) => emitLab(ctx, patient, visit, test, shifts[test.code] ?? 0));
  const at = visit.start + 20 * MINUTE;
  const report = start(ctx, "DiagnosticReport");
  report["status"] = "final";
  report["category"] = [{ coding: [{ system: "http://terminology.hl7.org/CodeSystem/v2-0074", code: "LAB", display: "Laboratory" }] }];
  report["code"] = concept(LOINC, panel.code, panel.display);
  report["subject"] = patientRef(patient);
  report["encounter"] = encounterRef(ctx, visit);
  report["effectiveDateTime"] = dateTime(at, patient.offset);
  report["issued"] = dateTime(at + 240 * MINUTE, patient.offset);
  report["performer"] = [organizationRef(ctx, visit.organization)];
  report["resultsInterpreter"] = [practitionerRef(ctx, visit.practitioner)];
  report["result"] = results.map((r, i) => refTo(ctx, r, panel.tests[i]!.display));
  return emit(ctx, report);
}
