import type { CodeSystemIndex } from '../compile/code-system-index.ts';
import type { CompiledValueSet } from '../compile/compiled-value-set.ts';
import type { TerminologyContext } from '../context.ts';
import { invalid, missingDependency } from '../errors.ts';
import type { Designation } from '../model/datatypes.ts';
import { all, then, type SyncOrAsync } from '../../sync-or-async.ts';
import { splitCanonical } from '../version.ts';

const VALUESET_SUPPLEMENT = 'http://hl7.org/fhir/StructureDefinition/valueset-supplement';
const NONE: readonly CodeSystemIndex[] = [];

/** The supplements a ValueSet names (`valueset-supplement` extensions) as url and version. */
function namedSupplements(vs: CompiledValueSet): { url: string; version?: string }[] {
  return (vs.resource.extension ?? []).filter((e) => e.url === VALUESET_SUPPLEMENT && e.valueCanonical !== undefined).map((e) => splitCanonical(e.valueCanonical!));
}

/**
 * The supplements a ValueSet names, loaded: at once when they are loaded, else as a promise. A ValueSet
 * that names a supplement the server does not have cannot be used (a 400 `not-found`, as the reference
 * servers answer), nor can a code system that is not a supplement be named as one (a 400 `invalid`).
 */
export function requireSupplements(vs: CompiledValueSet, ctx: TerminologyContext): SyncOrAsync<readonly CodeSystemIndex[]> {
  if (vs.resource.extension === undefined) return NONE;
  const named = namedSupplements(vs);
  if (named.length === 0) return NONE;
  return then(all(named.map(({ url, version }) => ctx.codeSystem(url, version))), (found) =>
    found.map((cs, i) => {
      const { url, version } = named[i]!;
      const name = version === undefined ? url : `${url}|${version}`;
      if (cs === null) throw missingDependency(`The supplement '${name}' that ${vs.label} names could not be found`, ['url']);
      if (cs.content !== 'supplement') throw invalid(`'${name}', named as a supplement by ${vs.label}, is not a supplement (its content is '${cs.content}')`, ['url']);
      return cs;
    }),
  );
}

/**
 * The designations the given supplements add to a concept of `system` (their display too, in the
 * supplement's language), for display checks and displays in a language.
 */
export function supplementDesignations(supplements: readonly CodeSystemIndex[] | undefined, system: string, code: string): Designation[] {
  const out: Designation[] = [];
  for (const s of supplements ?? []) {
    if (s.resource.supplements === undefined || s.resource.supplements.split('|')[0] !== system) continue;
    const d = s.find(code)?.definition;
    if (d === undefined) continue;
    if (d.display !== undefined) out.push({ language: s.language, value: d.display });
    out.push(...(d.designation ?? []));
  }
  return out;
}
