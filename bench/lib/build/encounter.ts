/** Encounters: when they happen, what kind they are, and the Encounter resource. */
import type { ConditionDef } from "../catalog/clinical.ts";
import { SNOMED, coded, concept } from "../fhir.ts";
import type { FhirResource, Reference } from "../fhir.ts";
import type { BuildContext } from "./context.ts";
import { DAY, HOUR, MINUTE, YEAR, dateTime, emit, organizationRef, practitionerRef, refTo, start } from "./context.ts";
import type { PatientState } from "./patient.ts";
import { ageAt, patientRef } from "./patient.ts";

export type VisitKind = "wellness" | "followup" | "symptom" | "emergency" | "inpatient";

export interface Visit {
  kind: VisitKind;
  start: number;
  end: number;
  resource: FhirResource;
  practitioner: number;
  organization: number;
}

interface KindDef {
  classCode: string;
  classDisplay: string;
  type: [string, string];
  minutes: [number, number];
}

const KINDS: Record<VisitKind, KindDef> = {
  wellness: { classCode: "AMB", classDisplay: "ambulatory", type: ["162673000", "General examination of patient (procedure)"], minutes: [20, 45] },
  followup: { classCode: "AMB", classDisplay: "ambulatory", type: ["390906007", "Follow-up encounter (procedure)"], minutes: [15, 30] },
  symptom: { classCode: "AMB", classDisplay: "ambulatory", type: ["185345009", "Encounter for symptom (procedure)"], minutes: [15, 40] },
  emergency: { classCode: "EMER", classDisplay: "emergency", type: ["50849002", "Emergency room admission (procedure)"], minutes: [60, 360] },
  inpatient: { classCode: "IMP", classDisplay: "inpatient encounter", type: ["32485007", "Hospital admission (procedure)"], minutes: [1440, 5760] },
};

const WELL_CHILD: [string, string] = ["410620009", "Well child visit (procedure)"];
const ACT_CODE = "http://terminology.hl7.org/CodeSystem/v3-ActCode";
const PARTICIPATION = "http://terminology.hl7.org/CodeSystem/v3-ParticipationType";

/** Sorted visit start times over the last ten years of the patient's life (at least one visit). */
export function planVisitTimes(ctx: BuildContext, patient: PatientState, scale: number): number[] {
  const count = Math.max(1, Math.round(scale * ctx.rng.int(3, 13)));
  const from = Math.max(patient.birth + 2 * DAY, ctx.now - 10 * YEAR);
  const to = ctx.now - 7 * DAY;
  const times: number[] = [];
  for (let i = 0; i < count; i++) times.push(from + ctx.rng.float() * Math.max(DAY, to - from));
  return times.sort((a, b) => a - b);
}

/** Moves a time to a plausible local hour: office hours for ambulatory visits, any hour otherwise. */
function timeOfDay(ctx: BuildContext, at: number, offset: number, ambulatory: boolean): number {
  const localMidnight = Math.floor((at + offset * HOUR) / DAY) * DAY - offset * HOUR;
  const minutes = ambulatory ? ctx.rng.int(8 * 60, 16 * 60 + 30) : ctx.rng.int(0, 24 * 60 - 1);
  return localMidnight + minutes * MINUTE;
}

/** Who sees the patient: usually the GP at the home organization, sometimes a colleague elsewhere. */
function caregiver(ctx: BuildContext, patient: PatientState, kind: VisitKind): [number, number] {
  const pool = ctx.shared.practitioners;
  if (kind !== "emergency" && kind !== "inpatient" && ctx.rng.chance(0.85)) {
    return [patient.generalPractitioner, patient.homeOrganization];
  }
  const practitioner = ctx.rng.int(0, pool.length - 1);
  return [practitioner, pool[practitioner]!.organization];
}

/** Emits the Encounter for a visit (FHIR R4 Encounter) and returns the visit. */
export function emitEncounter(ctx: BuildContext, patient: PatientState, kind: VisitKind, at: number, reason?: ConditionDef): Visit {
  const def = KINDS[kind];
  const begin = timeOfDay(ctx, at, patient.offset, def.classCode === "AMB");
  const end = begin + ctx.rng.int(def.minutes[0], def.minutes[1]) * MINUTE;
  const [practitioner, organization] = caregiver(ctx, patient, kind);
  const period = { start: dateTime(begin, patient.offset), end: dateTime(end, patient.offset) };
  const [typeCode, typeDisplay] = kind === "wellness" && ageAt(patient, begin) < 18 ? WELL_CHILD : def.type;
  const resource = start(ctx, "Encounter");
  resource["status"] = "finished";
  resource["class"] = { system: ACT_CODE, code: def.classCode, display: def.classDisplay };
  resource["type"] = [concept(SNOMED, typeCode, typeDisplay)];
  resource["subject"] = patientRef(patient);
  resource["participant"] = [
    {
      type: [{ ...coded(PARTICIPATION, "PPRF", "primary performer"), text: "primary performer" }],
      period: { ...period },
      individual: practitionerRef(ctx, practitioner),
    },
  ];
  resource["period"] = period;
  if (reason !== undefined) resource["reasonCode"] = [concept(SNOMED, reason.code, reason.display)];
  resource["serviceProvider"] = organizationRef(ctx, organization);
  emit(ctx, resource);
  return { kind, start: begin, end, resource, practitioner, organization };
}

/** A fresh reference to the visit's Encounter. */
export function encounterRef(ctx: BuildContext, visit: Visit): Reference {
  return refTo(ctx, visit.resource);
}
