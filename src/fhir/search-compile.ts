/**
 * FHIR R4 search (search.html) compiled into store conditions: every parameter type, prefixes,
 * modifiers, chaining, `_has`. The REST API, conditional interactions, bulk export's `_typeFilter` and
 * SMART scope filters all compile their queries here, so a query means the same everywhere.
 */
import { FhirError } from '../errors.ts';
import type { CompositePart, CompositeTest, Comparator, Condition, DateTest, IndexTable, NumberTest, SortKey, TokenValue } from '../store/types.ts';
import { queryDateRange } from './dates.ts';
import { isDomainResource, paramOf, paramsOf, type ParamDefinition, type ParamType } from './definitions.ts';
import { contactKey, reachesContactPoints } from './contact-points.ts';
import { canonicalParam, containedIdParam, containedPrefix, exactString, normalizeString, sortParam, soundex } from './indexer.ts';
import { foldAscii, readsOwnRows } from '../store/search-sql.ts';
import { MAX_PREFIX_SEARCH_BYTES } from '../store/index-limits.ts';
import { canonicalUnit, UCUM_SYSTEM } from './ucum.ts';
import { parseNear } from './near.ts';
import { absoluteType, isAbsoluteReference, parseReference, urlNamingPattern } from './references.ts';
import { ID_PATTERN, isResourceType } from './resource-types.ts';
import { parseTextQuery } from './text-query.ts';
import { isCanonicalType, referenceKinds } from './search-canonical.ts';
import { alternatives, EmptyValue, splitEscaped, tokenValue, unescapeValue } from './search-values.ts';
import { pathTypes, typeModel, type BindingModel, type Slot, type TypeModel } from './validation/model.ts';

/** A required binding whose codes are listed (BindingModel). */
type CodesBinding = Extract<BindingModel, { kind: 'codes' }>;

/** A condition the search layer completes before querying: a token parameter against a set of codes (`:in`, `:not-in`, `:below`, `:above`). */
/**
 * A set of codes the terminology service enumerates: a ValueSet by canonical (`:in`), or the codes a
 * code system's subsumption gives for each `system|code` (`:below`: the code and those it subsumes,
 * `is-a`; `:above`: the code and those that subsume it, `generalizes`). `id`: the tenant's ValueSet
 * that the value names by its location (`ValueSet/<id>`, or that under the tenant's FHIR base), set when
 * the search layer completes the condition (valueSetLocation in src/fhir/search.ts) and read when no
 * ValueSet has the value as its canonical URL (R4 `:in`: "a URI (relative or absolute) that identifies
 * a value set").
 */
export type CodeSet =
  | { kind: 'value-set'; canonical: string; id?: string }
  | { kind: 'subsumption'; op: 'is-a' | 'generalizes'; codes: { system: string; code: string }[] };

export interface ValueSetCondition {
  kind: 'value-set';
  param: string;
  codes: CodeSet;
  /** The modifier as written (`in`, `not-in`, `below`, `above`), for errors. */
  modifier: string;
  /** The parameter it is part of, for errors (`_filter`); none: `param:modifier` itself. */
  within?: string;
  not: boolean;
  /**
   * `:in` or `:not-in` given several ValueSets (`a,b`): those after the first, whose codes join `codes`'
   * (search.html: a comma ORs a parameter's values; `:not-in` is then in none of them, as `:not` of several codes).
   */
  more?: CodeSet[];
  /**
   * The `system|code` pairs of the required bindings of the `code` elements the parameter reaches (codeBindings):
   * such an element holds its code alone, indexed without a system, and a code of the set found there is of the
   * binding's system (search.html, token: "the system is implicit"); any other code needs its system.
   */
  implied?: string[];
}

/**
 * A reference to a resource of a type arranged in a hierarchy (`Location.partOf`: hierarchyParam) with
 * `:below` (it and every resource below it, its parts and theirs) or `:above` (it and every resource it
 * is part of), as R4 search's "Searching Hierarchies" has it (`Procedure?location:below=42`): the search
 * layer walks the hierarchy in the store and completes it into a reference to each resource found.
 */
export interface HierarchyCondition {
  kind: 'hierarchy';
  /** The reference parameter as stored, and the type whose hierarchy is walked. */
  param: string;
  target: string;
  /** The resources the walk starts from (ORed values). */
  ids: string[];
  direction: 'below' | 'above';
  modifier: string;
  /** The parameter it is part of, for errors (a chain, `_has`); none: `param:modifier` itself. */
  within?: string;
}

export type PendingCondition = Condition | ValueSetCondition | HierarchyCondition;

/** The names R4 gives a reference to a resource's parent of its own type (`Location.partof`, `Encounter.part-of`, `Specimen.parent`). */
const HIERARCHY_NAMES = new Set(['partof', 'part-of', 'parent']);

/** hierarchyParam by type (null: none), as the definitions never change: the CapabilityStatement asks for each type many times. */
const HIERARCHY_PARAMS = new Map<string, ParamDefinition | null>();

/**
 * The parameter of `type` that names a resource's parent of the same type, if its resources form a
 * hierarchy (Location, Organization, Encounter, CarePlan, Task, Specimen, ResearchStudy,
 * DeviceDefinition): what `:below` and `:above` on a reference to `type` walk.
 */
export function hierarchyParam(type: string): ParamDefinition | undefined {
  const params = paramsOf(type);
  // Only R4's types have parameters: the memo holds 146 at most, whatever a request names.
  if (params.length === 0) return undefined;
  let out = HIERARCHY_PARAMS.get(type);
  if (out === undefined) {
    out = params.find((d) => d.type === 'reference' && HIERARCHY_NAMES.has(d.code) && !d.storedAs && d.targets.length === 1 && d.targets[0] === type) ?? null;
    HIERARCHY_PARAMS.set(type, out);
  }
  return out ?? undefined;
}

const PREFIXES: Comparator[] = ['eq', 'ne', 'gt', 'lt', 'ge', 'le', 'sa', 'eb', 'ap'];

/** Modifiers each parameter type accepts (besides `:missing`, which all do). */
export const MODIFIERS: Record<ParamType, string[]> = {
  string: ['exact', 'contains'],
  token: ['not', 'text', 'of-type', 'in', 'not-in', 'below', 'above'],
  reference: ['identifier', '[type]', 'below', 'above'],
  uri: ['below', 'above'],
  date: [],
  number: [],
  quantity: [],
  composite: [],
  special: [],
};

/** How deep chains and `_has` may nest. */
export const MAX_CHAIN_DEPTH = 4;

function invalid(param: string, message: string): FhirError {
  return new FhirError('invalid', message, { expression: [param] });
}

/** Splits an optional prefix off a date, number or quantity value (two letters before a digit or sign). */
function prefixed(raw: string): { op: Comparator; rest: string } {
  const p = raw.slice(0, 2) as Comparator;
  return PREFIXES.includes(p) && /^[0-9+\-.]/.test(raw.slice(2)) ? { op: p, rest: raw.slice(2) } : { op: 'eq', rest: raw };
}

/** `ap`: the value's range widened by 10% of its distance from now (at least its own precision). */
function approximate(low: number, high: number, now: number): { low: number; high: number } {
  const gap = Math.abs((low + high) / 2 - now) * 0.1;
  return { low: low - gap, high: high + gap };
}

export function dateTest(param: string, raw: string, now: number): DateTest {
  const { op, rest } = prefixed(raw);
  const range = queryDateRange(rest);
  if (!range) throw invalid(param, `Invalid date value '${raw}' for '${param}': expected [${PREFIXES.join('|')}]<FHIR date, dateTime or instant>`);
  return op === 'ap' ? { op, ...approximate(range.low, range.high, now) } : { op, ...range };
}

