/**
 * Transaction Bundles of generated data (FHIR R4 §2.36 Bundle, http.html#transaction): a first
 * Bundle that PUTs the shared Organizations and Practitioners by id, then one Bundle per patient
 * whose entries are POSTed, identified by `urn:uuid:` fullUrls and referring to each other by them.
 */
import type { SharedPool } from "./build/context.ts";
import type { FhirResource } from "./fhir.ts";
import type { GenerateOptions } from "./generator.ts";
import { generatePatientRecords, generateShared, resolveOptions } from "./generator.ts";

export interface BundleEntry {
  fullUrl: string;
  /** POSTed resources leave out `id` (the server assigns one); PUT resources keep it. */
  resource: { resourceType: string; id?: string; [element: string]: unknown };
  request: { method: "POST" | "PUT"; url: string };
}

export interface TransactionBundle {
  resourceType: "Bundle";
  type: "transaction";
  entry: BundleEntry[];
}

/** The Bundle that creates or updates the shared pool under its fixed ids (PUT Type/id). */
export function sharedBundle(shared: SharedPool): TransactionBundle {
  return {
    resourceType: "Bundle",
    type: "transaction",
    entry: shared.resources.map((resource) => ({
      fullUrl: `urn:uuid:${resource.id}`,
      resource,
      request: { method: "PUT", url: `${resource.resourceType}/${resource.id}` },
    })),
  };
}

/**
 * One patient's transaction Bundle. The record must have been built with `urn` references;
 * ids move to the fullUrl, since a server assigns its own ids on POST.
 */
export function patientBundle(record: readonly FhirResource[]): TransactionBundle {
  return {
    resourceType: "Bundle",
    type: "transaction",
    entry: record.map(({ id, ...resource }) => ({
      fullUrl: `urn:uuid:${id}`,
      resource,
      request: { method: "POST", url: resource.resourceType },
    })),
  };
}

/** Yields the shared Bundle, then one transaction Bundle per patient. */
export function* generateBundles(options: GenerateOptions): Generator<TransactionBundle> {
  const resolved = resolveOptions({ ...options, referenceStyle: "urn" });
  const shared = generateShared(resolved);
  yield sharedBundle(shared);
  for (const record of generatePatientRecords(resolved, shared)) yield patientBundle(record);
}
