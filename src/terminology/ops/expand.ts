import type { CodeSystemIndex } from '../compile/code-system-index.ts';
import { ENUMERATION_WORK_LIMIT, type ExpansionEntry, enumerateValueSet, WorkLimitReached } from '../compile/enumerate.ts';
import type { CompiledValueSet } from '../compile/compiled-value-set.ts';
import type { TerminologyContext } from '../context.ts';
import { missingDependency, tooCostly } from '../errors.ts';
import type { expandParams } from '../input/operations.ts';
import type { OperationInput } from '../input/parameters.ts';
import { type ValueSetTarget, valueSetTarget } from '../input/value-set-target.ts';
import type { DatePeriod } from '../model/date-time.ts';
import type { Designation } from '../model/datatypes.ts';
import { expansionParameters as composeParameters, type ValueSet } from '../model/value-set.ts';
import type { ParametersParameter } from '../model/parameters.ts';
import { chosenDisplay } from './display-language.ts';
import { designationsOf, recording, sameParameter, statusWarnings, storedParameters, supplemented, usedValueSets } from './expansion-parts.ts';
import { nestContains } from './expansion-tree.ts';
import { displayLanguageOf } from '../input/parameters.ts';
import { resolveValueSet } from './resolve-value-set.ts';
import { applicableSupplements, requireSupplements, unusedSupplements } from './supplements.ts';
import { appliedVersionInputs, type SystemVersions, systemVersions, withSystemVersions } from './system-versions.ts';
import { compareVersions, matchesVersion, splitCanonical } from '../version.ts';

export interface ExpandInput {
  readonly target: ValueSetTarget;
  /** Text filter: case-insensitive substring of the code or display. */
  readonly filter?: string;
  readonly count?: number;
  readonly offset?: number;
  readonly activeOnly?: boolean;
  /** Versions not given explicitly are chosen as of this date (R4 `date`). */
  readonly date?: DatePeriod;
  /** The language of the displays (R4 `displayLanguage`). */
  readonly displayLanguage?: string;
  /** Whether each code carries its designations (R4 `includeDesignations`). */
  readonly includeDesignations?: boolean;
  /** R4 `designation`: the languages (`urn:ietf:bcp:47|de`) or uses (`system|code`) of the designations listed; given, they are listed. */
  readonly designations?: readonly string[];
  /**
   * R4 `excludeNested`: false nests each code under its nearest ancestor in the expansion, unless the
   * request pages (`count`, `offset`) or the value set lists its codes; otherwise, and by default, the
   * expansion is flat. Echoed.
   */
  readonly excludeNested?: boolean;
  /** R4 `excludeNotForUI`: true leaves out the codes not to be chosen (abstract, `notSelectable`), which serve only to group others. */
  readonly excludeNotForUI?: boolean;
  /** R4 `exclude-system`: code systems (`url`, or `url|version`, a version pattern too) whose codes are left out. */
  readonly excludeSystems?: readonly string[];
  /** R4 `system-version`, `check-system-version` and `force-system-version`. */
  readonly systemVersions?: SystemVersions;
  /** The three as given, to echo in the expansion's parameters those that decided a version. */
  readonly systemVersionInputs?: readonly { readonly name: string; readonly valueUri: string }[];
}

export interface ExpandDeps {
  readonly terminology: TerminologyContext;
  /** The largest number of codes one $expand response may carry. */
  readonly maxExpansionSize: number;
  readonly now: () => Date;
  readonly newId: () => string;
}

type ExpansionParameter = Omit<ParametersParameter, 'part' | 'valueCoding'>;

/** A ValueSet resource with its computed expansion (output of $expand). */
export interface ExpandedValueSet {
  readonly resourceType: 'ValueSet';
  readonly id?: string;
  readonly url?: string;
  readonly version?: string;
  readonly name?: string;
  readonly title?: string;
  readonly status?: string;
  readonly experimental?: boolean;
  readonly date?: string;
  readonly language?: string;
  readonly expansion: {
    readonly identifier: string;
    readonly timestamp: string;
    /** Absent when counting every code would cost more than the enumeration's budget (the page is full without it). */
    readonly total?: number;
    /** Present when the request gives an `offset` (R4: "if paging is being used"; without one the page starts at 0). */
    readonly offset?: number;
    /** Absent when empty, as are `contains` (R4 json.html: arrays are never empty). */
    readonly parameter?: readonly ExpansionParameter[];
    readonly contains?: readonly ExpansionContainsOut[];
  };
}

