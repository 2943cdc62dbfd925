import { ENUMERATION_WORK_LIMIT, enumerateValueSet, WorkLimitReached } from '../compile/enumerate.ts';
import { tooCostly } from '../errors.ts';
import type { TerminologyContext } from '../context.ts';
import { splitCanonical } from '../version.ts';
import type { ValueSetTarget } from '../input/value-set-target.ts';
import { parseValueSet } from '../model/value-set.ts';
import { resolveValueSet } from './resolve-value-set.ts';

/**
 * The distinct system and code pairs of a ValueSet (by canonical `url|version`, or inline), as search's
 * `:in`, `:not-in`, `:below` and `:above` use them: at most `limit + 1`, so that a caller can tell
 * "more than `limit`" without enumerating the rest. An unknown ValueSet or code system is the
 * terminology engine's 400, as is one whose codes cost more than ENUMERATION_WORK_LIMIT to list
 * (`too-costly`).
 */
export async function valueSetCodes(terminology: TerminologyContext, target: ValueSetTarget, limit: number): Promise<{ system: string; code: string }[]> {
  const vs = await resolveValueSet(target, terminology);
  const seen = new Set<string>();
  const out: { system: string; code: string }[] = [];
  try {
    for await (const { system, code } of enumerateValueSet(vs, terminology, { left: ENUMERATION_WORK_LIMIT })) {
      const key = `${system}|${code}`;
      if (seen.has(key)) continue;
      seen.add(key);
      out.push({ system, code });
      if (out.length > limit) break;
    }
  } catch (err) {
    if (!(err instanceof WorkLimitReached)) throw err;
    throw tooCostly(`The codes of ${vs.label} are too costly to list: it reads ${err.message} (includes that repeat the same codes, or excludes and imports tested on each), the most one expansion may`);
  }
  return out;
}

/** The ValueSet `url|version` names. */
export function valueSetByCanonical(canonical: string): ValueSetTarget {
  const { url, version } = splitCanonical(canonical);
  return version === undefined ? { kind: 'url', url } : { kind: 'url', url, version };
}

/**
 * A ValueSet of each code with the codes it subsumes (`is-a`) or that subsume it (`generalizes`) in its
 * code system: one include per code, so the sets are ORed.
 */
export function subsumptionValueSet(op: 'is-a' | 'generalizes', codes: { system: string; code: string }[]): ValueSetTarget {
  const resource = parseValueSet({
    resourceType: 'ValueSet', status: 'active',
    compose: { include: codes.map(({ system, code }) => ({ system, filter: [{ property: 'concept', op, value: code }] })) },
  });
  return { kind: 'inline', resource };
}
