/**
 * A compiled FHIRPath engine for the invariants of the FHIR R4 StructureDefinitions
 * (https://hl7.org/fhir/R4/fhirpath.html, FHIRPath N1 http://hl7.org/fhirpath/N1/, with FHIRPath 2.0's STU
 * functions: boundaries and precision in fhirpath-boundary.ts, encodings in fhirpath-text.ts, sort(),
 * defineVariable(), the date and time components; not its Long). An expression is
 * parsed once; for each focus type it is evaluated on, its syntax tree is turned once into plain
 * closures with the FHIR type of every path step resolved (through `FhirPathTypes`), so an evaluation
 * only walks JSON and allocates the collections it produces.
 *
 * Values are plain R4 JSON. A value whose type its position does not tell (a choice element's
 * `valueQuantity`, a child reached by `children()`, a primitive with a `_name` sibling) is carried as a
 * `Typed`; a resource carries its own `resourceType`. Booleans follow FHIRPath's three-valued logic
 * (`undefined` is the empty collection); `and`/`or`/`implies` short-circuit. Functions that need a server
 * or terminology (`resolve`, `memberOf`, `conformsTo`, `htmlChecks`, ...) throw UnsupportedFhirPath at
 * compile time. At run time an error (`single()` on many, comparing a date with a number) makes the
 * invariant hold, as does an empty result: only a result of exactly `false` fails.
 *
 * Where R4's expressions and FHIRPath.js part, Cinder reads them as HL7's Java validator does: an
 * unqualified System type name also matches the FHIR primitive of that name (que-7's `answer is Boolean`),
 * a regex literal that Unicode mode refuses (`\@` in eld-16) is compiled without it, and two quantities
 * of the same non-UCUM unit compare by value (rng-2). A dateTime without an offset is read in UTC.
 */
import { guarded, guardedTest } from '../../regex-guard.ts';
import type { Clock } from '../../clock.ts';
import { literalOf } from '../exact-json.ts';
import { add as addRational, compare as compareRational, divide, multiply as multiplyRational, numberRational, rationalKey, roundedUnits, subtract, type Rational } from '../rational.ts';
import { canonicalUnit, temperatureOf, type CanonicalUnit, type Temperature } from '../ucum.ts';
import {
  addQuantities, CALENDAR_MS, CALENDAR_UCUM, calendarFactors, calendarKeyword, convertQuantity, isCalendarMonths, isDefiniteCalendar,
  multiplyQuantities, parseQuantityText, type PlainQuantity,
} from './fhirpath-quantity-math.ts';
import { decimalArithmetic, decimalPlaces, logarithm, numberText, power, roundTo, UNARY_MATH } from './fhirpath-math.ts';
import {
  datePart, decimalBoundary, decimalPrecision, DEFAULT_DECIMAL_PRECISION, temporalBoundary, temporalComponent, temporalPrecision, timePart, timezoneOffset,
  type TemporalComponent,
} from './fhirpath-boundary.ts';
import { decodeText, encodeText, EncodingFormatError, escapeText, unescapeText } from './fhirpath-text.ts';
import { currentTemporal, shiftTemporal, TemporalArithmeticError, type TemporalKind } from './fhirpath-temporal.ts';
import { FhirPathSyntaxError, parseFhirPath, UnsupportedFhirPath, type Ast, type Literal, type TypeName } from './fhirpath-parse.ts';

export { FhirPathSyntaxError, UnsupportedFhirPath };

export interface FhirPathTypes {
  /** The FHIR type of element `name` of a value of type `owner` (e.g. ('Observation','value') -> undefined for choice; ('Patient','birthDate') -> 'date'; ('Observation','valueQuantity') -> 'Quantity'), or undefined when unknown. Backbone elements are named by their path, e.g. 'Patient.contact'. */
  elementType(owner: string, name: string): string | undefined;
  /**
   * Every element of a type (inherited ones too), for type()'s ClassInfo (N1 § 10 Reflection); absent, a ClassInfo
   * lists no element.
   */
  typeElements?(type: string): readonly ReflectedElement[] | undefined;
}
/** An element of a type as typeElements gives it: its name (`value` for `value[x]`), its FHIR types, whether it repeats. */
export interface ReflectedElement {
  name: string;
  types: readonly string[];
  many: boolean;
}
export interface InvariantContext {
  resource: unknown;
  rootResource: unknown;
  /**
   * Where evaluations that share it keep what does not change between them: the collections that
   * `%resource`, `%rootResource` and `%context` paths reach (ref-1's `%rootResource.contained.id`, met
   * once per Reference), each with the value it was computed from. One per validation walk: it must
   * not outlive a change of the resources evaluated.
   */
  memo?: Map<object, unknown>;
  /**
   * How many more values a client-written expression (a FHIRPath Patch path's `where()`, a profile's
   * invariant) may visit, shared by the evaluations of one path or one profile check: each navigation
   * and function result counts its items, and going past it is a run-time error (the expression cannot
   * be evaluated), as a regex that backtracks is. `what` names who is held to it in the error's words.
   */
  budget?: { left: number; readonly limit: number; readonly what?: string };
  /** The time `now()`, `today()` and `timeOfDay()` read, once per evaluation (N1: the same throughout it); the system's when absent. */
  clock?: Clock;
}
/**
 * An invariant run on a focus: true when it holds, false when it does not; undefined when it does not because its
 * expression gives nothing (compileInvariant's `emptyFails`), which a report tells apart (emptyResultNote).
 */
export type CompiledInvariant = (focus: unknown, focusType: string | undefined, ctx: InvariantContext) => boolean | undefined;

/**
 * What a report of an invariant adds when its expression gave nothing (CompiledInvariant's undefined): the
 * values it compares cannot be ordered, which its human text does not say.
 */
export const EMPTY_RESULT_NOTE = 'its expression gives no result here, which fails: values FHIRPath cannot compare, such as times of different precisions or quantities whose units cannot be converted, or an element it needs is absent';

type Json = Record<string, unknown>;
type Coll = readonly unknown[];
type Category = 'boolean' | 'number' | 'string' | 'datetime' | 'time' | 'quantity' | 'object';

const EMPTY: Coll = [];
const TRUE: Coll = [true];
const FALSE: Coll = [false];
const UCUM = 'http://unitsofmeasure.org';

/**
 * A value with the FHIR (or `System.`) type its position does not tell, and a primitive's `_name` sibling; `text`, a
 * Decimal's (or a quantity literal's number's) text as written where String() would not give it back (`1.0`, `1.50`):
 * the precision N1's toString() keeps (a literal's, a FHIR decimal's as its JSON wrote it, `toDecimal()` of a string).
 */
class Typed {
  constructor(readonly type: string, readonly value: unknown, readonly ext: Json | undefined, readonly text?: string) {}
}

/** A Decimal `value` written `text`: the number, or a Typed keeping the text where numberText would not give it back. */
function decimalItem(type: string, value: number, text: string): unknown {
  return numberText(value) === text ? value : new Typed(type, value, undefined, text);
}

/** The text of a number item: as written where it was kept (Typed.text), else as N1 writes a number. */
function numberTextOf(item: unknown, value: number): string {
  return item instanceof Typed && item.text !== undefined ? item.text : numberText(value);
}

/** A run-time error of an evaluation (FHIRPath's "error"): an invariant fails on it (compileInvariant), a client's expression is a 4xx. */
class EvaluationError extends Error {}

/**
 * A client-written expression that visits more values than its budget allows, or whose regular
 * expression backtracks without end (src/regex-guard.ts): it cannot be evaluated. A guarded invariant
 * (compileInvariant's `guarded`) throws it rather than holding.
 */
export class FhirPathTooCostly extends EvaluationError {}

function isObject(v: unknown): v is Json {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function valueOf(item: unknown): unknown {
  return item instanceof Typed ? item.value : item;
}

// ---------------------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------------------

const CATEGORIES = new Map<string, Category>();
/**
 * FHIRPath's Integer: "whole numbers in the range -2^31 to 2^31-1" (N1 § 2.1.x System types); an Integer
 * result outside it is an overflow, which gives nothing ("Operations that cause arithmetic overflow or
 * underflow will result in empty", § 6.6).
 */
const INT_MIN = -(2 ** 31);
const INT_MAX = 2 ** 31 - 1;
const isInt32 = (n: number) => Number.isInteger(n) && n >= INT_MIN && n <= INT_MAX;
/** An Integer result as a collection: itself, or nothing past the 32-bit range. */
const int32Result = (n: number): Coll => (isInt32(n) ? [n] : EMPTY);
for (const t of ['boolean', 'System.Boolean']) CATEGORIES.set(t, 'boolean');
for (const t of ['integer', 'positiveInt', 'unsignedInt', 'decimal', 'integer64', 'System.Integer', 'System.Decimal']) CATEGORIES.set(t, 'number');
for (const t of ['string', 'code', 'id', 'markdown', 'uri', 'url', 'canonical', 'oid', 'uuid', 'base64Binary', 'xhtml', 'System.String']) {
  CATEGORIES.set(t, 'string');
}
for (const t of ['date', 'dateTime', 'instant', 'System.Date', 'System.DateTime']) CATEGORIES.set(t, 'datetime');
for (const t of ['time', 'System.Time']) CATEGORIES.set(t, 'time');
for (const t of ['Quantity', 'Age', 'Count', 'Distance', 'Duration', 'MoneyQuantity', 'SimpleQuantity', 'System.Quantity']) {
  CATEGORIES.set(t, 'quantity');
}

const FHIR_PRIMITIVES = [
  'base64Binary', 'boolean', 'canonical', 'code', 'date', 'dateTime', 'decimal', 'id', 'instant', 'integer', 'markdown', 'oid',
  'positiveInt', 'string', 'time', 'unsignedInt', 'uri', 'url', 'uuid', 'xhtml',
];
const PRIMITIVES = new Set(FHIR_PRIMITIVES);
const COMPLEX_TYPES = new Set([
  'Address', 'Age', 'Annotation', 'Attachment', 'BackboneElement', 'CodeableConcept', 'Coding', 'ContactDetail', 'ContactPoint',
  'Contributor', 'Count', 'DataRequirement', 'Distance', 'Dosage', 'Duration', 'Element', 'ElementDefinition', 'Expression',
  'Extension', 'HumanName', 'Identifier', 'MarketingStatus', 'Meta', 'Money', 'MoneyQuantity', 'Narrative', 'ParameterDefinition',
  'Period', 'Population', 'ProdCharacteristic', 'ProductShelfLife', 'Quantity', 'Range', 'Ratio', 'Reference', 'RelatedArtifact',
  'SampledData', 'Signature', 'SimpleQuantity', 'SubstanceAmount', 'Timing', 'TriggerDefinition', 'UsageContext',
]);
const BACKBONE_TYPES = new Set(['Dosage', 'ElementDefinition', 'MarketingStatus', 'Population', 'ProdCharacteristic', 'ProductShelfLife', 'SubstanceAmount', 'Timing']);
/** The R4 base types that are not Element, DomainResource or BackboneElement. */
const PARENTS = new Map<string, string>([
  ['Age', 'Quantity'], ['Count', 'Quantity'], ['Distance', 'Quantity'], ['Duration', 'Quantity'], ['MoneyQuantity', 'Quantity'],
  ['SimpleQuantity', 'Quantity'], ['canonical', 'uri'], ['url', 'uri'], ['oid', 'uri'], ['uuid', 'uri'], ['code', 'string'], ['id', 'string'],
  ['markdown', 'string'], ['positiveInt', 'integer'], ['unsignedInt', 'integer'], ['Bundle', 'Resource'], ['Binary', 'Resource'],
  ['Parameters', 'Resource'], ['DomainResource', 'Resource'], ['BackboneElement', 'Element'],
]);
/** `valueQuantity` -> `Quantity`, `valueDateTime` -> `dateTime`: the suffixes of choice elements. */
const CHOICE_SUFFIXES = new Map<string, string>();
for (const t of [...FHIR_PRIMITIVES, ...COMPLEX_TYPES]) CHOICE_SUFFIXES.set(t[0]!.toUpperCase() + t.slice(1), t);

function parentOf(type: string): string | undefined {
  const p = PARENTS.get(type);
  if (p !== undefined) return p;
  if (type === 'Element' || type === 'Resource') return undefined;
  if (type.includes('.') || BACKBONE_TYPES.has(type)) return 'BackboneElement';
  if (PRIMITIVES.has(type) || COMPLEX_TYPES.has(type)) return 'Element';
  return 'DomainResource';
}

/** The type names FhirPathTypes gives, with FHIRPath's System types shortened (`System.String`). */
function normaliseType(type: string | undefined): string | undefined {
  if (type === undefined) return undefined;
  return type.startsWith('http://hl7.org/fhirpath/') ? type.slice('http://hl7.org/fhirpath/'.length) : type;
}

/** A static type that says nothing about its items: resources carry their own. */
function staticType(type: string | undefined): string | undefined {
  return type === 'Resource' || type === 'DomainResource' ? undefined : type;
}

function isPrimitiveType(type: string | undefined): boolean {
  return type !== undefined && (PRIMITIVES.has(type) || type.startsWith('System.'));
}

/** The type of `item` in a collection whose items are statically of type `type` (undefined: ask the item). */
function typeOfItem(item: unknown, type: string | undefined): string | undefined {
  if (item instanceof Typed) return item.type;
  if (type !== undefined) return type;
  switch (typeof item) {
    case 'string': return 'System.String';
    case 'boolean': return 'System.Boolean';
    case 'number': return Number.isInteger(item) ? 'System.Integer' : 'System.Decimal';
    case 'object': {
      const rt = (item as Json | null)?.resourceType;
      return typeof rt === 'string' ? rt : undefined;
    }
    default: return undefined;
  }
}

function categoryOf(item: unknown, type: string | undefined): Category {
  const t = typeOfItem(item, type);
  const c = t === undefined ? undefined : CATEGORIES.get(t);
  if (c !== undefined) return c;
  const v = valueOf(item);
  switch (typeof v) {
    case 'string': return 'string';
    case 'number': return 'number';
    case 'boolean': return 'boolean';
    default: return 'object';
  }
}

interface TypeTest {
  name: string;
  fhir: boolean;
  /** `System.<name>`, when System types match. */
  system: string | undefined;
  /** For an unqualified System name (`Boolean`): the FHIR primitive it also matches (`boolean`), as HL7's validator does. */
  lenient: string | undefined;
}

const SYSTEM_ONLY = new Map([['Boolean', 'boolean'], ['String', 'string'], ['Integer', 'integer'], ['Decimal', 'decimal'], ['Date', 'date'], ['DateTime', 'dateTime'], ['Time', 'time']]);

/** FHIRPath's System types (N1 § 4, § 10), by name. */
const SYSTEM_TYPES = new Set(['Any', 'Boolean', 'String', 'Integer', 'Decimal', 'Date', 'DateTime', 'Time', 'Quantity', 'SimpleTypeInfo', 'ClassInfo', 'ClassInfoElement', 'ListTypeInfo', 'TupleTypeInfo']);
/** R4's abstract types, which no value has but which values are of (`is Resource`, `ofType(Element)`). */
const ABSTRACT_TYPES = new Set(['Element', 'BackboneElement', 'Resource', 'DomainResource']);

/**
 * The type test of a type specifier the expression names (`is`, `as`, `ofType()`), refusing one that names no type
 * (`as(string1)`, `ofType(Quantty)`): FHIRPath makes that an error, not an empty result that would make an invariant
 * hold, or fail, whatever the resource. Names without a namespace or in FHIR's are checked where the model lists its
 * types (typeElements).
 */
function namedTypeTest(t: TypeName, scope: Scope, at: number): TypeTest {
  const elements = scope.types.typeElements;
  // A System name that is none of its types tests false (HL7's suite: `Patient.is(System.Patient)` is false).
  if (elements !== undefined && t.namespace !== 'System') {
    const fhir = PRIMITIVES.has(t.name) || ABSTRACT_TYPES.has(t.name) || (!t.name.includes('.') && elements(t.name) !== undefined);
    const system = t.namespace !== 'FHIR' && SYSTEM_TYPES.has(t.name);
    if (!fhir && !system) throw new UnsupportedFhirPath(scope.expression, at, `unknown type ${t.namespace === undefined ? '' : `${t.namespace}.`}${t.name}`);
  }
  return typeTest(t);
}

function typeTest(t: TypeName): TypeTest {
  if (t.namespace === 'System') return { name: t.name, fhir: false, system: `System.${t.name}`, lenient: undefined };
  if (t.namespace === 'FHIR') return { name: t.name, fhir: true, system: undefined, lenient: undefined };
  return { name: t.name, fhir: !SYSTEM_ONLY.has(t.name), system: `System.${t.name}`, lenient: SYSTEM_ONLY.get(t.name) };
}

/** § 6.3 `is`: the type or one of its bases. */
function typeMatches(actual: string | undefined, test: TypeTest): boolean {
  if (actual === undefined) return false;
  if (actual.startsWith('System.')) return actual === test.system;
  if (actual === test.lenient) return true;
  if (!test.fhir) return false;
  for (let t: string | undefined = actual; t !== undefined; t = parentOf(t)) if (t === test.name) return true;
  return false;
}

/** The static type of a collection filtered by `ofType`/`as`. */
function testedType(test: TypeTest): string | undefined {
  if (test.lenient !== undefined) return undefined;
  return staticType(test.fhir ? test.name : test.system);
}

// ---------------------------------------------------------------------------------------------------
// Reflection (N1 § 10, STU): type()
// ---------------------------------------------------------------------------------------------------

/** The members of the TypeInfo values type() gives, by their System types (a TypeSpecifier as its text, `FHIR.Element`). */
const REFLECTION_TYPES = new Map<string, ReadonlyMap<string, string>>([
  ['System.SimpleTypeInfo', new Map([['namespace', 'System.String'], ['name', 'System.String'], ['baseType', 'System.String']])],
  ['System.ClassInfo', new Map([['namespace', 'System.String'], ['name', 'System.String'], ['baseType', 'System.String'], ['element', 'System.ClassInfoElement']])],
  ['System.ClassInfoElement', new Map([['name', 'System.String'], ['type', 'System.String'], ['isOneBased', 'System.Boolean']])],
]);

/** A FHIR type as a TypeSpecifier: `FHIR.HumanName`; a backbone element (`Patient.contact`) by the type it is, `FHIR.BackboneElement`. */
const typeSpecifier = (t: string) => `FHIR.${t.includes('.') ? 'BackboneElement' : t}`;

/** The ClassInfoElements of each type, by the typeElements function that gave them. */
const classElementCache = new WeakMap<NonNullable<FhirPathTypes['typeElements']>, Map<string, readonly Json[]>>();

/**
 * N1 § 10: the ClassInfoElements of type `t` (named `name` in its ClassInfo), the elements it defines beyond its base's
 * (CodeableConcept: coding and text, not Element's id and extension; a backbone element, those its definition adds to
 * BackboneElement's). Each has the element's name, its TypeSpecifier (`FHIR.string`; a repeating one `List<FHIR.Coding>`;
 * a choice `Choice<FHIR.boolean, FHIR.dateTime>`, as CQL's model info writes one) and `isOneBased` false (FHIR's lists
 * are indexed from 0).
 */
function classElements(types: FhirPathTypes, t: string, name: string): readonly Json[] {
  const read = types.typeElements;
  if (read === undefined) return [];
  let byType = classElementCache.get(read);
  if (byType === undefined) classElementCache.set(read, (byType = new Map()));
  const known = byType.get(t);
  if (known !== undefined) return known;
  const base = t.includes('.') ? 'BackboneElement' : parentOf(name);
  const inherited = new Set((base === undefined ? undefined : read(base))?.map((e) => e.name));
  const out: Json[] = [];
  for (const e of read(t) ?? []) {
    if (inherited.has(e.name)) continue;
    const one = e.types.length === 1 ? typeSpecifier(e.types[0]!) : `Choice<${e.types.map(typeSpecifier).join(', ')}>`;
    out.push({ name: e.name, type: e.many ? `List<${one}>` : one, isOneBased: false });
  }
  byType.set(t, out);
  return out;
}

/**
 * N1 type() of one item: a SimpleTypeInfo for a primitive (a System type, `baseType` System.Any; a FHIR primitive, in
 * namespace FHIR with its FHIR base, `FHIR.Element` or `FHIR.string` for a code), a ClassInfo for a FHIR data type or
 * resource (its base: `FHIR.Element`, `FHIR.DomainResource`...; a backbone element is a `BackboneElement`); undefined
 * where the item's type is not known (a value of an element the model does not define), which N1 gives as nothing.
 */
function typeInfoOf(item: unknown, type: string | undefined, types: FhirPathTypes): Typed | undefined {
  const t = typeOfItem(item, type);
  if (t === undefined || REFLECTION_TYPES.has(t)) return undefined;
  if (t.startsWith('System.')) return new Typed('System.SimpleTypeInfo', { namespace: 'System', name: t.slice('System.'.length), baseType: 'System.Any' }, undefined);
  const name = t.includes('.') ? 'BackboneElement' : t;
  const base = parentOf(name);
  const info = { namespace: 'FHIR', name, ...(base !== undefined && { baseType: `FHIR.${base}` }) };
  if (PRIMITIVES.has(name)) return new Typed('System.SimpleTypeInfo', info, undefined);
  return new Typed('System.ClassInfo', { ...info, element: classElements(types, t, name) }, undefined);
}

// ---------------------------------------------------------------------------------------------------
// Navigation
// ---------------------------------------------------------------------------------------------------

/** One JSON property a name reaches: `birthDate` (+ `_birthDate`), `valueQuantity`. */
interface Child {
  key: string;
  /** `_key`, for primitives (which may have an `id` and extensions there). */
  extKey: string | undefined;
  type: string | undefined;
  /** Carry values as Typed (the collection has no static type). */
  wrap: boolean;
}

/** What `name` reaches from a value of a given type: one property, or the typed properties of a choice element. */
interface Lookup {
  single?: Child;
  /** A choice element's typed properties (tried when `single` finds nothing), by key too. */
  choices?: Child[];
  byKey?: Map<string, Child>;
}

function child(key: string, type: string | undefined, dynamic: boolean): Child {
  const t = normaliseType(type);
  const primitive = t === undefined || isPrimitiveType(t);
  return { key, extKey: primitive ? `_${key}` : undefined, type: t, wrap: dynamic && staticType(t) !== undefined };
}

/** The choices by their JSON keys, `valueString` and `_valueString`. */
function byKey(choices: Child[]): Map<string, Child> {
  const map = new Map<string, Child>();
  for (const c of choices) {
    map.set(c.key, c);
    if (c.extKey !== undefined) map.set(c.extKey, c);
  }
  return map;
}

/** Resolves `name` on values of type `owner` (undefined owner: by the JSON alone, choice elements by their suffixes). */
function lookup(types: FhirPathTypes, owner: string | undefined, name: string, dynamic: boolean): Lookup {
  const reflected = owner === undefined ? undefined : REFLECTION_TYPES.get(owner);
  if (reflected !== undefined) {
    // type()'s TypeInfo (N1 § 10 Reflection): its members by their System types.
    const t = reflected.get(name);
    return { single: { key: name, extKey: undefined, type: t, wrap: dynamic && t !== undefined } };
  }
  if (owner !== undefined && isPrimitiveType(owner)) {
    // A primitive's `_name` sibling holds its id and extensions.
    const t = name === 'extension' ? 'Extension' : name === 'id' ? 'string' : undefined;
    return { single: { key: name, extKey: undefined, type: t, wrap: dynamic && t !== undefined } };
  }
  if (owner !== undefined) {
    const direct = types.elementType(owner, name);
    if (direct !== undefined) return { single: child(name, direct, dynamic) };
    const choices: Child[] = [];
    for (const suffix of CHOICE_SUFFIXES.keys()) {
      const t = types.elementType(owner, name + suffix);
      if (t !== undefined) choices.push({ ...child(name + suffix, t, true), wrap: staticType(normaliseType(t)) !== undefined });
    }
    if (choices.length > 0) return { choices, byKey: byKey(choices) };
  }
  // Unknown to the model: the property itself, or any `name<Type>` by its suffix.
  const choices: Child[] = [...CHOICE_SUFFIXES].map(([suffix, t]) => child(name + suffix, t, true));
  return { single: { key: name, extKey: undefined, type: undefined, wrap: false }, choices, byKey: byKey(choices) };
}

function pushValue(out: unknown[], v: unknown, c: Child): void {
  if (c.wrap && !(v instanceof Typed) && !(isObject(v) && typeof v.resourceType === 'string')) out.push(new Typed(c.type!, v, undefined));
  else out.push(v);
}

/**
 * A number of `holder` (at `key`) whose JSON wrote it otherwise than String() writes it (`1.50`, src/fhir/exact-json.ts):
 * as a Typed keeping that text (toString() gives it), of type `type` (the element's, else a Decimal). Undefined otherwise.
 */
function writtenNumber(holder: object, key: string | number, v: number, type: string | undefined, ext?: Json): Typed | undefined {
  const text = literalOf(holder, key);
  // An exponent (`1e-7`) is no text of N1's (its toString() writes none): the number is written as numberText writes it.
  return text === undefined || /[eE]/.test(text) ? undefined : new Typed(type ?? 'System.Decimal', v, ext, text);
}

/** Appends the values of property `c` of `obj` to `out`, pairing primitives with their `_key` siblings. */
function collect(obj: Json, c: Child, out: unknown[]): void {
  const v = obj[c.key];
  const e = c.extKey === undefined ? undefined : obj[c.extKey];
  if (e === undefined || e === null) {
    if (v === undefined || v === null) return;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const x = v[i];
        if (x !== null && x !== undefined) pushValue(out, (typeof x === 'number' && writtenNumber(v, i, x, c.type)) || x, c);
      }
    } else pushValue(out, (typeof v === 'number' && writtenNumber(obj, c.key, v, c.type)) || v, c);
    return;
  }
  const type = c.type ?? 'string';
  if (Array.isArray(v) || Array.isArray(e)) {
    const vs = Array.isArray(v) ? v : v === undefined || v === null ? [] : [v];
    const es = Array.isArray(e) ? e : [e];
    const n = Math.max(vs.length, es.length);
    for (let i = 0; i < n; i++) {
      const x = vs[i] ?? undefined;
      const y = es[i] ?? undefined;
      const ext = isObject(y) ? y : undefined;
      if (x !== undefined || y !== undefined) out.push((typeof x === 'number' && Array.isArray(v) && writtenNumber(v, i, x, type, ext)) || new Typed(type, x, ext));
    }
  } else {
    const ext = isObject(e) ? e : undefined;
    out.push((typeof v === 'number' && writtenNumber(obj, c.key, v, type, ext)) || new Typed(type, v ?? undefined, ext));
  }
}