interface ExpansionContainsOut {
  readonly extension?: readonly { readonly url: string }[];
  readonly system: string;
  readonly version?: string;
  readonly code: string;
  readonly display?: string;
  readonly abstract?: true;
  readonly inactive?: true;
  readonly designation?: readonly Designation[];
  readonly contains?: readonly ExpansionContainsOut[];
}

/**
 * Reads the $expand inputs; `count`/`offset` are validated as non-negative integers at the edge.
 * `acceptLanguage`, the request's header, stands for `displayLanguage` when that is not given
 * (ignored when malformed), as on $validate-code.
 */
export function expandInput(raw: OperationInput<(typeof expandParams)['spec']>, instanceId?: string, acceptLanguage?: string): ExpandInput {
  const { filter, count, offset, activeOnly, date, includeDesignations, excludeNested, excludeNotForUI } = raw;
  const displayLanguage = displayLanguageOf(raw.displayLanguage, acceptLanguage);
  const designations = raw.designation === undefined || raw.designation.length === 0 ? {} : { designations: raw.designation };
  const excludeSystems = raw['exclude-system'];
  const versionNames = ['system-version', 'check-system-version', 'force-system-version'] as const;
  const systemVersionInputs = versionNames.flatMap((name) => (raw[name] ?? []).map((valueUri) => ({ name, valueUri })));
  const versions = systemVersions(raw);
  return {
    target: valueSetTarget(raw, instanceId), filter, count, offset, activeOnly, date, displayLanguage, includeDesignations, excludeNested, excludeNotForUI, ...designations,
    ...(excludeSystems === undefined || excludeSystems.length === 0 ? {} : { excludeSystems }),
    ...(versions === undefined ? {} : { systemVersions: versions, systemVersionInputs }),
  };
}

/**
 * ValueSet/$expand (FHIR R4 ValueSet-expand) with `filter`, `count`, `offset`, `activeOnly`,
 * `date` (the ValueSet and CodeSystem versions in effect then), `displayLanguage`,
 * `includeDesignations`, `designation`, `excludeNested`, `excludeNotForUI` and the code system
 * versions of `system-version`, `check-system-version` and `force-system-version`. The expansion's
 * parameters echo the inputs and name the code system versions, value sets and supplements used
 * (expansion-parts.ts). The total is computed unless that would take more than the
 * enumeration's work budget (ENUMERATION_WORK_LIMIT) after the page is full: then it is left out, as R4
 * allows (`expansion.total` 0..1); a page the budget cannot fill, or a page larger than
 * `maxExpansionSize`, is refused (too-costly) instead of building an unbounded response.
 */
