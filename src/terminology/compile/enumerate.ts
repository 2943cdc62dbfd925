import { FhirError } from '../../errors.ts';
import { invalid, missingDependency } from '../errors.ts';
import type { ConceptDefinition } from '../model/code-system.ts';
import type { StatusExtensions } from '../model/datatypes.ts';
import { type ConceptReference, storedExpansionParameter } from '../model/value-set.ts';
import type { CodeSystemIndex, ConceptEntry } from './code-system-index.ts';
import type { CompiledConceptSet } from './concept-set.ts';
import type { CompiledValueSet } from './compiled-value-set.ts';
import { type CodeSystemLookup, type DrawnThrough, systemLabel, unknownVersionText } from './membership.ts';
import { at } from './filters.ts';

/** One code of an expansion, before paging. */
export interface ExpansionEntry {
  readonly system: string;
  readonly version?: string;
  readonly code: string;
  readonly display?: string;
  readonly abstract: boolean;
  readonly inactive: boolean;
  /** The CodeSystem's concept and the language of its display, when the code is in a known CodeSystem. */
  readonly concept?: { readonly definition: ConceptDefinition; readonly language: string | undefined };
  /**
   * The imported ValueSets the code was drawn through (an include with no system lists their codes; DrawnThrough):
   * the supplements they name apply to it, as they do in their own expansions. Absent for a code drawn from a code
   * system by the ValueSet itself.
   */
  readonly via?: DrawnThrough;
  /** The concept's extensions an expansion repeats on its `contains` (carriedExtensions). */
  readonly extension?: readonly ConceptExtension[];
}

type ConceptExtension = NonNullable<StatusExtensions>[number];

const EXT = 'http://hl7.org/fhir/StructureDefinition/';
/** How a concept is shown (R4 core extensions on a concept, whoever defines it: code system, supplement or value set). */
const RENDERING = new Set([`${EXT}rendering-style`, `${EXT}rendering-xhtml`]);
/** What a value set says of a concept it lists: its presence deprecated, or a definition of its own for this value set. */
const LISTED = new Set([...RENDERING, `${EXT}valueset-deprecated`, `${EXT}structuredefinition-standards-status`, `${EXT}valueset-concept-definition`]);

/**
 * The extensions of a concept an expansion repeats on its `contains`, as the reference servers repeat them:
 * from the value set's `compose.include.concept`, those on its presence there and its rendering
 * (`listed`), then the rendering the code system (or a supplement, `supplemented` in expansion-parts.ts)
 * gives it, each url once, the value set's first. Other extensions (an order, a label, an `itemWeight`,
 * which R5 gives as `contains.property`, an element R4 does not have) are not repeated.
 */
export function carriedExtensions(listed: StatusExtensions, defined: StatusExtensions, before: readonly ConceptExtension[] = []): readonly ConceptExtension[] | undefined {
  const out = [...before];
  for (const e of listed ?? []) if (LISTED.has(e.url) && !out.some((o) => o.url === e.url)) out.push(e);
  for (const e of defined ?? []) if (RENDERING.has(e.url) && !out.some((o) => o.url === e.url)) out.push(e);
  return out.length === 0 ? undefined : out;
}

/**
 * How much one enumeration may do: each candidate code it reads (repeats of overlapping includes too)
 * and each test of one against an exclude counts one. A ValueSet of 3,000 includes each importing the
 * same 100,000 codes is 3×10⁸ candidates, and 40,000 codes against 2,000 excludes 8×10⁷ tests: minutes
 * of the event loop for one request. Past the budget the enumeration throws WorkLimitReached, which its
 * caller answers (a 400 `too-costly`, or a page without its total).
 */
export interface EnumerationBudget {
  left: number;
}

/** The work an enumeration may do by default (about a second at most): a code system of 2,000,000 codes, or 350,000 against four excludes. */
export const ENUMERATION_WORK_LIMIT = 2_000_000;

/** Thrown by an enumeration that used up its budget. */
export class WorkLimitReached extends Error {
  constructor(readonly limit: number) {
    super(`more than ${limit} codes and exclude tests`);
  }
}