/** How many values `collect` would append. */
function countOf(obj: Json, c: Child): number {
  const v = obj[c.key];
  const e = c.extKey === undefined ? undefined : obj[c.extKey];
  if (e === undefined || e === null) {
    if (v === undefined || v === null) return 0;
    if (!Array.isArray(v)) return 1;
    let n = 0;
    for (const x of v) if (x !== null && x !== undefined) n++;
    return n;
  }
  if (!Array.isArray(v) && !Array.isArray(e)) return 1;
  const vs = Array.isArray(v) ? v : [v];
  const es = Array.isArray(e) ? e : [e];
  let n = 0;
  for (let i = 0; i < Math.max(vs.length, es.length); i++) if ((vs[i] ?? es[i] ?? null) !== null) n++;
  return n;
}

/** The JSON object whose properties a navigation reads: the value, or a primitive's `_name` sibling. */
function objectOf(item: unknown): Json | undefined {
  if (item instanceof Typed) return isObject(item.value) ? item.value : item.ext;
  return isObject(item) ? item : undefined;
}

function collectLookup(obj: Json, l: Lookup, out: unknown[]): void {
  if (l.single !== undefined) {
    const before = out.length;
    collect(obj, l.single, out);
    if (l.choices === undefined || out.length > before) return;
  }
  if (l.choices!.length <= 4) {
    for (const c of l.choices!) collect(obj, c, out);
    return;
  }
  for (const key in obj) {
    const c = l.byKey!.get(key);
    // `_valueString` alone: a primitive with extensions but no value.
    if (c !== undefined && (c.key === key || obj[c.key] === undefined)) collect(obj, c, out);
  }
}

function countLookup(obj: Json, l: Lookup): number {
  if (l.single !== undefined) {
    const n = countOf(obj, l.single);
    if (l.choices === undefined || n > 0) return n;
  }
  let n = 0;
  if (l.choices!.length <= 4) {
    for (const c of l.choices!) n += countOf(obj, c);
    return n;
  }
  for (const key in obj) {
    const c = l.byKey!.get(key);
    if (c !== undefined && (c.key === key || obj[c.key] === undefined)) n += countOf(obj, c);
  }
  return n;
}

/**
 * Appends the values of property `c` of `obj` that a navigation can read (objectOf: objects, and primitives with a
 * `_key` sibling) to `out`, in `collect`'s order, without wrapping the others; how many values `collect` would append.
 */
function collectNavigable(obj: Json, c: Child, out: unknown[]): number {
  const e = c.extKey === undefined ? undefined : obj[c.extKey];
  if (e === undefined || e === null) {
    const v = obj[c.key];
    if (v === undefined || v === null) return 0;
    if (!Array.isArray(v)) {
      if (isObject(v)) pushValue(out, v, c);
      return 1;
    }
    let n = 0;
    for (const x of v) {
      if (x === null || x === undefined) continue;
      n++;
      if (isObject(x)) pushValue(out, x, c);
    }
    return n;
  }
  // A primitive with a `_key` sibling: rare enough to collect whole and keep what has properties.
  const from = out.length;
  collect(obj, c, out);
  const n = out.length - from;
  let to = from;
  for (let i = from; i < out.length; i++) if (objectOf(out[i]) !== undefined) out[to++] = out[i];
  out.length = to;
  return n;
}

/**
 * `children()`: every property of every item, typed from the item's type, into `out` (null: only counted); the
 * count. With `navigable`, only the children a navigation can read go into `out` (collectNavigable), all counted.
 */
function childrenOf(types: FhirPathTypes, memo: Map<string, Map<string, Child>>, items: Coll, type: string | undefined, out: unknown[] | null, navigable = false): number {
  let n = 0;
  for (const item of items) {
    const obj = objectOf(item);
    if (obj === undefined) continue;
    const owner = typeOfItem(item, type);
    let known = owner === undefined ? undefined : memo.get(owner);
    if (known === undefined && owner !== undefined) memo.set(owner, (known = new Map()));
    for (const key in obj) {
      if (key === 'resourceType') continue;
      let name = key;
      if (key.charCodeAt(0) === 95 /* _ */) {
        name = key.slice(1);
        if (obj[name] !== undefined) continue;
      }
      let c = known?.get(name);
      if (c === undefined) {
        const t = owner === undefined ? undefined : types.elementType(owner, name);
        c = child(name, t, true);
        if (t === undefined) c = { ...c, extKey: undefined, wrap: false };
        known?.set(name, c);
      }
      if (out === null) n += countOf(obj, c);
      else if (navigable) n += collectNavigable(obj, c, out);
      else collect(obj, c, out);
    }
  }
  return out === null || navigable ? n : out.length;
}

// ---------------------------------------------------------------------------------------------------
// Values: dates, times, quantities, equality
// ---------------------------------------------------------------------------------------------------

interface DateParts {
  y: number; mo: number; d: number; h: number; mi: number; s: number; ms: number;
  /** Offset in minutes, NaN when absent (then UTC, the server's default time zone). */
  tz: number;
  /** 0 year .. 5 seconds (seconds and milliseconds are one precision, § 5.2.6). */
  precision: number;
  epoch: number;
}
const newParts = (): DateParts => ({ y: 0, mo: 1, d: 1, h: 0, mi: 0, s: 0, ms: 0, tz: NaN, precision: 0, epoch: 0 });
const DA = newParts();
const DB = newParts();

function digits(s: string, at: number, n: number): number {
  if (at + n > s.length) return -1;
  let v = 0;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(at + i) - 48;
    if (c < 0 || c > 9) return -1;
    v = v * 10 + c;
  }
  return v;
}

/** Parses hh(:mm(:ss(.fff)?)?)? at `at` into `out` (precision 3..5); returns the end or -1. */
function parseClock(s: string, at: number, out: DateParts): number {
  out.h = digits(s, at, 2);
  if (out.h < 0 || out.h > 23) return -1;
  out.precision = 3;
  at += 2;
  if (s[at] !== ':') return at;
  out.mi = digits(s, at + 1, 2);
  if (out.mi < 0 || out.mi > 59) return -1;
  out.precision = 4;
  at += 3;
  if (s[at] !== ':') return at;
  out.s = digits(s, at + 1, 2);
  if (out.s < 0 || out.s > 60) return -1;
  out.precision = 5;
  at += 3;
  if (s[at] === '.') {
    let frac = 0;
    let scale = 1;
    at++;
    const start = at;
    while (at < s.length && s.charCodeAt(at) >= 48 && s.charCodeAt(at) <= 57) {
      if (scale < 1000) {
        frac = frac * 10 + s.charCodeAt(at) - 48;
        scale *= 10;
      }
      at++;
    }
    if (at === start) return -1;
    out.ms = Math.round((frac * 1000) / scale);
  }
  return at;
}

/** Parses a date, dateTime or instant (FHIR or FHIRPath literal form) into `out`. */
function parseDateTime(s: string, out: DateParts): boolean {
  out.mo = 1; out.d = 1; out.h = 0; out.mi = 0; out.s = 0; out.ms = 0; out.tz = NaN; out.precision = 0;
  out.y = digits(s, 0, 4);
  if (out.y < 0) return false;
  let at = 4;
  if (s[at] === '-') {
    out.mo = digits(s, 5, 2);
    if (out.mo < 1 || out.mo > 12) return false;
    out.precision = 1;
    at = 7;
    if (s[at] === '-') {
      out.d = digits(s, 8, 2);
      if (out.d < 1 || out.d > 31) return false;
      out.precision = 2;
      at = 10;
      if (s[at] === 'T') {
        at = parseClock(s, 11, out);
        if (at < 0) return false;
        if (s[at] === 'Z') {
          out.tz = 0;
          at++;
        } else if (s[at] === '+' || s[at] === '-') {
          const hh = digits(s, at + 1, 2);
          const mm = digits(s, at + 4, 2);
          if (hh < 0 || mm < 0 || s[at + 3] !== ':') return false;
          out.tz = (s[at] === '-' ? -1 : 1) * (hh * 60 + mm);
          at += 6;
        }
      }
    }
  }
  if (at !== s.length) return false;
  out.epoch = Date.UTC(out.y, out.mo - 1, out.d, out.h, out.mi, Math.min(out.s, 59), out.ms) - (Number.isNaN(out.tz) ? 0 : out.tz * 60000);
  return true;
}

function parseTime(s: string, out: DateParts): boolean {
  out.mi = 0; out.s = 0; out.ms = 0;
  const at = parseClock(s, 0, out);
  if (at !== s.length) return false;
  out.precision -= 3;
  out.epoch = ((out.h * 60 + out.mi) * 60 + out.s) * 1000 + out.ms;
  return true;
}

/** The instant of `x` truncated to `precision` (time-zone normalised first). */
function epochAt(x: DateParts, precision: number, time: boolean): number {
  if (precision >= x.precision) return x.epoch;
  if (time) return ((x.h * 60 + (precision >= 1 ? x.mi : 0)) * 60) * 1000;
  if (Number.isNaN(x.tz)) {
    return Date.UTC(x.y, precision >= 1 ? x.mo - 1 : 0, precision >= 2 ? x.d : 1, precision >= 3 ? x.h : 0, precision >= 4 ? x.mi : 0);
  }
  const unit = precision === 4 ? 60000 : precision === 3 ? 3600000 : precision === 2 ? 86400000 : 0;
  if (unit > 0) return Math.floor(x.epoch / unit) * unit;
  const d = new Date(x.epoch);
  return Date.UTC(d.getUTCFullYear(), precision >= 1 ? d.getUTCMonth() : 0, 1);
}

/** § 6.1.x date/time comparison: undefined when the precisions differ and the common part is equal. */
function compareTemporal(a: string, b: string, time: boolean): number | undefined {
  const ok = time ? parseTime(a, DA) && parseTime(b, DB) : parseDateTime(a, DA) && parseDateTime(b, DB);
  if (!ok) throw new EvaluationError('not a date/time');
  const p = Math.min(DA.precision, DB.precision);
  const ta = epochAt(DA, p, time);
  const tb = epochAt(DB, p, time);
  if (DA.precision !== DB.precision && ta === tb) return undefined;
  return ta < tb ? -1 : ta > tb ? 1 : 0;
}

interface QuantityParts { value: number; unit: string; system: string | undefined }
const QA: QuantityParts = { value: 0, unit: '', system: undefined };
const QB: QuantityParts = { value: 0, unit: '', system: undefined };

/** A FHIR Quantity (without comparator) or a System.Quantity literal as value + unit; false when not comparable. */
function quantityParts(item: unknown, out: QuantityParts): boolean {
  const v = valueOf(item);
  if (!isObject(v) || typeof v.value !== 'number' || v.comparator !== undefined) return false;
  out.value = v.value;
  if (item instanceof Typed && item.type === 'System.Quantity') {
    out.unit = v.unit as string;
    out.system = CALENDAR_MS.has(out.unit) ? CALENDAR : UCUM;
    return true;
  }
  out.system = typeof v.system === 'string' ? v.system : undefined;
  // No unit at all (no code, no unit, no system): a plain number, which compares with another such one, as
  // HL7's validator compares two quantities without a unit by their values (rng-2 on a Range of 0.2 to 0.9).
  const unitless = v.code === undefined && v.unit === undefined && out.system === undefined;
  const unit = typeof v.code === 'string' ? v.code : out.system === undefined && typeof v.unit === 'string' ? v.unit : unitless ? '' : undefined;
  if (unit === undefined) return false;
  out.unit = unit;
  return true;
}

/**
 * Two UCUM units' conversions into their common canonical unit (src/fhir/ucum.ts: products, quotients,
 * exponents, annotations, `10*n`, Cel and [degF] by their offsets), or null when either has no canonical
 * form or they measure different things (mg/dL and mmol/L; a unit outside the table; a special unit inside
 * an expression).
 */
function commensurable(a: string, b: string): [CanonicalUnit, CanonicalUnit] | null {
  const ca = canonicalUnit(a);
  const cb = canonicalUnit(b);
  return ca === undefined || cb === undefined || ca.code !== cb.code ? null : [ca, cb];
}

/**
 * `x` in unit `a` against `y` in unit `b` (commensurable), -1, 0 or 1: for two temperatures (Cel, [degF], [degRe], K)
 * exactly, by UCUM's affine conversions on the values as decimals (`37.0000000000001 'Cel' > 310.15 'K'`, `100 '[degF]'
 * = 37.77777777777778 'Cel'` false), which a kelvin value of 15 digits gave the wrong way; other units by their
 * canonical values.
 */
function compareConverted(x: number, a: string, y: number, b: string, units: [CanonicalUnit, CanonicalUnit]): number {
  const exact = inKelvin(x, a, y, b);
  if (exact !== undefined) return compareRational(exact[0], exact[1]);
  const [cx, cy] = [units[0].convert(x), units[1].convert(y)];
  return cx < cy ? -1 : cx > cy ? 1 : 0;
}

/** Two temperatures' values in kelvin, exactly; undefined when either unit is no temperature or either value no decimal. */
function inKelvin(x: number, a: string, y: number, b: string): [Rational, Rational] | undefined {
  const ta = temperatureOf(a);
  const tb = ta === undefined ? undefined : temperatureOf(b);
  if (ta === undefined || tb === undefined) return undefined;
  const [rx, ry] = [numberRational(x), numberRational(y)];
  if (rx === undefined || ry === undefined) return undefined;
  return [kelvin(rx, ta), kelvin(ry, tb)];
}

const kelvin = (v: Rational, t: Temperature): Rational => addRational(multiplyRational(v, t.a), t.b);

/**
 * § 6.1.3 `~` on two temperatures, exactly: the more precise value converted into the other's unit and both rounded to
 * the less precise's places (`36.6 'Cel' ~ 97.88 '[degF]'` true, `100 '[degF]' ~ 37.8 'Cel'` true at 100's precision);
 * undefined when either unit is no temperature.
 */
function equivalentTemperatures(x: number, a: string, y: number, b: string): boolean | undefined {
  const ta = temperatureOf(a);
  const tb = ta === undefined ? undefined : temperatureOf(b);
  if (ta === undefined || tb === undefined) return undefined;
  const [rx, ry] = [numberRational(x), numberRational(y)];
  if (rx === undefined || ry === undefined) return undefined;
  const [pa, pb] = [decimalPlaces(x), decimalPlaces(y)];
  const [value, into, other, places] = pa <= pb ? [ry, ta, rx, pa] : [rx, tb, ry, pb];
  const from = pa <= pb ? tb : ta;
  const converted = divide(subtract(kelvin(value, from), into.b), into.a);
  return converted !== undefined && roundedUnits(converted, places) === roundedUnits(other, places);
}

/** The system of a calendar duration's unit (N1, Time-valued Quantities: `1 year`, `4 days`, held as `'year'`, `'day'`). */
const CALENDAR = 'calendar';

/**
 * Puts `q` (a calendar second or millisecond, which N1 makes equal to its UCUM unit) under UCUM, so it compares with
 * definite durations; a calendar duration above seconds stays as it is (N1 makes it unequal to a definite duration and
 * unordered against one: `1 year = 1 'a'` is false, `1 day > 1 'h'` empty).
 */