export async function expandValueSet(asked: ExpandInput, deps: ExpandDeps): Promise<ExpandedValueSet> {
  const terminology = deps.terminology.at(asked.date);
  const vs = await resolveValueSet(asked.target, terminology);
  const input = withValueSetParameters(asked, vs.resource);
  const supplements = await requireSupplements(vs, terminology);
  const offset = input.offset ?? 0;
  const limit = deps.maxExpansionSize;
  if (input.count !== undefined && input.count > limit) {
    throw tooCostly(`count ${input.count} is larger than the expansion limit of ${limit} codes`);
  }
  const text = input.filter?.toLowerCase();
  const excludedSystem = systemExclusion(input.excludeSystems);
  const seen = new Set<string>();
  // Versions merged (versionsMatch true): each code once, as the latest version that has it gives it, in the place it was first listed.
  const merged = vs.versionsMatch === true;
  const latest = new Map<string, { version: string | undefined; at: number }>();
  // Every code system (version) the expansion drew on, whether or not a code of it is in the page or passed the filters.
  const used = new Set<string>();
  const systems = new Map<string, CodeSystemIndex>();
  // The version parameters that decided a version (echoed, with the other inputs).
  const applied = new Set<string>();
  const lookup = recording(withSystemVersions(terminology, input.systemVersions, applied), used, systems);
  const contains: ExpansionContainsOut[] = [];
  let total = 0;
  // The total is left out when counting it would cost more than the enumeration's budget and the page is full without it.
  let counted = true;
  try {
    for await (const found of enumerateValueSet(vs, lookup, { left: ENUMERATION_WORK_LIMIT })) {
      const key = merged ? `${found.system}||${found.code}` : `${found.system}|${found.version ?? ''}|${found.code}`;
      const e = inLanguage(supplemented(found, applicableSupplements(vs, found.via, supplements)), input.displayLanguage);
      if ((input.activeOnly === true && e.inactive) || (input.excludeNotForUI === true && e.abstract) || excludedSystem(found) || !matches(e, text)) continue;
      used.add(found.version === undefined ? found.system : `${found.system}|${found.version}`);
      if (seen.has(key)) {
        const first = merged ? latest.get(key) : undefined;
        if (first !== undefined && compareVersions(found.version ?? '', first.version ?? '') > 0) {
          first.version = found.version;
          if (first.at >= 0) contains[first.at] = contained(e, input);
        }
        continue;
      }
      seen.add(key);
      const inPage = total >= offset && (input.count === undefined || contains.length < input.count);
      if (merged) latest.set(key, { version: found.version, at: inPage ? contains.length : -1 });
      if (inPage) contains.push(contained(e, input));
      total++;
      if (input.count === undefined && contains.length > limit) {
        throw tooCostly(`The expansion of ${vs.label} has more than ${limit} codes; use 'count' and 'offset' to page, or 'filter'`);
      }
    }
  } catch (err) {
    if (!(err instanceof WorkLimitReached)) throw err;
    if (input.count === undefined || contains.length < input.count) {
      throw tooCostly(`The expansion of ${vs.label} is too costly: it reads ${err.message} (includes that repeat the same codes, or excludes and imports tested on each), the most one expansion may; narrow the ValueSet, or use 'filter'`);
    }
    counted = false;
  }
  // Only once every include was read: a page answered without its total may not have looked at all of them.
  const unused = counted && vs.expansion === undefined ? unusedSupplements(supplements, used) : [];
  if (unused.length > 0) {
    const names = unused.map((cs) => `'${cs.version === undefined ? cs.url : `${cs.url}|${cs.version}`}' (of '${cs.resource.supplements}')`).join(', ');
    throw missingDependency(`The expansion of ${vs.label} uses no code system version that the supplement${unused.length > 1 ? 's' : ''} ${names} it names supplement${unused.length > 1 ? '' : 's'}`, ['url']);
  }
  // Nested only when asked (R4 leaves the default to the server; HAPI FHIR and Medplum answer flat) and not paged.
  // A value set that lists its codes keeps its own flat order, as the reference servers answer.
  const nested = input.excludeNested === false && input.count === undefined && input.offset === undefined && vs.expansion === undefined
    && vs.includes.every((set) => set.conceptList() === undefined);
  // Codes drawn from a fragment of a code system: the expansion may lack codes, said as tx.fhir.org says it (`used-fragment`,
  // R4's `valueset-unclosed` with the reason).
  const fragments = [...used].filter((key) => systems.get(key)?.content === 'fragment');
  const parameter = [
    ...expansionParameters(input, applied),
    ...[...used].map((valueUri) => ({ name: 'used-codesystem', valueUri })),
    ...[...usedValueSets(vs)].map((valueUri) => ({ name: 'used-valueset', valueUri })),
    ...supplements.map((cs) => ({ name: 'used-supplement', valueUri: cs.version === undefined ? cs.url : `${cs.url}|${cs.version}` })),
    ...statusWarnings(vs, used, systems),
    ...fragments.map((valueUri) => ({ name: 'used-fragment', valueUri })),
  ];
  // Codes of several versions met as one concept (versionsMatch, or an exclude of a version no include pins): said as tx.fhir.org says it.
  if (vs.versionsMerged) parameter.push({ name: 'versionsMatch', valueBoolean: true });
  parameter.push(...storedParameters(vs, (p) => parameter.some((q) => sameParameter(q, p))));
  return {
    resourceType: 'ValueSet',
    ...definitionFields(vs.resource),
    expansion: {
      ...(fragments.length === 0 ? {} : { extension: unclosed(fragments) }),
      identifier: `urn:uuid:${deps.newId()}`,
      timestamp: deps.now().toISOString(),
      ...(counted ? { total } : {}),
      ...(input.offset === undefined ? {} : { offset }),
      // "JSON objects and arrays are never empty" (R4 json.html): an expansion of no codes has no `contains`.
      ...(parameter.length > 0 ? { parameter } : {}),
      ...(contains.length > 0 ? { contains: versionedWhereAmbiguous(nested ? await nestContains(contains, lookup) : contains, vs, used) } : {}),
    },
  };
}