function spend(budget: EnumerationBudget | undefined, units: number, limit: number): void {
  if (budget !== undefined && (budget.left -= units) < 0) throw new WorkLimitReached(limit);
}

/** A membership test's cost bound past this counts as this: enough to spend any budget at once. */
const COST_CAP = 1e9;
const setCosts = new WeakMap<CompiledConceptSet, number>();
const valueSetCosts = new WeakMap<CompiledValueSet, number>();

/**
 * What a membership test against `set` may cost, in the units of EnumerationBudget: one, plus one per
 * filter, plus the tests of its imported ValueSets (each of their includes and excludes, recursively),
 * so that an exclude importing a ValueSet of 3,000 includes costs 3,000 a code, not one.
 */
function setCost(set: CompiledConceptSet): number {
  let cost = setCosts.get(set);
  if (cost === undefined) {
    cost = 1 + set.filters.length;
    for (const i of set.imports) if (i.compiled !== null) cost += valueSetCost(i.compiled);
    cost = Math.min(cost, COST_CAP);
    setCosts.set(set, cost);
  }
  return cost;
}

function valueSetCost(vs: CompiledValueSet): number {
  let cost = valueSetCosts.get(vs);
  if (cost === undefined) {
    cost = vs.expansion !== undefined ? 1 : 0;
    if (vs.expansion === undefined) for (const set of [...vs.includes, ...vs.excludes]) cost = Math.min(cost + setCost(set), COST_CAP);
    valueSetCosts.set(vs, cost);
  }
  return cost;
}

/**
 * Lists the codes of a compiled ValueSet in definition order (R4 ValueSet 4.9.5 / $expand):
 * each include's candidates, filtered by its filters and imports, minus the excludes. Codes can
 * repeat when includes overlap; the caller de-duplicates. Enumeration is lazy, so a caller that
 * stops early (size limit) does not pay for the rest. An include whose codes are a subset of what an
 * earlier include already listed (the same imported ValueSet, or a code system listed whole before) is
 * skipped, as it could only repeat them; `budget` bounds the rest (EnumerationBudget).
 */
export async function* enumerateValueSet(
  vs: CompiledValueSet, lookup: CodeSystemLookup, budget?: EnumerationBudget, limit = budget?.left ?? 0,
): AsyncGenerator<ExpansionEntry> {
  if (vs.expansion !== undefined) {
    // The displays of a stored expansion are in the language it was computed for (its `displayLanguage`), else the value set's.
    const language = storedExpansionParameter(vs.resource, 'displayLanguage') ?? vs.resource.language;
    for (const item of vs.expansion.items) {
      spend(budget, 1, limit);
      if (item.inactive === true && !vs.inactiveAllowed) continue;
      const { system, version, code, display, designation } = item;
      // The expansion's entry is the concept as this value set shows it: the supplements it names add their displays
      // and designations to it, as to a code drawn from a code system.
      const definition: ConceptDefinition = { code, ...(display === undefined ? {} : { display }), ...(designation === undefined ? {} : { designation }) };
      const concept = { definition, language: language ?? (await expansionLanguage(lookup, system, version)) };
      yield { system, version, code, display, abstract: item.abstract ?? false, inactive: item.inactive ?? false, concept };
    }
    return;
  }
  const listedWhole = new Set<string>();
  for (const include of vs.includes) {
    if (coveredBy(include, listedWhole)) continue;
    for await (const entry of enumerateSet(include, lookup, budget, limit)) {
      spend(budget, 1, limit);
      if (entry.inactive && !vs.inactiveAllowed) continue;
      if (await excluded(vs, entry, lookup, budget, limit)) continue;
      yield entry;
    }
    const whole = wholeSource(include);
    if (whole !== undefined) listedWhole.add(whole);
  }
}

/**
 * The language of a stored expansion's display of a code of `system` `version`, when the value set does not say it:
 * that code system version's, the display being its. Only for an entry that names its version: one that names none
 * says nothing of which version it came from (and looking the latest up would list it as used). Only a hint: a code
 * system the request's versions refuse (check-system-version) leaves it unknown, as a missing one does.
 */
