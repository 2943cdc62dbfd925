/** The Patient resource and the hidden traits (age, body, conditions) the rest of the record follows. */
import type { ConditionDef } from "../catalog/clinical.ts";
import { CHRONIC_CONDITIONS } from "../catalog/clinical.ts";
import { SMOKING_VALUES } from "../catalog/measurements.ts";
import { CITIES, FAMILY_NAMES, FEMALE_NAMES, MALE_NAMES, RACES } from "../catalog/people.ts";
import type { City } from "../catalog/people.ts";
import { coded, concept, round } from "../fhir.ts";
import type { FhirResource, Reference } from "../fhir.ts";
import type { BuildContext } from "./context.ts";
import { YEAR, date, emit, organizationRef, practitionerRef, refTo, start } from "./context.ts";
import { address, phone } from "./shared.ts";

export interface ChronicCondition {
  def: ConditionDef;
  onset: number;
  /** Set once the condition has been diagnosed at an encounter. */
  resource?: FhirResource;
  /** The latest prescription per medication code, so a renewal can close the previous one. */
  prescriptions: Map<string, FhirResource>;
}

export interface PatientState {
  resource: FhirResource;
  ref: Reference;
  gender: "male" | "female";
  birth: number;
  offset: number;
  homeOrganization: number;
  generalPractitioner: number;
  adultHeight: number;
  bmi: number;
  smoking: (typeof SMOKING_VALUES)[number];
  chronic: ChronicCondition[];
}

const AGE_BANDS = [[0, 17], [18, 44], [45, 64], [65, 95]] as const;
const AGE_WEIGHTS = [22, 36, 26, 16];
const CORE = "http://hl7.org/fhir/us/core/StructureDefinition/";

/** A fresh reference to the patient (each resource gets its own object). */
export function patientRef(patient: PatientState): Reference {
  return { ...patient.ref };
}

/** Age in years at a point in time. */
export function ageAt(patient: PatientState, ms: number): number {
  return (ms - patient.birth) / YEAR;
}

function ombExtension(url: string, system: string, code: string, display: string): Record<string, unknown> {
  return {
    url: `${CORE}${url}`,
    extension: [
      { url: "ombCategory", valueCoding: { system, code, display } },
      { url: "text", valueString: display },
    ],
  };
}

function demographics(ctx: BuildContext, gender: "male" | "female", hispanic: boolean): Record<string, unknown>[] {
  const race = ctx.rng.weighted(RACES, RACES.map((r) => r.weight));
  const ethnicity = hispanic ? ["2135-2", "Hispanic or Latino"] : ["2186-5", "Not Hispanic or Latino"];
  return [
    ombExtension("us-core-race", "urn:oid:2.16.840.1.113883.6.238", race.code, race.display),
    ombExtension("us-core-ethnicity", "urn:oid:2.16.840.1.113883.6.238", ethnicity[0]!, ethnicity[1]!),
    { url: `${CORE}us-core-birthsex`, valueCode: gender === "female" ? "F" : "M" },
  ];
}

function chronicConditions(ctx: BuildContext, birth: number, bmi: number): ChronicCondition[] {
  const out: ChronicCondition[] = [];
  const age = (ctx.now - birth) / YEAR;
  for (const def of CHRONIC_CONDITIONS) {
    const obese = def.code === "162864005";
    if (age < def.minAge || (obese ? bmi < 30 : !ctx.rng.chance(def.weight))) continue;
    const earliest = birth + def.minAge * YEAR;
    const onset = earliest + ctx.rng.float() * (ctx.now - earliest);
    out.push({ def, onset, prescriptions: new Map() });
  }
  return out;
}


function identifiers(ctx: BuildContext): unknown[] {
  const rng = ctx.rng;
  return [
    { use: "usual", type: concept("http://terminology.hl7.org/CodeSystem/v2-0203", "MR", "Medical Record Number"), system: "urn:oid:2.16.840.1.113883.19.5", value: `MRN${rng.digits(9)}` },
    { use: "official", system: "http://hl7.org/fhir/sid/us-ssn", value: `999-${rng.digits(2)}-${rng.digits(4)}` },
  ];
}

