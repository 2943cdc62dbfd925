/**
 * Whether a `_revinclude` can reach the resources searched (R4 search.html, "Including other
 * resources"): its parameter must be able to refer to their type, as the CapabilityStatement's
 * `searchRevInclude` lists them, and its `:Type`, if any, must be that type.
 */
import { FhirError, type FhirIssue } from '../errors.ts';
import { paramOf, paramsOf, type ParamDefinition } from './definitions.ts';
import { issue } from './outcome.ts';
import { isResourceType } from './resource-types.ts';
import { namedTargets, namesNone, referenceTargets } from './search-compile.ts';
import type { Include } from './search.ts';

/**
 * Whether reference parameter `def` may refer to `type`, as `_has` takes it: a target of it (one of no
 * target type may refer to any), which its references can name (namedTargets: canonical references name
 * canonical resources alone).
 */
function mayReferTo(def: ParamDefinition, type: string): boolean {
  const targets = referenceTargets(def);
  return (targets.length === 0 || targets.includes(type)) && namedTargets(def, [type]).length > 0;
}

/**
 * Why `_revinclude` value `include` can add nothing to a search of `type`, or undefined when it can:
 * `Source:param` whose parameter does not refer to `type` (`Account?_revinclude=Observation:subject`),
 * `Source:*` when none of Source's does, or a `:Type` other than `type` (`Patient?_revinclude=
 * Observation:subject:Group`). `*` and `:iterate` (which follows the included resources, of any type)
 * always can.
 */
export function unreachableRevinclude(type: string, include: Include): string | undefined {
  const { source, param, target, iterate } = include;
  if (iterate || source === '*') return undefined;
  if (target !== undefined && target !== type) return `its :Type ${target} is not the type searched (${type})`;
  if (param === '*') {
    return paramsOf(source).some((d) => d.type === 'reference' && mayReferTo(d, type)) ? undefined : `no reference parameter of ${source} refers to ${type}`;
  }
  const def = paramOf(source, param)!;
  if (mayReferTo(def, type)) return undefined;
  const targets = referenceTargets(def);
  return targets.length && !targets.includes(type) ? `'${param}' of ${source} does not refer to ${type} (its targets: ${targets.join(', ')})` : `${source}.${namesNone(def, [type])}`;
}

/**
 * `include` (`key=raw`, a `_revinclude` on a search of `type`) unless unreachableRevinclude says it
 * can add nothing: then a 400 naming `key` when `strict`, else a warning in `warnings` and nothing, as
 * possibleInclude in src/fhir/search.ts does for a `:Type` its parameter cannot refer to.
 */
export function reachingRevinclude(type: string, include: Include, key: string, raw: string, strict: boolean, warnings: FhirIssue[]): Include | undefined {
  const why = unreachableRevinclude(type, include);
  return why === undefined ? include : ignoredInclude(`${key} '${raw}' cannot include anything on ${type}: ${why}`, key, strict, warnings);
}

/**
 * An `_include` or `_revinclude` (`key`) that can include nothing, for `message`: a 400 naming `key`
 * under strict handling, else a warning in `warnings`, as for other parameters ignored.
 */
export function ignoredInclude(message: string, key: string, strict: boolean, warnings: FhirIssue[]): undefined {
  if (strict) throw new FhirError('invalid', message, { expression: [key] });
  warnings.push(issue('warning', 'not-supported', `${message}, so it was ignored`, [key]));
  return undefined;
}

/**
 * Why a plain `_include` (no `:iterate`) includes nothing when its source type (`Observation:subject`)
 * is none of the `types` searched: it follows references of the matches alone, so a 400 naming it
 * when strict, ignored with a warning otherwise (ignoredInclude), as an include of a `:Type` its
 * parameter cannot refer to. Undefined for any other include; one whose source is no resource type is
 * malformed, parseInclude's 400.
 */
export function foreignInclude(types: readonly string[], key: string, raw: string): string | undefined {
  if (!key.startsWith('_include') || key.includes(':') || raw === '*') return undefined;
  const source = raw.split(':', 1)[0]!;
  if (!isResourceType(source) || types.includes(source)) return undefined;
  const searched = types.length > 5 ? `${types.length} types` : types.join(', ');
  return `${key} '${raw}': ${source} is not ${types.length > 1 ? 'among the types' : 'the type'} searched (${searched}), so it includes nothing; add :iterate to follow references of included resources`;
}