async function expansionLanguage(lookup: CodeSystemLookup, system: string, version: string | undefined): Promise<string | undefined> {
  if (version === undefined) return undefined;
  try {
    return (await lookup.codeSystem(system, version))?.language;
  } catch (e) {
    if (e instanceof FhirError) return undefined;
    throw e;
  }
}

/**
 * Where an include's candidate codes come from: a code system (and version), or without a system its
 * first imported ValueSet. Undefined for a list of concepts, which one of a fragment CodeSystem may
 * name though the CodeSystem does not hold them (systemCandidates), and for an include with neither.
 */
function candidateSource(set: CompiledConceptSet): string | undefined {
  if (set.system !== undefined) return set.conceptList() === undefined ? `system ${set.system}|${set.version ?? ''}` : undefined;
  const first = set.imports[0];
  return first !== undefined && first.compiled !== null ? `import ${first.canonical}` : undefined;
}

/** What an include lists whole, when it is all of its source: no filters, and no imports but the one that is its source. */
function wholeSource(set: CompiledConceptSet): string | undefined {
  const onlySource = set.filters.length === 0 && set.imports.length === (set.system === undefined ? 1 : 0);
  return onlySource ? candidateSource(set) : undefined;
}

/**
 * Whether every code `set` lists is one an earlier include listed whole (`listed`): its candidates come
 * from the same source, which its filters and further imports could only narrow, and the excludes are
 * the same.
 */
function coveredBy(set: CompiledConceptSet, listed: ReadonlySet<string>): boolean {
  const source = candidateSource(set);
  return source !== undefined && listed.has(source);
}

/**
 * Whether an exclude removes the entry. An exclude pinned to a version that no include pins removes
 * the codes that version selects from every version (as the reference servers answer: excluding one
 * version of a code system from another is a diff); otherwise it is evaluated in the entry's version.
 */
async function excluded(vs: CompiledValueSet, entry: ExpansionEntry, lookup: CodeSystemLookup, budget: EnumerationBudget | undefined, limit: number): Promise<boolean> {
  for (const set of vs.excludes) {
    if (set.system !== undefined && set.system !== entry.system) continue;
    const missing = set.missingImports()[0];
    if (missing !== undefined) throw missingDependency(`${set.where}: the imported ValueSet '${missing}' could not be found, so the expansion would hold codes it excludes`, at(set.path));
    spend(budget, setCost(set), limit);
    // A diff (the code in any version) unless versions are kept apart; by default only for a version no include pins.
    const coding = vs.diffs(set) ? { system: entry.system, code: entry.code } : entry;
    if ((await set.check(coding, lookup)).member) return true;
  }
  return false;
}

async function* enumerateSet(set: CompiledConceptSet, lookup: CodeSystemLookup, budget: EnumerationBudget | undefined, limit: number): AsyncGenerator<ExpansionEntry> {
  const imports = set.imports.map((i) => i.compiled).filter((c) => c !== null);
  const missing = set.missingImports();
  if (missing.length > 0) {
    throw missingDependency(`${set.where}: the imported ValueSet '${missing[0]}' could not be found, so the expansion would be incomplete`, at(set.path));
  }
  // Without a system, the first import supplies the candidates and the others intersect: the code is drawn
  // through every one of them.
  const [first, ...others] = imports;
  const candidates = set.system !== undefined ? systemCandidates(set, set.system, lookup) : first !== undefined ? enumerateValueSet(first, lookup, budget, limit) : [];
  const checks = set.system !== undefined ? imports : others;
  const checksCost = checks.reduce((sum, vs) => sum + valueSetCost(vs), 0);
  // The intersected imports, once for every code drawn through the first.
  let beside: DrawnThrough | undefined;
  for (const vs of others) beside = { vs, inner: undefined, next: beside };
  for await (const entry of candidates) {
    if (checksCost > 0) spend(budget, checksCost, limit);
    if (!(await inAll(checks, entry, lookup))) continue;
    yield set.system !== undefined || first === undefined ? entry : { ...entry, via: { vs: first, inner: entry.via, next: beside } };
  }
}

async function inAll(valueSets: readonly CompiledValueSet[], entry: ExpansionEntry, lookup: CodeSystemLookup): Promise<boolean> {
  for (const vs of valueSets) {
    if (!(await vs.check(entry, lookup)).member) return false;
  }
  return true;
}