const DECIMAL = /^[+-]?(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

/** A number's value and the range [low, high) its significant figures imply (search.html 3.1.1.5.5). */
export function numberTest(param: string, raw: string): NumberTest {
  const { op, rest } = prefixed(raw);
  const m = DECIMAL.exec(rest);
  if (!m) throw invalid(param, `Invalid number '${raw}' for '${param}': expected [${PREFIXES.join('|')}]<decimal>`);
  const value = Number(rest);
  // The bounds are worked out in decimal and read as numbers as the stored values were (from their
  // JSON text): `5.4` is [5.35, 5.45) exactly, where 5.4 - 0.05 in binary floating point is 5.3500000000000005.
  const digits = BigInt(`${rest[0] === '-' ? '-' : ''}${m[1]}${m[2] ?? ''}`);
  const exponent = Number(m[3] ?? 0) - (m[2]?.length ?? 0) - 1;
  const bound = (offset: bigint) => Number(`${digits * 10n + offset}e${exponent}`);
  if (op === 'ap') {
    // 10% of the value (its digits one place down) or half its last place (5), whichever is wider, in
    // decimal too: 1.1 - 0.11 in binary floating point is 0.9900000000000001, which would leave out 0.99.
    const magnitude = digits < 0n ? -digits : digits;
    const gap = magnitude > 5n ? magnitude : 5n;
    return { op, value, low: bound(-gap), high: bound(gap) };
  }
  return { op, value, low: bound(-5n), high: bound(5n) };
}

/**
 * `[prefix]number|system|code`, `number||unit`, or a plain number. A UCUM unit that src/fhir/ucum.ts
 * reads is converted to its canonical unit (`canonical`: the test reads the rows of canonicalParam), so
 * that `5.4|http://unitsofmeasure.org|mg` finds 0.0054 g and 5400 ug too.
 */
function quantityTest(param: string, raw: string): NumberTest {
  const parts = splitEscaped(raw, '|');
  if (parts.length !== 1 && parts.length !== 3) throw invalid(param, `Invalid quantity '${raw}' for '${param}': expected [prefix]number[|system|code]`);
  const test = numberTest(param, parts[0]!);
  if (parts.length === 3) {
    const system = unescapeValue(parts[1]!);
    const code = unescapeValue(parts[2]!);
    if (system) test.system = system;
    if (code) test.code = code;
  }
  const unit = test.system === UCUM_SYSTEM && test.code !== undefined ? canonicalUnit(test.code) : undefined;
  if (!unit) return test;
  const { op, value, low, high } = test;
  return { op, value: unit.convert(value), low: unit.convert(low), high: unit.convert(high), system: UCUM_SYSTEM, code: unit.code, canonical: true };
}

/** Tests (ORed) split by whether they read canonical rows: those on `param`'s, and those on its canonical rows. */
function byUnits<T>(tests: T[], canonical: (t: T) => boolean, on: (param: string, tests: T[]) => Condition, param: string): Condition {
  const converted = tests.filter(canonical);
  const plain = tests.filter((t) => !canonical(t));
  if (!converted.length) return on(param, plain);
  if (!plain.length) return on(canonicalParam(param), converted);
  return { kind: 'or', any: [on(param, plain), on(canonicalParam(param), converted)] };
}

/**
 * `values` and, for a parameter reaching `code` elements bound (required) to listed codes, the codes that
 * a `system|code` or `system|` value names there: such an element holds its code alone, its system being
 * the binding's (search.html, token: "the system is implicit"), and is indexed without one
 * (`gender=http://hl7.org/fhir/administrative-gender|male` finds `"gender": "male"`, as `gender=male` does).
 */
function withImpliedSystems(def: ParamDefinition, values: TokenValue[], fold = false): TokenValue[] {
  const bindings = codeBindings(def);
  if (!bindings.length || !values.some((v) => v.system)) return values;
  const implied = new Set<string>();
  for (const v of values) {
    if (!v.system) continue;
    for (const b of bindings) {
      if (v.value !== undefined && !fold) {
        if (b.systemCodes.has(`${v.system}|${v.value}`)) implied.add(v.value);
      } else {
        // Folded (`_filter`), the values are in lower case, and so are the binding's codes compared.
        const at = (sc: string) => (fold ? foldAscii(sc) : sc);
        for (const sc of b.systemCodes) {
          if (v.value === undefined ? at(sc).startsWith(`${v.system}|`) : at(sc) === `${v.system}|${v.value}`) implied.add(at(sc).slice(v.system.length + 1));
        }
      }
    }
  }
  return [...values, ...[...implied].filter((code) => !values.some((v) => v.system === '' && v.value === code)).map((code) => ({ system: '', value: code }))];
}

const CODE_BINDINGS = new Map<ParamDefinition, CodesBinding[]>();

/** The required bindings to listed codes of the `code` elements a token parameter's paths reach (plain `a.b` paths from its type). */
function codeBindings(def: ParamDefinition): CodesBinding[] {
  let out = CODE_BINDINGS.get(def);
  if (out) return out;
  out = [];
  for (const path of def.paths) {
    if (!/^[a-z][A-Za-z]*(\.[a-z][A-Za-z]*)*$/.test(path.key)) continue;
    let type: string | undefined = def.base;
    let slot: Slot | undefined;
    for (const step of path.key.split('.')) {
      slot = type === undefined ? undefined : typeModel(type)?.slots.get(step);
      type = slot?.type;
    }
    const binding = slot?.element.binding;
    if (slot?.type === 'code' && binding?.kind === 'codes') out.push(binding);
  }
  CODE_BINDINGS.set(def, out);
  return out;
}

/**
 * `values` on token parameter `def` where every path of it reaches ContactPoint elements (`telecom`,
 * `phone`, `email`): a value without a system (`|555-1234`) matches the ContactPoint's value whatever its
 * `system`. R4's token table gives a ContactPoint no system (search.html: its code is ContactPoint.value,
 * and `|code` "no system"), while its rows carry `ContactPoint.system` (`phone`, `email`) as theirs, as
 * HAPI FHIR indexes it, so that `telecom=phone|555-1234` finds it too (an extension kept). The value is
 * compared lower-cased, as the rows hold it (contact-points.ts contactKey): `email=Alice@Example.org`.
 */
function contactPointValues(def: ParamDefinition, values: TokenValue[]): TokenValue[] {
  if (!reachesContactPoints(def)) return values;
  return values.map((v) => {
    if (v.value === undefined) return v;
    const value = contactKey(v.value);
    return v.system === '' || v.system === undefined ? { value } : { system: v.system, value };
  });
}

const IDENTIFIERS = new Map<ParamDefinition, boolean>();

/**
 * Whether a path of token parameter `def` may reach Identifier elements, which alone `:of-type` searches
 * (R4 search.html: "token (only Identifier)"): plain `a.b` paths from its type by the R4 model (a
 * `where(...)` at the end aside); one the model cannot follow (an extension's value) counts as one that
 * may. A parameter over several types (a union such as `combo-code`, a choice element) may if any may.
 */
export function holdsIdentifiers(def: ParamDefinition): boolean {
  let out = IDENTIFIERS.get(def);
  if (out !== undefined) return out;
  out = def.type === 'token' && def.paths.some((path) => {
    const types = pathTypes(def.base, path.key.replace(/\.where\([^()]*\)$/, ''));
    return types.length === 0 || types.includes('Identifier');
  });
  IDENTIFIERS.set(def, out);
  return out;
}

/** The element types a token parameter's paths reach, for errors (holdsIdentifiers). */
function valueTypes(def: ParamDefinition): string[] {
  return [...new Set(def.paths.flatMap((path) => pathTypes(def.base, path.key.replace(/\.where\([^()]*\)$/, ''))))];
}

/** The modifiers token parameter `def` takes: `:of-type` where it may hold Identifiers (holdsIdentifiers). */
export function tokenModifiers(def: ParamDefinition): string[] {
  return holdsIdentifiers(def) ? MODIFIERS.token : MODIFIERS.token.filter((m) => m !== 'of-type');
}

/**
 * `_filter`'s `eq` on token parameter `def` (`unequal`: `ne`) with one raw value, as search_filter.html
 * has them: "Token is the same, including namespace if specified (case insensitive)" (systems and codes
 * compared with their ASCII letters folded, a `code` element's implied system too), and "An item in the
 * set has an unequal value" (a row of the parameter matching none of the value's forms).
 */
export function tokenComparison(def: ParamDefinition, raw: string, unequal: boolean): Condition {
  const v = tokenOf(def.code, raw);
  const folded: TokenValue = { ...(v.system !== undefined && { system: foldAscii(v.system) }), ...(v.value !== undefined && { value: foldAscii(v.value) }) };
  const values = contactPointValues(def, withImpliedSystems(def, [folded], true));
  const on = (param: string): Condition => (unequal ? { kind: 'token', param, values, fold: true, unequal } : { kind: 'token', param, values, fold: true });
  // A folded parameter's values are its members' together: one of them has a row, or an unequal one.
  const coded = def.unionOf ? { kind: 'or', any: def.unionOf.map(on) } satisfies Condition : on(def.code);
  // A text without a code (its string row of `:text`) is a value too (missingRows), and never equal to a token: unequal.
  return unequal ? { kind: 'or', any: [coded, { kind: 'missing', table: 'search_string', params: storedParams(def).map((p) => `${p}:text`), missing: false }] } : coded;
}

function tokenOf(param: string, raw: string): TokenValue {
  const v = tokenValue(raw);
  // `|` alone, or an empty composite component (`$gt100`), names neither a system nor a code.
  if (!v.value && !v.system) throw invalid(param, `Empty token value for '${param}'${raw === '' ? '' : ` ('${raw}' names neither a system nor a code)`}`);
  return v;
}


/**
 * A reference search value: `Type/id`, an id, an absolute URL, or a canonical URL (`url[|version]`).
 * An absolute URL is compiled as written, as another server's resource and a canonical are stored; one
 * under the tenant's FHIR base becomes its `Type/id` when the conditions are completed (localReferences
 * in src/fhir/search.ts), the base being the tenant's.
 */
function referenceValues(def: ParamDefinition, raw: string, typeModifier: string | undefined): TokenValue[] {
  if (isAbsoluteReference(raw)) {
    const named = absoluteType(raw);
    if (typeModifier && named !== undefined && named !== typeModifier) throw invalid(def.code, `'${raw}' is not a reference to ${typeModifier}`);
    return [{ system: '', value: raw }];
  }
  const parsed = parseReference(raw);
  if (parsed) {
    if (typeModifier && parsed.type !== typeModifier) throw invalid(def.code, `'${raw}' is not a reference to ${typeModifier}`);
    return [{ system: parsed.type, value: parsed.id }];
  }
  if (!ID_PATTERN.test(raw)) throw invalid(def.code, `Invalid reference value '${raw}' for '${def.code}'`);
  const target = typeModifier ?? (def.targets.length === 1 ? def.targets[0] : undefined);
  return [target ? { system: target, value: raw } : { value: raw }];
}

/**
 * `:below` / `:above` on reference parameter `def` (HierarchyCondition): each value `Type/id` or `id`
 * (the type then the one target of the parameter whose resources form a hierarchy), not an absolute
 * URL (the caller's canonicalBelow); ORed per type.
 */
function hierarchyCondition(def: ParamDefinition, modifier: 'below' | 'above', values: string[], name: string): PendingCondition {
  const byType = new Map<string, string[]>();
  for (const raw of values) {
    const parsed = parseReference(raw);
    let target: string;
    let id: string;
    if (parsed) ({ type: target, id } = parsed);
    else {
      if (!ID_PATTERN.test(raw)) throw invalid(name, `Invalid value '${raw}' for '${name}': expected Type/id or id`);
      const candidates = namedTargets(def, referenceTargets(def)).filter((t) => hierarchyParam(t) !== undefined);
      if (candidates.length !== 1) {
        throw invalid(name, candidates.length ? `'${raw}': name the type of '${def.code}' (${candidates.map((t) => `${t}/${raw}`).join(', ')})` : `'${def.code}' refers to no type whose resources form a hierarchy`);
      }
      [target, id] = [candidates[0]!, raw];
    }
    if (def.targets.length && !referenceTargets(def).includes(target)) throw invalid(name, `'${def.code}' does not refer to ${target}`);
    if (!hierarchyParam(target)) throw invalid(name, `${target} resources form no hierarchy (no part-of or parent parameter) for ':${modifier}'`);
    // A canonical reference names a canonical resource, none of which forms a hierarchy.
    if (!namedTargets(def, [target]).length) throw invalid(name, namesNone(def, [target]));
    (byType.get(target) ?? byType.set(target, []).get(target)!).push(id);
  }
  const param = def.storedAs?.param ?? def.code;
  const conditions = [...byType].map(([target, ids]): HierarchyCondition => ({ kind: 'hierarchy', param, target, ids, direction: modifier, modifier }));
  return conditions.length === 1 ? conditions[0]! : { kind: 'or', any: conditions as unknown as Condition[] };
}

/**
 * `:below` on canonical references (search.html, "References and Versions"): `url` matches every version
 * of it (as `url` alone does: a versioned canonical is indexed with and without its version), and
 * `url|1` the versions `1` and those below it (`1.0`, `1.1.2`), each value ORed.
 */
function canonicalBelow(param: string, urls: string[], name: string): Condition {
  const exact: TokenValue[] = [];
  const below: string[] = [];
  for (const url of urls) {
    exact.push({ system: '', value: url });
    if (url.lastIndexOf('|') > url.lastIndexOf('/')) below.push(url);
  }
  const token: Condition = { kind: 'token', param, values: exact };
  return below.length ? { kind: 'or', any: [token, { kind: 'uri-prefix', param, values: prefixes(name, below, '.') }] } : token;
}

/**
 * The values of a `uri-prefix` condition, each followed by `suffix`, within MAX_PREFIX_SEARCH_BYTES: a
 * longer prefix is past what PostgreSQL's bounded forms of long values answer
 * (src/store/index-limits.ts), refused on both databases so that a search means the same on each.
 */
function prefixes(name: string, values: string[], suffix = ''): string[] {
  const most = MAX_PREFIX_SEARCH_BYTES - Buffer.byteLength(suffix);
  const long = values.find((v) => Buffer.byteLength(v) > most);
  if (long !== undefined) throw invalid(name, `A ':below' value of '${name}' holds at most ${most} bytes (this one ${Buffer.byteLength(long)})`);
  return values.map((v) => v + suffix);
}

/** The condition that reference parameter `def` refers to `type`/`id` (a compartment's membership, src/fhir/compartments.ts). */
export function referenceTo(def: ParamDefinition, type: string, id: string): Condition {
  return storedReference(def, [{ system: type, value: id }]);
}

/** The condition on a reference parameter kept in another's rows (ParamDefinition.storedAs). */
function storedReference(def: ParamDefinition, values: TokenValue[], not?: boolean): Condition {
  if (!def.storedAs) return not ? { kind: 'token', param: def.code, values, not, reference: true } : { kind: 'token', param: def.code, values, reference: true };
  const { param, target } = def.storedAs;
  // An absolute URL (system '') stays as written when it names the target type (localReferences).
  const url = (v: TokenValue) => v.system === '' && v.value !== undefined && isAbsoluteReference(v.value);
  const vs = target === undefined ? values : values
    .filter((v) => v.system === undefined || v.system === target || (url(v) && absoluteType(v.value!) === target))
    .map((v) => (url(v) ? v : { ...v, system: target }));
  return not ? { kind: 'token', param, values: vs, not, reference: true } : { kind: 'token', param, values: vs, reference: true };
}

/** The table a parameter type's rows are in. */
export function tableOf(type: ParamType): IndexTable {
  switch (type) {
    case 'string': return 'search_string';
    // `special`: Location's `near`, whose rows are positions (src/fhir/near.ts).
    case 'date': case 'number': case 'quantity': case 'special': return 'search_range';
    case 'composite': return 'search_composite';
    default: return 'search_index';
  }
}

/** The parameters holding `def`'s rows. */
function storedParams(def: ParamDefinition): string[] {
  return def.unionOf ?? [def.storedAs?.param ?? def.code];
}

/**
 * The parameters whose rows are `def`'s values for `:missing`: its own, and for a reference parameter
 * whose paths name no type those of its references by identifier alone (`:identifier`, which finds
 * them: search.html, `:missing=true` is "no value"). A parameter restricted to a type (`patient`:
 * `subject.where(resolve() is Patient)`) does not count them: such a reference resolves to nothing, and
 * its rows keep no `Reference.type` to tell a Patient's.
 */
function missingParams(def: ParamDefinition): string[] {
  const params = storedParams(def);
  if (def.type !== 'reference' || def.storedAs?.target !== undefined || def.paths.some((p) => p.targetType !== undefined)) return params;
  return params.flatMap((p) => [p, `${p}:identifier`]);
}

function compositePart(def: ParamDefinition, type: ParamType, raw: string, now: number): CompositePart {
  const value = unescapeValue(raw);
  switch (type) {
    case 'token': return { kind: 'token', ...tokenOf(def.code, raw) };
    case 'reference': return { kind: 'token', ...referenceValues(def, value, undefined)[0]! };
    case 'string': return { kind: 'string', value: normalizeString(value) };
    case 'date': return { kind: 'date', test: dateTest(def.code, value, now) };
    case 'quantity': return { kind: 'number', test: quantityTest(def.code, raw), column: 'both' };
    case 'number': return { kind: 'number', test: numberTest(def.code, value), column: 'both' };
    default: throw new FhirError('not-supported', `Composite '${def.code}' has a ${type} component, which Cinder cannot search`, { expression: [def.code] });
  }
}

function compositeTest(def: ParamDefinition, raw: string, now: number): CompositeTest {
  const parts = splitEscaped(raw, '$');
  const comps = def.components!;
  if (parts.length !== comps.length + 1) throw invalid(def.code, `Invalid composite value '${raw}' for '${def.code}': expected ${comps.length + 1} parts separated by '$'`);
  const first = tokenOf(def.code, parts[0]!);
  const rest = comps.map((c, i) => compositePart(def, c.type, parts[i + 1]!, now));
  if (comps.length === 2) {
    // MolecularSequence coordinates: the start in low, the end in high
    (rest[0] as { column: string }).column = 'low';
    (rest[1] as { column: string }).column = 'high';
  }
  return { system1: first.system, value1: first.value, parts: rest };
}

/** A composite part as a condition on the parameter that holds it (composites kept as ANDed parameters). */
function partCondition(param: string, p: CompositePart): Condition {
  if (p.kind === 'number' && p.test.canonical) return { kind: 'number', param: canonicalParam(param), tests: [p.test] };
  switch (p.kind) {
    case 'token': return { kind: 'token', param, values: [{ ...(p.system !== undefined ? { system: p.system } : {}), ...(p.value !== undefined ? { value: p.value } : {}) }] };
    case 'string': return { kind: 'string', param, values: [{ value: p.value, match: 'prefix' }] };
    case 'date': return { kind: 'date', param, tests: [p.test] };
    case 'number': return { kind: 'number', param, tests: [p.test] };
  }
}

/** Composite tests (ORed) on `def`: rows of its own, its parameters ANDed (`andOf`), or any of a union's members. */
function compositeCondition(def: ParamDefinition, tests: CompositeTest[]): Condition {
  if (def.unionOf) return { kind: 'or', any: def.unionOf.map((code) => compositeCondition(paramOf(def.base, code)!, tests)) };
  if (!def.andOf) {
    const canonical = (t: CompositeTest) => t.parts.some((p) => p.kind === 'number' && p.test.canonical === true);
    return byUnits(tests, canonical, (param, ts) => ({ kind: 'composite', param, tests: ts }), def.code);
  }
  const [first, ...rest] = def.andOf;
  const pairs = tests.map((t) => [partCondition(first!, { kind: 'token', system: t.system1, value: t.value1 }), ...t.parts.map((p, j) => partCondition(rest[j]!, p))]);
  if (pairs.length === 1) return { kind: 'and', all: pairs[0]! };
  // Every alternative holds one of the values of each parameter, so the values ORed hold too, and a
  // search can start from those (the pairs themselves, ORed, cannot: neither pair's rows alone are
  // their answer): `code-value-quantity=A$gt250,B$gt400` is also `code=A,B` and `value-quantity=gt250,gt400`.
  const implied = def.andOf.map((_, j) => anyOf(pairs.map((all) => all[j]!)));
  return { kind: 'and', all: [...implied, { kind: 'or', any: pairs.map((all): Condition => ({ kind: 'and', all })) }] };
}

/**
 * Conditions of one kind (partCondition's), their values ORed: one condition per parameter (a quantity
 * part may be on the canonical rows of its parameter), an `or` of them when there are two.
 */
function anyOf(conditions: Condition[]): Condition {
  const params = new Map<string, Condition[]>();
  for (const c of conditions) {
    const param = (c as { param: string }).param;
    (params.get(param) ?? params.set(param, []).get(param)!).push(c);
  }
  return params.size === 1 ? sameParam(conditions) : { kind: 'or', any: [...params.values()].map(sameParam) };
}

function sameParam(conditions: Condition[]): Condition {
  const [c] = conditions;
  switch (c!.kind) {
    case 'token': return { ...c!, values: conditions.flatMap((x) => (x as typeof c).values) };
    case 'string': return { ...c!, values: conditions.flatMap((x) => (x as typeof c).values) };
    case 'date': return { ...c!, tests: conditions.flatMap((x) => (x as typeof c).tests) };
    case 'number': return { ...c!, tests: conditions.flatMap((x) => (x as typeof c).tests) };
    default: return { kind: 'or', any: conditions };
  }
}

/**
 * `:missing` on the rows of `params` of `def`'s type. A token's value is also a text without a code (a
 * CodeableConcept of text alone, a Coding's display, an Identifier's type text without a value): its
 * string row of `:text`, which `:text` finds, is a value too (a value is what the parameter's searches find).
 */
function missingRows(def: ParamDefinition, params: string[], missing: boolean): Condition {
  const rows: Condition = { kind: 'missing', table: tableOf(def.type), params, missing };
  if (def.type !== 'token') return rows;
  const texts: Condition = { kind: 'missing', table: 'search_string', params: params.map((p) => `${p}:text`), missing };
  return missing ? { kind: 'and', all: [rows, texts] } : { kind: 'or', any: [rows, texts] };
}

/** `:missing` on a parameter kept as others ANDed: missing when any of them is. */
function missingCondition(def: ParamDefinition, missing: boolean): Condition {
  if (def.unionOf) {
    const members = def.unionOf.map((code) => missingCondition(paramOf(def.base, code)!, missing));
    return missing ? { kind: 'and', all: members } : { kind: 'or', any: members };
  }
  if (!def.andOf) return missingRows(def, [def.code], missing);
  const members = def.andOf.map((code): Condition => missingRows(paramOf(def.base, code)!, [code], missing));
  return missing ? { kind: 'or', any: members } : { kind: 'and', all: members };
}

/** All prefixes of a URL at its `/` boundaries, itself included (`uri:above`). */
function uriAncestors(url: string): string[] {
  const out: string[] = [];
  for (let i = url.indexOf('//') + 2; i > 1 && i < url.length; i = url.indexOf('/', i + 1)) {
    if (i > 0 && url[i] === '/') out.push(url.slice(0, i));
    if (url.indexOf('/', i + 1) < 0) break;
  }
  out.push(url);
  return out;
}

/**
 * Token parameter `def`'s codes against `codes` (`:in`, `:below`, `:above`; `not`: `:not-in`). A union
 * (`combo-code`) is its members ORed, as its plain values are: one of them has such a code, and for
 * `:not-in` none has (as its `:not`); each member's condition names the parameter as written (`within`).
 */
function codeSetCondition(def: ParamDefinition, name: string, modifier: string, codes: CodeSet, not: boolean, more: CodeSet[] = []): PendingCondition {
  const also = more.length ? { more } : {};
  const implied = (of: ParamDefinition | undefined) => {
    const pairs = of ? codeBindings(of).flatMap((b) => [...b.systemCodes]) : [];
    return pairs.length ? { implied: pairs } : {};
  };
  if (!def.unionOf) return { kind: 'value-set', param: def.code, codes, modifier, not, ...also, ...implied(def) };
  const members = def.unionOf.map((param): ValueSetCondition => ({ kind: 'value-set', param, codes, modifier, within: name, not: false, ...also, ...implied(paramOf(def.base, param)) }));
  const any = { kind: 'or', any: members as unknown as Condition[] } satisfies Condition;
  return not ? { kind: 'not', condition: any } : any;
}

/** The condition of one simple parameter (no chain) with its modifier and raw value. */
function simpleCondition(def: ParamDefinition, modifier: string | undefined, raw: string, now: number): PendingCondition {
  const name = modifier ? `${def.code}:${modifier}` : def.code;
  if (modifier === 'missing') {
    if (raw === '') throw new EmptyValue('invalid', `Empty value in search parameter '${name}'`, { expression: [name] });
    if (raw !== 'true' && raw !== 'false') throw invalid(name, `Invalid ':missing' value '${raw}': expected true or false`);
    if (def.storedAs?.target) {
      // `patient:missing`: no subject that is a Patient, nor another server's URL naming one (`patient=<url>` finds it)
      const { param, target } = def.storedAs;
      return { kind: 'missing', table: 'search_index', params: [param], missing: raw === 'true', systems: [target], urls: [urlNamingPattern(target)] };
    }
    if (def.type === 'composite') return missingCondition(def, raw === 'true');
    return missingRows(def, missingParams(def), raw === 'true');
  }
  const unsupported = () => new FhirError('invalid', `Unknown modifier ':${modifier}' for the ${def.type} parameter '${def.code}'`, { expression: [name] });
  // Read where each modifier has been checked: an empty value (EmptyValue) is ignored, a bad modifier is not.
  const parts = (): string[] => alternatives(raw, name);
  const union = (make: (param: string) => Condition): Condition =>
    def.unionOf ? { kind: 'or', any: def.unionOf.map(make) } : make(def.storedAs?.param ?? def.code);
  switch (def.type) {
    case 'string': {
      if (modifier !== undefined && modifier !== 'exact' && modifier !== 'contains') throw unsupported();
      const values = parts().map((p) => {
        const text = unescapeValue(p);
        if (def.code === 'phonetic') return { value: soundex(text).toLowerCase(), match: 'prefix' as const };
        if (modifier === 'exact') return { value: exactString(text), match: 'exact' as const };
        return { value: normalizeString(text), match: modifier === 'contains' ? ('contains' as const) : ('prefix' as const) };
      });
      return { kind: 'string', param: def.code, values };
    }
    case 'token': {
      if (modifier === 'text') {
        // The text of the coded value (CodeableConcept.text, Coding.display) contains the value.
        const texts = parts().map((p) => normalizeString(unescapeValue(p)));
        return union((param) => ({
          kind: 'or',
          any: [
            { kind: 'token-text', param, values: texts },
            { kind: 'string', param: `${param}:text`, values: texts.map((value) => ({ value, match: 'contains' as const })) },
          ],
        }));
      }
      if (modifier === 'of-type') {
        // R4 defines `:of-type` for Identifiers alone: on other values it could match nothing.
        if (!holdsIdentifiers(def)) {
          throw invalid(name, `Modifier ':of-type' applies to Identifier values, which the token parameter '${def.code}' does not hold (its values: ${valueTypes(def).join(', ')})`);
        }
        const values = parts().map((p) => {
          const split = splitEscaped(p, '|').map(unescapeValue);
          const [system, code, value] = split;
          if (split.length !== 3 || !code || !value) throw invalid(name, `Invalid ':of-type' value '${p}': expected system|code|value`);
          return { system: system!, value: `${code}|${value}` };
        });
        return union((param) => ({ kind: 'token', param: `${param}:of-type`, values }));
      }
      if (modifier === 'in' || modifier === 'not-in') {
        const [first, ...more] = parts().map((p): CodeSet => ({ kind: 'value-set', canonical: unescapeValue(p) }));
        return codeSetCondition(def, name, modifier, first!, modifier === 'not-in', more);
      }
      if (modifier === 'below' || modifier === 'above') {
        const codes = parts().map((p) => {
          const pieces = splitEscaped(p, '|').map(unescapeValue);
          if (pieces.length !== 2 || !pieces[0] || !pieces[1]) throw invalid(name, `Invalid ':${modifier}' value '${p}': expected system|code`);
          return { system: pieces[0], code: pieces[1] };
        });
        return codeSetCondition(def, name, modifier, { kind: 'subsumption', op: modifier === 'below' ? 'is-a' : 'generalizes', codes }, false);
      }
      if (modifier !== undefined && modifier !== 'not') throw unsupported();
      const values = contactPointValues(def, withImpliedSystems(def, parts().map((p) => tokenOf(name, p))));
      if (modifier === 'not' && def.unionOf) {
        // none of the folded parameters has a matching value
        return { kind: 'not', condition: { kind: 'or', any: def.unionOf.map((param) => ({ kind: 'token', param, values })) } };
      }
      return union((param) => (modifier === 'not' ? { kind: 'token', param, values, not: true } : { kind: 'token', param, values }));
    }
    case 'uri': {
      if (modifier !== undefined && modifier !== 'below' && modifier !== 'above') throw unsupported();
      const values = parts().map(unescapeValue);
      if (modifier === 'below') return { kind: 'uri-prefix', param: def.code, values: prefixes(name, values) };
      if (modifier === 'above') return { kind: 'token', param: def.code, values: values.flatMap(uriAncestors).map((value) => ({ system: '', value })) };
      return { kind: 'token', param: def.code, values: values.map((value) => ({ system: '', value })) };
    }
    case 'reference': {
      if (modifier === 'below' || modifier === 'above') {
        const values = parts().map(unescapeValue);
        const urls = values.filter(isAbsoluteReference);
        if (urls.length === 0) return hierarchyCondition(def, modifier, values, name);
        if (modifier === 'above' || urls.length !== values.length) {
          throw invalid(name, `'${name}' takes Type/id or id (a hierarchy)${modifier === 'below' ? ', or canonical URLs alone' : ''}`);
        }
        return canonicalBelow(def.storedAs?.param ?? def.code, urls, name);
      }
      if (modifier === 'identifier') {
        return { kind: 'token', param: `${def.storedAs?.param ?? def.code}:identifier`, values: parts().map((p) => tokenOf(name, p)) };
      }
      if (modifier !== undefined && !isResourceType(modifier)) throw unsupported();
      if (modifier !== undefined) checkTargetType(def, modifier, name);
      return storedReference(def, parts().flatMap((p) => referenceValues(def, unescapeValue(p), modifier)));
    }
    case 'date':
      if (modifier !== undefined) throw unsupported();
      return { kind: 'date', param: def.code, tests: parts().map((p) => dateTest(name, p, now)) };
    case 'number':
      if (modifier !== undefined) throw unsupported();
      return { kind: 'number', param: def.code, tests: parts().map((p) => numberTest(name, p)) };
    case 'quantity':
      if (modifier !== undefined) throw unsupported();
      return union((param) => byUnits(parts().map((p) => quantityTest(name, p)), (t) => t.canonical === true, (p, tests) => ({ kind: 'number', param: p, tests }), param));
    case 'composite':
      if (modifier !== undefined) throw unsupported();
      return compositeCondition(def, parts().map((p) => compositeTest(def, p, now)));
    case 'special':
      // R4's one special parameter, Location's `near`; any other would be refused.
      if (def.code !== 'near') throw new FhirError('not-supported', `The special parameter '${def.code}' is not supported`, { expression: [name] });
      if (modifier !== undefined) throw unsupported();
      return { kind: 'near', param: def.code, points: parts().map((p) => parseNear(name, p)) };
  }
}

/** Thrown for a parameter the type does not have (the caller decides: warning or 400). */
export class UnknownParameterError extends FhirError {}

/**
 * An error about a part of a chain or `_has` (a malformed value, an unknown parameter of the other
 * type) as one about the parameter as written (`subject:Patient.birthdate`), which the OperationOutcome's
 * expression then names; an unknown part stays an UnknownParameterError (ignored when lenient).
 */
function namingParameter(err: unknown, key: string): unknown {
  if (!(err instanceof FhirError) || err.status >= 500) return err;
  const first = err.issues[0];
  if (first?.expression?.length === 1 && first.expression[0] === key) return err;
  const message = err.message.includes(key) ? err.message : `${key}: ${err.message}`;
  const options = { expression: [key], cause: err, ...(first?.code ? { issueCode: first.code } : {}) };
  if (err instanceof UnknownParameterError) return new UnknownParameterError(err.category, message, options);
  return err instanceof EmptyValue ? new EmptyValue(err.category, message, options) : new FhirError(err.category, message, options);
}

function unknown(type: string, key: string): UnknownParameterError {
  return new UnknownParameterError('not-supported', `Search parameter '${key}' is not supported for ${type}`, { expression: [key] });
}

/**
 * The condition of one search parameter `key` (`name[:modifier]`, a chain `ref[:Type].name...`, or
 * `_has:Type:ref:name...`) with its raw value, on resources of `type`.
 */
export function parameterCondition(type: string, key: string, raw: string, now: number, depth = 0): PendingCondition {
  if (depth > MAX_CHAIN_DEPTH) throw new FhirError('invalid', `'${key}' chains more than ${MAX_CHAIN_DEPTH} levels`, { issueCode: 'too-costly', expression: [key] });
  const dot = key.indexOf('.');
  // `_has` alone (no `:Type:ref:name`) is hasCondition's malformed `_has`, not an unknown parameter.
  const has = key === '_has' || key.startsWith('_has:');
  if (has || dot > 0) {
    try {
      return has ? hasCondition(type, key, raw, now, depth) : chainCondition(type, key, dot, raw, now, depth);
    } catch (err) {
      throw depth === 0 ? namingParameter(err, key) : err;
    }
  }
  const [name, modifier] = splitModifier(key);
  if (name === '_id') {
    if (modifier === 'not') return { kind: 'id', ids: idValues(raw), not: true };
    if (modifier !== undefined) throw invalid(key, `Unknown modifier ':${modifier}' for '_id'`);
    return { kind: 'id', ids: idValues(raw) };
  }
  if (name === '_lastUpdated') {
    if (modifier !== undefined) throw invalid(key, `Unknown modifier ':${modifier}' for '_lastUpdated'`);
    return { kind: 'lastUpdated', tests: alternatives(raw, key).map((p) => dateTest(key, p, now)) };
  }
  if (name === '_list') return listCondition(type, key, modifier, raw);
  if (isTextParam(type, name)) {
    if (modifier !== undefined) throw invalid(key, `Unknown modifier ':${modifier}' for '${name}'`);
    const parsed = alternatives(raw, key).map((v) => parseTextQuery(key, unescapeValue(v)));
    const query = parsed.length === 1 ? parsed[0]!.query : { any: parsed.map((p) => p.query) };
    return { kind: 'text', field: name === '_text' ? 'narrative' : 'content', values: parsed.flatMap((p) => p.alternatives), query };
  }
  const def = paramOf(type, name);
  if (!def) throw unknown(type, key);
  if (modifier?.includes(':')) throw invalid(key, `'${key}' has more than one modifier: a search parameter takes one (${name}:${modifier.split(':', 1)[0]})`);
  return simpleCondition(def, modifier, raw, now);
}

/** `name` and what follows its first colon, whole: a second modifier is not dropped but refused where it is read. */
function splitModifier(key: string): [name: string, modifier: string | undefined] {
  const colon = key.indexOf(':');
  return colon < 0 ? [key, undefined] : [key.slice(0, colon), key.slice(colon + 1)];
}

/**
 * `_list=id` (R4 search.html, all resources): the resources a List names among its entries' items, as
 * `_has:List:item:_id=id` (as HAPI FHIR has it; an entry marked `deleted` still counts, being indexed
 * as an item). The List may be named as a reference too, `List/id`, or an absolute URL, kept as written
 * until the search layer reads it as the id it names under the tenant's FHIR base (localReferences in
 * src/fhir/search.ts; another server's names no List here). A functional list (R4 lifecycle.html,
 * "Current Resource Lists": `$current-problems`, `$current-medications`, `$current-allergies`,
 * `$current-drug-allergies`) is what the curated lists of that kind hold: the items of the Lists whose
 * status is `current` and whose code names the kind (FUNCTIONAL_LISTS); with the search's own
 * `patient=` they are that patient's.
 */
function listCondition(type: string, key: string, modifier: string | undefined, raw: string): Condition {
  if (modifier !== undefined) throw invalid(key, `Unknown modifier ':${modifier}' for '_list'`);
  const values = alternatives(raw, key).map(unescapeValue);
  const item = paramOf('List', 'item')!;
  const param = item.storedAs?.param ?? item.code;
  const ids: string[] = [];
  const lists: Condition[] = [];
  for (const value of values) {
    const functional = functionalList(value);
    if (functional) {
      if (!functional.types.includes(type)) throw invalid(key, `'${value}' lists ${functional.types.join(' and ')} resources, not ${type}`);
      lists.push({ kind: 'has', type: 'List', param, where: [
        { kind: 'token', param: 'status', values: [{ value: 'current' }] }, { kind: 'token', param: 'code', values: functional.codes },
      ] });
    } else if (value.startsWith('$')) {
      throw invalid(key, `Unknown functional list '${value}' in '_list' (known: ${Object.keys(FUNCTIONAL_LISTS).join(', ')})`);
    } else ids.push(listId(key, value));
  }
  if (ids.length) lists.unshift({ kind: 'has', type: 'List', param, where: [{ kind: 'id', ids }] });
  return lists.length === 1 ? lists[0]! : { kind: 'or', any: lists };
}

/** A List named in `_list`: its id, `List/id` as that id, or an absolute URL of a List as written. */
function listId(key: string, value: string): string {
  if (ID_PATTERN.test(value)) return value;
  const absolute = isAbsoluteReference(value);
  const parsed = absolute ? undefined : parseReference(value);
  if ((absolute ? absoluteType(value) : parsed?.type) !== 'List' || value.includes('/_history/')) {
    throw invalid(key, `Invalid List '${value}' in '_list': expected an id, List/id or the URL of a List`);
  }
  return parsed?.id ?? value;
}

const LOINC = 'http://loinc.org';
const LIST_USE = 'http://terminology.hl7.org/CodeSystem/list-example-use-codes';

/**
 * The functional lists R4 names (lifecycle.html, "Current Resource Lists"): the types they list, and the
 * codes of the Lists that are such a list: the LOINC codes R4 gives each, and the R4 example List use
 * code of that kind (`problems`, `medications`, `allergies`). R4 gives drug allergies no code of their own
 * ("a subset of the full allergies list"): a List coded 52472-8, Allergies and adverse drug reactions.
 */
/** The types and List codes of a functional list by its name (`$current-problems`), or undefined. */
export function functionalList(name: string): { types: string[]; codes: TokenValue[] } | undefined {
  return Object.hasOwn(FUNCTIONAL_LISTS, name) ? FUNCTIONAL_LISTS[name] : undefined;
}

const FUNCTIONAL_LISTS: Record<string, { types: string[]; codes: TokenValue[] }> = {
  '$current-problems': { types: ['Condition'], codes: [{ system: LOINC, value: '46105-3' }, { system: LIST_USE, value: 'problems' }] },
  '$current-medications': {
    types: ['MedicationStatement', 'MedicationRequest'],
    codes: [{ system: LOINC, value: '57828-6' }, { system: LOINC, value: '10160-0' }, { system: LIST_USE, value: 'medications' }],
  },
  '$current-allergies': {
    types: ['AllergyIntolerance'],
    codes: [{ system: LOINC, value: '18716-1' }, { system: LOINC, value: '52472-8' }, { system: LOINC, value: '48765-2' }, { system: LIST_USE, value: 'allergies' }],
  },
  '$current-drug-allergies': { types: ['AllergyIntolerance'], codes: [{ system: LOINC, value: '52472-8' }] },
};

/** `_content` (every type) and `_text` (types with a narrative): full-text search (src/fhir/text-index.ts). */
export function isTextParam(type: string, name: string): boolean {
  return name === '_content' || (name === '_text' && isDomainResource(type));
}

/** Whether `name` (no modifier) is a parameter searches of `type` take: its own, or `_id`, `_lastUpdated`, `_list`, `_text`, `_content`. */
export function isSearchParam(type: string, name: string): boolean {
  return name === '_id' || name === '_lastUpdated' || name === '_list' || isTextParam(type, name) || paramOf(type, name) !== undefined;
}

function idValues(raw: string): string[] {
  const ids = alternatives(raw, '_id').map(unescapeValue);
  for (const id of ids) if (!ID_PATTERN.test(id)) throw invalid('_id', `Invalid _id value '${id}'`);
  return ids;
}

/** The reference parameter `code` of `type` as the rows hold it: stored parameter and target restriction. */
function referenceParam(type: string, code: string, key: string): ParamDefinition {
  const def = paramOf(type, code);
  if (!def) throw unknown(type, key);
  if (def.type !== 'reference') throw invalid(key, `'${code}' is a ${def.type} parameter of ${type}, not a reference`);
  return def;
}

function chainCondition(type: string, key: string, dot: number, raw: string, now: number, depth: number): Condition {
  const head = key.slice(0, dot);
  const rest = key.slice(dot + 1);
  const [code, typeModifier] = splitModifier(head);
  const def = referenceParam(type, code, key);
  let targets = typeModifier ? [typeModifier] : referenceTargets(def);
  if (typeModifier && !isResourceType(typeModifier)) throw invalid(key, `'${typeModifier}' is not a resource type`);
  if (typeModifier) checkTargetType(def, typeModifier, key);
  if (targets.length === 0) throw invalid(key, `'${code}' may refer to any type: name one ('${code}:Patient.${rest}')`);
  const named = namedTargets(def, targets);
  if (named.length === 0) throw invalid(key, namesNone(def, targets));
  targets = named;
  // A chained name must exist on the targets searched (on at least one when the type is not named).
  const restName = rest.split(/[.:]/, 1)[0]!;
  if (rest.startsWith('_has:')) {
    // A `_has` after the chain (`subject._has:Condition:subject:code=x`): on the targets its reference can
    // refer to (Patient and Group, not Device), as a chained name on those that have it; none is hasCondition's 400.
    const reached = typeModifier ? targets : targets.filter((t) => hasReaches(rest, t));
    if (reached.length) targets = reached;
  } else targets = targets.filter((t) => isSearchParam(t, restName));
  if (targets.length === 0) throw unknown(typeModifier ?? def.targets.join('|'), rest);
  return markWithin(chainOver(def, targets, (t) => [parameterCondition(t, rest, raw, now, depth + 1) as Condition]), key) as Condition;
}

/**
 * `:Type` on reference parameter `def` (`subject:Patient=1`, `subject:Patient.name=x`): a 400 naming
 * `key` when `def` may not refer to `type` (Observation's `subject` refers to no Organization), as no
 * reference it holds could match.
 */
function checkTargetType(def: ParamDefinition, type: string, key: string): void {
  const targets = referenceTargets(def);
  if (targets.length && !targets.includes(type)) throw invalid(key, `'${def.code}' does not refer to ${type} (its targets: ${targets.join(', ')})`);
}

/** The types a reference parameter may refer to (its stored target alone for `patient` and the like; none: any). */
export function referenceTargets(def: ParamDefinition): string[] {
  return def.storedAs?.target ? [def.storedAs.target] : def.targets;
}

/**
 * Of `targets`, the types whose resources the references of `def` can name: every one where it holds
 * literal references, else the canonical resources alone (a canonical names a resource by its `url`:
 * `ActivityDefinition.composed-of` names no Patient).
 */
export function namedTargets(def: ParamDefinition, targets: string[]): string[] {
  return referenceKinds(def).literal ? targets : targets.filter(isCanonicalType);
}

/** Why `def` names none of `targets` (namedTargets). */
export function namesNone(def: ParamDefinition, targets: string[]): string {
  return `'${def.code}' holds canonical references, which name canonical resources (with a url and a version), not ${targets.length > 3 ? `${targets.length} other types` : targets.join(', ')}`;
}

/**
 * The chain through reference `def` to each of `targets`, whose resources meet `where` of their type;
 * ORed over several. Each also reaches the resources contained in the searched one (insideContained).
 * Through canonical references (src/fhir/search-canonical.ts), a canonical resource type is reached by
 * its `url` and `version` (a `canonical` chain), beside the literal references where `def` holds both.
 */
export function chainOver(def: ParamDefinition, targets: string[], where: (target: string) => Condition[]): Condition {
  const param = def.storedAs?.param ?? def.code;
  const kinds = referenceKinds(def);
  const chains = targets.flatMap((t): Condition[] => {
    const conditions = where(t);
    const canonical: Condition[] = kinds.canonical && isCanonicalType(t) ? [{ kind: 'chain', param, targetType: t, where: conditions, canonical: true }] : [];
    return kinds.literal ? [insideContained({ kind: 'chain', param, targetType: t, where: conditions }), ...canonical] : canonical;
  });
  return chains.length === 1 ? chains[0]! : { kind: 'or', any: chains };
}

/**
 * A chain, or the same conditions met by a resource that the searched one contains and refers to
 * through the chain's parameter (R4 search: "a chained condition will be evaluated inside contained
 * resources"): on the searched resource's own rows of the contained one (src/fhir/indexer.ts
 * containedRows), each condition's parameter prefixed. A test that needs rows (a value, `:missing=false`)
 * finds them only where such a resource is; others (`:missing=true`, `:not`) require one (a row of its
 * id). The resources one parameter refers to are searched as one: two conditions of one chain (a
 * `_filter` target's `[...]`) may be met by two of them. Conditions a contained resource has no rows
 * for (`_id`, `_lastUpdated`, `_has`, full text) leave the chain as it is.
 */
function insideContained(chain: Extract<Condition, { kind: 'chain' }>): Condition {
  const prefix = containedPrefix(chain.param, chain.targetType);
  const renamed: Condition[] = [];
  for (const w of chain.where) {
    const r = onContainedRows(w, prefix);
    if (r === undefined) return chain;
    renamed.push(r);
  }
  if (renamed.length === 0) return chain;
  const inside: Condition = renamed.length === 1 && readsOwnRows(renamed[0]!)
    ? renamed[0]!
    : { kind: 'and', all: [{ kind: 'missing', table: 'search_index', params: [containedIdParam(prefix)], missing: false }, ...renamed] };
  return { kind: 'or', any: [chain, inside], contained: containedIdParam(prefix) };
}

/** `c` on the rows of the contained resources under `prefix`; undefined when they have none for it. */
export function onContainedRows(c: Condition, prefix: string): Condition | undefined {
  // A pending condition (a ValueSet, a hierarchy) is completed later on the prefixed parameter.
  const pending = c as PendingCondition;
  if (pending.kind === 'value-set' || pending.kind === 'hierarchy') return { ...pending, param: prefix + pending.param } as unknown as Condition;
  switch (c.kind) {
    case 'token': case 'string': case 'uri-prefix': case 'token-text': case 'date': case 'number': case 'composite': case 'near': case 'chain':
      return { ...c, param: prefix + c.param };
    case 'missing':
      return { ...c, params: c.params.map((p) => prefix + p) };
    case 'or': case 'and': {
      const parts = (c.kind === 'or' ? c.any : c.all).map((x) => onContainedRows(x, prefix));
      if (parts.some((x) => x === undefined)) return undefined;
      if (c.kind === 'and') return { kind: 'and', all: parts as Condition[] };
      // A nested chain's alternative on its contained resources is on the searched resource's rows too.
      return c.contained === undefined ? { kind: 'or', any: parts as Condition[] } : { kind: 'or', any: parts as Condition[], contained: prefix + c.contained };
    }
    case 'not': {
      const inner = onContainedRows(c.condition, prefix);
      return inner && { kind: 'not', condition: inner };
    }
    default:
      return undefined;
  }
}

/** Whether `_has:Other:code:...` (`key`) can find resources of `type`: `Other.code` may refer to it (hasCondition's tests). */
function hasReaches(key: string, type: string): boolean {
  const m = /^_has:([A-Za-z]+):([A-Za-z0-9-]+):/.exec(key);
  const def = m && isResourceType(m[1]!) ? paramOf(m[1]!, m[2]!) : undefined;
  if (def?.type !== 'reference') return true;
  if (def.storedAs?.target ? def.storedAs.target !== type : def.targets.length > 0 && !def.targets.includes(type)) return false;
  const kinds = referenceKinds(def);
  return kinds.literal || (kinds.canonical && isCanonicalType(type));
}

function hasCondition(type: string, key: string, raw: string, now: number, depth: number): Condition {
  const m = /^_has:([A-Za-z]+):([A-Za-z0-9-]+):(.+)$/.exec(key);
  if (!m) throw invalid(key, `Invalid '_has' parameter '${key}': expected _has:Type:reference:parameter`);
  const [, other, code, rest] = m as unknown as [string, string, string, string];
  if (!isResourceType(other)) throw invalid(key, `'${other}' is not a resource type`);
  const def = referenceParam(other, code, key);
  if (def.storedAs?.target && def.storedAs.target !== type) throw invalid(key, `'${other}.${code}' does not refer to ${type}`);
  if (!def.storedAs?.target && def.targets.length && !def.targets.includes(type)) throw invalid(key, `'${other}.${code}' does not refer to ${type}`);
  // Canonical references name a canonical resource by its `url` and `version` (src/fhir/search-canonical.ts).
  const kinds = referenceKinds(def);
  const canonical = kinds.canonical && isCanonicalType(type);
  if (!kinds.literal && !canonical) throw invalid(key, `${other}.${namesNone(def, [type])}`);
  const inner = parameterCondition(other, rest, raw, now, depth + 1) as Condition;
  const param = def.storedAs?.param ?? def.code;
  const has: Condition[] = [];
  if (kinds.literal) has.push({ kind: 'has', type: other, param, where: [inner] });
  if (canonical) has.push({ kind: 'has', type: other, param, where: [inner], canonical: true });
  return markWithin(has.length === 1 ? has[0]! : { kind: 'or', any: has }, key) as Condition;
}

/**
 * Whether a condition holds one that the search layer must complete first (resolveConditions in
 * src/fhir/search.ts: a ValueSet or subsumption, a hierarchy), at any depth: in `and`, `or`, `not`,
 * chains and `_has`.
 */
export function hasPending(c: PendingCondition): boolean {
  switch (c.kind) {
    case 'value-set': case 'hierarchy': return true;
    case 'and': return c.all.some(hasPending);
    case 'or': return c.any.some(hasPending);
    case 'not': return hasPending(c.condition);
    case 'chain': case 'has': return c.where.some(hasPending);
    default: return false;
  }
}

/** Whether a condition walks a reference hierarchy (`:below` / `:above`: HierarchyCondition) at any depth, as hasPending looks. */
export function walksHierarchy(c: PendingCondition): boolean {
  switch (c.kind) {
    case 'hierarchy': return true;
    case 'and': return c.all.some(walksHierarchy);
    case 'or': return c.any.some(walksHierarchy);
    case 'not': return walksHierarchy(c.condition);
    case 'chain': case 'has': return c.where.some(walksHierarchy);
    default: return false;
  }
}

/**
 * Marks the pending conditions inside `c` (ValueSet, hierarchy) as part of the parameter `key` (a
 * chain, `_has`, `_filter`), which their errors then name; the outermost parameter marks last, so its
 * name is the one kept.
 */
export function markWithin(c: PendingCondition, key: string): PendingCondition {
  if (!hasPending(c)) return c;
  switch (c.kind) {
    case 'value-set': case 'hierarchy': return { ...c, within: key };
    case 'and': return { ...c, all: c.all.map((x) => markWithin(x, key)) as Condition[] };
    case 'or': return { ...c, any: c.any.map((x) => markWithin(x, key)) as Condition[] };
    case 'not': return { ...c, condition: markWithin(c.condition, key) as Condition };
    case 'chain': case 'has': return { ...c, where: c.where.map((x) => markWithin(x, key)) as Condition[] };
    default: return c;
  }
}

/** `_sort`: comma-separated keys, `-` for descending; `_id`, `_lastUpdated` or a parameter of the type. */
const ONE_VALUE = new Map<ParamDefinition, boolean>();

/**
 * Whether a resource has at most one value of date parameter `def`, so at most one of its range rows
 * (a Period and a Timing are one range each): its one path is of elements of at most one value each
 * (`Encounter.period`), or its paths are the types of one choice element (`onsetDateTime`,
 * `onsetPeriod`), by the R4 model. Then a sort on it needs no aggregate over the resource's rows.
 */
function oneValue(def: ParamDefinition): boolean {
  let one = ONE_VALUE.get(def);
  if (one !== undefined) return one;
  const steps = def.paths.map((p) => p.key.split('.'));
  const slots = steps.map((path) => {
    let type: string | undefined = def.base;
    const reached: Slot[] = [];
    for (const [i, step] of path.entries()) {
      const model: TypeModel | null | undefined = /^[a-z][A-Za-z]*$/.test(step) && type !== undefined ? typeModel(type) : undefined;
      // A choice element by its name (`effective`): any of its types, so only as the last step.
      const slot: Slot | undefined = model?.slots.get(step) ?? (i === path.length - 1 ? [...(model?.slots.values() ?? [])].find((x) => x.element.choice && x.element.name === step) : undefined);
      if (slot === undefined) return undefined;
      reached.push(slot);
      type = slot.type;
    }
    return reached;
  });
  if (slots.length === 0 || slots.some((s) => s === undefined || s.some((slot) => slot.element.max > 1))) one = false;
  else if (slots.length === 1) one = true;
  else {
    // Several paths: one value only if each is a name of the same choice element, and nothing below.
    const element = slots[0]![0]!.element;
    one = element.choice && slots.every((s) => s!.length === 1 && s![0]!.element === element);
  }
  ONE_VALUE.set(def, one);
  return one;
}

/**
 * The most `_sort` keys one search takes: each is a key read for every match (a subquery in the
 * statement), and PostgreSQL and SQLite refuse a statement of a few thousand (a 500 after seconds).
 */
export const MAX_SORT_KEYS = 16;

export function parseSort(type: string, raw: string | null): SortKey[] {
  if (raw === null || raw === '') return [];
  const parts = raw.split(',');
  if (parts.length > MAX_SORT_KEYS) {
    throw new FhirError('invalid', `_sort has ${parts.length} keys; at most ${MAX_SORT_KEYS} are supported`, { issueCode: 'too-costly', expression: ['_sort'] });
  }
  return parts.map((part): SortKey => {
    const descending = part.startsWith('-');
    const code = descending ? part.slice(1) : part;
    if (code === '_id') return { by: 'id', descending };
    if (code === '_lastUpdated') return { by: 'lastUpdated', descending };
    const def = paramOf(type, code);
    if (!def) throw new FhirError('invalid', `Unknown _sort parameter '${code}' for ${type}`, { expression: ['_sort'] });
    if (def.unionOf) {
      // A union (`combo-code` = `code` | `component-code`) keeps no rows of its own to order by.
      throw new FhirError('not-supported', `Cannot sort by '${code}', which is searched as any of ${def.unionOf.map((p) => `'${p}'`).join(', ')}: sort by one of those`, { expression: ['_sort'] });
    }
    if (def.type === 'composite' || def.type === 'special') {
      throw new FhirError('not-supported', `Cannot sort by the ${def.type} parameter '${code}'`, { expression: ['_sort'] });
    }
    const stored = def.storedAs?.param ?? def.code;
    // A quantity orders by its value in its canonical UCUM unit where it has one (indexer.ts sortParam).
    const key: SortKey = { by: 'param', table: tableOf(def.type), param: def.type === 'quantity' ? sortParam(stored) : stored, descending };
    if (def.type === 'date' && oneValue(def)) key.oneRow = true;
    return def.storedAs?.target === undefined ? key : { ...key, target: def.storedAs.target };
  });
}
