import type { CodeSystemIndex, ConceptEntry } from '../compile/code-system-index.ts';
import { systemLabel, unknownCode } from '../compile/membership.ts';
import type { TerminologyContext } from '../context.ts';
import { invalid, notFound } from '../errors.ts';
import type { subsumesParams } from '../input/operations.ts';
import type { OperationInput } from '../input/parameters.ts';
import type { Parameters } from '../model/parameters.ts';
import { checkSameCodeSystem, type CodeSystemTarget, targetCodeSystem } from './resolve-code-system.ts';

/** R4 ConceptSubsumptionOutcome: how concept A relates to concept B. */
export type SubsumptionOutcome = 'equivalent' | 'subsumes' | 'subsumed-by' | 'not-subsumed';

export interface SubsumesInput {
  /** The CodeSystem named by system (and version), or the stored one at instance level. */
  readonly target: CodeSystemTarget;
  readonly codeA: string;
  readonly codeB: string;
  /** The inputs that named each code, for messages (`codeA` or `codingA.code`). */
  readonly paths: { readonly a: string; readonly b: string };
}

type RawInput = OperationInput<(typeof subsumesParams)['spec']>;

/**
 * Applies the input rules of CodeSystem/$subsumes (R4): `codeA` and `codeB` with `system` (and
 * `version`), or `codingA` and `codingB`, which must name the same system (and version); at instance
 * level the system is the stored CodeSystem's, and one the client names as well must be it.
 */
export function subsumesInput(raw: RawInput, instance?: CodeSystemIndex): SubsumesInput {
  const side = (which: 'A' | 'B') => {
    const code = raw[`code${which}`];
    const coding = raw[`coding${which}`];
    if (code !== undefined && coding !== undefined) throw invalid(`give either 'code${which}' or 'coding${which}', not both`, [`code${which}`, `coding${which}`]);
    if (code !== undefined) return { code, system: raw.system, version: raw.version, path: `code${which}`, systemPath: 'system', versionPath: 'version' };
    if (coding === undefined) throw invalid(`'code${which}' or 'coding${which}' is required`, [`code${which}`, `coding${which}`]);
    if (coding.code === undefined) throw invalid(`'coding${which}' has no code`, [`coding${which}.code`]);
    return { code: coding.code, system: coding.system ?? raw.system, version: coding.version ?? raw.version, path: `coding${which}.code`, systemPath: `coding${which}.system`, versionPath: `coding${which}.version` };
  };
  const a = side('A');
  const b = side('B');
  if (a.system !== undefined && b.system !== undefined && a.system !== b.system) {
    throw invalid(`'${a.systemPath}' is '${a.system}' and '${b.systemPath}' is '${b.system}': subsumption is tested within one code system`, [a.systemPath, b.systemPath]);
  }
  if (a.version !== undefined && b.version !== undefined && a.version !== b.version) {
    throw invalid(`'${a.versionPath}' is '${a.version}' and '${b.versionPath}' is '${b.version}': subsumption is tested within one version of a code system`, [a.versionPath, b.versionPath]);
  }
  const paths = { a: a.path, b: b.path };
  const system = a.system ?? b.system;
  const version = a.version ?? b.version;
  if (instance !== undefined) {
    const named = a.system !== undefined ? a : b;
    checkSameCodeSystem(instance, system, version, { system: named.systemPath, version: named.versionPath });
    return { target: { instance }, codeA: a.code, codeB: b.code, paths };
  }
  if (system === undefined) throw invalid("'system' (or the codings' system) is required", ['system']);
  return { target: { system, version }, codeA: a.code, codeB: b.code, paths };
}

/**
 * CodeSystem/$subsumes (FHIR R4 CodeSystem-subsumes): `equivalent` when both codes name one concept
 * (as the code system matches codes: a case-insensitive one ignores case), `subsumes` when B is A or
 * below it in the code system's hierarchy (the same is-a reading the value set filters use),
 * `subsumed-by` the other way round, else `not-subsumed`. An unknown code system or code is a 404; a
 * code system whose concepts are not all present (`not-present`, `example`, `fragment`) answers only
 * for the codes it holds, and a supplement is a 400.
 */
export async function subsumes(input: SubsumesInput, deps: { readonly terminology: TerminologyContext }): Promise<Parameters> {
  const cs = await targetCodeSystem(input.target, deps.terminology);
  if (cs.content === 'supplement') {
    throw invalid(`CodeSystem ${systemLabel(cs.url, cs.version)} is a supplement; test subsumption in the code system it supplements ('${cs.resource.supplements}')`, ['system']);
  }
  const find = (code: string, path: string): ConceptEntry => {
    const entry = cs.find(code);
    if (entry === undefined) throw notFound(`${path}: ${unknownCode(code, cs).text}`);
    return entry;
  };
  const a = find(input.codeA, input.paths.a);
  const b = find(input.codeB, input.paths.b);
  const outcome: SubsumptionOutcome = a === b ? 'equivalent' : cs.isA(b, a) ? 'subsumes' : cs.isA(a, b) ? 'subsumed-by' : 'not-subsumed';
  return { resourceType: 'Parameters', parameter: [{ name: 'outcome', valueCode: outcome }] };
}
