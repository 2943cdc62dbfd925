/**
 * Membership in a ValueSet a Questionnaire contains (`answerValueSet: "#verbal"`, R4 references.html,
 * contained resources): decided from the value set itself, since the terminology resolves canonical urls
 * only. Its `expansion.contains` when it has one; else its `compose`: codes listed by `include.concept`
 * (and `exclude.concept`). An include by filter, by other value sets, or of a whole code system cannot be
 * decided here, so a code not found is then undecided rather than outside.
 */
type Json = Record<string, unknown>;

export type LocalMembership = 'member' | 'not-member' | 'unknown';

function objects(v: unknown): Json[] {
  return Array.isArray(v) ? v.filter((x): x is Json => typeof x === 'object' && x !== null && !Array.isArray(x)) : [];
}

function sameSystem(coding: { system?: string }, system: unknown): boolean {
  return coding.system === undefined || coding.system === system;
}

function inExpansion(contains: Json[], coding: { system?: string; code: string }): boolean {
  const stack = [...contains];
  while (stack.length > 0) {
    const c = stack.pop()!;
    if (c.code === coding.code && sameSystem(coding, c.system)) return true;
    stack.push(...objects(c.contains));
  }
  return false;
}

function listed(parts: Json[], coding: { system?: string; code: string }): boolean {
  return parts.some((p) => sameSystem(coding, p.system) && objects(p.concept).some((c) => c.code === coding.code));
}

/** Whether `coding` is in the contained value set `vs`. */
export function containedMembership(vs: Json, coding: { system?: string; code: string }): LocalMembership {
  const expansion = vs.expansion as Json | undefined;
  if (expansion !== undefined && Array.isArray(expansion.contains)) return inExpansion(objects(expansion.contains), coding) ? 'member' : 'not-member';
  const compose = (vs.compose ?? {}) as Json;
  const include = objects(compose.include);
  if (listed(objects(compose.exclude), coding)) return 'not-member';
  if (listed(include, coding)) return 'member';
  const open = include.some((i) => i.filter !== undefined || i.valueSet !== undefined || i.concept === undefined);
  return open ? 'unknown' : 'not-member';
}