async function* systemCandidates(set: CompiledConceptSet, system: string, lookup: CodeSystemLookup): AsyncGenerator<ExpansionEntry> {
  const cs = await lookup.codeSystem(system, set.version);
  const listed = set.conceptList();
  if (cs === null || cs.content === 'not-present') {
    if (listed === undefined) {
      // A version the server lacks as HL7's UNKNOWN_CODESYSTEM_VERSION_EXP, naming the versions it has, shaped as the
      // reference servers give it (no `expression`); the client's input at fault named: the request's parameter that
      // asked for the version (`force-system-version`, ...), or the include of a value set the request supplies.
      const asked = cs === null ? lookup.requestedVersion?.(system, set.version) : undefined;
      const version = asked?.version ?? set.version;
      if (cs === null && version !== undefined) {
        const versions = await lookup.codeSystemVersions?.(system);
        const where = asked !== undefined ? [asked.parameter] : set.supplied ? at(set.path) : [];
        throw missingDependency(unknownVersionText(system, version, versions, 'the value set cannot be expanded'), where, 'UNKNOWN_CODESYSTEM_VERSION_EXP');
      }
      // Unknown (or known without its codes): `not-found` when the server has no such code system, as the reference servers answer.
      const text = `${set.where}: CodeSystem ${systemLabel(system, set.version, lookup.asOf)} is not available, so it cannot be expanded`;
      throw cs === null ? missingDependency(text, at(set.path)) : invalid(text, at(set.path));
    }
    for (const c of listed) yield listedEntry(system, set.version, undefined, c);
    return;
  }
  if (cs.content === 'supplement') {
    // A supplement adds designations and properties to another code system's codes: it has no codes of its own to include.
    throw invalid(`${set.where}: CodeSystem ${systemLabel(system, cs.version)} is a supplement, so it cannot be expanded; include the code system it supplements ('${cs.resource.supplements}')`, at(set.path), 'vs-invalid');
  }
  if (listed !== undefined) {
    for (const c of listed) {
      const e = cs.find(c.code);
      // A listed code missing from a fragment or example CodeSystem is not proof of absence.
      if (e !== undefined) yield entryOf(system, cs, e, c);
      else if (cs.content !== 'complete') yield listedEntry(system, cs.version, cs.language, c);
    }
    return;
  }
  const predicates = set.predicatesFor(cs);
  for (const e of cs.entries()) {
    if (predicates.every((p) => p(e))) yield entryOf(system, cs, e);
  }
}

/**
 * The expansion entry of a code the include lists that its code system does not hold (unknown, or a
 * fragment without it): the include's display and designations are all there is of the concept.
 */
function listedEntry(system: string, version: string | undefined, language: string | undefined, c: ConceptReference): ExpansionEntry {
  const definition: ConceptDefinition = { code: c.code, ...(c.display === undefined ? {} : { display: c.display }), ...(c.designation === undefined ? {} : { designation: c.designation }) };
  const extension = carriedExtensions(c.extension, undefined);
  return { system, version, code: c.code, display: c.display, abstract: false, inactive: false, concept: { definition, language }, ...(extension === undefined ? {} : { extension }) };
}

/**
 * The expansion entry of a concept; `designations` are those the value set's include gives the concept
 * (R4 `compose.include.concept.designation`: "additional representations for this concept when used in
 * this value set"), listed after the code system's.
 */
function entryOf(system: string, cs: CodeSystemIndex, e: ConceptEntry, listed?: ConceptReference): ExpansionEntry {
  const designations = listed?.designation;
  const definition = designations === undefined || designations.length === 0 ? e.definition : { ...e.definition, designation: [...(e.definition.designation ?? []), ...designations] };
  const concept = { definition, language: cs.language };
  const extension = listed?.extension === undefined && e.definition.extension === undefined ? undefined : carriedExtensions(listed?.extension, e.definition.extension);
  return { system, version: cs.version, code: e.code, display: definition.display, abstract: e.abstract, inactive: e.inactive, concept, ...(extension === undefined ? {} : { extension }) };
}
