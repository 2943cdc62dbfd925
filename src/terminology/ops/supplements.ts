import type { CodeSystemIndex } from '../compile/code-system-index.ts';
import type { CompiledValueSet } from '../compile/compiled-value-set.ts';
import type { TerminologyContext } from '../context.ts';
import { invalid } from '../errors.ts';
import { splitCanonical } from '../version.ts';

const VALUESET_SUPPLEMENT = 'http://hl7.org/fhir/StructureDefinition/valueset-supplement';

/** The supplements a ValueSet names (`valueset-supplement` extensions) as url and version. */
function namedSupplements(vs: CompiledValueSet): { url: string; version?: string }[] {
  return (vs.resource.extension ?? []).filter((e) => e.url === VALUESET_SUPPLEMENT && e.valueCanonical !== undefined).map((e) => splitCanonical(e.valueCanonical!));
}

/**
 * A ValueSet that names a supplement the server does not have cannot be used (a 400, as the reference
 * servers answer), nor can a code system that is not a supplement be named as one. Undefined when a
 * named CodeSystem is not loaded yet (the steady state then falls back to loading).
 */
export function checkSupplements(vs: CompiledValueSet, get: (url: string, version?: string) => CodeSystemIndex | null | undefined): true | undefined {
  for (const { url, version } of namedSupplements(vs)) {
    const cs = get(url, version);
    if (cs === undefined) return undefined;
    const name = version === undefined ? url : `${url}|${version}`;
    if (cs === null) throw invalid(`The supplement '${name}' that ${vs.label} names could not be found`, ['url']);
    if (cs.content !== 'supplement') throw invalid(`'${name}', named as a supplement by ${vs.label}, is not a supplement (its content is '${cs.content}')`, ['url']);
  }
  return true;
}

/** checkSupplements, loading the CodeSystems it needs. */
export async function requireSupplements(vs: CompiledValueSet, ctx: TerminologyContext): Promise<void> {
  for (const { url, version } of namedSupplements(vs)) await ctx.codeSystem(url, version);
  checkSupplements(vs, (url, version) => ctx.loadedCodeSystem(url, version) ?? null);
}
