/**
 * Synthetic FHIR R4 patient data, deterministic for a seed.
 *
 * `generatePatients()` yields the shared Organizations and Practitioners first, then each
 * patient's record (Patient, Encounters, Observations, ...), one resource at a time, so
 * callers can stream any number of patients in flat memory. Patient `i` is generated from its
 * own random stream, so records do not depend on how many patients come before them.
 */
import { z } from "zod";
import type { BuildContext, ReferenceStyle, SharedPool } from "./build/context.ts";
import { buildPatientRecord } from "./build/record.ts";
import { buildSharedPool } from "./build/shared.ts";
import type { FhirResource } from "./fhir.ts";
import { Random, hashSeed } from "./prng.ts";

export const generateOptionsSchema = z.object({
  patients: z.number().int().min(1).max(10_000_000),
  seed: z.union([z.string().min(1), z.number()]).default(1),
  perPatientScale: z.number().gt(0).max(100).default(1),
  referenceStyle: z.enum(["relative", "urn"]).default("relative"),
  /** The generated world's "now" (never the clock, so output is reproducible). */
  now: z.iso.datetime({ offset: true }).default("2025-01-01T00:00:00Z"),
});

export type GenerateOptions = z.input<typeof generateOptionsSchema>;
export type ResolvedOptions = z.output<typeof generateOptionsSchema>;
export type { FhirResource, ReferenceStyle, SharedPool };

/** Checks and completes options; throws a zod error naming the bad field. */
export function resolveOptions(options: GenerateOptions): ResolvedOptions {
  return generateOptionsSchema.parse(options);
}

/** How many shared Organizations and Practitioners a data set of `patients` patients has. */
export function sharedPoolSize(patients: number): { organizations: number; practitioners: number } {
  const organizations = Math.max(2, Math.ceil(patients / 250));
  return { organizations, practitioners: Math.max(2 * organizations, Math.ceil(patients / 25)) };
}

/** Builds the shared Organizations and Practitioners (random stream 0 of the seed). */
export function generateShared(options: ResolvedOptions): SharedPool {
  const size = sharedPoolSize(options.patients);
  return buildSharedPool(new Random(hashSeed(options.seed), 0), size.organizations, size.practitioners);
}

/** Builds the record of patient `index` (0-based) from its own random stream. */
export function generatePatientRecord(options: ResolvedOptions, shared: SharedPool, index: number): FhirResource[] {
  const ctx: BuildContext = {
    rng: new Random(hashSeed(options.seed), index + 1),
    now: Date.parse(options.now),
    style: options.referenceStyle,
    shared,
    out: [],
  };
  buildPatientRecord(ctx, options.perPatientScale);
  return ctx.out;
}

/** Yields each patient's record as an array, in patient order (the shared pool is not included). */
export function* generatePatientRecords(options: ResolvedOptions, shared: SharedPool): Generator<FhirResource[]> {
  for (let i = 0; i < options.patients; i++) yield generatePatientRecord(options, shared, i);
}

/**
 * Yields every resource of the data set: the shared Organizations and Practitioners, then each
 * patient's record. Every reference resolves to a resource yielded earlier.
 */
export function* generatePatients(options: GenerateOptions): Generator<FhirResource> {
  const resolved = resolveOptions(options);
  const shared = generateShared(resolved);
  yield* shared.resources;
  for (const record of generatePatientRecords(resolved, shared)) yield* record;
}
