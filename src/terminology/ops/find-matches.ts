import type { CodeSystemIndex, ConceptEntry } from '../compile/code-system-index.ts';
import { systemLabel } from '../compile/membership.ts';
import type { TerminologyContext } from '../context.ts';
import { invalid, notSupported } from '../errors.ts';
import type { findMatchesParams } from '../input/operations.ts';
import type { FindProperty, OperationInput } from '../input/parameters.ts';
import type { ConceptProperty } from '../model/code-system.ts';
import { conceptProperties } from './lookup.ts';
import { checkSameCodeSystem, type CodeSystemTarget, targetCodeSystem } from './resolve-code-system.ts';

export interface FindMatchesInput {
  readonly target: CodeSystemTarget;
  readonly properties: readonly FindProperty[];
}

type RawInput = OperationInput<(typeof findMatchesParams)['spec']>;

/**
 * Applies the input rules of CodeSystem/$find-matches: `system` (and `version`) at type level, the
 * stored CodeSystem at instance level; `subproperty` (SNOMED CT relationship groups) is not supported
 * (400). `exact` and `compositional` change nothing: see findMatches.
 */
export function findMatchesInput(raw: RawInput, instance?: CodeSystemIndex): FindMatchesInput {
  const properties = raw.property ?? [];
  const grouped = properties.findIndex((p) => p.subproperty);
  if (grouped >= 0) throw notSupported('Subproperties (relationship groups) are not supported by $find-matches', [`property[${grouped}].subproperty`]);
  if (instance !== undefined) {
    checkSameCodeSystem(instance, raw.system, raw.version, { system: 'system', version: 'version' });
    return { target: { instance }, properties };
  }
  if (raw.system === undefined) throw invalid("'system' is required unless $find-matches is invoked on a CodeSystem", ['system']);
  return { target: raw.version === undefined ? { system: raw.system } : { system: raw.system, version: raw.version }, properties };
}

/** Whether concept property `p` holds the value `given` (one value[x] field), as R4 types compare. */
function sameValue(p: ConceptProperty, given: Readonly<Record<string, unknown>>, cs: CodeSystemIndex): boolean {
  const [field, value] = Object.entries(given)[0]!;
  switch (field) {
    case 'valueCode':
      return p.valueCode === value || (p.valueCoding !== undefined && p.valueCoding.code === value && (p.valueCoding.system === undefined || p.valueCoding.system === cs.url));
    case 'valueCoding': {
      const c = value as { system?: unknown; code?: unknown };
      if (p.valueCoding !== undefined) return p.valueCoding.code === c.code && (c.system === undefined || p.valueCoding.system === undefined || p.valueCoding.system === c.system);
      return p.valueCode !== undefined && p.valueCode === c.code && (c.system === undefined || c.system === cs.url);
    }
    case 'valueInteger':
    case 'valueDecimal':
      return (p.valueInteger ?? p.valueDecimal) === value;
    default:
      return (p as Record<string, unknown>)[field] === value;
  }
}

/** The given properties that `entry` does not hold (a property without a value: one it has at all). */
function unmatched(cs: CodeSystemIndex, entry: ConceptEntry, properties: readonly FindProperty[]): FindProperty[] {
  const own = conceptProperties(cs, entry);
  return properties.filter((given) => !own.some((p) => p.code === given.code && (given.value === undefined || sameValue(p, given.value, cs))));
}

/** The `code` output of a match: the concept as a Coding of its code system. */
function coding(cs: CodeSystemIndex, entry: ConceptEntry) {
  return {
    system: cs.url, ...(cs.version !== undefined && { version: cs.version }), code: entry.code,
    ...(entry.definition.display !== undefined && { display: entry.definition.display }),
  };
}

/**
 * CodeSystem/$find-matches (FHIR R4 CodeSystem-find-matches) over a code system Cinder holds: the
 * concepts whose properties (their own, and `parent`, `child` and `inactive` as $lookup gives them)
 * hold every given property (code and value; a property given without a value: one the concept has):
 * complete matches, in the code system's order. When no concept is a complete match, the partial
 * matches are the concepts that hold the most of the given properties (at least one), each with the
 * properties it does not hold as `unmatched`. Possible matches by text are never returned, so
 * `exact=false` (a human's search, for which R4 lets the server add them) answers as `exact=true`;
 * post-coordinated expressions are never returned (`compositional` allows them, never requires them).
 * No property given: no match.
 */
export async function findMatches(input: FindMatchesInput, deps: { readonly terminology: TerminologyContext }): Promise<Record<string, unknown>> {
  const cs = await targetCodeSystem(input.target, deps.terminology);
  if (cs.content === 'supplement') {
    throw invalid(`CodeSystem ${systemLabel(cs.url, cs.version)} is a supplement; find matches in the code system it supplements ('${cs.resource.supplements}')`, ['system']);
  }
  if (input.properties.length === 0) return { resourceType: 'Parameters' };
  const complete: ConceptEntry[] = [];
  let best = 0;
  let partial: { entry: ConceptEntry; missing: FindProperty[] }[] = [];
  for (const entry of cs.entries()) {
    const missing = unmatched(cs, entry, input.properties);
    if (missing.length === 0) {
      complete.push(entry);
      continue;
    }
    const held = input.properties.length - missing.length;
    if (complete.length > 0 || held === 0 || held < best) continue;
    if (held > best) [best, partial] = [held, []];
    partial.push({ entry, missing });
  }
  const match = complete.length > 0
    ? complete.map((entry) => ({ name: 'match', part: [{ name: 'code', valueCoding: coding(cs, entry) }] }))
    : partial.map(({ entry, missing }) => ({
      name: 'match',
      part: [
        { name: 'code', valueCoding: coding(cs, entry) },
        ...missing.map((p) => ({ name: 'unmatched', part: [{ name: 'code', valueCode: p.code }, ...(p.value === undefined ? [] : [{ name: 'value', ...p.value }])] })),
      ],
    }));
  return match.length === 0 ? { resourceType: 'Parameters' } : { resourceType: 'Parameters', parameter: match };
}