/** An expansion based on fragments of code systems is not closed: R4's `valueset-unclosed`, and the reason as tx.fhir.org gives it. */
function unclosed(fragments: readonly string[]): { url: string; valueBoolean?: boolean; valueString?: string }[] {
  const systems = fragments.map((key) => splitCanonical(key).url).join(', ');
  return [
    { url: 'http://hl7.org/fhir/StructureDefinition/valueset-unclosed', valueBoolean: true },
    { url: 'http://hl7.org/fhir/StructureDefinition/valueset-unclosed-reason', valueString: `This extension is based on a fragment of the code system ${systems}` },
  ];
}

/**
 * The request's inputs with the ones the value set sets for its own expansions (`valueset-expansion-parameter` on
 * `compose`), as HL7's expander reads them before the request's: `displayLanguage`, `activeOnly`,
 * `includeDesignations`, `excludeNested` and `excludeNotForUI` where the request gives none, and its `designation`s
 * beside the request's. Echoed in the expansion's parameters, as the values it was computed with.
 */
function withValueSetParameters(asked: ExpandInput, vs: ValueSet): ExpandInput {
  const own = composeParameters(vs);
  if (own.length === 0) return asked;
  const text = (name: string) => own.find((p) => p.name === name)?.value;
  const flag = (name: string) => (text(name) === 'true' ? true : text(name) === 'false' ? false : undefined);
  const designations = [...(asked.designations ?? [])];
  for (const p of own) if (p.name === 'designation' && !designations.includes(p.value)) designations.push(p.value);
  return {
    ...asked,
    displayLanguage: asked.displayLanguage ?? text('displayLanguage'),
    activeOnly: asked.activeOnly ?? flag('activeOnly'),
    includeDesignations: asked.includeDesignations ?? flag('includeDesignations'),
    excludeNested: asked.excludeNested ?? flag('excludeNested'),
    excludeNotForUI: asked.excludeNotForUI ?? flag('excludeNotForUI'),
    ...(designations.length > 0 ? { designations } : {}),
  };
}

/**
 * `contains.version` where it tells the reader something `used-codesystem` does not, as the reference
 * servers give it: for a code system the value set includes in several versions, or of which the expansion
 * drew on several versions. Otherwise each code's version is the one `used-codesystem` names for its system
 * (R4: a well-maintained code system does not need the version reported on each code), and it is left out.
 */
function versionedWhereAmbiguous(contains: readonly ExpansionContainsOut[], vs: CompiledValueSet, used: ReadonlySet<string>): readonly ExpansionContainsOut[] {
  const versions = new Map<string, number>();
  for (const u of used) {
    const { url } = splitCanonical(u);
    versions.set(url, (versions.get(url) ?? 0) + 1);
  }
  const keep = (system: string) => vs.overloaded.has(system) || (versions.get(system) ?? 0) > 1;
  const strip = (cs: readonly ExpansionContainsOut[]): ExpansionContainsOut[] => cs.map((c) => {
    const inner = c.contains === undefined ? {} : { contains: strip(c.contains) };
    if (c.version === undefined || keep(c.system)) return c.contains === undefined ? c : { ...c, ...inner };
    const { version: _, ...rest } = c;
    return { ...rest, ...inner };
  });
  return strip(contains);
}

