/**
 * Patient compartments read for many patients at once (`Patient/$everything`, src/fhir/everything-rows.ts):
 * how many rows each patient's compartment holds, and the rows of several patients in one statement.
 * Compartment rows exist for current, live versions alone, as for a compartment search.
 */
import type { ResourceVersion } from './resources.ts';

/**
 * The patients `compartmentSizes` counts for: these ids in this order (whether a Patient of that id
 * exists or not), or the live Patients of the tenant after `after` (none: from the first) in id order,
 * at most `count`.
 */
export type PatientSelection = { ids: string[] } | { after?: string; count: number };

export interface CompartmentSizesQuery {
  patients: PatientSelection;
  /** Only rows of these resource types are counted. */
  types: string[];
  /** Each patient's rows are counted up to this many, on the compartment index alone. */
  cap: number;
}

export interface CompartmentSize {
  patient: string;
  /** The rows of `types` in the patient's compartment, at most the query's `cap`. */
  rows: number;
}

export interface CompartmentRowsQuery {
  /** The patients, in the order their rows come. */
  patients: string[];
  /**
   * The types, in the order each patient's rows come, each type's by id (bytewise). Of the type
   * Patient, the patient itself alone (not the Patients whose `link` puts them in its compartment).
   */
  types: string[];
  /** Only versions updated at or after this instant. */
  since?: number;
  /**
   * Where the first patient's rows start: after its row of `types[type]` with this id ('' for the
   * type's first row); a `type` at or past the end of `types` leaves none of that patient's rows.
   */
  after?: { type: number; id: string };
  /**
   * Leave out a resource (not a Patient) that is also in the compartment of a live Patient whose id
   * comes before its patient's (bytewise): across every live Patient in id order, each resource then
   * comes once, with the first of its patients.
   */
  firstOwner?: boolean;
  count: number;
}

/** A resource of a patient's compartment, and that patient (a resource in several comes once for each, unless `firstOwner`). */
export interface CompartmentRow extends ResourceVersion {
  patient: string;
}

/** The compartment reads of a ResourceRepo. */
export interface CompartmentReads {
  /** Each selected patient with the size of its compartment, in the selection's order. */
  compartmentSizes(tenant: string, query: CompartmentSizesQuery): Promise<CompartmentSize[]>;
  /** The first `count` rows of the patients' compartments, in the query's order. */
  compartmentRows(tenant: string, query: CompartmentRowsQuery): Promise<CompartmentRow[]>;
  /**
   * The patients whose compartments hold the current, live resources of `type` with these ids, on the
   * compartment index alone (no stored text read): each `{id, patient}` once, in no particular order.
   */
  compartmentPatients(tenant: string, type: string, ids: string[]): Promise<{ id: string; patient: string }[]>;
}
