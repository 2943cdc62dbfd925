/**
 * The `documentation` of one search parameter in the CapabilityStatement (R4
 * `CapabilityStatement.rest.resource.searchParam.documentation`): what its values mean where Cinder
 * reads more than R4 says, and the modifiers it takes, each of which works with some value of it.
 */
import { reachesContactPoints } from './contact-points.ts';
import type { ParamDefinition } from './definitions.ts';
import { NEAR_DOC } from './near.ts';
import { REST_RESOURCE_TYPES } from './resource-types.ts';
import { hierarchyParam, MODIFIERS, namedTargets, referenceTargets, tokenModifiers } from './search-compile.ts';

const QUANTITY_DOC = 'A value in a UCUM unit (number|http://unitsofmeasure.org|code) also finds amounts stored in any commensurable UCUM unit (5.4 mg finds 5400 ug); _sort orders by the value in its canonical UCUM unit where it has one (500 mg before 1 g), else as written.';

const CONTACT_POINT_DOC = 'A ContactPoint value is compared without case (Alice@Example.org finds alice@example.org).';

const CANONICAL_BELOW = 'canonical URLs alone (`url`: every version; `url|version`: it and the versions below it)';

/**
 * The types whose hierarchy (`Location.partof` and the like: hierarchyParam) `:below` and `:above` on
 * reference parameter `def` walk, as hierarchyCondition in search-compile.ts takes a `Type/id`: its
 * target types that form one, or any type that does for a parameter R4 gives no target type, and that
 * its references can name (none for canonical references: namedTargets).
 */
export function hierarchyTargets(def: ParamDefinition): string[] {
  return namedTargets(def, def.targets.length ? referenceTargets(def) : [...REST_RESOURCE_TYPES]).filter((t) => hierarchyParam(t) !== undefined);
}

/**
 * What `:below` and `:above` take on reference parameter `def`, and which of the two it has: `:below`
 * always takes canonical URLs alone (canonicalBelow in search-compile.ts); both take `Type/id` of a
 * type that forms a hierarchy, and `id` alone when its targets hold one such type.
 */
function referenceDoc(def: ParamDefinition): { text: string; modifiers: string[] } {
  const types = hierarchyTargets(def);
  const base = MODIFIERS.reference.filter((m) => m !== 'above');
  if (!types.length) {
    return { text: `:below takes ${CANONICAL_BELOW}; no :above (it names no resource of a type that forms a hierarchy).`, modifiers: base };
  }
  const named = types.map((t) => `${t} (${t}.${hierarchyParam(t)!.code})`).join(', ');
  const byId = def.targets.length && types.length === 1 ? ` or \`id\`` : '';
  return {
    text: `:below and :above take \`Type/id\`${byId} of ${named}: :below finds it and its parts, however deep, :above it and those it is part of; :below also takes ${CANONICAL_BELOW}.`,
    modifiers: MODIFIERS.reference,
  };
}

/** The documentation of search parameter `def` (not `_id` and the like, documented with the statement). */
export function paramDocumentation(def: ParamDefinition): string {
  const reference = def.type === 'reference' ? referenceDoc(def) : undefined;
  const modifiers = ['missing', ...(reference?.modifiers ?? (def.type === 'token' ? tokenModifiers(def) : MODIFIERS[def.type]))];
  const notes = [
    def.code === 'near' ? NEAR_DOC : '', def.type === 'quantity' ? QUANTITY_DOC : '', reachesContactPoints(def) ? CONTACT_POINT_DOC : '', reference?.text ?? '',
  ].filter(Boolean);
  return `${notes.map((n) => `${n} `).join('')}Modifiers: ${modifiers.map((m) => `:${m}`).join(', ')}`;
}