/** The value set's own elements an expansion repeats (those the engine keeps of it), absent ones left out. */
function definitionFields(vs: ExpandDefinition): Partial<ExpandDefinition> {
  const out: Partial<Record<keyof ExpandDefinition, unknown>> = {};
  for (const key of DEFINITION_FIELDS) if (vs[key] !== undefined) out[key] = vs[key];
  return out as Partial<ExpandDefinition>;
}

const DEFINITION_FIELDS = ['id', 'language', 'url', 'version', 'name', 'title', 'status', 'experimental', 'date'] as const;
type ExpandDefinition = Pick<ExpandedValueSet, (typeof DEFINITION_FIELDS)[number]>;

/** An entry as shown: its display in the language asked for, taken from designation `from` when it is one. */
type Shown = ExpansionEntry & { readonly from?: Designation };

/** The entry with its display in `language` when its concept has a designation in it. */
function inLanguage(e: ExpansionEntry, language: string | undefined): Shown {
  if (language === undefined || e.concept === undefined) return e;
  const { value, from } = chosenDisplay(e.concept.definition, e.concept.language, language);
  return { ...e, display: value, ...(from === undefined ? {} : { from }) };
}

/** Whether an entry's code system (and version) is one `exclude-system` names. */
function systemExclusion(canonicals: readonly string[] | undefined): (e: ExpansionEntry) => boolean {
  if (canonicals === undefined) return () => false;
  const excluded = canonicals.map((c) => splitCanonical(c));
  return (e) => excluded.some(({ url, version }) => url === e.system && (version === undefined || (e.version !== undefined && matchesVersion(version, e.version))));
}

function matches(e: ExpansionEntry, text: string | undefined): boolean {
  if (text === undefined || text === '') return true;
  return e.code.toLowerCase().includes(text) || (e.display?.toLowerCase().includes(text) ?? false);
}

function contained(e: Shown, input: ExpandInput): ExpansionContainsOut {
  const designation = input.includeDesignations === true || input.designations !== undefined ? designationsOf(e, input.designations, e.from) : undefined;
  return {
    ...(e.extension === undefined ? {} : { extension: e.extension }),
    system: e.system,
    ...(e.version === undefined ? {} : { version: e.version }),
    code: e.code,
    ...(e.display === undefined ? {} : { display: e.display }),
    ...(e.abstract ? { abstract: true } : {}),
    ...(e.inactive ? { inactive: true } : {}),
    ...(designation === undefined || designation.length === 0 ? {} : { designation }),
  };
}

function expansionParameters(input: ExpandInput, applied: ReadonlySet<string>): ExpansionParameter[] {
  const out: ExpansionParameter[] = [];
  if (input.filter !== undefined) out.push({ name: 'filter', valueString: input.filter });
  if (input.count !== undefined) out.push({ name: 'count', valueInteger: input.count });
  if (input.offset !== undefined) out.push({ name: 'offset', valueInteger: input.offset });
  if (input.activeOnly !== undefined) out.push({ name: 'activeOnly', valueBoolean: input.activeOnly });
  if (input.date !== undefined) out.push({ name: 'date', valueDateTime: input.date.text });
  // As a `code` (no whitespace but single spaces): an Accept-Language header may space its list with several, or tabs.
  if (input.displayLanguage !== undefined) out.push({ name: 'displayLanguage', valueCode: input.displayLanguage.trim().replace(/\s+/g, ' ') });
  if (input.includeDesignations !== undefined) out.push({ name: 'includeDesignations', valueBoolean: input.includeDesignations });
  for (const d of input.designations ?? []) out.push({ name: 'designation', valueString: d });
  if (input.excludeNested !== undefined) out.push({ name: 'excludeNested', valueBoolean: input.excludeNested });
  if (input.excludeNotForUI !== undefined) out.push({ name: 'excludeNotForUI', valueBoolean: input.excludeNotForUI });
  for (const c of input.excludeSystems ?? []) out.push({ name: 'exclude-system', valueUri: c });
  out.push(...appliedVersionInputs(input.systemVersionInputs ?? [], applied));
  return out;
}
