import type { ConceptProperty, PropertyDefinition } from '../model/code-system.ts';

/** The roles a concept property can play for the engine (FHIR R4 concept-properties). */
export type PropertyRole = 'parent' | 'child' | 'inactive' | 'status' | 'notSelectable';

const BASE = 'http://hl7.org/fhir/concept-properties#';
const ROLE_BY_URI: Record<string, PropertyRole> = {
  [`${BASE}parent`]: 'parent',
  [`${BASE}child`]: 'child',
  [`${BASE}inactive`]: 'inactive',
  [`${BASE}status`]: 'status',
  [`${BASE}notSelectable`]: 'notSelectable',
};
const ROLE_BY_CODE: Record<string, PropertyRole> = {
  parent: 'parent',
  subsumedBy: 'parent',
  child: 'child',
  inactive: 'inactive',
  status: 'status',
  notSelectable: 'notSelectable',
  abstract: 'notSelectable',
};

/**
 * Statuses (concept-properties#status) under which a concept counts as inactive. A `deprecated` concept
 * is still active, only discouraged (FHIR concept-properties; the reference servers keep it in
 * `activeOnly` expansions and warn when it is validated). A concept's standards-status extension
 * `withdrawn` makes it inactive too (code-system-index.ts), as tx.fhir.org reads it.
 */
export const INACTIVE_STATUSES: ReadonlySet<string> = new Set(['retired', 'inactive']);

/**
 * Maps property codes of one CodeSystem to their roles: by the standard URI when the
 * CodeSystem declares one, else by the conventional code (HL7 v3 uses `subsumedBy`, `abstract`).
 */
export function propertyRoles(defs: readonly PropertyDefinition[]): Map<string, PropertyRole> {
  const roles = new Map<string, PropertyRole>(Object.entries(ROLE_BY_CODE));
  for (const def of defs) {
    const byUri = def.uri !== undefined ? ROLE_BY_URI[def.uri] : undefined;
    if (byUri !== undefined) roles.set(def.code, byUri);
    else if (def.uri !== undefined) roles.delete(def.code);
  }
  return roles;
}

/** A concept property value as the string filters compare against. */
export function propertyValueText(p: ConceptProperty): string | undefined {
  if (p.valueCode !== undefined) return p.valueCode;
  if (p.valueCoding !== undefined) return p.valueCoding.code;
  if (p.valueString !== undefined) return p.valueString;
  if (p.valueBoolean !== undefined) return String(p.valueBoolean);
  if (p.valueInteger !== undefined) return String(p.valueInteger);
  if (p.valueDecimal !== undefined) return String(p.valueDecimal);
  return p.valueDateTime;
}
