/** State shared by the builders of one patient's record, and small formatting helpers. */
import type { FhirResource, Reference } from "../fhir.ts";
import type { Random } from "../prng.ts";

/**
 * How references between a patient's own resources are written: `relative` (`Patient/<id>`,
 * for NDJSON) or `urn` (`urn:uuid:<id>`, for transaction Bundles, FHIR R4 §3.1.0.11.1 / bundle.html#references).
 * Shared Organization and Practitioner references are always relative.
 */
export type ReferenceStyle = "relative" | "urn";

export interface SharedOrganization {
  id: string;
  ref: Reference;
}

export interface SharedPractitioner {
  id: string;
  ref: Reference;
  /** Index of the organization this practitioner works for. */
  organization: number;
}

export interface SharedPool {
  organizations: readonly SharedOrganization[];
  practitioners: readonly SharedPractitioner[];
  resources: readonly FhirResource[];
}

export interface BuildContext {
  rng: Random;
  /** The generated world's "now", epoch milliseconds. */
  now: number;
  style: ReferenceStyle;
  shared: SharedPool;
  /** The current patient's resources, in an order where references point backwards. */
  out: FhirResource[];
}

export const MINUTE = 60_000;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;
export const YEAR = 365.25 * DAY;

/** Starts a resource of the given type with a fresh deterministic id. */
export function start(ctx: BuildContext, resourceType: string): FhirResource {
  return { resourceType, id: ctx.rng.uuid() };
}

/** Appends a finished resource to the record. */
export function emit<T extends FhirResource>(ctx: BuildContext, resource: T): T {
  ctx.out.push(resource);
  return resource;
}

/** A reference to a resource of this patient's record. */
export function refTo(ctx: BuildContext, resource: FhirResource, display?: string): Reference {
  const reference = ctx.style === "urn" ? `urn:uuid:${resource.id}` : `${resource.resourceType}/${resource.id}`;
  return display === undefined ? { reference } : { reference, display };
}

/** A FHIR dateTime with seconds and a fixed UTC offset in hours (e.g. `2019-03-04T09:15:00-05:00`). */
export function dateTime(ms: number, offsetHours: number): string {
  const local = new Date(Math.floor(ms / 1000) * 1000 + offsetHours * HOUR).toISOString().slice(0, 19);
  const sign = offsetHours < 0 ? "-" : "+";
  const abs = Math.abs(offsetHours);
  return `${local}${sign}${abs < 10 ? "0" : ""}${abs}:00`;
}

/** A FHIR date (`YYYY-MM-DD`) in the given UTC offset. */
export function date(ms: number, offsetHours: number): string {
  return new Date(ms + offsetHours * HOUR).toISOString().slice(0, 10);
}

/** A fresh reference to a shared Organization. */
export function organizationRef(ctx: BuildContext, index: number): Reference {
  return { ...ctx.shared.organizations[index]!.ref };
}

/** A fresh reference to a shared Practitioner. */
export function practitionerRef(ctx: BuildContext, index: number): Reference {
  return { ...ctx.shared.practitioners[index]!.ref };
}