function definite(q: QuantityParts): void {
  if (q.system === CALENDAR && isDefiniteCalendar(q.unit)) {
    q.unit = CALENDAR_UCUM.get(q.unit)!;
    q.system = UCUM;
  }
}

/**
 * For ordering only: a calendar week, day, hour or minute under its UCUM unit too (`2 'd' < 3 days` true), as HL7's
 * FHIRPath.js and the later FHIRPath releases order them; these have one length, so the order is never in doubt
 * (N1 relates them to UCUM by `~` alone, and a profile's `value < 3 days` on a FHIR Duration, always in UCUM, would
 * otherwise give nothing and fail). A year and a month, whose lengths vary, stay unordered against UCUM (`1 year > 1
 * 'a'` empty, as N1 says); `=` keeps N1's answers (equalQuantities).
 */
function orderable(q: QuantityParts): void {
  if (q.system === CALENDAR && !isCalendarMonths(q.unit)) {
    q.unit = CALENDAR_UCUM.get(q.unit)!;
    q.system = UCUM;
  }
}

/**
 * Quantities compare when their units are the same (none on either: unitless), or UCUM units of one dimension, or
 * two calendar durations, or a calendar second or millisecond and a UCUM time, and when `ordering` (`<`, `>`, ...) a
 * calendar week to minute and a UCUM time too (orderable); otherwise empty (a calendar year or month and any UCUM
 * unit, as N1 says of `1 year > 1 'a'`).
 */
function compareQuantities(a: unknown, b: unknown, ordering = false): number | undefined {
  if (!quantityParts(a, QA) || !quantityParts(b, QB)) return undefined;
  let x = QA.value;
  let y = QB.value;
  if (QA.unit !== QB.unit || QA.system !== QB.system) {
    if (QA.system === CALENDAR && QB.system === CALENDAR) {
      const [fa, fb] = calendarFactors(QA.unit, QB.unit);
      x *= fa;
      y *= fb;
    } else {
      // `=` by N1 (a second or millisecond alone is a UCUM time); `<` and the like as orderable says.
      const asUcum = ordering ? orderable : definite;
      asUcum(QA);
      asUcum(QB);
      if (QA.system !== UCUM || QB.system !== UCUM) return undefined;
      const units = commensurable(QA.unit, QB.unit);
      if (units === null) return undefined;
      return compareConverted(x, QA.unit, y, QB.unit, units);
    }
  }
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * Two FHIR Quantities whose codes cannot order them because a side has no code (two codes that cannot
 * be ordered, g and mL, stay unordered whatever their texts say):
 * - of the same `unit` text, ordered by their values, as HL7's validator orders quantities (`<=` and
 *   the like compare the values when the `unit` texts are the same): rng-2 on 1 mg (UCUM) to 5 "mg";
 * - of differing texts, where the side without a code (and without a system) gives as its text a UCUM
 *   unit: taken as that unit, the same as the other side's UCUM code (1 "mg/dL" to 5 mg/dL, coded and
 *   written "milligram per deciliter"), or one Cinder converts to it (1 mg to 2 "g"). A text that is no
 *   UCUM unit ("milligram", "tablets" against "tablet") orders nothing: FHIRPath leaves them empty.
 */
function compareByUnitText(a: unknown, b: unknown): number | undefined {
  if ((a instanceof Typed && a.type === 'System.Quantity') || (b instanceof Typed && b.type === 'System.Quantity')) return undefined;
  const x = valueOf(a);
  const y = valueOf(b);
  if (!isObject(x) || !isObject(y) || x.comparator !== undefined || y.comparator !== undefined) return undefined;
  if (typeof x.value !== 'number' || typeof y.value !== 'number') return undefined;
  if (x.code !== undefined && y.code !== undefined) return undefined;
  let xv = x.value;
  let yv = y.value;
  if (typeof x.unit !== 'string' || x.unit !== y.unit) {
    const ux = ucumUnitOf(x);
    const uy = ucumUnitOf(y);
    if (ux === undefined || uy === undefined) return undefined;
    if (ux !== uy) {
      const units = commensurable(ux, uy);
      if (units === null) return undefined;
      return compareConverted(xv, ux, yv, uy, units);
    }
  }
  return xv < yv ? -1 : xv > yv ? 1 : 0;
}

/** The UCUM unit a FHIR Quantity names: its code in UCUM, or, without a code and a system, its `unit` text. */
function ucumUnitOf(q: Json): string | undefined {
  if (q.code !== undefined) return q.system === UCUM && typeof q.code === 'string' ? q.code : undefined;
  return q.system === undefined && typeof q.unit === 'string' ? q.unit : undefined;
}

/** `<` and friends on two single items: a negative, zero or positive number, or undefined (empty). */
function compareItems(a: unknown, at: string | undefined, b: unknown, bt: string | undefined): number | undefined {
  const ca = categoryOf(a, at);
  const cb = categoryOf(b, bt);
  const x = valueOf(a);
  const y = valueOf(b);
  if (x === undefined || x === null || y === undefined || y === null) return undefined;
  if (ca === cb) {
    switch (ca) {
      case 'number':
      case 'string':
        return (x as number) < (y as number) ? -1 : (x as number) > (y as number) ? 1 : 0;
      case 'datetime':
      case 'time':
        // A date element whose JSON holds no text (`"end": 5`, refused by the structure check too) is no date to order.
        if (typeof x !== 'string' || typeof y !== 'string') throw new EvaluationError(`cannot compare ${typeof x} with ${typeof y} as dates or times`);
        return compareTemporal(x, y, ca === 'time');
      case 'quantity':
        return compareQuantities(a, b, true) ?? compareByUnitText(a, b);
      default:
    }
  }
  throw new EvaluationError(`cannot compare ${ca} with ${cb}`);
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (!isObject(a) && !Array.isArray(a)) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!deepEqual(a[i], b[i])) return false;
    return true;
  }
  if (!isObject(b)) return false;
  let n = 0;
  for (const k in a) {
    if (a[k] === undefined) continue;
    n++;
    if (!deepEqual(a[k], b[k])) return false;
  }
  for (const k in b) if (b[k] !== undefined) n--;
  return n === 0;
}

/** § 6.1.1 `=` on two items: true, false, or undefined (dates of different precision). */
function equalItems(a: unknown, at: string | undefined, b: unknown, bt: string | undefined): boolean | undefined {
  const x = valueOf(a);
  const y = valueOf(b);
  const ca = categoryOf(a, at);
  const cb = categoryOf(b, bt);
  if (ca !== cb) return false;
  switch (ca) {
    case 'datetime':
    case 'time': {
      if (typeof x !== 'string' || typeof y !== 'string') return x === y;
      const c = compareTemporal(x, y, ca === 'time');
      return c === undefined ? undefined : c === 0;
    }
    case 'quantity': {
      const c = compareQuantities(a, b);
      if (c !== undefined) return c === 0;
      const unequal = unequalUnits(a, b);
      return unequal === null ? deepEqual(x, y) : unequal;
    }
    case 'object':
      return deepEqual(x, y);
    default:
      return x === y;
  }
}

/**
 * N1 Quantity Equality where compareQuantities found no answer: false for a calendar duration above seconds and a UCUM
 * time (`1 year = 1 'a'`, `1 day = 1 'd'`: "considered unequal"); empty for units of two dimensions or a UCUM unit
 * that cannot be read ("invalid units": `1 'g' = 1 'mL'`, `1 year = 1 'g'`); null where the quantities are of
 * another system or carry a comparator (their JSON decides).
 */
function unequalUnits(a: unknown, b: unknown): false | undefined | null {
  if (!quantityParts(a, QA) || !quantityParts(b, QB)) return null;
  definite(QA);
  definite(QB);
  const [calendar, other] = QA.system === CALENDAR ? [QA, QB] : [QB, QA];
  if (calendar.system === CALENDAR) {
    if (other.system === CALENDAR) return null;
    if (other.system !== UCUM) return null;
    return canonicalUnit(other.unit)?.code === 's' ? false : undefined;
  }
  if (QA.system !== UCUM || QB.system !== UCUM) return null;
  return undefined;
}

/** § 6.1.3 `~` on two items. */
function equivalentItems(a: unknown, at: string | undefined, b: unknown, bt: string | undefined): boolean {
  const x = valueOf(a);
  const y = valueOf(b);
  const ca = categoryOf(a, at);
  if (ca !== categoryOf(b, bt)) return false;
  // Values whose JSON is not of their type's kind (a date element holding 5) are equivalent only when the same.
  const kind = ca === 'number' ? 'number' : ca === 'string' || ca === 'datetime' || ca === 'time' ? 'string' : undefined;
  if (kind !== undefined && (typeof x !== kind || typeof y !== kind)) return x === y;
  if (ca === 'string') return normaliseText(x as string) === normaliseText(y as string);
  if (ca === 'number') return equivalentNumbers(x as number, y as number);
  if (ca === 'datetime' || ca === 'time') {
    const c = compareTemporal(x as string, y as string, ca === 'time');
    return c === 0 && DA.precision === DB.precision;
  }
  if (ca === 'quantity') {
    const q = equivalentQuantities(a, b);
    if (q !== undefined) return q;
  }
  return equalItems(a, at, b, bt) === true;
}

/**
 * § 6.1.3 `~` on two quantities: their values equivalent as decimals are (rounded to the precision of the less
 * precise), the other converted into its unit where the units differ (`1.5 'g' ~ 1.54 'g'`, `1 'g' ~ 1000.4 'mg'`);
 * false where the units cannot be converted; undefined where either is no quantity these compare (equality decides).
 */
function equivalentQuantities(a: unknown, b: unknown): boolean | undefined {
  if (!quantityParts(a, QA) || !quantityParts(b, QB)) return undefined;
  const [x, y] = [QA.value, QB.value];
  if (QA.unit === QB.unit && QA.system === QB.system) return equivalentNumbers(x, y);
  if (QA.system === CALENDAR && QB.system === CALENDAR) {
    // In the unit of the less precise value, at its precision, as below.
    const [fa, fb] = calendarFactors(QA.unit, QB.unit);
    const [pa, pb] = [decimalPlaces(x), decimalPlaces(y)];
    return pa <= pb ? roundedEqual(x, (y * fb) / fa, pa) : roundedEqual((x * fa) / fb, y, pb);
  }
  // N1: a calendar duration is equivalent to its definite duration (`1 year ~ 1 'a'`, `1 day ~ 1 'd'`).
  for (const q of [QA, QB]) {
    if (q.system === CALENDAR) {
      q.unit = CALENDAR_UCUM.get(q.unit)!;
      q.system = UCUM;
    }
  }
  if (QA.system !== UCUM || QB.system !== UCUM) return false;
  const units = commensurable(QA.unit, QB.unit);
  if (units === null) return false;
  const temperatures = equivalentTemperatures(x, QA.unit, y, QB.unit);
  if (temperatures !== undefined) return temperatures;
  const [ua, ub] = units;
  const [pa, pb] = [decimalPlaces(x), decimalPlaces(y)];
  // In the unit of the less precise value, at its precision.
  return pa <= pb ? roundedEqual(x, valueIn(ua, ub.convert(y)), pa) : roundedEqual(valueIn(ub, ua.convert(x)), y, pb);
}

/** The value in `unit` of the amount `canonical` in its canonical unit (the inverse of unit.convert, which is affine). */
function valueIn(unit: CanonicalUnit, canonical: number): number {
  const zero = unit.convert(0);
  return (canonical - zero) / (unit.convert(1) - zero);
}

/** `x` and `y` the same once rounded to `places` decimal places, halves away from zero, in decimal (roundTo: `1.005` to 1.01). */
const roundedEqual = (x: number, y: number, places: number) => roundTo(x, places) === roundTo(y, places);

/** § 6.1.3 string equivalence: case and the kind of each whitespace character are ignored. */
function normaliseText(s: string): string {
  return s.toUpperCase().replace(/\s/g, ' ');
}

function equivalentNumbers(x: number, y: number): boolean {
  return roundedEqual(x, y, Math.min(decimalPlaces(x), decimalPlaces(y)));
}

function equalColls(a: Coll, at: string | undefined, b: Coll, bt: string | undefined): boolean | undefined {
  if (a.length === 0 || b.length === 0) return undefined;
  if (a.length !== b.length) return false;
  let result: boolean | undefined = true;
  for (let i = 0; i < a.length; i++) {
    const r = equalItems(a[i], at, b[i], bt);
    if (r === false) return false;
    if (r === undefined) result = undefined;
  }
  return result;
}

function equivalentColls(a: Coll, at: string | undefined, b: Coll, bt: string | undefined): boolean {
  if (a.length !== b.length) return false;
  const used = new Array<boolean>(b.length).fill(false);
  outer: for (const x of a) {
    for (let j = 0; j < b.length; j++) {
      if (!used[j] && equivalentItems(x, at, b[j], bt)) {
        used[j] = true;
        continue outer;
      }
    }
    return false;
  }
  return true;
}

/** A key that equal items share (for de-duplicating large collections): of an item of category `c` (not a quantity) whose value is `v`. */
function itemKey(v: unknown, c: Category): string {
  return c === 'object' ? `o${canonicalJson(v)}` : `${c[0]}${String(v)}`;
}

/**
 * The quantities of a large collection kept so far, found again by `=`. `=` on quantities is no relation a single
 * key captures (units convert, a calendar year is 12 months and also 365 days, two literals of one JSON are equal
 * where their units do not convert), so each quantity is filed under a few keys, one for each way `=` can find two
 * equal (its JSON; its system, unit and value; its value in its UCUM canonical unit; as a calendar duration, in
 * months and in milliseconds), and a quantity is a repeat when `=` finds it equal to one filed under one of its keys.
 */
class QuantitySet {
  private readonly filed = new Map<string, unknown[]>();
  private readonly keys: string[] = [];

  constructor(private readonly type: string | undefined) {}

  /** Whether `x` equals no quantity added before (then it is added). */
  add(x: unknown): boolean {
    this.keysOf(x);
    for (const k of this.keys) {
      const ys = this.filed.get(k);
      if (ys !== undefined) for (const y of ys) if (equalItems(x, this.type, y, this.type) === true) return false;
    }
    for (const k of this.keys) {
      const ys = this.filed.get(k);
      if (ys === undefined) this.filed.set(k, [x]);
      else ys.push(x);
    }
    return true;
  }

  private keysOf(x: unknown): void {
    const keys = this.keys;
    keys.length = 0;
    const v = valueOf(x);
    const parsed = quantityParts(x, QA);
    // By JSON alone (deepEqual) only where `=` may come to it: a quantity it cannot read, a literal, and a FHIR
    // Quantity of no code and no system, whose JSON a literal's can be. A FHIR Quantity that has either meets
    // one of the same JSON only as a FHIR Quantity, which `=` reads the same way, by the keys below.
    if (!parsed || (x instanceof Typed && x.type === 'System.Quantity') || !isObject(v) || (v.code === undefined && v.system === undefined)) {
      keys.push(`j${canonicalJson(v)}`);
    }
    if (!parsed) return;
    keys.push(`s${QA.system ?? ''}|${QA.unit}|${QA.value}`);
    if (QA.system === CALENDAR) {
      keys.push(`t${QA.value * CALENDAR_MS.get(QA.unit)!}`);
      if (isCalendarMonths(QA.unit)) keys.push(`m${QA.value * (QA.unit === 'year' ? 12 : 1)}`);
    }
    definite(QA);
    // A temperature by its exact kelvin, as `=` compares it (inKelvin): two 15-digit kelvins of one amount may differ.
    const temperature = QA.system === UCUM ? temperatureOf(QA.unit) : undefined;
    const exact = temperature === undefined ? undefined : numberRational(QA.value);
    if (temperature !== undefined && exact !== undefined) {
      keys.push(`k${rationalKey(kelvin(exact, temperature))}`);
      return;
    }
    const unit = QA.system === UCUM ? canonicalUnit(QA.unit) : undefined;
    if (unit !== undefined) keys.push(`c${unit.code}|${unit.convert(QA.value)}`);
  }
}