function names(ctx: BuildContext, gender: "male" | "female", age: number): { given: string; family: string; name: unknown[] } {
  const rng = ctx.rng;
  const given = rng.pick(gender === "female" ? FEMALE_NAMES : MALE_NAMES);
  const middle = rng.pick(gender === "female" ? FEMALE_NAMES : MALE_NAMES);
  const family = rng.pick(FAMILY_NAMES);
  const official: Record<string, unknown> = { use: "official", family, given: [given, middle] };
  if (age >= 18) official["prefix"] = [gender === "female" ? rng.pick(["Ms.", "Mrs."]) : "Mr."];
  return { given, family, name: [official] };
}

/** The patient's home organization and a general practitioner working there. */
function careTeam(ctx: BuildContext): [organization: number, practitioner: number] {
  const organizations = ctx.shared.organizations.length;
  const home = ctx.rng.int(0, organizations - 1);
  const colleagues = Math.ceil((ctx.shared.practitioners.length - home) / organizations);
  return [home, home + organizations * ctx.rng.int(0, colleagues - 1)];
}

interface Identity {
  gender: "male" | "female";
  birth: number;
  city: City;
  homeOrganization: number;
  generalPractitioner: number;
}

/** Emits the Patient resource (FHIR R4 Patient, with the US Core race/ethnicity/birth sex extensions). */
function emitPatientResource(ctx: BuildContext, who: Identity): FhirResource {
  const rng = ctx.rng;
  const age = (ctx.now - who.birth) / YEAR;
  const { given, family, name } = names(ctx, who.gender, age);
  const email = `${given}.${family}.${rng.digits(3)}@example.com`.toLowerCase().replace("'", "");
  const resource = start(ctx, "Patient");
  resource["meta"] = { profile: [`${CORE}us-core-patient`] };
  resource["extension"] = demographics(ctx, who.gender, rng.chance(0.18));
  resource["identifier"] = identifiers(ctx);
  resource["active"] = true;
  resource["name"] = name;
  resource["telecom"] = [{ system: "phone", value: phone(rng), use: "home" }, ...(age >= 16 ? [{ system: "email", value: email }] : [])];
  resource["gender"] = who.gender;
  resource["birthDate"] = date(who.birth, who.city.offset);
  resource["address"] = [address(rng, who.city)];
  resource["maritalStatus"] = maritalStatus(ctx, age);
  resource["multipleBirthBoolean"] = rng.chance(0.02);
  resource["communication"] = [{ language: coded("urn:ietf:bcp:47", rng.chance(0.85) ? "en-US" : "es"), preferred: true }];
  resource["generalPractitioner"] = [practitionerRef(ctx, who.generalPractitioner)];
  resource["managingOrganization"] = organizationRef(ctx, who.homeOrganization);
  return emit(ctx, resource);
}

/** Creates the patient (emitting the Patient resource) with the traits the rest of the record follows. */
export function buildPatient(ctx: BuildContext): PatientState {
  const rng = ctx.rng;
  const gender = rng.chance(0.5) ? "female" : "male";
  const band = rng.weighted(AGE_BANDS, AGE_WEIGHTS);
  const birth = ctx.now - (band[0] + rng.float() * (band[1] - band[0] + 1)) * YEAR;
  const city = rng.pick(CITIES);
  const [homeOrganization, generalPractitioner] = careTeam(ctx);
  const bmi = Math.min(45, Math.max(17, rng.normal(27, 4.5)));
  const resource = emitPatientResource(ctx, { gender, birth, city, homeOrganization, generalPractitioner });
  return {
    resource, ref: refTo(ctx, resource), gender, birth, offset: city.offset, homeOrganization, generalPractitioner,
    adultHeight: round(gender === "female" ? rng.normal(163, 6.5) : rng.normal(176, 7), 1),
    bmi,
    smoking: rng.weighted(SMOKING_VALUES, SMOKING_VALUES.map((s) => s.weight)),
    chronic: chronicConditions(ctx, birth, bmi),
  };
}

function maritalStatus(ctx: BuildContext, age: number): unknown {
  const system = "http://terminology.hl7.org/CodeSystem/v3-MaritalStatus";
  if (age < 18) return { coding: [{ system, code: "S", display: "Never Married" }], text: "Never Married" };
  const [code, display] = ctx.rng.weighted([["M", "Married"], ["S", "Never Married"], ["D", "Divorced"], ["W", "Widowed"]], [50, 30, 12, age > 60 ? 15 : 2]);
  return { coding: [{ system, code, display }], text: display };
}
