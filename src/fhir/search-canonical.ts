/**
 * Canonical references (R4 references.html, "Canonical URLs"): a `canonical` (or `uri`) element naming a
 * canonical resource by its `url`, or by `url|version` one version of it. `_include` and `_revinclude`
 * (src/fhir/search.ts), chains and `_has` (src/fhir/search-compile.ts, SqlBuilder in
 * src/store/search-sql.ts, src/fhir/search-match.ts) read them with one meaning: `url` names every
 * resource of the target type whose `url` it is, `url|version` those whose `version` is that too.
 */
import type { Condition } from '../store/types.ts';
import { paramOf, type ParamDefinition } from './definitions.ts';
import { pathTypes } from './validation/model.ts';

/** Whether resources of `type` are canonical resources, searched by `url` and `version`. */
export function isCanonicalType(type: string): boolean {
  return paramOf(type, 'url')?.type === 'uri' && paramOf(type, 'version')?.type === 'token';
}

/**
 * The resources that `canonicals` name: by `url` where no version is given (every version held), by
 * `url` and `version` where one is (`url|version`).
 */
export function canonicalCondition(canonicals: Iterable<string>): Condition {
  const urls = new Set<string>();
  const versioned: Condition[] = [];
  for (const canonical of canonicals) {
    const bar = canonical.indexOf('|');
    if (bar < 0) {
      urls.add(canonical);
      continue;
    }
    versioned.push({
      kind: 'and',
      all: [
        { kind: 'token', param: 'url', values: [{ system: '', value: canonical.slice(0, bar) }] },
        { kind: 'token', param: 'version', values: [{ value: canonical.slice(bar + 1) }] },
      ],
    });
  }
  const any: Condition[] = [...versioned];
  if (urls.size) any.unshift({ kind: 'token', param: 'url', values: [...urls].map((value) => ({ system: '', value })) });
  return any.length === 1 ? any[0]! : { kind: 'or', any };
}

/**
 * The canonicals a resource's rows of one reference parameter (`values`: those of system '') name. A
 * versioned canonical `url|v` is indexed with its `url` alone too (src/fhir/indexer.ts referenceValues),
 * so a `url` row beside a `url|...` row is that reference's, not one naming every version: it is left
 * out (a resource naming both `url` and `url|v` in one parameter is read as naming `url|v` alone).
 * SqlBuilder's canonical chains and `_has` read the rows so too.
 */
export function namedCanonicals(values: string[]): string[] {
  return values.filter((v) => v.includes('|') || !values.some((w) => w.startsWith(`${v}|`)));
}

/**
 * The condition on the rows of reference parameter `param` of a resource naming one of the canonical resources
 * of `named` (url → their versions): a row `url|version`, or a row `url` with no `url|...` row beside it (namedCanonicals;
 * a `:below` of `url|` would compare no bounded form of a url past PostgreSQL's index bound), in one token condition (`canonical`): one
 * set of values, where a condition per url cost SQLite a statement term each (`_revinclude` of a page of 300).
 */
export function namingCanonicals(param: string, named: Map<string, Iterable<string>>): Condition {
  const values: { system: string; value: string }[] = [];
  for (const [url, versions] of named) {
    values.push({ system: '', value: url });
    for (const v of versions) values.push({ system: '', value: `${url}|${v}` });
  }
  return { kind: 'token', param, values, canonical: true };
}

const KINDS = new Map<ParamDefinition, { canonical: boolean; literal: boolean }>();

/**
 * What reference parameter `def`'s paths reach, by the R4 model: `canonical` (or `uri`, `url`) elements,
 * whose values name canonical resources, and `literal` ones, Reference elements (or any path the model
 * does not resolve, read as before: as literal references).
 */
export function referenceKinds(def: ParamDefinition): { canonical: boolean; literal: boolean } {
  let out = KINDS.get(def);
  if (out) return out;
  out = { canonical: false, literal: false };
  for (const path of def.paths) {
    const types = path.targetType === undefined ? pathTypes(def.base, path.key.replace(/\.where\([^()]*\)/g, '')) : [];
    if (types.some((t) => t === 'canonical' || t === 'uri' || t === 'url')) out.canonical = true;
    if (types.length === 0 || types.some((t) => t !== 'canonical' && t !== 'uri' && t !== 'url')) out.literal = true;
  }
  KINDS.set(def, out);
  return out;
}