function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (isObject(v)) {
    return `{${Object.keys(v).filter((k) => v[k] !== undefined).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson(v[k])}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** The items of `items` without repeats (by `=`), in order. */
function distinctItems(items: Coll, type: string | undefined): Coll {
  if (items.length < 2) return items;
  const out: unknown[] = [];
  if (items.length <= 8) {
    for (const x of items) if (!containsItem(out, type, x, type)) out.push(x);
    return out.length === items.length ? items : out;
  }
  return firstOfEach(items, type, out) ? items : out;
}

/** § 5.1.2 `isDistinct()`: whether `items` has no repeats (by `=`); a large collection stops at its first repeat. */
function isDistinctColl(items: Coll, type: string | undefined): boolean {
  if (items.length <= 8) return distinctItems(items, type).length === items.length;
  return firstOfEach(items, type, null);
}

/**
 * The first item of each value of a large collection (by itemKey) into `out`, or (`out` null) only whether every
 * item is distinct, stopping at the first repeat. Items of category string (a CodeSystem's 100,000 codes) are
 * keyed by their text alone, in a set of their own, with no key string built for each.
 */
function firstOfEach(items: Coll, type: string | undefined, out: unknown[] | null): boolean {
  const texts = new Set<string>();
  const others = new Set<string>();
  let quantities: QuantitySet | undefined;
  let distinct = true;
  // The category of the last Typed item's type: a large collection's items are mostly of one type.
  let lastType: string | undefined;
  let lastCategory: Category | undefined;
  for (const x of items) {
    let v: unknown = x;
    let c: Category;
    if (x instanceof Typed) {
      v = x.value;
      if (x.type !== lastType) {
        lastType = x.type;
        lastCategory = CATEGORIES.get(x.type);
      }
      c = lastCategory ?? categoryOf(x, type);
    } else c = categoryOf(x, type);
    let added: boolean;
    if (c === 'quantity') {
      quantities ??= new QuantitySet(type);
      added = quantities.add(x);
    } else {
      const seen = c === 'string' ? texts : others;
      const before = seen.size;
      seen.add(c === 'string' ? (typeof v === 'string' ? v : String(v)) : itemKey(v, c));
      added = seen.size > before;
    }
    if (added) out?.push(x);
    else if (out === null) return false;
    else distinct = false;
  }
  return distinct;
}

function containsItem(items: Coll, type: string | undefined, x: unknown, xt: string | undefined): boolean {
  if (items.length > 8) return indexOf(items, type).has(x, xt);
  for (const y of items) if (equalItems(x, xt, y, type) === true) return true;
  return false;
}

/**
 * The key that items equal by `=` share and unequal ones do not, for the items whose equality is plain:
 * strings, numbers and booleans (of one category and JavaScript type, the same value) and objects
 * (deepEqual: the same canonical JSON). Undefined for others (dates, times and quantities, which compare
 * with precision and units; a primitive with only an extension), which are compared one by one.
 */
function equalityKey(item: unknown, type: string | undefined): string | undefined {
  const v = valueOf(item);
  const c = categoryOf(item, type);
  switch (c) {
    case 'string':
    case 'number':
    case 'boolean': {
      const t = typeof v;
      return t === 'string' || t === 'number' || t === 'boolean' ? `${c[0]}${t[0]}${String(v)}` : undefined;
    }
    case 'object':
      return v !== null && typeof v === 'object' ? `o${canonicalJson(v)}` : undefined;
    default:
      return undefined;
  }
}

/** Membership in a large collection by key, built once per collection (a memoised path's, or the other side of `intersect`). */
class MemberIndex {
  private readonly keys = new Set<string>();
  private readonly others: unknown[] = [];
  constructor(items: Coll, readonly type: string | undefined) {
    for (const y of items) {
      const k = equalityKey(y, type);
      if (k === undefined) this.others.push(y);
      else this.keys.add(k);
    }
  }
  has(x: unknown, xt: string | undefined): boolean {
    const k = equalityKey(x, xt);
    if (k !== undefined && this.keys.has(k)) return true;
    for (const y of this.others) if (equalItems(x, xt, y, this.type) === true) return true;
    return false;
  }
}

const indexes = new WeakMap<Coll, MemberIndex>();

function indexOf(items: Coll, type: string | undefined): MemberIndex {
  let index = indexes.get(items);
  if (index === undefined || index.type !== type) indexes.set(items, (index = new MemberIndex(items, type)));
  return index;
}

/** The items of `items` that are (`keep` true) or are not members of `others`. */
function filterMembers(items: Coll, type: string | undefined, others: Coll, othersType: string | undefined, keep: boolean): Coll {
  let out: unknown[] | undefined;
  for (let i = 0; i < items.length; i++) {
    const kept = containsItem(others, othersType, items[i], type) === keep;
    if (!kept && out === undefined) out = items.slice(0, i);
    else if (kept && out !== undefined) out.push(items[i]);
  }
  return out ?? items;
}

// ---------------------------------------------------------------------------------------------------
// Compilation
// ---------------------------------------------------------------------------------------------------

interface Env {
  /** `$this`: one item, or undefined for none. */
  this: unknown;
  index: number;
  resource: unknown;
  rootResource: unknown;
  context: unknown;
  memo?: Map<object, unknown>;
  /** What a client's expression may still visit (InvariantContext.budget). */
  budget?: { left: number; readonly limit: number; readonly what?: string };
  /** `%extension`: the extension whose context invariant is evaluated (compileExtensionContext). */
  extension?: unknown;
  /** `%previous` and `%current`: a SubscriptionTopic trigger's versions (compileTopicCriteria). */
  previous?: unknown;
  current?: unknown;
  /** InvariantContext.clock, and the instant `now()` read from it in this evaluation (set on its first call). */
  clock?: Clock;
  instant?: number;
  /** `$total`: the running result of the innermost aggregate(). */
  total?: Coll;
  /** The variables defineVariable() set, by name: each read by the rest of its invocation chain (Scope.variables). */
  vars?: Map<string, Coll>;
}

/** The variables a path may start from whose value is the same for every item an evaluation iterates. */
type Root = 'resource' | 'rootResource' | 'context';

interface Expr {
  /** The type of every item (undefined: each item tells its own). */
  type: string | undefined;
  coll(env: Env): Coll;
  /** Singleton evaluation as a Boolean (§ 4.5): undefined when empty; throws on many. */
  bool(env: Env): boolean | undefined;
  size(env: Env): number;
  /** The items, when they do not depend on the evaluation (literals and unions of them). */
  constant?: Coll;
  /** A path from this variable alone (`%resource.code.coding`): its items depend on nothing else. */
  root?: Root;
  /**
   * The items of `coll` a member step can read (objectOf), in order, when they come cheaper than the whole
   * collection: `descendants()` and `children()` do not wrap the primitives a following `.name` would skip.
   */
  navigable?: (env: Env) => Coll;
}

interface Scope {
  expression: string;
  types: FhirPathTypes;
  /** The type of `$this` (undefined: the item tells). */
  thisType: string | undefined;
  contextType: string | undefined;
  /** Inside where/select/all/exists/repeat criteria: `$index` is defined. */
  iterating: boolean;
  /**
   * The expression is a client's (a FHIRPath Patch path), so its regular expressions are held to
   * src/regex-guard.ts; R4's invariants, whose patterns are the specification's, are not (a guard
   * refusing one on a huge value would leave the invariant holding for every later resource).
   */
  clientWritten?: true;
  /** An extension's context invariant: `%extension` names the extension (compileExtensionContext). */
  extensionVariable?: true;
  /** A SubscriptionTopic's fhirPathCriteria: `%previous` and `%current` name the versions (compileTopicCriteria). */
  topicVariables?: true;
  /** Inside aggregate()'s aggregator: `$total` is defined, of this static type (undefined: its items tell). */
  total?: { type: string | undefined };
  /**
   * The aggregators of aggregate()s nested in an aggregator, compiled once for each type of `$this` and `$total`
   * they are compiled for (aggregate()): shared by the whole of the outermost aggregate()'s compilation.
   */
  aggregators?: Map<Ast, Map<string, Expr>>;
  /** The names defineVariable() defines earlier in the invocation chain being compiled: `%name` reads Env.vars. */
  variables?: ReadonlySet<string>;
}

function singletonBool(c: Coll): boolean | undefined {
  if (c.length === 0) return undefined;
  if (c.length > 1) throw new EvaluationError('a single value was expected');
  const v = valueOf(c[0]);
  if (v === undefined || v === null) return undefined;
  return typeof v === 'boolean' ? v : true;
}

function boolColl(b: boolean | undefined): Coll {
  return b === undefined ? EMPTY : b ? TRUE : FALSE;
}

function collExpr(type: string | undefined, coll: (env: Env) => Coll, size?: (env: Env) => number): Expr {
  return { type, coll, bool: (env) => singletonBool(coll(env)), size: size ?? ((env) => coll(env).length) };
}

function boolExpr(bool: (env: Env) => boolean | undefined): Expr {
  return { type: 'System.Boolean', coll: (env) => boolColl(bool(env)), bool, size: (env) => (bool(env) === undefined ? 0 : 1) };
}

function constExpr(type: string | undefined, items: Coll): Expr {
  const b = items.length === 1 ? singletonBool(items) : undefined;
  return { type, coll: () => items, bool: items.length > 1 ? () => singletonBool(items) : () => b, size: () => items.length, constant: items };
}

/** `make`, or its result computed once when every input is constant (`('a' | 'b')`). */
function folded(inputs: Expr[], make: () => Expr): Expr {
  const e = make();
  if (!inputs.every((i) => i.constant !== undefined)) return e;
  try {
    return constExpr(e.type, e.coll(FOLDING_ENV));
  } catch {
    return e;
  }
}

const FOLDING_ENV: Env = { this: undefined, index: 0, resource: undefined, rootResource: undefined, context: undefined };

/** Membership in a constant collection of strings, by a set (`status in ('proposed' | 'cancelled')`). */
function stringSet(items: Expr): Set<string> | undefined {
  const c = items.constant;
  if (c === undefined || items.type !== 'System.String' || c.some((x) => typeof x !== 'string')) return undefined;
  return new Set(c as string[]);
}

function single(c: Coll): unknown {
  if (c.length > 1) throw new EvaluationError('a single value was expected');
  return c[0];
}

function singleString(c: Coll): string | undefined {
  const v = valueOf(single(c));
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new EvaluationError('a string was expected');
  return v;
}

function singleInteger(c: Coll): number | undefined {
  const v = valueOf(single(c));
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new EvaluationError('an integer was expected');
  return v;
}

/** The static types of FHIRPath's Integer (N1) and the FHIR integers it reads as one. */
const INTEGER_TYPES = new Set(['System.Integer', 'integer', 'positiveInt', 'unsignedInt']);

/**
 * An argument N1 types Integer (`substring()`, `skip()`, `take()`): its single value, undefined when empty. Anything
 * else is an error (N1 converts no Decimal to an Integer implicitly): a value of another static type, `1.0` among
 * them, which JavaScript cannot tell from `1`, or a value that is no whole number.
 */
function integerArgument(arg: Expr, name: string): (env: Env) => number | undefined {
  const notInteger = arg.type !== undefined && !INTEGER_TYPES.has(arg.type);
  return (env) => {
    const item = single(arg.coll(env));
    const v = valueOf(item);
    if (v === undefined || v === null) return undefined;
    if (notInteger || typeof v !== 'number' || !Number.isInteger(v) || (item instanceof Typed && !INTEGER_TYPES.has(item.type))) {
      throw new EvaluationError(`${name}() takes an Integer`);
    }
    return v;
  };
}

/** Wraps raw items of a statically typed collection so that they keep their type in a mixed one. */
function retype(items: Coll, type: string | undefined, out: unknown[]): void {
  for (const x of items) out.push(type === undefined || x instanceof Typed || (isObject(x) && typeof x.resourceType === 'string') ? x : new Typed(type, x, undefined));
}

/** The type of the union of two collections, and whether their items must be wrapped to keep it. */
function joinTypes(a: Expr, b: Expr): string | undefined {
  return a.type === b.type ? a.type : undefined;
}

function combineColls(a: Expr, b: Expr, env: Env): Coll {
  const x = a.coll(env);
  const y = b.coll(env);
  if (y.length === 0) return x;
  if (x.length === 0 && a.type === b.type) return y;
  const out: unknown[] = [];
  if (a.type === b.type) {
    for (const v of x) out.push(v);
    for (const v of y) out.push(v);
  } else {
    retype(x, a.type, out);
    retype(y, b.type, out);
  }
  return out;
}

/** A bound on the collections `repeat()` and `descendants()` build (a resource is a tree; this is a guard). */
const MAX_ITEMS = 10_000_000;

const VARIABLES = new Map([['ucum', UCUM], ['sct', 'http://snomed.info/sct'], ['loinc', 'http://loinc.org']]);

function build(ast: Ast, scope: Scope): Expr {
  switch (ast.kind) {
    case 'literal':
      // A whole number past the 32-bit range is no Integer (N1 § 2.1.x): it is read as a Decimal, as HL7's
      // validator reads a literal that is no 32-bit integer (`2147483648 is Decimal`).
      if (ast.literal.kind === 'number' && ast.literal.integer && ast.literal.value > INT_MAX) return literal({ ...ast.literal, integer: false });
      return literal(ast.literal);
    case 'this':
      return collExpr(scope.thisType, (env) => (env.this === undefined ? EMPTY : [env.this]), (env) => (env.this === undefined ? 0 : 1));
    case 'index':
      if (!scope.iterating) throw new UnsupportedFhirPath(scope.expression, ast.at, '$index outside an iteration');
      return collExpr('System.Integer', (env) => [env.index]);
    case 'total':
      if (scope.total === undefined) throw new FhirPathSyntaxError(scope.expression, ast.at, "'$total' outside aggregate()");
      return collExpr(scope.total.type, (env) => env.total ?? EMPTY);
    case 'var':
      return variable(ast.name, ast.at, scope);
    case 'member':
      return member(ast.target === undefined ? undefined : build(ast.target, scope), ast.name, scope);
    case 'indexer': {
      const target = build(ast.target, scope);
      const index = build(ast.index, chainScope(ast.target, scope));
      return collExpr(target.type, (env) => {
        const items = target.coll(env);
        const i = singleInteger(index.coll(env));
        return i === undefined || i < 0 || i >= items.length ? EMPTY : [items[i]];
      });
    }
    case 'unary': {
      const o = ast.operand;
      // -2147483648: the least Integer, whose magnitude alone is past the range.
      if (ast.op === '-' && o.kind === 'literal' && o.literal.kind === 'number' && o.literal.integer && o.literal.value === -INT_MIN) return constExpr('System.Integer', [INT_MIN]);
      const operand = build(o, scope);
      if (ast.op === '+') return operand;
      const integer = isIntegerType(operand.type);
      return collExpr(operand.type, (env) => {
        const item = single(operand.coll(env));
        const v = valueOf(item);
        if (v === undefined || v === null) return EMPTY;
        if (typeof v === 'number') {
          if (integer) return int32Result(-v);
          // A Decimal keeps its written precision (`-1.0`); zero stays unsigned (`-0.0` is `0.0`).
          if (item instanceof Typed && item.text !== undefined) {
            const text = item.text.startsWith('-') || v === 0 ? item.text.replace(/^-/, '') : `-${item.text}`;
            return [new Typed(item.type, -v || 0, undefined, text)];
          }
          return [-v || 0];
        }
        return [signedQuantity(item, operand.type, (x) => -x)];
      });
    }
    case 'binary':
      return binary(ast.op, build(ast.left, scope), build(ast.right, scope), ast.at, scope);
    case 'type': {
      const operand = build(ast.operand, scope);
      const test = namedTypeTest(ast.type, scope, ast.at);
      return ast.op === 'is' ? isType(operand, test) : asType(operand, test);
    }
    case 'call':
      return call(ast, scope);
  }
}

function literal(l: Literal): Expr {
  switch (l.kind) {
    case 'string': return constExpr('System.String', [l.value]);
    case 'number': return constExpr(l.integer ? 'System.Integer' : 'System.Decimal', [l.integer ? l.value : decimalItem('System.Decimal', l.value, l.text)]);
    case 'boolean': return constExpr('System.Boolean', [l.value]);
    case 'date': return constExpr('System.Date', [new Typed('System.Date', l.value, undefined)]);
    case 'dateTime': return constExpr('System.DateTime', [new Typed('System.DateTime', l.value, undefined)]);
    case 'time': return constExpr('System.Time', [new Typed('System.Time', l.value, undefined)]);
    case 'quantity': {
      // A calendar duration keyword, singular or plural, is held singular (its unit representation, `1 'year'`).
      const unit = calendarKeyword(l.unit) ?? l.unit;
      return constExpr('System.Quantity', [new Typed('System.Quantity', { value: l.value, unit }, undefined, numberText(l.value) === l.text ? undefined : l.text)]);
    }
    case 'empty': return constExpr(undefined, EMPTY);
  }
}

function variable(name: string, at: number, scope: Scope): Expr {
  switch (name) {
    case 'resource': return { ...collExpr(undefined, (env) => (env.resource === undefined ? EMPTY : [env.resource])), root: 'resource' };
    case 'rootResource': return { ...collExpr(undefined, (env) => (env.rootResource === undefined ? EMPTY : [env.rootResource])), root: 'rootResource' };
    case 'context': return { ...collExpr(scope.contextType, (env) => (env.context === undefined ? EMPTY : [env.context])), root: 'context' };
    case 'extension':
      if (!scope.extensionVariable) throw new UnsupportedFhirPath(scope.expression, at, '%extension outside an extension\'s context invariant');
      return collExpr('Extension', (env) => (env.extension === undefined ? EMPTY : [env.extension]));
    case 'previous':
    case 'current':
      if (!scope.topicVariables) throw new UnsupportedFhirPath(scope.expression, at, `%${name} outside a SubscriptionTopic's fhirPathCriteria`);
      return collExpr(undefined, (env) => {
        const v = name === 'previous' ? env.previous : env.current;
        return v === undefined ? EMPTY : [v];
      });
    default: {
      if (scope.variables?.has(name)) return collExpr(undefined, (env) => env.vars?.get(name) ?? EMPTY);
      const url = VARIABLES.get(name)
        ?? (name.startsWith('vs-') ? `http://hl7.org/fhir/ValueSet/${name.slice(3)}` : undefined)
        ?? (name.startsWith('ext-') ? `http://hl7.org/fhir/StructureDefinition/${name.slice(4)}` : undefined);
      if (url === undefined) throw new UnsupportedFhirPath(scope.expression, at, `%${name}`);
      return constExpr('System.String', [url]);
    }
  }
}

/**
 * `target.name`; a path from `%resource`, `%rootResource` or `%context` is computed once for each value
 * of its variable in the evaluations sharing a memo (InvariantContext.memo), not again for every item
 * an invariant is checked on or iterates (ref-1 on each of 10,000 References to contained resources).
 */
function member(target: Expr | undefined, name: string, scope: Scope): Expr {
  const e = scope.clientWritten ? budgeted(navigation(target, name, scope)) : navigation(target, name, scope);
  const root = target?.root;
  if (root === undefined) return e;
  const memoised: Expr = {
    type: e.type,
    root,
    coll: (env) => {
      const memo = env.memo;
      if (memo === undefined) return e.coll(env);
      const from = env[root];
      const known = memo.get(memoised) as { from: unknown; items: Coll } | undefined;
      if (known !== undefined && known.from === from) return known.items;
      const items = e.coll(env);
      memo.set(memoised, { from, items });
      return items;
    },
    bool: (env) => singletonBool(memoised.coll(env)),
    size: (env) => memoised.coll(env).length,
  };
  return memoised;
}

/** `e`, whose items count against the evaluation's budget (InvariantContext.budget). */
function budgeted(e: Expr): Expr {
  if (e.constant !== undefined) return e;
  return collExpr(e.type, (env) => {
    const items = e.coll(env);
    charge(env, items.length + 1);
    return items;
  });
}

/** Takes `values` from the evaluation's budget (InvariantContext.budget), if it has one; FhirPathTooCostly past it. */
function charge(env: Env, values: number): void {
  const budget = env.budget;
  if (budget !== undefined && (budget.left -= values) < 0) {
    throw new FhirPathTooCostly(`the expression is too costly to evaluate: it visits more than ${budget.limit} values, the most ${budget.what ?? 'a patch path'} may`);
  }
}

/**
 * The characters of text that count as one value against a budget: a string function's work grows with its
 * string's length, and a budget of values alone would let one expression go over a large string again and
 * again (`name.select(%resource.text.div.lower())`), or grow one (`replace()`), for as long as it likes.
 */
const CHARACTERS_PER_VALUE = 100;

/** Charges the work of a string function on `length` characters (a budget's values, CHARACTERS_PER_VALUE each). */
function chargeText(env: Env, length: number): void {
  if (env.budget !== undefined && length > CHARACTERS_PER_VALUE) charge(env, Math.ceil(length / CHARACTERS_PER_VALUE));
}

/**
 * Charges comparing `colls`' items (`=`, `~`, `<`, `in`) by their size: two large strings of one length are compared
 * character by character (`~` normalises both first), and two elements (or resources) member by member.
 */
function chargeCompared(env: Env, ...colls: Coll[]): void {
  if (env.budget === undefined) return;
  let size = 0;
  for (const items of colls) for (const item of items) size += sizeOf(valueOf(item));
  chargeText(env, size);
}

/** `items`, charged (chargeCompared) as the items a function keys or compares one with another (`|`, union(), distinct()). */
function compared(env: Env, items: Coll): Coll {
  if (items.length > 1) chargeCompared(env, items);
  return items;
}

/** The sizes of the elements an evaluation compared, kept for the next comparison of the same ones. */
const SIZES = new WeakMap<object, number>();

/** About the characters of `v` as JSON: its strings' lengths and one per other value (an object's measured once). */
function sizeOf(v: unknown): number {
  if (typeof v === 'string') return v.length;
  if (v === null || typeof v !== 'object') return 1;
  const known = SIZES.get(v);
  if (known !== undefined) return known;
  let size = 1;
  for (const x of Array.isArray(v) ? v : Object.values(v)) size += sizeOf(x);
  SIZES.set(v, size);
  return size;
}

/** `target.name` (or `name` on `$this`); a capitalised name first on `$this` is a type name (`Patient.name`). */
function navigation(target: Expr | undefined, name: string, scope: Scope): Expr {
  if (target === undefined && /^[A-Z]/.test(name)) {
    const test = typeTest({ namespace: undefined, name });
    const thisType = scope.thisType;
    return collExpr(staticType(name), (env) => (env.this !== undefined && typeMatches(typeOfItem(env.this, thisType), test) ? [env.this] : EMPTY));
  }
  const ownerType = target === undefined ? scope.thisType : target.type;
  const types = scope.types;
  if (ownerType !== undefined) {
    const l = lookup(types, ownerType, name, false);
    const type = l.single !== undefined && l.choices === undefined ? staticType(l.single.type) : undefined;
    if (target === undefined) {
      return collExpr(type, (env) => {
        const obj = objectOf(env.this);
        if (obj === undefined) return EMPTY;
        const out: unknown[] = [];
        collectLookup(obj, l, out);
        return out;
      }, (env) => {
        const obj = objectOf(env.this);
        return obj === undefined ? 0 : countLookup(obj, l);
      });
    }
    return collExpr(type, (env) => {
      const items = target.coll(env);
      if (items.length === 0) return EMPTY;
      const out: unknown[] = [];
      for (const item of items) {
        const obj = objectOf(item);
        if (obj !== undefined) collectLookup(obj, l, out);
      }
      return out;
    }, (env) => {
      let n = 0;
      for (const item of target.coll(env)) {
        const obj = objectOf(item);
        if (obj !== undefined) n += countLookup(obj, l);
      }
      return n;
    });
  }
  // Items that tell their own type (resources, Typed): resolve per type, once.
  const memo = new Map<string, Lookup>();
  const untyped = lookup(types, undefined, name, true);
  const lookupFor = (item: unknown): Lookup => {
    const owner = typeOfItem(item, undefined);
    if (owner === undefined) return untyped;
    let l = memo.get(owner);
    if (l === undefined) memo.set(owner, (l = lookup(types, owner, name, true)));
    return l;
  };
  const source: (env: Env) => Coll = target === undefined ? (env) => (env.this === undefined ? EMPTY : [env.this]) : target.navigable ?? target.coll;
  return collExpr(undefined, (env) => {
    const items = source(env);
    if (items.length === 0) return EMPTY;
    const out: unknown[] = [];
    for (const item of items) {
      const obj = objectOf(item);
      if (obj !== undefined) collectLookup(obj, lookupFor(item), out);
    }
    return out;
  });
}

function isType(operand: Expr, test: TypeTest): Expr {
  const type = operand.type;
  return boolExpr((env) => {
    const items = operand.coll(env);
    if (items.length === 0) return undefined;
    return typeMatches(typeOfItem(single(items), type), test);
  });
}

function asType(operand: Expr, test: TypeTest): Expr {
  const type = operand.type;
  return collExpr(testedType(test) ?? (test.lenient === undefined ? undefined : type), (env) => {
    const items = operand.coll(env);
    if (items.length === 0) return EMPTY;
    return typeMatches(typeOfItem(single(items), type), test) ? items : EMPTY;
  });
}

