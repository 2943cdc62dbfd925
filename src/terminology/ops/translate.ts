import { type CompiledGroup, conceptMapIndex, type ConceptMapIndex } from '../compile/concept-map-index.ts';
import type { CachedConceptMaps, ConceptMapCatalog } from '../concept-maps.ts';
import type { TerminologyContext } from '../context.ts';
import { invalid, notFound } from '../errors.ts';
import type { Dependency } from '../input/parameters.ts';
import type { Equivalence, MapTarget, OtherElement } from '../model/concept-map.ts';
import type { Coding } from '../model/datatypes.ts';
import type { Parameters, ParametersParameter as Parameter } from '../model/parameters.ts';
import { splitCanonical } from '../version.ts';
import type { MapChoice, SourceCoding, TranslateInput } from './translate-input.ts';

/**
 * How many `unmapped` `other-map` hops one translation follows. Each map is followed once per coding
 * (a cycle ends, and groups sending their codes to the same map do not each walk it again: 10 groups a
 * map over 8 hops walked 10^7 paths, 3.5 s, and repeated each match as often).
 */
export const MAX_OTHER_MAP_DEPTH = 8;

/** One `match` of the output. */
interface Match {
  readonly equivalence: Equivalence;
  readonly concept?: Coding;
  readonly product: readonly OtherElement[];
  /** The ConceptMap's `url|version`. */
  readonly source?: string;
}

/** R4: a match with one of these is no translation (`result` false unless another match is one). */
const NO_MATCH: ReadonlySet<Equivalence> = new Set(['unmatched', 'disjoint']);

/** Read backwards, a target wider than its source makes the source narrower than the target. */
const REVERSED: Partial<Record<Equivalence, Equivalence>> = { wider: 'narrower', narrower: 'wider', subsumes: 'specializes', specializes: 'subsumes' };

export interface TranslateDeps {
  readonly terminology: TerminologyContext;
  readonly maps: CachedConceptMaps;
}

/**
 * ConceptMap/$translate (FHIR R4 ConceptMap-translate): every mapping of the coding(s) in the chosen
 * ConceptMaps' groups from their system (with `reverse`, to it), one `match` each; a code a group does
 * not list takes the group's `unmapped` (`provided`: the same code, `fixed`: its code, `other-map`: that
 * map's translation). `result` is true when a match's equivalence is other than `unmatched` or `disjoint`.
 */
export async function translate(input: TranslateInput, deps: TranslateDeps): Promise<Parameters> {
  const catalog = await deps.maps.current();
  const chosen = await chosenMap(input.map, catalog, deps.maps);
  const matches: Match[] = [];
  for (const coding of input.codings) {
    const groups = chosen?.groups ?? candidates(catalog, coding.system, input);
    // The maps this coding has been translated through: an other-map to one of them adds nothing new.
    const visited = new Set<ConceptMapIndex>(groups.map((g) => g.map));
    for (const g of groups) {
      if (input.reverse) reverseIn(g, coding, input, matches);
      else forwardIn(g, coding, input, catalog, matches, visited, 1);
    }
  }
  const result = matches.some((m) => !NO_MATCH.has(m.equivalence));
  const parameter: Parameter[] = [{ name: 'result', valueBoolean: result }];
  if (!result) parameter.push({ name: 'message', valueString: noTranslation(input, matches.length > 0) });
  for (const m of matches) parameter.push(await matchParameter(m, deps.terminology));
  return { resourceType: 'Parameters', parameter };
}

async function chosenMap(choice: MapChoice, catalog: ConceptMapCatalog, maps: CachedConceptMaps): Promise<ConceptMapIndex | undefined> {
  switch (choice.kind) {
    case 'any':
      return undefined;
    case 'inline':
      return conceptMapIndex(choice.map);
    case 'instance': {
      const cm = await maps.byId(choice.id);
      if (cm === null) throw notFound(`ConceptMap/${choice.id} is not known`);
      return conceptMapIndex(cm);
    }
    case 'url': {
      const map = catalog.byUrl(choice.url, choice.version);
      const name = choice.version === undefined ? choice.url : `${choice.url}|${choice.version}`;
      if (map === null) throw invalid(`ConceptMap '${name}' could not be found`, ['url']);
      return map;
    }
  }
}

/** Without a map named: the groups of every map from (reverse: to) the system, within the value sets given. */
function candidates(catalog: ConceptMapCatalog, system: string, input: TranslateInput): readonly CompiledGroup[] {
  const choice = input.map as Extract<MapChoice, { kind: 'any' }>;
  const groups = input.reverse ? catalog.groupsTo(system) : catalog.groupsFrom(system);
  // Read backwards, the client's source value set is the map's target one.
  const from = input.reverse ? choice.target : choice.source;
  const to = input.reverse ? choice.source : choice.target;
  return groups.filter((g) => inScope(g.map.sourceScope, from) && inScope(g.map.targetScope, to));
}

/** A map naming no value set fits any; one naming another does not. */
const inScope = (mapScope: string | undefined, asked: string | undefined) =>
  asked === undefined || mapScope === undefined || mapScope === splitCanonical(asked).url;

