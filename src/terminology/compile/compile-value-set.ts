import { FhirError } from '../../errors.ts';
import { invalid, unprocessable } from '../errors.ts';
import { type DatePeriod, parseDateTime } from '../model/date-time.ts';
import type { CodeSystemLookup } from './membership.ts';
import { parseValueSet, type ConceptSet, type ValueSet } from '../model/value-set.ts';
import { CompiledConceptSet, type ConceptSetParts, type ImportedValueSet } from './concept-set.ts';
import { CompiledValueSet } from './compiled-value-set.ts';
import { ExpansionIndex } from './expansion-index.ts';
import { at, checkFilter } from './filters.ts';

/** Resolves `include.valueSet` references while a ValueSet is compiled. */
export interface ImportResolver {
  /**
   * The compiled ValueSet for a canonical reference (`url` or `url|version`), or null when
   * none is found. `stack` names the ValueSets being compiled, to detect import cycles.
   */
  importValueSet(canonical: string, stack: readonly string[]): Promise<CompiledValueSet | null>;
  /**
   * The same terminology as it was at `date`, with its code systems (for `compose.lockedDate`);
   * absent where no dated terminology is at hand (then a lockedDate changes nothing).
   */
  asOfDate?(date: DatePeriod): ImportResolver & CodeSystemLookup;
}

/** HL7's catalogue key of a cycle of imports. */
const CIRCULAR = 'VALUESET_CIRCULAR_REFERENCE';

/** The key of a ValueSet on the compile stack: its canonical URL and version. */
export function valueSetKey(vs: ValueSet): string {
  return vs.url === undefined ? '(inline ValueSet)' : `${vs.url}|${vs.version ?? ''}`;
}

/**
 * Compiles a ValueSet into a membership test (R4 ValueSet 4.9.5, compose). Imports are
 * compiled recursively; a cycle of imports is a 400, never a hang.
 */
export async function compileValueSet(
  vs: ValueSet,
  resolver: ImportResolver,
  stack: readonly string[] = [],
  container?: ContainedValueSets,
  supplied = false,
): Promise<CompiledValueSet> {
  const key = valueSetKey(vs);
  if (stack.includes(key)) {
    const cycle = [...stack.slice(stack.indexOf(key)), key].map((k) => k.replace(/\|$/, ''));
    // HL7's VALUESET_CIRCULAR_REFERENCE, shaped as the reference servers give it: the chain in the text, no `expression`
    // (but in a value set the request supplies: compileConceptSet).
    throw unprocessable(`circular ValueSet import: ${cycle.join(' -> ')}`, [], CIRCULAR);
  }
  const inner = [...stack, key];
  const label = vs.url === undefined ? 'the supplied ValueSet' : `ValueSet '${vs.url}'`;
  // The value set as HL7's catalogue names it in its messages: `url|version`, unquoted.
  const named = vs.url === undefined ? undefined : vs.version === undefined ? vs.url : `${vs.url}|${vs.version}`;
  // An issue about an element of the compose names it by its FHIRPath in the value set the message names (the
  // one asked for, or one it imports: a compiled value set serves both).
  const path = (element: string) => `ValueSet.${element}`;
  const compose = vs.compose;
  if (compose === undefined) {
    const expansion = vs.expansion?.contains !== undefined ? new ExpansionIndex(vs.expansion.contains) : undefined;
    return new CompiledValueSet({ resource: vs, includes: [], excludes: [], expansion, supplied });
  }
  // compose.lockedDate (R4): the code systems and value sets the compose does not pin a version of are
  // the versions in effect at that date: imports are resolved then, and each include and exclude of a
  // code system is pinned to its version of that date (none in effect then: left to the request's).
  const locked = compose.lockedDate === undefined ? undefined : lockedDate(compose.lockedDate, label, path('compose.lockedDate'));
  const dated = locked === undefined ? undefined : resolver.asOfDate?.(locked);
  if (dated !== undefined) resolver = dated;
  // `#id` imports name a ValueSet contained in this one, or, in a contained one, another of its container's.
  const scope = container ?? new ContainedValueSets(vs.contained);
  const local: ImportResolver = {
    importValueSet(canonical, importStack) {
      return canonical.startsWith('#') ? scope.compile(canonical, resolver, importStack) : resolver.importValueSet(canonical, importStack);
    },
  };
  const pinned = async (set: ConceptSet): Promise<ConceptSet> => {
    if (dated === undefined || set.system === undefined || set.version !== undefined) return set;
    const version = (await dated.codeSystem(set.system))?.version;
    return version === undefined ? set : { ...set, version };
  };
  const includes: CompiledConceptSet[] = [];
  for (const [i, set] of compose.include.entries()) {
    includes.push(await compileConceptSet(await pinned(set), { where: `${label} compose.include[${i}]`, path: path(`compose.include[${i}]`), valueSet: named, supplied }, local, inner));
  }
  const excludes: CompiledConceptSet[] = [];
  for (const [i, set] of (compose.exclude ?? []).entries()) {
    excludes.push(await compileConceptSet(await pinned(set), { where: `${label} compose.exclude[${i}]`, path: path(`compose.exclude[${i}]`), valueSet: named, supplied }, local, inner));
  }
  return new CompiledValueSet({ resource: vs, includes, excludes, supplied });
}