function binary(op: string, left: Expr, right: Expr, at: number, scope: Scope): Expr {
  switch (op) {
    case 'and':
      return boolExpr((env) => {
        const a = left.bool(env);
        if (a === false) return false;
        const b = right.bool(env);
        if (b === false) return false;
        return a === true && b === true ? true : undefined;
      });
    case 'or':
      return boolExpr((env) => {
        const a = left.bool(env);
        if (a === true) return true;
        const b = right.bool(env);
        if (b === true) return true;
        return a === false && b === false ? false : undefined;
      });
    case 'xor':
      return boolExpr((env) => {
        const a = left.bool(env);
        if (a === undefined) return undefined;
        const b = right.bool(env);
        return b === undefined ? undefined : a !== b;
      });
    case 'implies':
      return boolExpr((env) => {
        const a = left.bool(env);
        if (a === false) return true;
        const b = right.bool(env);
        if (b === true) return true;
        return a === true && b === false ? false : undefined;
      });
    case '=':
    case '!=': {
      const negate = op === '!=';
      const fast = stringEquality(left, right, negate) ?? stringEquality(right, left, negate);
      if (fast !== undefined) return fast;
      return boolExpr((env) => {
        const a = left.coll(env);
        const b = right.coll(env);
        chargeCompared(env, a, b);
        const r = equalColls(a, left.type, b, right.type);
        return r === undefined ? undefined : r !== negate;
      });
    }
    case '~':
    case '!~': {
      const negate = op === '!~';
      return boolExpr((env) => {
        const a = left.coll(env);
        const b = right.coll(env);
        chargeCompared(env, a, b);
        return equivalentColls(a, left.type, b, right.type) !== negate;
      });
    }
    case '<': case '<=': case '>': case '>=': {
      const test = op === '<' ? (c: number) => c < 0 : op === '<=' ? (c: number) => c <= 0 : op === '>' ? (c: number) => c > 0 : (c: number) => c >= 0;
      return boolExpr((env) => {
        const a = left.coll(env);
        const b = right.coll(env);
        if (a.length === 0 || b.length === 0) return undefined;
        chargeCompared(env, a, b);
        const c = compareItems(single(a), left.type, single(b), right.type);
        return c === undefined ? undefined : test(c);
      });
    }
    case '|': {
      const type = joinTypes(left, right);
      return folded([left, right], () => collExpr(type, (env) => distinctItems(compared(env, combineColls(left, right, env)), type)));
    }
    case 'in':
    case 'contains': {
      const [item, items] = op === 'in' ? [left, right] : [right, left];
      const set = stringSet(items);
      return boolExpr((env) => {
        const x = item.coll(env);
        if (x.length === 0) return undefined;
        const v = single(x);
        chargeCompared(env, x);
        if (set !== undefined && categoryOf(v, item.type) === 'string') return set.has(valueOf(v) as string);
        // The collection is looked up by its members' keys, made once for it (containsItem), not compared item by item.
        return containsItem(items.coll(env), items.type, v, item.type);
      });
    }
    case '&':
      return collExpr('System.String', (env) => {
        const a = singleString(left.coll(env)) ?? '';
        const b = singleString(right.coll(env)) ?? '';
        // What it makes is charged as text: a concatenation may double a string (`repeat($this & $this)`).
        chargeText(env, a.length + b.length);
        return [a + b];
      });
    case '+': case '-': case '*': case '/': case 'div': case 'mod':
      return arithmetic(op, left, right);
    default:
      throw new UnsupportedFhirPath(scope.expression, at, `operator ${op}`);
  }
}

/** `code = 'x'` on an element of a string type: the values compared directly. */
function stringEquality(element: Expr, literal: Expr, negate: boolean): Expr | undefined {
  const c = literal.constant;
  if (c === undefined || c.length !== 1 || typeof c[0] !== 'string' || CATEGORIES.get(element.type ?? '') !== 'string') return undefined;
  const text = c[0];
  return boolExpr((env) => {
    const items = element.coll(env);
    if (items.length === 0) return undefined;
    return (items.length === 1 && valueOf(items[0]) === text) !== negate;
  });
}

function arithmetic(op: string, left: Expr, right: Expr): Expr {
  const integer = CATEGORIES.get(left.type ?? '') === 'number' && CATEGORIES.get(right.type ?? '') === 'number'
    && !['decimal', 'System.Decimal'].includes(left.type!) && !['decimal', 'System.Decimal'].includes(right.type!) && op !== '/';
  const stringType = op === '+' && CATEGORIES.get(left.type ?? '') === 'string' ? 'System.String' : undefined;
  // A date, time or quantity operand gives an item that carries its own type (quantityArithmetic).
  const typed = [left.type, right.type].some((t) => ['datetime', 'time', 'quantity'].includes(CATEGORIES.get(t ?? '') ?? ''));
  return collExpr(stringType ?? (integer ? 'System.Integer' : typed ? undefined : 'System.Decimal'), (env) => {
    const x = single(left.coll(env));
    const y = single(right.coll(env));
    const a = valueOf(x);
    const b = valueOf(y);
    if (a === undefined || a === null || b === undefined || b === null) return EMPTY;
    if (op === '+' && typeof a === 'string' && typeof b === 'string') {
      chargeText(env, a.length + b.length);
      return [a + b];
    }
    if (typeof a !== 'number' || typeof b !== 'number') return quantityArithmetic(op, x, left.type, y, right.type, env);
    if (!integer) {
      const d = decimalArithmetic(op, a, b);
      return d === undefined ? EMPTY : [d];
    }
    let r: number;
    switch (op) {
      case '+': r = a + b; break;
      case '-': r = a - b; break;
      case '*': r = a * b; break;
      case 'div': if (b === 0) return EMPTY; r = Math.trunc(a / b); break;
      default: if (b === 0) return EMPTY; r = a % b;
    }
    // Integers stay 32-bit (an overflow gives nothing); `r || 0` keeps -0 out of Integers.
    return int32Result(r || 0);
  });
}

/** A System.Quantity item of `q`. */
const quantityItem = (q: PlainQuantity) => new Typed('System.Quantity', { value: q.value, unit: q.unit }, undefined);

/**
 * An item as a quantity for arithmetic: a quantity (a FHIR Quantity in UCUM, or whose unit text is its unit, or a
 * literal), or a number as a quantity of unit '1'; undefined for a quantity of another system or with a comparator.
 */
function arithmeticQuantity(item: unknown, type: string | undefined): PlainQuantity | undefined {
  const v = valueOf(item);
  if (typeof v === 'number') return { value: v, unit: '1', calendar: false };
  if (categoryOf(item, type) !== 'quantity' || !quantityParts(item, QA)) return undefined;
  if (QA.system === CALENDAR) return { value: QA.value, unit: QA.unit, calendar: true };
  if (QA.system !== UCUM && QA.system !== undefined) return undefined;
  return { value: QA.value, unit: QA.unit === '' ? '1' : QA.unit, calendar: false };
}

const TEMPORAL_KINDS = new Map<string, TemporalKind>([['date', 'date'], ['System.Date', 'date'], ['time', 'time'], ['System.Time', 'time']]);
const TEMPORAL_TYPES: Record<TemporalKind, string> = { date: 'System.Date', dateTime: 'System.DateTime', time: 'System.Time' };

/**
 * `+ - * /` where an operand is no number: a Date, DateTime or Time moved by a time-valued quantity (N1 § 6.6,
 * fhirpath-temporal.ts), or two quantities (or a quantity and a number) combined (fhirpath-quantity-math.ts); empty
 * where their units do not combine; an error for any other operands, or a unit a date/time cannot be moved by.
 */
function quantityArithmetic(op: string, x: unknown, xt: string | undefined, y: unknown, yt: string | undefined, env: Env): Coll {
  const cx = categoryOf(x, xt);
  if ((cx === 'datetime' || cx === 'time') && (op === '+' || op === '-') && categoryOf(y, yt) === 'quantity') {
    if (!quantityParts(y, QB) || (QB.system !== CALENDAR && QB.system !== UCUM)) throw new EvaluationError('a time-valued quantity was expected');
    const kind = cx === 'time' ? 'time' : TEMPORAL_KINDS.get(typeOfItem(x, xt) ?? '') ?? 'dateTime';
    try {
      return [new Typed(TEMPORAL_TYPES[kind], shiftTemporal(kind, String(valueOf(x)), op === '-' ? -QB.value : QB.value, QB.unit), undefined)];
    } catch (err) {
      if (err instanceof TemporalArithmeticError) throw new EvaluationError(err.message);
      throw err;
    }
  }
  if (op !== '+' && op !== '-' && op !== '*' && op !== '/') throw new EvaluationError(`cannot apply ${op}`);
  const foreign = foreignArithmetic(op, x, xt, y, yt);
  if (foreign !== null) return foreign;
  const a = arithmeticQuantity(x, xt);
  const b = arithmeticQuantity(y, yt);
  if (a === undefined || b === undefined) throw new EvaluationError(`cannot apply ${op}`);
  const q = op === '*' || op === '/' ? multiplyQuantities(a, b, op === '/') : addQuantities(a, b, op === '+' ? 1 : -1);
  if (q === undefined) return EMPTY;
  // A product's unit is text that grows with each product (`$this * $this` in repeat()): charged as text.
  chargeText(env, q.unit.length);
  return [quantityItem(q)];
}

/** A FHIR Quantity that UCUM does not read: one with a comparator, or of another system (`'tab'` in SNOMED CT). */
function foreignQuantity(item: unknown, type: string | undefined): Json | undefined {
  const v = valueOf(item);
  if (!isObject(v) || (item instanceof Typed && item.type === 'System.Quantity') || categoryOf(item, type) !== 'quantity' || typeof v.value !== 'number') return undefined;
  return v.comparator !== undefined || (typeof v.system === 'string' && v.system !== UCUM) ? v : undefined;
}

/**
 * Arithmetic on a quantity UCUM does not read (foreignQuantity), or null when neither operand is one. N1 leaves a unit it
 * cannot read empty, but two quantities of one unit add and subtract (`'tab' + 'tab'`), and a number scales one: a copy
 * keeping its system, code and text; any other operand, or a comparator (a bound, no value to compute with), gives nothing.
 */
function foreignArithmetic(op: '+' | '-' | '*' | '/', x: unknown, xt: string | undefined, y: unknown, yt: string | undefined): Coll | null {
  const fx = foreignQuantity(x, xt);
  const fy = foreignQuantity(y, yt);
  if (fx === undefined && fy === undefined) return null;
  if (fx?.comparator !== undefined || fy?.comparator !== undefined) return EMPTY;
  const a = valueOf(x);
  const b = valueOf(y);
  const scaled = (q: Json, value: number) => (Number.isFinite(value) ? [new Typed('Quantity', { ...q, value }, undefined)] : EMPTY);
  // In decimal, as Decimals and UCUM quantities compute (decimalArithmetic); NaN, dropped, for a division by zero.
  const dec = (o: string, m: number, n: number) => decimalArithmetic(o, m, n) ?? Number.NaN;
  if (fx !== undefined && typeof b === 'number' && (op === '*' || op === '/')) return scaled(fx, dec(op, fx.value as number, b));
  if (fy !== undefined && typeof a === 'number' && op === '*') return scaled(fy, dec('*', a, fy.value as number));
  if (fx === undefined || fy === undefined || (op !== '+' && op !== '-')) return EMPTY;
  if (fx.system !== fy.system || fx.code === undefined || fx.code !== fy.code) return EMPTY;
  return scaled(fx, dec(op, fx.value as number, fy.value as number));
}

/** A quantity item with `fn` applied to its value (unary minus, abs()): a literal stays one, a FHIR Quantity keeps its system, code and type. */
function signedQuantity(item: unknown, type: string | undefined, fn: (value: number) => number): unknown {
  const v = valueOf(item);
  if (!isObject(v) || categoryOf(item, type) !== 'quantity' || typeof v.value !== 'number') throw new EvaluationError('a number or a quantity was expected');
  const value = fn(v.value);
  return item instanceof Typed ? new Typed(item.type, { ...v, value }, item.ext) : { ...v, value };
}

/** The item of `input` as toQuantity() reads it (N1 § 5.5.7: a number as unit '1', a Boolean as 1.0 or 0.0 '1', a string of a quantity). */
function toQuantityOf(item: unknown, type: string | undefined, env: Env): PlainQuantity | undefined {
  const v = valueOf(item);
  if (typeof v === 'boolean') return { value: v ? 1 : 0, unit: '1', calendar: false };
  if (typeof v === 'string') {
    chargeText(env, v.length);
    return categoryOf(item, type) === 'string' ? parseQuantityText(v) : undefined;
  }
  return arithmeticQuantity(item, type);
}

/** toQuantity([unit]) and convertsToQuantity([unit]): the quantity, converted to `unit` when one is given (convertQuantity). */
function quantityConversion(input: Expr, args: Ast[], scope: Scope, converts: boolean): Expr {
  const unit = args[0] === undefined ? undefined : build(args[0], scope);
  const convert = (env: Env, item: unknown): PlainQuantity | undefined => {
    const q = toQuantityOf(item, input.type, env);
    if (q === undefined || unit === undefined) return q;
    const u = singleString(unit.coll(env));
    return u === undefined ? undefined : convertQuantity(q, u);
  };
  if (converts) {
    return boolExpr((env) => {
      const items = input.coll(env);
      return items.length === 0 ? undefined : convert(env, single(items)) !== undefined;
    });
  }
  return collExpr('System.Quantity', (env) => {
    const items = input.coll(env);
    if (items.length === 0) return EMPTY;
    const q = convert(env, single(items));
    return q === undefined ? EMPTY : [quantityItem(q)];
  });
}

/**
 * `now()`, `today()`, `timeOfDay()`: the evaluation's instant (read from its clock on the first call, N1 § 5.10.1). A
 * SubscriptionTopic's fhirPathCriteria may not ask it (src/fhir/subscriptions/fhirpath-criteria.ts: not the write's).
 */
function currentExpr(kind: TemporalKind, scope: Scope, c: Call): Expr {
  arity(c, scope, 0, 0);
  if (scope.topicVariables) throw new UnsupportedFhirPath(scope.expression, c.at, `${c.name}()`);
  return collExpr(TEMPORAL_TYPES[kind], (env) => {
    env.instant ??= (env.clock?.now() ?? Date.now());
    return [new Typed(TEMPORAL_TYPES[kind], currentTemporal(kind, env.instant), undefined)];
  });
}

// ---------------------------------------------------------------------------------------------------
// Functions
// ---------------------------------------------------------------------------------------------------

/** Static types whose values are integers: an Integer function's result when its operands are of them (`2.power(3)`). */
const isIntegerType = (t: string | undefined) => CATEGORIES.get(t ?? '') === 'number' && t !== 'decimal' && t !== 'System.Decimal';

/**
 * N1 § 5.7 on a number (fhirpath-math.ts): empty for an empty input or argument, or a result no number holds; an error
 * for a collection of more than one, or an operand or argument that is no number. ceiling(), floor() and truncate()
 * give an Integer, power() an Integer on Integers when its result is one, the others a Decimal.
 */
function mathFunction(input: Expr, args: Ast[], scope: Scope, name: string, fn: (x: number, arg: number | undefined) => number | undefined): Expr {
  const arg = args[0] === undefined ? undefined : build(args[0], scope);
  const integer = name === 'ceiling' || name === 'floor' || name === 'truncate';
  const integral = name === 'power' && isIntegerType(input.type) && isIntegerType(arg?.type);
  return collExpr(integer ? 'System.Integer' : integral ? undefined : 'System.Decimal', (env) => {
    const x = valueOf(single(input.coll(env)));
    if (x === undefined || x === null) return EMPTY;
    if (typeof x !== 'number') throw new EvaluationError(`${name}() applies to a number`);
    let a: number | undefined;
    if (arg !== undefined) {
      const v = valueOf(single(arg.coll(env)));
      if (v === undefined || v === null) return EMPTY;
      if (typeof v !== 'number') throw new EvaluationError(`the argument of ${name}() must be a number`);
      a = v;
    }
    const r = fn(x, a);
    if (r === undefined) return EMPTY;
    if (integer) return int32Result(r);
    if (!integral) return [r];
    // An Integer to a non-negative Integer power is an Integer, nothing past the 32-bit range; to a negative one a Decimal.
    if (a! < 0) return [new Typed('System.Decimal', r, undefined)];
    return isInt32(r) ? [new Typed('System.Integer', r, undefined)] : EMPTY;
  });
}

type Call = Extract<Ast, { kind: 'call' }>;
type FunctionCompiler = (input: Expr, args: Ast[], scope: Scope, call: Call) => Expr;

/** Functions that need something Cinder does not give an invariant (a server, a terminology, an HTML parser). */
const NOT_EVALUATED = new Set(['resolve', 'memberOf', 'conformsTo', 'htmlChecks', 'subsumes', 'subsumedBy', 'elementDefinition', 'slice', 'checkModifiers']);

function arity(call: Call, scope: Scope, min: number, max: number): void {
  if (call.args.length < min || call.args.length > max) {
    throw new FhirPathSyntaxError(scope.expression, call.at, `${call.name}() takes ${min === max ? min : `${min} to ${max}`} argument(s)`);
  }
}

/** Compiles a criteria/projection argument, evaluated with `$this` set to each item of `input`. */
function perItem(arg: Ast, input: Expr, scope: Scope): Expr {
  return build(arg, { ...scope, thisType: input.type, iterating: true });
}

function typeArgument(arg: Ast, scope: Scope): TypeTest {
  if (arg.kind === 'member' && arg.target === undefined) return namedTypeTest({ namespace: undefined, name: arg.name }, scope, arg.at);
  if (arg.kind === 'member' && arg.target?.kind === 'member' && arg.target.target === undefined && (arg.target.name === 'FHIR' || arg.target.name === 'System')) {
    return namedTypeTest({ namespace: arg.target.name, name: arg.name }, scope, arg.at);
  }
  throw new FhirPathSyntaxError(scope.expression, arg.at, 'type name expected');
}

/** The index of the first item for which `criteria` (with `$this`/`$index` set to it) is true (`wanted`) or not; -1 for none. */
function findItem(env: Env, items: Coll, criteria: Expr, wanted: boolean): number {
  const savedThis = env.this;
  const savedIndex = env.index;
  let found = -1;
  for (let i = 0; i < items.length; i++) {
    env.this = items[i];
    env.index = i;
    if ((criteria.bool(env) === true) === wanted) {
      found = i;
      break;
    }
  }
  env.this = savedThis;
  env.index = savedIndex;
  return found;
}

/** `projection` (with `$this`/`$index` set) of each item, into `out`; `wrap` keeps the items' types in an untyped `out`. */
function projectItems(env: Env, items: Coll, projection: Expr, out: unknown[], wrap: boolean): void {
  const savedThis = env.this;
  const savedIndex = env.index;
  for (let i = 0; i < items.length; i++) {
    env.this = items[i];
    env.index = i;
    const r = projection.coll(env);
    if (!wrap || projection.type === undefined) for (const x of r) out.push(x);
    else retype(r, projection.type, out);
  }
  env.this = savedThis;
  env.index = savedIndex;
}

const NO_ARGUMENT = Symbol('none');

/** The value of an optional single-valued argument: NO_ARGUMENT when absent, undefined when empty. */
function argumentValue(arg: Expr | undefined, env: Env): unknown {
  if (arg === undefined) return NO_ARGUMENT;
  const v = valueOf(single(arg.coll(env)));
  return v === null ? undefined : v;
}

/** A function on a single string with up to two arguments; empty when the string or an argument is. */
function stringFunction(input: Expr, args: Ast[], scope: Scope, type: string, fn: (s: string, a: unknown, b: unknown, env: Env) => unknown): Expr {
  const [first, second] = args.map((a) => build(a, scope));
  const apply = (env: Env): unknown => {
    const s = singleString(input.coll(env));
    if (s === undefined) return undefined;
    const a = argumentValue(first, env);
    const b = argumentValue(second, env);
    if (a === undefined || b === undefined) return undefined;
    chargeText(env, s.length + (typeof a === 'string' ? a.length : 0) + (typeof b === 'string' ? b.length : 0));
    return fn(s, a, b, env);
  };
  if (type === 'System.Boolean') return boolExpr(apply as (env: Env) => boolean | undefined);
  return collExpr(type, (env) => {
    const r = apply(env);
    return r === undefined ? EMPTY : [r];
  });
}

/** A regular expression argument: compiled once when it is a literal. FHIRPath regexes match anywhere (§ 5.6.9). */
function regexArgument(arg: Ast, scope: Scope, flags: string): Expr | RegExp {
  if (arg.kind === 'literal' && arg.literal.kind === 'string') {
    try {
      return new RegExp(arg.literal.value, `u${flags}`);
    } catch {
      // R4's patterns escape characters that Unicode-mode JavaScript refuses (`\@`, `\'`); they mean the character.
      try {
        return new RegExp(arg.literal.value, flags);
      } catch (cause) {
        throw new FhirPathSyntaxError(scope.expression, arg.at, `invalid regular expression (${String(cause)})`);
      }
    }
  }
  return build(arg, scope);
}

/** A regular expression that backtracks without end (src/regex-guard.ts): the expression cannot be evaluated. */
const tooCostlyRegex = () => new FhirPathTooCostly('the regular expression is too costly to evaluate (it backtracks without end)');

function toRegex(r: Expr | RegExp, env: Env, flags: string): RegExp | undefined {
  if (r instanceof RegExp) return r;
  const source = singleString(r.coll(env));
  if (source === undefined) return undefined;
  try {
    return new RegExp(source, `u${flags}`);
  } catch {
    throw new EvaluationError('invalid regular expression');
  }
}

