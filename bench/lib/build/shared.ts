/** Organizations and Practitioners shared by all patients (referenced, never duplicated). */
import { CITIES, FAMILY_NAMES, FEMALE_NAMES, MALE_NAMES, ORGANIZATION_KINDS, STREET_NAMES, STREET_SUFFIXES } from "../catalog/people.ts";
import type { City } from "../catalog/people.ts";
import { NPI, concept } from "../fhir.ts";
import type { FhirResource } from "../fhir.ts";
import type { Random } from "../prng.ts";
import type { SharedOrganization, SharedPool, SharedPractitioner } from "./context.ts";

/** A 10-digit NPI with a valid Luhn check digit (computed over the "80840" prefix, as CMS specifies). */
export function npi(rng: Random): string {
  const base = `1${rng.digits(8)}`;
  const digits = `80840${base}`;
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 0) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return `${base}${(10 - (sum % 10)) % 10}`;
}

/** A street address in a city. */
export function address(rng: Random, city: City): Record<string, unknown> {
  return {
    use: "home",
    line: [`${rng.int(1, 9999)} ${rng.pick(STREET_NAMES)} ${rng.pick(STREET_SUFFIXES)}`],
    city: city.name,
    state: city.state,
    postalCode: `${city.zip}${rng.digits(2)}`,
    country: "US",
  };
}

/** A North American phone number in the fictional 555-01xx range. */
export function phone(rng: Random): string {
  return `${rng.int(201, 989)}-555-01${rng.digits(2)}`;
}

function organization(rng: Random): FhirResource {
  const city = rng.pick(CITIES);
  const name = `${city.name} ${rng.pick(FAMILY_NAMES)} ${rng.pick(ORGANIZATION_KINDS)}`;
  return {
    resourceType: "Organization",
    id: rng.uuid(),
    identifier: [{ system: NPI, value: npi(rng) }],
    active: true,
    type: [concept("http://terminology.hl7.org/CodeSystem/organization-type", "prov", "Healthcare Provider")],
    name,
    telecom: [{ system: "phone", value: phone(rng), use: "work" }],
    address: [{ ...address(rng, city), use: "work" }],
  };
}

function practitioner(rng: Random, workplace: FhirResource): FhirResource {
  const gender = rng.chance(0.5) ? "female" : "male";
  const given = rng.pick(gender === "female" ? FEMALE_NAMES : MALE_NAMES);
  const family = rng.pick(FAMILY_NAMES);
  return {
    resourceType: "Practitioner",
    id: rng.uuid(),
    identifier: [{ system: NPI, value: npi(rng) }],
    active: true,
    name: [{ use: "official", family, given: [given], prefix: ["Dr."] }],
    telecom: [{ system: "email", value: `${given}.${family}@example.org`.toLowerCase().replace("'", ""), use: "work" }],
    address: structuredClone(workplace["address"]),
    gender,
    qualification: [{ code: concept("http://terminology.hl7.org/CodeSystem/v2-0360|2.7", "MD", "Doctor of Medicine") }],
  };
}

function practitionerName(resource: FhirResource): string {
  const [name] = resource["name"] as [{ family: string; given: string[] }];
  return `Dr. ${name.given[0]} ${name.family}`;
}

/** Builds the shared pool: `organizations` organizations and `practitioners` practitioners spread over them. */
export function buildSharedPool(rng: Random, organizations: number, practitioners: number): SharedPool {
  const orgResources = Array.from({ length: organizations }, () => organization(rng));
  const orgs: SharedOrganization[] = orgResources.map((r) => ({
    id: r.id,
    ref: { reference: `Organization/${r.id}`, display: r["name"] as string },
  }));
  const practResources: FhirResource[] = [];
  const practs: SharedPractitioner[] = [];
  for (let i = 0; i < practitioners; i++) {
    const org = i % organizations;
    const resource = practitioner(rng, orgResources[org]!);
    practResources.push(resource);
    practs.push({ id: resource.id, ref: { reference: `Practitioner/${resource.id}`, display: practitionerName(resource) }, organization: org });
  }
  return { organizations: orgs, practitioners: practs, resources: [...orgResources, ...practResources] };
}
