/**
 * Patient and Group exports by a patient-context token (SMART `patient/` scopes): the token reads the
 * types its scopes bind in its patient's compartment alone (Access.patientLimit), so the export holds
 * them for that patient alone, as its searches would. When every exported type is bound, the export
 * is that patient's compartment, exactly as a `patient` parameter naming it makes it (the job's
 * stored patients); beside types a system/user scope lifts, each bound type is narrowed by the
 * compartment condition its searches carry, and the lifted ones are exported as for any token.
 */
import { FhirError } from '../errors.ts';
import type { Condition } from '../store/types.ts';
import type { TypeSelection } from './types-param.ts';

export interface PatientBound {
  patient: string;
  /** The exported types (and Provenance target types) the token reads in the patient's compartment alone. */
  types: string[];
  /**
   * Whether every scanned type and Provenance target type is bound: the export is then the patient's
   * compartment (its stored patients).
   */
  whole: boolean;
}

/** The bound a type selection carries, if the token's `patient/` scopes bind any of its types. */
export function patientBound(selection: TypeSelection): PatientBound | undefined {
  if (selection.patient === undefined) return undefined;
  const whole = [...selection.types, ...selection.provenanceTargets].every((t) => selection.bound.includes(t));
  return { patient: selection.patient, types: selection.bound, whole };
}

/** A `patient` parameter may name the token's own patient alone (403 otherwise: the token reads no other's). */
export function requireOwnPatient(bound: PatientBound | undefined, wanted: string[]): void {
  const other = bound && wanted.find((id) => id !== bound.patient);
  if (other === undefined) return;
  throw new FhirError('forbidden', `The access token reads only Patient/${bound!.patient}'s compartment: patient may not name Patient/${other}`, {
    expression: ['patient'],
  });
}

/** A Group export by such a token covers its patient alone, who must be one of the Group's members. */
export function requireMember(bound: PatientBound | undefined, members: Set<string>, groupId: string): void {
  if (!bound || members.has(bound.patient)) return;
  throw new FhirError('forbidden', `Patient/${bound.patient}, whose compartment the access token is limited to, is not a member of Group/${groupId}`);
}

const inCompartment = (patient: string): Condition => ({ kind: 'compartment', patient });

/**
 * `filters` (ORed alternatives per type) with each bound type's alternatives ANDed with the patient's
 * compartment; a type without alternatives gets that condition alone. Only `types` are touched.
 */
export function withinCompartment(filters: Record<string, Condition[][]>, types: string[], bound: PatientBound): Record<string, Condition[][]> {
  const out = { ...filters };
  for (const type of types) {
    if (!bound.types.includes(type)) continue;
    const own = filters[type]?.length ? filters[type]! : [[]];
    out[type] = own.map((alternative) => [...alternative, inCompartment(bound.patient)]);
  }
  return out;
}