/**
 * The contained resources of the ValueSet being compiled, which its `#id` imports and those of its
 * contained ValueSets name (contained resources are all the container's: FHIR R4 references.html#contained).
 * Each is compiled once per compilation of the container, so that contained ValueSets importing one
 * another many times (a diamond of imports) cost their number, not the number of paths through them.
 */
class ContainedValueSets {
  private readonly compiled = new Map<string, CompiledValueSet | null>();

  constructor(private readonly contained: ValueSet['contained']) {}

  async compile(canonical: string, resolver: ImportResolver, stack: readonly string[]): Promise<CompiledValueSet | null> {
    const done = this.compiled.get(canonical);
    if (done !== undefined) return done;
    const raw = this.contained?.find((r) => r.resourceType === 'ValueSet' && r.id === canonical.slice(1));
    // Named by its reference when it has no url of its own, so that import cycles are told apart from it.
    // Kept once compiled, not while it is: an import cycle meets the stack (a 400) before it could wait on itself.
    const compiled = raw === undefined ? null : await compileValueSet(parseValueSet({ url: canonical, ...raw }, `contained ValueSet '${canonical}'`), resolver, stack, this);
    this.compiled.set(canonical, compiled);
    return compiled;
  }
}

function lockedDate(text: string, label: string, path: string | undefined): DatePeriod {
  const date = parseDateTime(text);
  if (date === null) throw invalid(`${label} compose.lockedDate '${text}' is not a FHIR date`, at(path), 'vs-invalid');
  return date;
}

async function compileConceptSet(
  set: ConceptSet,
  place: Pick<ConceptSetParts, 'where' | 'path' | 'valueSet' | 'supplied'>,
  resolver: ImportResolver,
  stack: readonly string[],
): Promise<CompiledConceptSet> {
  const { where, path } = place;
  const concepts = set.concept !== undefined && set.concept.length > 0 ? set.concept : undefined;
  const rawFilters = set.filter ?? [];
  const canonicals = set.valueSet ?? [];
  if (set.system === undefined && canonicals.length === 0) throw invalid(`${where} has neither a system nor a valueSet`, at(path), 'vs-invalid');
  if (set.system === undefined && (concepts !== undefined || rawFilters.length > 0)) {
    throw invalid(`${where} lists concepts or filters but no system`, at(path), 'vs-invalid');
  }
  if (concepts !== undefined && rawFilters.length > 0) throw invalid(`${where} cannot have both concept and filter`, at(path), 'vs-invalid');
  const filters = rawFilters.map((f, i) => checkFilter(f, set.system ?? '', `${where}.filter[${i}]`, path === undefined ? undefined : `${path}.filter[${i}]`));
  const imports: ImportedValueSet[] = [];
  for (const [j, canonical] of canonicals.entries()) {
    try {
      imports.push({ canonical, compiled: await resolver.importValueSet(canonical, stack) });
    } catch (e) {
      // A cycle met through an import of the value set the request supplies is the client's input at fault: named at
      // that import (a new error: a failed compilation of a stored value set may be kept and shared).
      if (place.supplied !== true || path === undefined || !(e instanceof FhirError) || e.issues[0]?.extension?.[0]?.valueString !== CIRCULAR) throw e;
      throw unprocessable(e.message, [`${path}.valueSet[${j}]`], CIRCULAR);
    }
  }
  return new CompiledConceptSet({ system: set.system, version: set.version, concepts, filters, imports, ...place });
}