/** FHIRPath's flags of a regular expression (3.0 STU, on matches(), matchesFull(), replaceMatches()): `i` ignores case, `m` makes `^` and `$` match at lines. */
const REGEX_FLAGS = /^[im]*$/;
const FLAGS_ERROR = "the flags of a regular expression are 'i' (case-insensitive) and 'm' (multi-line)";
const uniqueFlags = (flags: string) => [...new Set(flags)].join('');

/**
 * The regular expression of matches(), matchesFull() or replaceMatches() (`base`: their own JavaScript flags, `s` or
 * `g`), with its optional flags argument, anchored at both ends for matchesFull(): compiled once where pattern and
 * flags are literals, else at each evaluation; empty flags are none. A literal flag outside `i` and `m` is a
 * syntax error, an evaluated one an evaluation error.
 */
function regexFunctionArgument(patternArg: Ast, flagsArg: Ast | undefined, scope: Scope, base: string, anchored: boolean): (env: Env) => RegExp | undefined {
  const anchor = (r: RegExp) => (anchored ? new RegExp(`^(?:${r.source})$`, r.flags) : r);
  if (flagsArg === undefined || (flagsArg.kind === 'literal' && flagsArg.literal.kind === 'string')) {
    const literal = flagsArg?.kind === 'literal' && flagsArg.literal.kind === 'string' ? flagsArg.literal.value : '';
    if (!REGEX_FLAGS.test(literal)) throw new FhirPathSyntaxError(scope.expression, flagsArg!.at, FLAGS_ERROR);
    const flags = base + uniqueFlags(literal);
    const regex = regexArgument(patternArg, scope, flags);
    if (regex instanceof RegExp) {
      const r = anchor(regex);
      return () => r;
    }
    return (env) => {
      const r = toRegex(regex, env, flags);
      return r === undefined ? undefined : anchor(r);
    };
  }
  const flagsExpr = build(flagsArg, scope);
  const regex = regexArgument(patternArg, scope, base);
  return (env) => {
    const extra = singleString(flagsExpr.coll(env)) ?? '';
    if (!REGEX_FLAGS.test(extra)) throw new EvaluationError(FLAGS_ERROR);
    const r = toRegex(regex, env, base);
    if (r === undefined) return undefined;
    return anchor(extra === '' ? r : new RegExp(r.source, r.flags + uniqueFlags(extra)));
  };
}

/** matches() or matchesFull() (`anchored`): whether the single string holds the pattern (or is it whole), with its optional flags. */
function matchesFunction(input: Expr, args: Ast[], scope: Scope, c: Call, anchored: boolean): Expr {
  arity(c, scope, 1, 2);
  const regex = regexFunctionArgument(args[0]!, args[1], scope, 's', anchored);
  return boolExpr((env) => {
    const s = singleString(input.coll(env));
    if (s === undefined) return undefined;
    const r = regex(env);
    if (r === undefined) return undefined;
    chargeText(env, s.length);
    return scope.clientWritten ? guardedTest(r, s, tooCostlyRegex) : r.test(s);
  });
}

/**
 * N1 § 5.5 conversion functions `to<Name>()` and `convertsTo<Name>()` from one conversion: the converted item, or
 * undefined where N1's tables define no conversion of the item (or its text does not convert). Both take a single
 * item (many is an error) and give nothing for none.
 */
function conversions(name: string, type: string, convert: (item: unknown, type: string | undefined, env: Env) => unknown): [string, FunctionCompiler][] {
  return [
    [`to${name}`, (input, args, scope, c) => (arity(c, scope, 0, 0), collExpr(type, (env) => {
      const item = single(input.coll(env));
      if (item === undefined) return EMPTY;
      const r = convert(item, input.type, env);
      return r === undefined ? EMPTY : [r];
    }))],
    [`convertsTo${name}`, (input, args, scope, c) => (arity(c, scope, 0, 0), boolExpr((env) => {
      const item = single(input.coll(env));
      if (item === undefined) return undefined;
      return convert(item, input.type, env) !== undefined;
    }))],
  ];
}

/** An item's text for a conversion, charged as text (undefined when it is no string). */
function textOf(item: unknown, type: string | undefined, env: Env): string | undefined {
  const v = valueOf(item);
  if (typeof v !== 'string' || categoryOf(item, type) !== 'string') return undefined;
  chargeText(env, v.length);
  return v;
}

/** Whether a number item is a Decimal (by its static or own type; an untyped whole number is an Integer). */
function isDecimalItem(item: unknown, type: string | undefined): boolean {
  const t = typeOfItem(item, type);
  return t === 'decimal' || t === 'System.Decimal' || (t === undefined || !CATEGORIES.has(t) ? !Number.isInteger(valueOf(item)) : false);
}

/**
 * N1 toInteger(): an Integer, a Boolean (1 or 0), or a String of `(\+|-)?\d+` within the 32-bit range; a Decimal
 * converts to nothing, whole or not (N1's table defines no Decimal to Integer conversion).
 */
function integerOf(item: unknown, type: string | undefined, env: Env): number | undefined {
  const v = valueOf(item);
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (typeof v === 'number') return !isDecimalItem(item, type) && isInt32(v) ? v : undefined;
  const text = textOf(item, type, env);
  if (text === undefined || !/^[+-]?\d+$/.test(text)) return undefined;
  const n = Number(text) || 0;
  return isInt32(n) ? n : undefined;
}

/** N1 toDecimal(): an Integer or Decimal, a Boolean (1.0 or 0.0), or a String of `(\+|-)?\d+(\.\d+)?`. */
function decimalOf(item: unknown, type: string | undefined, env: Env): unknown {
  const v = valueOf(item);
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (typeof v === 'number') return item instanceof Typed && item.text !== undefined ? new Typed('System.Decimal', v, undefined, item.text) : v;
  const text = textOf(item, type, env);
  if (text === undefined || !/^[+-]?\d+(\.\d+)?$/.test(text)) return undefined;
  // A text past what a number holds (400 digits) is an overflow: nothing (N1 § 6.6), not Infinity.
  const n = Number(text);
  return Number.isFinite(n) ? decimalItem('System.Decimal', n, text.startsWith('+') ? text.slice(1) : text) : undefined;
}

const TRUE_TEXTS = new Set(['true', 't', 'yes', 'y', '1', '1.0']);
const FALSE_TEXTS = new Set(['false', 'f', 'no', 'n', '0', '0.0']);

/** N1 toBoolean(): a Boolean; an Integer or Decimal 1 or 0; a String of N1's table, case ignored. */
function booleanOf(item: unknown, type: string | undefined, env: Env): boolean | undefined {
  const v = valueOf(item);
  if (typeof v === 'boolean') return v;
  if (typeof v === 'number') return v === 1 ? true : v === 0 ? false : undefined;
  const text = textOf(item, type, env);
  if (text === undefined || text.length > 5) return undefined;
  const lower = text.toLowerCase();
  return TRUE_TEXTS.has(lower) ? true : FALSE_TEXTS.has(lower) ? false : undefined;
}

/**
 * N1 toDate(), toDateTime(), toTime(): a value of the type; a DateTime to a Date (its date part, at most the day), a
 * Date to a DateTime (the same components, no time set); a String in the type's format, partial precisions kept.
 */
function temporalOf(item: unknown, type: string | undefined, kind: TemporalKind): Typed | undefined {
  const category = categoryOf(item, type);
  const v = valueOf(item);
  if (typeof v !== 'string') return undefined;
  const t = typeOfItem(item, type);
  const own = category === 'time' ? 'time' : category === 'datetime' ? (t === 'date' || t === 'System.Date' ? 'date' : 'dateTime') : undefined;
  const result = (text: string) => new Typed(TEMPORAL_TYPES[kind], text, undefined);
  if (own !== undefined) {
    if (own === kind) return result(v);
    if (kind === 'date' && own === 'dateTime') return result(v.length > 10 ? v.slice(0, 10) : v);
    if (kind === 'dateTime' && own === 'date') return result(v);
    return undefined;
  }
  if (category !== 'string' || v.length > 40) return undefined;
  if (kind === 'time') return parseTime(v, DA) ? result(v) : undefined;
  if (!parseDateTime(v, DA)) return undefined;
  return kind === 'dateTime' || DA.precision <= 2 ? result(v) : undefined;
}

/** Removes FHIRPath's whitespace (tab, space, line feed, carriage return: its lexical category) from both ends. */
function trimWhitespace(s: string): string {
  const ws = (c: number) => c === 32 || c === 9 || c === 10 || c === 13;
  let start = 0;
  let end = s.length;
  while (start < end && ws(s.charCodeAt(start))) start++;
  while (end > start && ws(s.charCodeAt(end - 1))) end--;
  return s.slice(start, end);
}

/**
 * aggregate(aggregator [, init]): `$total` starts as `init` (evaluated once, on the outer context; empty without
 * one) and becomes the aggregator's result for each item in turn (`$this`, `$index` set); the last `$total` is the
 * result. `$total` is typed as `init` when the aggregator keeps that type (`$this + $total, 0` stays an Integer);
 * otherwise each of its items carries its own type.
 */
function aggregate(input: Expr, aggregatorAst: Ast, initAst: Ast | undefined, scope: Scope): Expr {
  const init = initAst === undefined ? constExpr(undefined, EMPTY) : build(initAst, scope);
  // An aggregator is compiled for up to three types of `$total`; one nested in it, in each of those compilations
  // again. Compiled once for each type of `$this` and `$total` (what its scope varies by within one expression),
  // the levels of an expression that nests them add compilations (at most three each) where they multiplied them
  // (30 levels: 3^30). Until the fifty-fourth session a nested one was compiled once, `$total` untyped, and an
  // Integer sum in it was a Decimal.
  const aggregators = scope.aggregators ?? new Map<Ast, Map<string, Expr>>();
  let compiled = aggregators.get(aggregatorAst);
  if (compiled === undefined) aggregators.set(aggregatorAst, (compiled = new Map()));
  const compile = (totalType: string | undefined): Expr => {
    const key = `${input.type ?? ''}|${totalType ?? ''}`;
    let e = compiled.get(key);
    if (e === undefined) compiled.set(key, (e = build(aggregatorAst, { ...scope, thisType: input.type, iterating: true, total: { type: totalType }, aggregators })));
    return e;
  };
  let aggregator = compile(init.type);
  let type = init.type;
  if (aggregator.type !== type) {
    // Without an init (an empty one suits every type), the aggregator's own type may hold throughout.
    const again = initAst === undefined && aggregator.type !== undefined ? compile(aggregator.type) : undefined;
    if (again !== undefined && again.type === aggregator.type) {
      type = aggregator.type;
      aggregator = again;
    } else {
      type = undefined;
      aggregator = compile(undefined);
    }
  }
  return aggregated(input, init, aggregator, type);
}

/** aggregate()'s evaluation: `aggregator` run for each item with `$total`; `type`, when known, that of every `$total`. */
function aggregated(input: Expr, init: Expr, aggregator: Expr, type: string | undefined): Expr {
  const typed = (items: Coll, itemsType: string | undefined): Coll => {
    if (type !== undefined || itemsType === undefined) return items;
    const out: unknown[] = [];
    retype(items, itemsType, out);
    return out;
  };
  return collExpr(type, (env) => {
    const items = input.coll(env);
    let total = typed(init.coll(env), init.type);
    const savedThis = env.this;
    const savedIndex = env.index;
    const savedTotal = env.total;
    try {
      for (let i = 0; i < items.length; i++) {
        env.this = items[i];
        env.index = i;
        env.total = total;
        total = typed(aggregator.coll(env), aggregator.type);
      }
    } finally {
      env.this = savedThis;
      env.index = savedIndex;
      env.total = savedTotal;
    }
    return total;
  });
}

/**
 * A Decimal's text in the digits its precision functions read: as written (`1.50`), or where it was written in exponent
 * notation (a FHIR decimal's JSON may be, `1.5E2`) as N1 writes the number (`150`).
 */
function plainDecimalText(written: string, value: number): string {
  return written.includes('e') || written.includes('E') ? numberText(value) : written;
}

/** The kind of a date or time item (a FHIR instant a DateTime), or undefined for an item of another type. */
function temporalKindOf(item: unknown, type: string | undefined): TemporalKind | undefined {
  const category = categoryOf(item, type);
  if (category === 'time') return 'time';
  if (category !== 'datetime') return undefined;
  const t = typeOfItem(item, type);
  return t === 'date' || t === 'System.Date' ? 'date' : 'dateTime';
}

/**
 * lowBoundary([precision]) and highBoundary([precision]) (FHIRPath 2.0, STU): of a single Decimal or Integer (a
 * Decimal to `precision` places, 8 without one), a Quantity (its value's, its unit kept), a Date, DateTime or Time
 * (to `precision` digits, the kind's finest without one) the least or greatest value it stands for
 * (fhirpath-boundary.ts); nothing for a precision the type is not written to; an error on another item.
 */
function boundaryFunction(input: Expr, args: Ast[], scope: Scope, high: boolean): Expr {
  const precisionOf = args[0] === undefined ? undefined : integerArgument(build(args[0], scope), high ? 'highBoundary' : 'lowBoundary');
  const name = high ? 'highBoundary' : 'lowBoundary';
  const decimalType = (t: string | undefined) => (t !== undefined && CATEGORIES.get(t) === 'number' ? 'System.Decimal' : t);
  return collExpr(decimalType(input.type), (env) => {
    const item = single(input.coll(env));
    const v = valueOf(item);
    if (v === undefined || v === null) return EMPTY;
    let precision: number | undefined;
    if (precisionOf !== undefined) {
      precision = precisionOf(env);
      if (precision === undefined) return EMPTY;
    }
    const category = categoryOf(item, input.type);
    if (category === 'number' && typeof v === 'number') {
      const text = decimalBoundary(plainDecimalText(numberTextOf(item, v), v), precision ?? DEFAULT_DECIMAL_PRECISION, high);
      return text === undefined ? EMPTY : [decimalItem('System.Decimal', Number(text), text)];
    }
    if (category === 'quantity' && isObject(v) && typeof v.value === 'number') {
      const written = item instanceof Typed && item.text !== undefined ? item.text : literalOf(v, 'value') ?? numberText(v.value);
      const text = decimalBoundary(plainDecimalText(written, v.value), precision ?? DEFAULT_DECIMAL_PRECISION, high);
      if (text === undefined) return EMPTY;
      return [new Typed(typeOfItem(item, input.type) ?? 'System.Quantity', { ...v, value: Number(text) }, undefined, text)];
    }
    const kind = temporalKindOf(item, input.type);
    if (kind !== undefined && typeof v === 'string') {
      const text = temporalBoundary(v, kind, precision, high);
      return text === undefined ? EMPTY : [new Typed(TEMPORAL_TYPES[kind], text, undefined)];
    }
    throw new EvaluationError(`${name}() applies to a Decimal, an Integer, a Quantity, a Date, a DateTime or a Time`);
  });
}

/**
 * precision() (FHIRPath 2.0, STU): the digits of precision of a single Decimal (its places as written: `1.58700` 5; an
 * Integer 0), Date, DateTime or Time (`@2014` 4, `@2014-01-05T10:30:00.000` 17, `@T10:30` 4); an error on another item.
 */
function precisionFunction(input: Expr): Expr {
  return collExpr('System.Integer', (env) => {
    const item = single(input.coll(env));
    const v = valueOf(item);
    if (v === undefined || v === null) return EMPTY;
    let digits: number | undefined;
    if (typeof v === 'number' && categoryOf(item, input.type) === 'number') digits = decimalPrecision(plainDecimalText(numberTextOf(item, v), v));
    else {
      const kind = temporalKindOf(item, input.type);
      if (kind === undefined) throw new EvaluationError('precision() applies to a Decimal, a Date, a DateTime or a Time');
      if (typeof v === 'string') digits = temporalPrecision(v, kind);
    }
    return digits === undefined ? EMPTY : [digits];
  });
}

/**
 * comparable(quantity) (FHIRPath 2.0, STU): whether two single quantities' units convert into each other: two UCUM units
 * of one dimension (`1 'cm'.comparable(1 '[in_i]')`), a calendar duration with another or with a UCUM time, two of one
 * unit of another system; nothing when either is empty; an error on an item that is no quantity.
 */
function comparableFunction(input: Expr, other: Expr): Expr {
  const ucumOf = (q: QuantityParts): string | undefined => (q.system === CALENDAR ? CALENDAR_UCUM.get(q.unit) : q.system === UCUM ? q.unit : undefined);
  return boolExpr((env) => {
    const a = single(input.coll(env));
    const b = single(other.coll(env));
    if (a === undefined || b === undefined) return undefined;
    if (categoryOf(a, input.type) !== 'quantity' || categoryOf(b, other.type) !== 'quantity' || !quantityParts(a, QA) || !quantityParts(b, QB)) {
      throw new EvaluationError('comparable() applies to two quantities');
    }
    const [ua, ub] = [ucumOf(QA), ucumOf(QB)];
    if (ua !== undefined && ub !== undefined) return ua === ub || commensurable(ua, ub) !== null;
    return QA.system === QB.system && QA.unit === QB.unit;
  });
}

/**
 * encode(), decode(), escape() and unescape() (FHIRPath 2.0, STU; fhirpath-text.ts) on a single string with a format or
 * target: nothing for a text that does not decode, an error for a format they do not define or an argument that is no
 * string. The result's length is charged as text too (hex doubles a string).
 */
function encodingFunction(input: Expr, args: Ast[], scope: Scope, name: string, fn: (s: string, format: string) => string | undefined): Expr {
  return stringFunction(input, args, scope, 'System.String', (s, format, _, env) => {
    if (typeof format !== 'string') throw new EvaluationError(`${name}() takes a string`);
    let out: string | undefined;
    try {
      out = fn(s, format);
    } catch (err) {
      if (err instanceof EncodingFormatError) throw new EvaluationError(err.message);
      throw err;
    }
    if (out !== undefined) chargeText(env, out.length);
    return out;
  });
}

/**
 * sort([key, ...]) (FHIRPath 2.0, STU): the items ordered by their keys in turn, each key evaluated on the item (`$this`)
 * and ascending, or descending when the selector is written with a minus (`-family`, `-$this`; a minus on a string key
 * too); without a key by the items themselves. A key that is empty sorts before every value, descending too; keys that do not order
 * (dates of different precisions) keep the items' order, the sort being stable; many values for one key, or keys
 * that do not compare (a number and a string), are an error, as `<` is.
 */
function sortFunction(input: Expr, args: Ast[], scope: Scope): Expr {
  const keys = args.map((arg) => {
    const descending = arg.kind === 'unary' && arg.op === '-';
    return { descending, expr: perItem(descending ? (arg as Extract<Ast, { kind: 'unary' }>).operand : arg, input, scope) };
  });
  return collExpr(input.type, (env) => {
    const items = input.coll(env);
    if (items.length <= 1) return items;
    charge(env, items.length);
    // Each item's keys, computed once: [key item, key type] per selector, undefined where the key is empty.
    const savedThis = env.this;
    const savedIndex = env.index;
    const keyed: { item: unknown; keys: (unknown[] | undefined)[] }[] = [];
    try {
      for (let i = 0; i < items.length; i++) {
        env.this = items[i];
        env.index = i;
        keyed.push({
          item: items[i],
          keys: keys.length === 0 ? [[items[i]]] : keys.map((k) => {
            const v = single(k.expr.coll(env));
            return v === undefined || valueOf(v) === null || valueOf(v) === undefined ? undefined : [v];
          }),
        });
      }
    } finally {
      env.this = savedThis;
      env.index = savedIndex;
    }
    const keyTypes = keys.length === 0 ? [input.type] : keys.map((k) => k.expr.type);
    keyed.sort((a, b) => {
      for (let k = 0; k < keyTypes.length; k++) {
        const x = a.keys[k];
        const y = b.keys[k];
        // An empty key comes first either way (HL7's case: `name.sort(-family)` puts the name without a family first).
        if (x === undefined || y === undefined) {
          if (x !== y) return x === undefined ? -1 : 1;
          continue;
        }
        const order = compareItems(x[0], keyTypes[k], y[0], keyTypes[k]) ?? 0;
        if (order !== 0) return keys[k]?.descending ? -order : order;
      }
      return 0;
    });
    return keyed.map((k) => k.item);
  });
}

/** The names of the environment's own variables (`%resource`, `%ucum`...), which defineVariable() may not define again. */
const RESERVED_VARIABLES = new Set(['resource', 'rootResource', 'context', 'extension', 'previous', 'current', 'ucum', 'sct', 'loinc']);

/** The name of a defineVariable() call (its string literal), or undefined for another node. */
function definedName(ast: Ast): string | undefined {
  if (ast.kind !== 'call' || ast.name !== 'defineVariable') return undefined;
  const arg = ast.args[0];
  return arg?.kind === 'literal' && arg.literal.kind === 'string' ? arg.literal.value : undefined;
}