function forwardIn(g: CompiledGroup, coding: SourceCoding, input: TranslateInput, catalog: ConceptMapCatalog, out: Match[], visited: Set<ConceptMapIndex>, depth: number): void {
  const { source, sourceVersion, target, targetVersion, unmapped } = g.group;
  if ((source !== undefined && source !== coding.system) || !sameVersion(sourceVersion, coding.version)) return;
  if (input.targetsystem !== undefined && target !== input.targetsystem) return;
  const elements = g.bySource.get(coding.code);
  const origin = g.map.canonical;
  const concept = (code: string, display: string | undefined): Coding => ({
    ...(target !== undefined ? { system: target } : {}), ...(targetVersion !== undefined ? { version: targetVersion } : {}), code, ...(display !== undefined ? { display } : {}),
  });
  if (elements !== undefined) {
    for (const t of elements.flatMap((e) => e.target ?? [])) {
      if (!dependsOnMet(t, input.dependencies)) continue;
      out.push({ equivalence: t.equivalence ?? 'equivalent', ...(t.code !== undefined ? { concept: concept(t.code, t.display) } : {}), product: t.product ?? [], ...(origin !== undefined ? { source: origin } : {}) });
    }
    return;
  }
  if (unmapped?.mode === 'provided') out.push({ equivalence: 'equivalent', concept: concept(coding.code, undefined), product: [], ...(origin !== undefined ? { source: origin } : {}) });
  else if (unmapped?.mode === 'fixed' && unmapped.code !== undefined) {
    out.push({ equivalence: 'relatedto', concept: concept(unmapped.code, unmapped.display), product: [], ...(origin !== undefined ? { source: origin } : {}) });
  } else if (unmapped?.mode === 'other-map' && unmapped.url !== undefined && depth < MAX_OTHER_MAP_DEPTH) {
    const { url, version } = splitCanonical(unmapped.url);
    const next = catalog.byUrl(url, version);
    if (next === null || visited.has(next)) return;
    visited.add(next);
    for (const h of next.groups) forwardIn(h, coding, input, catalog, out, visited, depth + 1);
  }
}

/** `reverse`: the source codes mapped to the code; dependsOn and product describe the forward direction and are not read. */
function reverseIn(g: CompiledGroup, coding: SourceCoding, input: TranslateInput, out: Match[]): void {
  const { source, sourceVersion, target, targetVersion } = g.group;
  if ((target !== undefined && target !== coding.system) || !sameVersion(targetVersion, coding.version)) return;
  if (input.targetsystem !== undefined && source !== input.targetsystem) return;
  const origin = g.map.canonical;
  for (const { element, target: t } of g.byTarget.get(coding.code) ?? []) {
    if (element.code === undefined) continue;
    const equivalence = t.equivalence ?? 'equivalent';
    const concept: Coding = {
      ...(source !== undefined ? { system: source } : {}), ...(sourceVersion !== undefined ? { version: sourceVersion } : {}),
      code: element.code, ...(element.display !== undefined ? { display: element.display } : {}),
    };
    out.push({ equivalence: REVERSED[equivalence] ?? equivalence, concept, product: [], ...(origin !== undefined ? { source: origin } : {}) });
  }
}

/** A group pinned to a version applies to a coding of that version, or of none. */
const sameVersion = (pinned: string | undefined, given: string | undefined) => pinned === undefined || given === undefined || pinned === given;

/**
 * A target with `dependsOn` applies only when, for each, a `dependency` input names its element
 * (`property`) with a coding of its value (and system, when it names one).
 */
function dependsOnMet(t: MapTarget, given: readonly Dependency[]): boolean {
  return (t.dependsOn ?? []).every((d) =>
    given.some((g) => g.element === d.property && (g.concept?.coding ?? []).some((c) => c.code === d.value && (d.system === undefined || c.system === d.system))));
}

function noTranslation(input: TranslateInput, unmatchedOnly: boolean): string {
  const codes = input.codings.map((c) => `'${c.system}#${c.code}'`).join(', ');
  const into = input.targetsystem === undefined ? '' : ` into ${input.targetsystem}`;
  const how = input.reverse ? 'No source concept is mapped to' : 'No translation was found for';
  return unmatchedOnly ? `The mappings of ${codes}${into} say it has no match (unmatched or disjoint)` : `${how} ${codes}${into}`;
}

async function matchParameter(m: Match, terminology: TerminologyContext): Promise<Parameter> {
  const part: Parameter[] = [{ name: 'equivalence', valueCode: m.equivalence }];
  if (m.concept !== undefined) part.push({ name: 'concept', valueCoding: await withDisplay(m.concept, terminology) });
  for (const p of m.product) {
    const concept: Coding = { ...(p.system !== undefined ? { system: p.system } : {}), code: p.value, ...(p.display !== undefined ? { display: p.display } : {}) };
    part.push({ name: 'product', part: [{ name: 'element', valueUri: p.property }, { name: 'concept', valueCoding: concept }] });
  }
  if (m.source !== undefined) part.push({ name: 'source', valueUri: m.source });
  return { name: 'match', part };
}

/** The concept's display from its code system when the map gives none (and the code system is known). */
async function withDisplay(concept: Coding, terminology: TerminologyContext): Promise<Coding> {
  if (concept.display !== undefined || concept.system === undefined || concept.code === undefined) return concept;
  const cs = await terminology.codeSystem(concept.system, concept.version);
  const display = cs?.find(concept.code)?.definition.display;
  return display === undefined ? concept : { ...concept, display };
}