/**
 * `scope` with the variables defined along the invocation chain `target` (`a.defineVariable('x').b` is the chain of
 * `.c(...)` in `a.defineVariable('x').b.c(%x)`): those its functions' arguments and indexes may read. A variable is
 * seen by what follows it in its chain and by nothing else (another branch of a union, the other side of an `and`).
 */
function chainScope(target: Ast | undefined, scope: Scope): Scope {
  let names: Set<string> | undefined;
  for (let node = target; node !== undefined; node = node.kind === 'call' || node.kind === 'member' || node.kind === 'indexer' ? node.target : undefined) {
    const name = definedName(node);
    if (name !== undefined) (names ??= new Set(scope.variables)).add(name);
  }
  return names === undefined ? scope : { ...scope, variables: names };
}

/**
 * defineVariable(name [, expr]) (FHIRPath 2.0, STU): the input unchanged, `%name` set to `expr` (evaluated on each
 * input item, as select() is; the input itself without one) for the rest of the invocation chain (chainScope). The
 * name is a string literal; one the environment defines (`%resource`, `%ucum`, `%vs-...`) or the chain defined
 * already is a compile-time error, as a variable read outside its chain is (an unknown `%name`).
 */
function defineVariableFunction(input: Expr, args: Ast[], scope: Scope, c: Call): Expr {
  const name = definedName(c);
  if (name === undefined) throw new FhirPathSyntaxError(scope.expression, args[0]!.at, 'defineVariable() takes its name as a string literal');
  if (RESERVED_VARIABLES.has(name) || name.startsWith('vs-') || name.startsWith('ext-') || scope.variables?.has(name)) {
    throw new FhirPathSyntaxError(scope.expression, c.at, `%${name} is defined already`);
  }
  const value = args[1] === undefined ? undefined : perItem(args[1], input, scope);
  return collExpr(input.type, (env) => {
    const items = input.coll(env);
    const out: unknown[] = [];
    if (value === undefined) retype(items, input.type, out);
    else projectItems(env, items, value, out, true);
    (env.vars ??= new Map()).set(name, out);
    return items;
  });
}

/**
 * The component functions of FHIRPath 2.0 (STU): yearOf() ... millisecondOf() an Integer, timezoneOffsetOf() a Decimal
 * of hours, dateOf() a Date, timeOf() a Time, of a single item of the kinds each takes (`takes`); nothing where the
 * value lacks the component (`@2012.monthOf()`), an error on an item of another type or on many.
 */
function componentFunction(input: Expr, name: string, takes: readonly TemporalKind[], type: string, read: (text: string, kind: TemporalKind) => unknown): Expr {
  return collExpr(type, (env) => {
    const item = single(input.coll(env));
    const v = valueOf(item);
    if (v === undefined || v === null) return EMPTY;
    const kind = temporalKindOf(item, input.type);
    if (kind === undefined || !takes.includes(kind) || typeof v !== 'string') {
      throw new EvaluationError(`${name}() applies to a ${takes.map((k) => TEMPORAL_TYPES[k].slice('System.'.length)).join(' or a ')}`);
    }
    const r = read(v, kind);
    return r === undefined ? EMPTY : [r];
  });
}

const DATES: readonly TemporalKind[] = ['date', 'dateTime'];
const ALL_TEMPORAL: readonly TemporalKind[] = ['date', 'dateTime', 'time'];

/** The component functions by name: the kinds each takes, its type, and its reading of the value's text. */
const COMPONENT_FUNCTIONS: [string, readonly TemporalKind[], string, (text: string, kind: TemporalKind) => unknown][] = [
  ...(['year', 'month', 'day'] as const).map((c): [string, readonly TemporalKind[], string, (text: string, kind: TemporalKind) => unknown] => [`${c}Of`, DATES, 'System.Integer', (t, k) => temporalComponent(t, k, c)]),
  ...(['hour', 'minute', 'second', 'millisecond'] as const).map((c: TemporalComponent): [string, readonly TemporalKind[], string, (text: string, kind: TemporalKind) => unknown] => [`${c}Of`, ALL_TEMPORAL, 'System.Integer', (t, k) => temporalComponent(t, k, c)]),
  ['timezoneOffsetOf', ['dateTime'], 'System.Decimal', (t) => {
    const text = timezoneOffset(t);
    return text === undefined ? undefined : decimalItem('System.Decimal', Number(text), text);
  }],
  ['dateOf', DATES, 'System.Date', (t) => {
    const text = datePart(t);
    return text === undefined ? undefined : new Typed('System.Date', text, undefined);
  }],
  ['timeOf', ['dateTime'], 'System.Time', (t) => {
    const text = timePart(t);
    return text === undefined ? undefined : new Typed('System.Time', text, undefined);
  }],
];

const FUNCTIONS = new Map<string, FunctionCompiler>([
  ['empty', (input, args, scope, c) => (arity(c, scope, 0, 0), boolExpr((env) => input.size(env) === 0))],
  ['exists', (input, args, scope, c) => {
    arity(c, scope, 0, 1);
    if (args.length === 0) return boolExpr((env) => input.size(env) > 0);
    const criteria = perItem(args[0]!, input, scope);
    return boolExpr((env) => findItem(env, input.coll(env), criteria, true) >= 0);
  }],
  ['all', (input, args, scope, c) => {
    arity(c, scope, 1, 1);
    const criteria = perItem(args[0]!, input, scope);
    return boolExpr((env) => findItem(env, input.coll(env), criteria, false) < 0);
  }],
  ...(['allTrue', 'anyTrue', 'allFalse', 'anyFalse'] as const).map((name): [string, FunctionCompiler] => [name, (input, args, scope, c) => {
    arity(c, scope, 0, 0);
    const wanted = name === 'allTrue' || name === 'anyTrue';
    const any = name.startsWith('any');
    return boolExpr((env) => {
      for (const item of input.coll(env)) {
        const v = valueOf(item);
        // A Boolean element with extensions and no value (`_active`) is neither true nor false: not all are true
        // (or false), and it makes none of them so; HL7's validator errs on neither.
        if ((v === undefined || v === null) && categoryOf(item, input.type) === 'boolean') {
          if (!any) return false;
          continue;
        }
        if (typeof v !== 'boolean') throw new EvaluationError(`${name}() on a non-Boolean`);
        if (any && v === wanted) return true;
        if (!any && v !== wanted) return false;
      }
      return !any;
    });
  }]),
  ['not', (input, args, scope, c) => {
    arity(c, scope, 0, 0);
    return boolExpr((env) => {
      const b = input.bool(env);
      return b === undefined ? undefined : !b;
    });
  }],
  ['count', (input, args, scope, c) => (arity(c, scope, 0, 0), collExpr('System.Integer', (env) => [input.size(env)]))],
  ['hasValue', (input, args, scope, c) => {
    arity(c, scope, 0, 0);
    return boolExpr((env) => {
      const items = input.coll(env);
      if (items.length !== 1) return false;
      const v = valueOf(items[0]);
      return v !== undefined && v !== null && typeof v !== 'object';
    });
  }],
  ['where', (input, args, scope, c) => {
    arity(c, scope, 1, 1);
    const criteria = perItem(args[0]!, input, scope);
    return collExpr(input.type, (env) => {
      const items = input.coll(env);
      const first = findItem(env, items, criteria, false);
      if (first < 0) return items;
      // From the first item left out on, copy the ones kept.
      const out = items.slice(0, first);
      const savedThis = env.this;
      const savedIndex = env.index;
      for (let i = first + 1; i < items.length; i++) {
        env.this = items[i];
        env.index = i;
        if (criteria.bool(env) === true) out.push(items[i]);
      }
      env.this = savedThis;
      env.index = savedIndex;
      return out;
    });
  }],
  ['select', (input, args, scope, c) => {
    arity(c, scope, 1, 1);
    const projection = perItem(args[0]!, input, scope);
    return collExpr(projection.type, (env) => {
      const items = input.coll(env);
      if (items.length === 0) return EMPTY;
      if (items.length === 1) {
        const saved = env.this;
        const savedIndex = env.index;
        env.this = items[0];
        env.index = 0;
        const r = projection.coll(env);
        env.this = saved;
        env.index = savedIndex;
        return r;
      }
      const out: unknown[] = [];
      projectItems(env, items, projection, out, false);
      return out;
    });
  }],
  ['repeat', (input, args, scope, c) => {
    arity(c, scope, 1, 1);
    const projection = perItem(args[0]!, { ...input, type: undefined }, scope);
    return collExpr(undefined, (env) => {
      const out: unknown[] = [];
      let level: unknown[] = [];
      retype(input.coll(env), input.type, level);
      // "Until no new items are found" (N1 § 5.2): a node of the resource is new once (by identity: two equal
      // Questionnaire items are two items), a primitive value once by its value (`repeat('test')` gives one 'test').
      const seenNodes = new Set<object>();
      const seenValues = new Set<string>();
      const isNew = (x: unknown): boolean => {
        const v = valueOf(x);
        if (v !== null && typeof v === 'object') {
          if (seenNodes.has(v)) return false;
          seenNodes.add(v);
          return true;
        }
        const key = `${typeof v}:${String(v)}`;
        if (seenValues.has(key)) return false;
        seenValues.add(key);
        return true;
      };
      while (level.length > 0) {
        const next: unknown[] = [];
        projectItems(env, level, projection, next, true);
        charge(env, next.length);
        const fresh = next.filter(isNew);
        for (const x of fresh) out.push(x);
        level = fresh;
        if (out.length > MAX_ITEMS) throw new EvaluationError('repeat() does not end');
      }
      return out;
    });
  }],
  ['ofType', (input, args, scope, c) => {
    arity(c, scope, 1, 1);
    const test = typeArgument(args[0]!, scope);
    const type = input.type;
    return collExpr(testedType(test) ?? (test.lenient === undefined ? undefined : type), (env) => {
      const items = input.coll(env);
      let out: unknown[] | undefined;
      for (let i = 0; i < items.length; i++) {
        const keep = typeMatches(typeOfItem(items[i], type), test);
        if (!keep && out === undefined) out = items.slice(0, i);
        else if (keep && out !== undefined) out.push(items[i]);
      }
      return out ?? items;
    });
  }],
  ['is', (input, args, scope, c) => (arity(c, scope, 1, 1), isType(input, typeArgument(args[0]!, scope)))],
  ['as', (input, args, scope, c) => (arity(c, scope, 1, 1), asType(input, typeArgument(args[0]!, scope)))],
  ['single', (input, args, scope, c) => (arity(c, scope, 0, 0), collExpr(input.type, (env) => {
    const items = input.coll(env);
    if (items.length > 1) throw new EvaluationError('single() on many');
    return items;
  }))],
  ['first', (input, args, scope, c) => (arity(c, scope, 0, 0), collExpr(input.type, (env) => {
    const items = input.coll(env);
    return items.length <= 1 ? items : [items[0]];
  }))],
  ['last', (input, args, scope, c) => (arity(c, scope, 0, 0), collExpr(input.type, (env) => {
    const items = input.coll(env);
    return items.length <= 1 ? items : [items[items.length - 1]];
  }))],
  ['tail', (input, args, scope, c) => (arity(c, scope, 0, 0), collExpr(input.type, (env) => input.coll(env).slice(1)))],
  ['skip', (input, args, scope, c) => {
    arity(c, scope, 1, 1);
    const n = integerArgument(build(args[0]!, scope), 'skip');
    return collExpr(input.type, (env) => input.coll(env).slice(Math.max(0, n(env) ?? 0)));
  }],
  ['take', (input, args, scope, c) => {
    arity(c, scope, 1, 1);
    const n = integerArgument(build(args[0]!, scope), 'take');
    return collExpr(input.type, (env) => input.coll(env).slice(0, Math.max(0, n(env) ?? 0)));
  }],
  ['sort', (input, args, scope) => sortFunction(input, args, scope)],
  ['defineVariable', (input, args, scope, c) => (arity(c, scope, 1, 2), defineVariableFunction(input, args, scope, c))],
  ['distinct', (input, args, scope, c) => (arity(c, scope, 0, 0), collExpr(input.type, (env) => distinctItems(compared(env, input.coll(env)), input.type)))],
  ['isDistinct', (input, args, scope, c) => (arity(c, scope, 0, 0), boolExpr((env) => {
    return isDistinctColl(compared(env, input.coll(env)), input.type);
  }))],
  ['union', (input, args, scope, c) => {
    arity(c, scope, 1, 1);
    const other = build(args[0]!, scope);
    const type = joinTypes(input, other);
    return folded([input, other], () => collExpr(type, (env) => distinctItems(compared(env, combineColls(input, other, env)), type)));
  }],
  ['combine', (input, args, scope, c) => {
    arity(c, scope, 1, 1);
    const other = build(args[0]!, scope);
    return folded([input, other], () => collExpr(joinTypes(input, other), (env) => combineColls(input, other, env)));
  }],
  ['intersect', (input, args, scope, c) => {
    arity(c, scope, 1, 1);
    const other = build(args[0]!, scope);
    return collExpr(input.type, (env) => {
      const items = compared(env, input.coll(env));
      if (items.length === 0) return EMPTY;
      return distinctItems(filterMembers(items, input.type, compared(env, other.coll(env)), other.type, true), input.type);
    });
  }],
  ['exclude', (input, args, scope, c) => {
    arity(c, scope, 1, 1);
    const other = build(args[0]!, scope);
    return collExpr(input.type, (env) => {
      return filterMembers(compared(env, input.coll(env)), input.type, compared(env, other.coll(env)), other.type, false);
    });
  }],
  ...(['subsetOf', 'supersetOf'] as const).map((name): [string, FunctionCompiler] => [name, (input, args, scope, c) => {
    arity(c, scope, 1, 1);
    const other = build(args[0]!, scope);
    const [small, big] = name === 'subsetOf' ? [input, other] : [other, input];
    return boolExpr((env) => {
      const items = compared(env, small.coll(env));
      return filterMembers(items, small.type, compared(env, big.coll(env)), big.type, true).length === items.length;
    });
  }]),
  ['iif', (input, args, scope, c) => {
    arity(c, scope, 2, 3);
    // The criterion and results are evaluated on the input (at most one item) as `$this`.
    const inner: Scope = { ...scope, thisType: input.type };
    const criterion = build(args[0]!, inner);
    const then = build(args[1]!, inner);
    const otherwise = args[2] === undefined ? constExpr(undefined, EMPTY) : build(args[2], inner);
    const type = joinTypes(then, otherwise);
    const fromThis = c.target === undefined;
    return collExpr(type, (env) => {
      const saved = env.this;
      if (!fromThis) env.this = single(input.coll(env));
      const branch = criterion.bool(env) === true ? then : otherwise;
      const items = branch.coll(env);
      env.this = saved;
      if (type !== undefined || branch.type === undefined) return items;
      const out: unknown[] = [];
      retype(items, branch.type, out);
      return out;
    });
  }],
  ['children', (input, args, scope, c) => {
    arity(c, scope, 0, 0);
    const memo = new Map<string, Map<string, Child>>();
    const e = collExpr(undefined, (env) => {
      const out: unknown[] = [];
      childrenOf(scope.types, memo, input.coll(env), input.type, out);
      return out;
    }, (env) => childrenOf(scope.types, memo, input.coll(env), input.type, null));
    e.navigable = (env) => {
      const out: unknown[] = [];
      childrenOf(scope.types, memo, input.coll(env), input.type, out, true);
      return out;
    };
    return e;
  }],
  ['descendants', (input, args, scope, c) => {
    arity(c, scope, 0, 0);
    const memo = new Map<string, Map<string, Child>>();
    const e = collExpr(undefined, (env) => descendantsOf(env, scope.types, memo, input, false));
    e.navigable = (env) => descendantsOf(env, scope.types, memo, input, true);
    return e;
  }],
  ['extension', (input, args, scope, c) => {
    arity(c, scope, 1, 1);
    const url = build(args[0]!, scope);
    return collExpr('Extension', (env) => {
      const u = singleString(url.coll(env));
      if (u === undefined) return EMPTY;
      let out: unknown[] | undefined;
      for (const item of input.coll(env)) {
        const ext = objectOf(item)?.extension;
        if (!Array.isArray(ext)) continue;
        for (const e of ext) if (isObject(e) && e.url === u) (out ??= []).push(e);
      }
      return out ?? EMPTY;
    });
  }],
  ['trace', (input, args, scope, c) => {
    arity(c, scope, 1, 2);
    build(args[0]!, scope);
    if (args[1] !== undefined) perItem(args[1], input, scope);
    return input;
  }],
  ['type', (input, args, scope, c) => (arity(c, scope, 0, 0), collExpr(undefined, (env) => {
    const out: unknown[] = [];
    for (const item of input.coll(env)) {
      const info = typeInfoOf(item, input.type, scope.types);
      if (info !== undefined) out.push(info);
    }
    return out;
  }))],
  ['toChars', (input, args, scope, c) => (arity(c, scope, 0, 0), collExpr('System.String', (env) => {
    // N1 § 5.6: the characters of the string (code points: a surrogate pair is one), each charged as a value.
    const s = singleString(input.coll(env));
    if (s === undefined) return EMPTY;
    charge(env, s.length);
    return Array.from(s);
  }))],
  ['toString', (input, args, scope, c) => (arity(c, scope, 0, 0), collExpr('System.String', (env) => {
    const item = single(input.coll(env));
    const v = valueOf(item);
    if (v === undefined || v === null) return EMPTY;
    if (isObject(v)) {
      if (categoryOf(item, input.type) !== 'quantity' || typeof v.value !== 'number') return EMPTY;
      // The value as written: a literal's text, or a FHIR Quantity's as its JSON wrote it (`1.50`).
      const text = item instanceof Typed && item.text !== undefined ? item.text : literalOf(v, 'value') ?? numberText(v.value);
      return [`${text} '${String(v.code ?? v.unit ?? '1')}'`];
    }
    return [typeof v === 'number' ? numberTextOf(item, v) : String(v)];
  }))],
  ...conversions('Integer', 'System.Integer', integerOf),
  ...conversions('Decimal', 'System.Decimal', decimalOf),
  ...conversions('Boolean', 'System.Boolean', booleanOf),
  ...conversions('Date', 'System.Date', (item, type) => temporalOf(item, type, 'date')),
  ...conversions('DateTime', 'System.DateTime', (item, type) => temporalOf(item, type, 'dateTime')),
  ...conversions('Time', 'System.Time', (item, type) => temporalOf(item, type, 'time')),
  ['convertsToString', (input, args, scope, c) => (arity(c, scope, 0, 0), boolExpr((env) => {
    const item = single(input.coll(env));
    const v = valueOf(item);
    if (v === undefined || v === null) return undefined;
    return !isObject(v) || (categoryOf(item, input.type) === 'quantity' && typeof v.value === 'number');
  }))],
  ['aggregate', (input, args, scope, c) => {
    arity(c, scope, 1, 2);
    return aggregate(input, args[0]!, args[1], scope);
  }],
  ['trim', (input, args, scope, c) => (arity(c, scope, 0, 0), stringFunction(input, args, scope, 'System.String', trimWhitespace))],
  ['split', (input, args, scope, c) => {
    arity(c, scope, 1, 1);
    const separator = build(args[0]!, scope);
    return collExpr('System.String', (env) => {
      const s = singleString(input.coll(env));
      const sep = singleString(separator.coll(env));
      if (s === undefined || sep === undefined) return EMPTY;
      chargeText(env, s.length);
      // The parts are charged before they are made. An empty separator splits between characters (code points, a
      // surrogate pair kept whole), as toChars() does.
      let count = 1;
      if (sep === '') count = s.length;
      else for (let at = s.indexOf(sep); at >= 0; at = s.indexOf(sep, at + sep.length)) count++;
      charge(env, count);
      return sep === '' ? Array.from(s) : s.split(sep);
    });
  }],
  ['join', (input, args, scope, c) => {
    arity(c, scope, 0, 1);
    const separator = args[0] === undefined ? undefined : build(args[0], scope);
    return collExpr('System.String', (env) => {
      const items = input.coll(env);
      if (items.length === 0) return EMPTY;
      const sep = separator === undefined ? '' : singleString(separator.coll(env));
      if (sep === undefined) return EMPTY;
      const parts: string[] = [];
      let length = 0;
      for (const item of items) {
        const v = valueOf(item);
        const string = categoryOf(item, input.type) === 'string';
        // A string element with extensions and no value (`_given` with a data-absent-reason) has no text to join (as
        // FHIRPath.js reads it; HL7's validator errs on it no more).
        if ((v === undefined || v === null) && string) continue;
        if (typeof v !== 'string' || !string) throw new EvaluationError('join() applies to strings');
        parts.push(v);
        length += v.length + sep.length;
      }
      chargeText(env, length);
      return [parts.join(sep)];
    });
  }],
  ['abs', (input, args, scope, c) => (arity(c, scope, 0, 0), collExpr(input.type, (env) => {
    const item = single(input.coll(env));
    const v = valueOf(item);
    if (v === undefined || v === null) return EMPTY;
    if (typeof v === 'number') return isIntegerType(input.type) ? int32Result(Math.abs(v)) : [Math.abs(v)];
    return [signedQuantity(item, input.type, Math.abs)];
  }))],
  ...[...UNARY_MATH].map(([name, fn]): [string, FunctionCompiler] => [name, (input, args, scope, c) => (arity(c, scope, 0, 0), mathFunction(input, [], scope, name, (x) => fn(x)))]),
  ['log', (input, args, scope, c) => (arity(c, scope, 1, 1), mathFunction(input, args, scope, 'log', (x, base) => logarithm(x, base!)))],
  ['power', (input, args, scope, c) => (arity(c, scope, 1, 1), mathFunction(input, args, scope, 'power', (x, exponent) => power(x, exponent!)))],
  ['round', (input, args, scope, c) => (arity(c, scope, 0, 1), mathFunction(input, args, scope, 'round', (x, precision) => {
    if (precision !== undefined && (!Number.isInteger(precision) || precision < 0)) throw new EvaluationError('round() takes a precision that is an integer of 0 or more');
    return roundTo(x, precision ?? 0);
  }))],
  ['lowBoundary', (input, args, scope, c) => (arity(c, scope, 0, 1), boundaryFunction(input, args, scope, false))],
  ['highBoundary', (input, args, scope, c) => (arity(c, scope, 0, 1), boundaryFunction(input, args, scope, true))],
  ['precision', (input, args, scope, c) => (arity(c, scope, 0, 0), precisionFunction(input))],
  ...COMPONENT_FUNCTIONS.map(([name, takes, type, read]): [string, FunctionCompiler] => [name, (input, args, scope, c) => (arity(c, scope, 0, 0), componentFunction(input, name, takes, type, read))]),
  ['comparable', (input, args, scope, c) => (arity(c, scope, 1, 1), comparableFunction(input, build(args[0]!, scope)))],
  ['toQuantity', (input, args, scope, c) => (arity(c, scope, 0, 1), quantityConversion(input, args, scope, false))],
  ['convertsToQuantity', (input, args, scope, c) => (arity(c, scope, 0, 1), quantityConversion(input, args, scope, true))],
  ['now', (input, args, scope, c) => currentExpr('dateTime', scope, c)],
  ['today', (input, args, scope, c) => currentExpr('date', scope, c)],
  ['timeOfDay', (input, args, scope, c) => currentExpr('time', scope, c)],
  ['length', (input, args, scope, c) => (arity(c, scope, 0, 0), stringFunction(input, args, scope, 'System.Integer', (s) => s.length))],
  ['lower', (input, args, scope, c) => (arity(c, scope, 0, 0), stringFunction(input, args, scope, 'System.String', (s) => s.toLowerCase()))],
  ['upper', (input, args, scope, c) => (arity(c, scope, 0, 0), stringFunction(input, args, scope, 'System.String', (s) => s.toUpperCase()))],
  ['startsWith', (input, args, scope, c) => (arity(c, scope, 1, 1),
    stringFunction(input, args, scope, 'System.Boolean', (s, p) => s.startsWith(p as string)))],
  ['endsWith', (input, args, scope, c) => (arity(c, scope, 1, 1),
    stringFunction(input, args, scope, 'System.Boolean', (s, p) => s.endsWith(p as string)))],
  ['contains', (input, args, scope, c) => (arity(c, scope, 1, 1),
    stringFunction(input, args, scope, 'System.Boolean', (s, p) => s.includes(p as string)))],
  ['indexOf', (input, args, scope, c) => (arity(c, scope, 1, 1),
    stringFunction(input, args, scope, 'System.Integer', (s, p) => s.indexOf(p as string)))],
  // FHIRPath 2.0 (STU): the last position of the substring, -1 without one; an empty substring is found at the end.
  ['lastIndexOf', (input, args, scope, c) => (arity(c, scope, 1, 1),
    stringFunction(input, args, scope, 'System.Integer', (s, p) => s.lastIndexOf(p as string)))],
  ['substring', (input, args, scope, c) => {
    arity(c, scope, 1, 2);
    const start = integerArgument(build(args[0]!, scope), 'substring');
    const length = args[1] === undefined ? undefined : integerArgument(build(args[1], scope), 'substring');
    return collExpr('System.String', (env) => {
      const s = singleString(input.coll(env));
      if (s === undefined) return EMPTY;
      const from = start(env);
      const n = length === undefined ? NO_ARGUMENT : length(env);
      if (from === undefined || n === undefined) return EMPTY;
      chargeText(env, s.length);
      if (from < 0 || from >= s.length) return EMPTY;
      return [n === NO_ARGUMENT ? s.slice(from) : s.slice(from, from + Math.max(0, n))];
    });
  }],
  ['replace', (input, args, scope, c) => (arity(c, scope, 2, 2),
    stringFunction(input, args, scope, 'System.String', (s, p, r, env) => {
      // N1: an empty pattern surrounds every character with the substitution (`'abc'.replace('', 'x')` is 'xaxbxcx').
      const parts = p === '' ? ['', ...Array.from(s), ''] : s.split(p as string);
      // What the answer will hold is charged before it is made: one replace() may multiply a string's length.
      chargeText(env, s.length + (parts.length - 1) * Math.max(0, (r as string).length - (p as string).length));
      return parts.join(r as string);
    }))],
  ['matches', (input, args, scope, c) => matchesFunction(input, args, scope, c, false)],
  // The whole string must match: the pattern anchored at both ends (matches() finds it anywhere).
  ['matchesFull', (input, args, scope, c) => matchesFunction(input, args, scope, c, true)],
  ['encode', (input, args, scope, c) => (arity(c, scope, 1, 1), encodingFunction(input, args, scope, 'encode', encodeText))],
  ['decode', (input, args, scope, c) => (arity(c, scope, 1, 1), encodingFunction(input, args, scope, 'decode', decodeText))],
  ['escape', (input, args, scope, c) => (arity(c, scope, 1, 1), encodingFunction(input, args, scope, 'escape', escapeText))],
  ['unescape', (input, args, scope, c) => (arity(c, scope, 1, 1), encodingFunction(input, args, scope, 'unescape', unescapeText))],
  ['replaceMatches', (input, args, scope, c) => {
    arity(c, scope, 2, 3);
    const regex = regexFunctionArgument(args[0]!, args[2], scope, 'g', false);
    const replacement = build(args[1]!, scope);
    return collExpr('System.String', (env) => {
      const s = singleString(input.coll(env));
      const r = regex(env);
      const with_ = singleString(replacement.coll(env));
      if (s === undefined || r === undefined || with_ === undefined) return EMPTY;
      chargeText(env, s.length + with_.length);
      return [scope.clientWritten ? guarded(r, () => s.replace(r, with_), tooCostlyRegex) : s.replace(r, with_)];
    });
  }],
]);

/**
 * `descendants()`: the children of `input`'s items, then theirs, level by level (each level charged whole, and
 * held to MAX_ITEMS); with `navigable`, only those a member step reads (Expr.navigable), the others only counted.
 */
function descendantsOf(env: Env, types: FhirPathTypes, memo: Map<string, Map<string, Child>>, input: Expr, navigable: boolean): Coll {
  const out: unknown[] = [];
  let level: unknown[] = [];
  let count = childrenOf(types, memo, input.coll(env), input.type, level, navigable);
  let total = 0;
  while (count > 0) {
    charge(env, count);
    total += count;
    for (const x of level) out.push(x);
    if (total > MAX_ITEMS) throw new EvaluationError('descendants() too many');
    const next: unknown[] = [];
    count = childrenOf(types, memo, level, undefined, next, navigable);
    level = next;
  }
  return out;
}

function call(ast: Call, scope: Scope): Expr {
  const compile = FUNCTIONS.get(ast.name);
  if (compile === undefined) {
    throw new UnsupportedFhirPath(scope.expression, ast.at, NOT_EVALUATED.has(ast.name) ? `${ast.name}()` : `unknown function ${ast.name}()`);
  }
  const input: Expr = ast.target === undefined
    ? collExpr(scope.thisType, (env) => (env.this === undefined ? EMPTY : [env.this]), (env) => (env.this === undefined ? 0 : 1))
    : build(ast.target, scope);
  const e = compile(input, ast.args, chainScope(ast.target, scope), ast);
  return scope.clientWritten ? budgeted(e) : e;
}

/**
 * Compiles an invariant (`ElementDefinition.constraint.expression`); throws UnsupportedFhirPath for a
 * construct the engine does not evaluate and FhirPathSyntaxError for one that is not FHIRPath. The
 * result runs on a focus value of a FHIR type: true when the invariant holds (its result is not
 * `false`; with `emptyFails`, only when it is `true`, as HL7's validator takes an invariant's result:
 * an empty one fails). It throws FhirPathEvaluationError for a run-time error (N1's "error": `single()` on
 * many, a string function on a number...; the engine's own fault turned into one), which the caller reports
 * as the invariant's failure, as HL7's validator does, never as holding: R4's own invariants as a tenant's
 * (until the fifty-fifth session R4's held on an error, so a resource their evaluation failed on was accepted).
 * With `guarded` the expression is a client's (a tenant's profile), held as a FHIRPath Patch path is to the
 * regex guard and to the context's `budget`, and throws FhirPathTooCostly when it cannot be evaluated for either.
 */
export function compileInvariant(expression: string, types: FhirPathTypes, guarded = false, emptyFails = false): CompiledInvariant {
  return compiling(expression, () => invariantOf(expression, types, guarded, emptyFails));
}

function invariantOf(expression: string, types: FhirPathTypes, guarded: boolean, emptyFails: boolean): CompiledInvariant {
  const ast = parseFhirPath(expression);
  const scopeOf = (focusType: string | undefined): Scope => {
    const type = staticType(normaliseType(focusType));
    const scope: Scope = { expression, types, thisType: type, contextType: type, iterating: false };
    if (guarded) scope.clientWritten = true;
    return scope;
  };
  const generic = build(ast, scopeOf(undefined));
  const specialise = (focusType: string): Expr => {
    try {
      return build(ast, scopeOf(focusType));
    } catch {
      return generic;
    }
  };
  const byType = new Map<string, Expr>();
  const env: Env = { this: undefined, index: 0, resource: undefined, rootResource: undefined, context: undefined };
  return (focus, focusType, ctx) => {
    try {
      let expr = generic;
      if (focusType !== undefined) {
        const known = byType.get(focusType);
        if (known === undefined) byType.set(focusType, (expr = specialise(focusType)));
        else expr = known;
      }
      env.this = focus === null ? undefined : focus;
      env.context = env.this;
      env.index = 0;
      env.resource = ctx.resource ?? undefined;
      env.rootResource = ctx.rootResource ?? undefined;
      env.memo = ctx.memo;
      env.budget = ctx.budget;
      env.clock = ctx.clock;
      env.instant = undefined;
      const result = expr.bool(env);
      if (!emptyFails) return result !== false;
      return result === undefined ? undefined : result;
    } catch (err) {
      throw asEvaluationError(err);
    }
  };
}

/**
 * `err`, thrown while evaluating an expression, as FHIRPath's run-time error: itself when it is one; the engine's own
 * (a stack too deep, a fault) as one too, so a client's expression that the engine fails on is said not to be
 * evaluable (a 4xx naming it, an invariant failed) rather than failing the request.
 */
function asEvaluationError(err: unknown): EvaluationError {
  if (err instanceof EvaluationError) return err;
  return new EvaluationError(err instanceof RangeError ? 'the expression nests too deeply to evaluate' : `the evaluation failed (${err instanceof Error ? err.message : String(err)})`);
}

/**
 * `compile()`, a client's expression compiled: FHIRPath's own compile-time errors (FhirPathSyntaxError,
 * UnsupportedFhirPath) as they are, and the engine's own fault as UnsupportedFhirPath naming the expression (a 4xx where
 * a client wrote it), never another error.
 */
function compiling<T>(expression: string, compile: () => T): T {
  try {
    return compile();
  } catch (err) {
    if (err instanceof FhirPathSyntaxError || err instanceof UnsupportedFhirPath) throw err;
    const what = err instanceof RangeError ? 'an expression nested too deeply to compile' : `an expression the engine failed to compile (${err instanceof Error ? err.message : String(err)})`;
    throw new UnsupportedFhirPath(expression, 0, what);
  }
}

/**
 * An extension definition's expressions about where the extension may be used (R4 StructureDefinition
 * `context` of type `fhirpath`, and `contextInvariant`), a client's FHIRPath held as a profile's
 * invariants are (the regex guard, the context's `budget`: FhirPathTooCostly). Throws
 * UnsupportedFhirPath or FhirPathSyntaxError at compile time as compileInvariant does.
 */
export interface CompiledExtensionContext {
  /**
   * Whether the expression, evaluated on `resource` (of type `type`, the resource the extension is in),
   * selects `node`, the element holding the extension, by place (HL7's validator: the result "contains"
   * the container): the object itself, or for a primitive the `_name` object holding its extensions.
   * An evaluation error selects nothing.
   */
  selects(resource: Json, type: string, node: object, ctx: InvariantContext): boolean;
  /**
   * Whether the invariant holds on the element holding the extension (`value`, of type `type`; for a
   * primitive, `ext` is its `_name` object), with `%extension` the extension: read as HL7's validator
   * reads a context invariant, a single boolean is its value, an empty result or an error is false,
   * anything else true.
   */
  holds(value: unknown, type: string, ext: Json | undefined, extension: Json, ctx: InvariantContext): boolean;
}

export function compileExtensionContext(expression: string, types: FhirPathTypes, invariant: boolean): CompiledExtensionContext {
  return compiling(expression, () => extensionContextOf(expression, types, invariant));
}

function extensionContextOf(expression: string, types: FhirPathTypes, invariant: boolean): CompiledExtensionContext {
  const ast = parseFhirPath(expression);
  const scopeOf = (focusType: string | undefined): Scope => {
    const type = staticType(normaliseType(focusType));
    const scope: Scope = { expression, types, thisType: type, contextType: type, iterating: false, clientWritten: true };
    if (invariant) scope.extensionVariable = true;
    return scope;
  };
  const generic = build(ast, scopeOf(undefined));
  const byType = new Map<string, Expr>();
  const exprFor = (focusType: string): Expr => {
    let e = byType.get(focusType);
    if (e === undefined) {
      try {
        e = build(ast, scopeOf(focusType));
      } catch {
        e = generic;
      }
      byType.set(focusType, e);
    }
    return e;
  };
  const evaluate = (focus: unknown, focusType: string, ctx: InvariantContext, extension?: unknown): Coll | undefined => {
    const env: Env = { this: focus, index: 0, resource: ctx.resource, rootResource: ctx.rootResource, context: focus, memo: ctx.memo, budget: ctx.budget, clock: ctx.clock, extension };
    try {
      return exprFor(focusType).coll(env);
    } catch (err) {
      if (err instanceof FhirPathTooCostly) throw err;
      return undefined;
    }
  };
  return {
    selects(resource, type, node, ctx) {
      const items = evaluate(resource, type, ctx);
      if (items === undefined) return false;
      for (const item of items) {
        if (item === node || (item instanceof Typed && (item.value === node || item.ext === node))) return true;
      }
      return false;
    },
    holds(value, type, ext, extension, ctx) {
      const focus = isPrimitiveType(type) ? new Typed(type, value, ext) : value;
      const items = evaluate(focus, type, ctx, extension);
      if (items === undefined || items.length === 0) return false;
      if (items.length > 1) return true;
      const v = valueOf(items[0]);
      return typeof v === 'boolean' ? v : true;
    },
  };
}

/**
 * `ast` (a client's expression, `expression` its text) built for each FHIR type of its focus, once each, the
 * generic build where a type's fails: what compileCriterion and compileValues evaluate.
 */
function typedBuilds(ast: Ast, expression: string, types: FhirPathTypes, iterating: boolean, topicVariables = false): (focusType: string | undefined) => Expr {
  const scopeOf = (focusType: string | undefined): Scope => {
    const type = staticType(normaliseType(focusType));
    return { expression, types, thisType: type, contextType: type, iterating, clientWritten: true, ...(topicVariables && { topicVariables: true as const }) };
  };
  const generic = build(ast, scopeOf(undefined));
  const byType = new Map<string, Expr>();
  return (focusType) => {
    if (focusType === undefined) return generic;
    let known = byType.get(focusType);
    if (known === undefined) {
      try {
        known = build(ast, scopeOf(focusType));
      } catch {
        known = generic;
      }
      byType.set(focusType, known);
    }
    return known;
  };
}

/** A run-time error of a criterion compiled by compileCriterion (FHIRPath's "error": `single()` on many, ...). */
export { EvaluationError as FhirPathEvaluationError };

/**
 * A where() criterion on one item: true, false or undefined (empty); throws FhirPathEvaluationError. `ext`: a
 * primitive item's id and extensions (FHIR JSON's `_name` companion), its children; with it, `focus` may be
 * null (a primitive with extensions alone is an item all the same).
 */
export type CompiledCriterion = (focus: unknown, focusType: string | undefined, index: number, ctx: InvariantContext, ext?: Json) => boolean | undefined;

/**
 * Compiles `ast`, the criteria of a `where()` inside `expression` (a FHIRPath Patch path), into a
 * singleton-Boolean evaluation (§ 4.5) on one item of a FHIR type, with `$this` the item and `$index`
 * its position. Throws UnsupportedFhirPath at once for a construct the engine does not evaluate.
 */
export function compileCriterion(ast: Ast, expression: string, types: FhirPathTypes): CompiledCriterion {
  const exprFor = compiling(expression, () => typedBuilds(ast, expression, types, true));
  return (focus, focusType, index, ctx, ext) => {
    try {
      const expr = exprFor(focusType);
      const self = ext === undefined ? focus : new Typed(normaliseType(focusType) ?? 'string', focus ?? undefined, ext);
      const env: Env = { this: self, index, resource: ctx.resource, rootResource: ctx.rootResource, context: self, memo: ctx.memo, budget: ctx.budget, clock: ctx.clock };
      return expr.bool(env);
    } catch (err) {
      throw asEvaluationError(err);
    }
  };
}

/** The values a client's expression selects from one focus value (CompiledValues). */
export type CompiledValues = (focus: unknown, focusType: string | undefined, ctx: InvariantContext) => unknown[];

/**
 * Compiles a client's expression evaluated on one value for what it selects (GraphQL's `@slice(path:)`,
 * whose values name a slice): the items' values, a primitive's as its JSON value. Throws
 * UnsupportedFhirPath or FhirPathSyntaxError at once as compileInvariant does; an evaluation throws
 * FhirPathEvaluationError, or FhirPathTooCostly past the context's `budget` or the regex guard.
 */
export function compileValues(expression: string, types: FhirPathTypes): CompiledValues {
  const exprFor = compiling(expression, () => typedBuilds(parseFhirPath(expression), expression, types, false));
  return (focus, focusType, ctx) => {
    try {
      const expr = exprFor(focusType);
      const env: Env = { this: focus ?? undefined, index: 0, resource: ctx.resource, rootResource: ctx.rootResource, context: focus ?? undefined, memo: ctx.memo, budget: ctx.budget, clock: ctx.clock };
      return expr.coll(env).map(valueOf);
    } catch (err) {
      throw asEvaluationError(err);
    }
  };
}

/** The versions a SubscriptionTopic trigger's criteria reads: `%previous` (none for a create) and `%current` (none for a delete). */
export interface TopicVersions {
  previous: unknown;
  current: unknown;
}

/** A compiled fhirPathCriteria (compileTopicCriteria): its singleton Boolean, undefined when empty. */
export type CompiledTopicCriteria = (type: string, versions: TopicVersions, budget: NonNullable<InvariantContext['budget']>) => boolean | undefined;

/**
 * Compiles a SubscriptionTopic resourceTrigger's `fhirPathCriteria` (R5 subscriptiontopic.html), a client's
 * expression with `%previous` and `%current` (the version replaced, none for a create; the version written,
 * none for a delete), evaluated on the resource (`$this` and `%resource`: the current version, else the
 * previous) as a singleton Boolean (§ 4.5). Throws UnsupportedFhirPath (`resolve()`, `memberOf()`, `now()`...)
 * or FhirPathSyntaxError at once; an evaluation throws FhirPathEvaluationError (`single()` on many, more
 * than one result), or FhirPathTooCostly past `budget` or the regex guard.
 */
export function compileTopicCriteria(expression: string, types: FhirPathTypes): CompiledTopicCriteria {
  const exprFor = compiling(expression, () => typedBuilds(parseFhirPath(expression), expression, types, false, true));
  return (type, versions, budget) => {
    const focus = versions.current ?? versions.previous;
    const env: Env = {
      this: focus, index: 0, resource: focus, rootResource: focus, context: focus, budget, previous: versions.previous ?? undefined, current: versions.current ?? undefined,
    };
    try {
      return exprFor(type).bool(env);
    } catch (err) {
      throw asEvaluationError(err);
    }
  };
}
