import { z } from 'zod';
import { invalid, notSupported } from '../errors.ts';
import { CodeSystemSchema } from '../model/code-system.ts';
import { CodeableConceptSchema, CodingSchema } from '../model/datatypes.ts';
import { type DatePeriod, parseDateTime } from '../model/date-time.ts';
import { checkDepth } from '../model/depth.ts';
import { zodToError } from '../model/parse.ts';
import { ValueSetSchema } from '../model/value-set.ts';
import { ConceptMapSchema } from '../model/concept-map.ts';

/** How one operation input parameter is carried: its value[x] fields and its zod schema. */
export interface ParamKind<S extends z.ZodType = z.ZodType> {
  /** Accepted fields of a Parameters entry (`valueUri`, `resource`, ...). */
  readonly fields: readonly string[];
  /** Whether the GET form may carry it as a query parameter. */
  readonly primitive: boolean;
  readonly schema: S;
  /**
   * For kinds whose schema checks without transforming: true exactly for the values the schema
   * accepts unchanged, so the common request skips zod; anything else still goes through the schema,
   * which words the error.
   */
  readonly plain?: (value: unknown) => boolean;
}

const kind = <S extends z.ZodType>(fields: readonly string[], primitive: boolean, schema: S, plain?: (value: unknown) => boolean): ParamKind<S> =>
  plain === undefined ? { fields, primitive, schema } : { fields, primitive, schema, plain };

/** A BCP 47 tag, or a list of them as HTTP's Accept-Language writes it (`en, en-AU`, `de-CH,de;q=0.9` or `de, *;q=0`). */
const LANGUAGE_TAG = /^\s*([A-Za-z]{1,8}(-[A-Za-z0-9]{1,8})*|\*)(\s*;\s*q=[01](\.\d{0,3})?)?(\s*,\s*([A-Za-z]{1,8}(-[A-Za-z0-9]{1,8})*|\*)(\s*;\s*q=[01](\.\d{0,3})?)?)*\s*$/;
/** Whether `v` is a language tag or a list of them (a `displayLanguage` value, or an Accept-Language header). */
export function isLanguageList(v: string): boolean {
  return LANGUAGE_TAG.test(v);
}

/**
 * The languages an operation answers in: its `displayLanguage` input, else the request's Accept-Language
 * header (ignored when malformed), as HL7's reference terminology servers read it on every operation.
 */
export function displayLanguageOf(given: string | undefined, acceptLanguage: string | undefined): string | undefined {
  return given ?? (acceptLanguage !== undefined && isLanguageList(acceptLanguage) ? acceptLanguage : undefined);
}

const nonEmptyString = (v: unknown) => typeof v === 'string' && v.length > 0;

/** The parameter kinds used by the terminology operations (FHIR R4 data types). */
export const P = {
  uri: kind(['valueUri', 'valueUrl', 'valueCanonical', 'valueString'], true, z.string().min(1), nonEmptyString),
  code: kind(['valueCode', 'valueString'], true, z.string().min(1), nonEmptyString),
  string: kind(['valueString', 'valueCode'], true, z.string(), (v) => typeof v === 'string'),
  /** A BCP 47 language tag (`de`, `en-GB`), or a list of them in preference order, as `displayLanguage` carries it. */
  language: kind(['valueCode', 'valueString'], true, z.string().regex(LANGUAGE_TAG, 'must be a language tag such as de or en-GB'), (v) => typeof v === 'string' && LANGUAGE_TAG.test(v)),
  boolean: kind(['valueBoolean'], true, z.boolean(), (v) => typeof v === 'boolean'),
  integer: kind(['valueInteger', 'valueUnsignedInt', 'valuePositiveInt'], true, z.number().int().nonnegative(), (v) => Number.isSafeInteger(v) && (v as number) >= 0),
  dateTime: kind(['valueDateTime', 'valueDate', 'valueInstant', 'valueString'], true, z.string().transform(toDatePeriod)),
  coding: kind(['valueCoding'], false, CodingSchema),
  codeableConcept: kind(['valueCodeableConcept'], false, CodeableConceptSchema),
  valueSet: kind(['resource'], false, ValueSetSchema),
  codeSystem: kind(['resource'], false, CodeSystemSchema),
  conceptMap: kind(['resource'], false, ConceptMapSchema),
  /** ConceptMap/$translate's `dependency`: parts `element` (uri) and `concept` (CodeableConcept). */
  dependency: kind(['part'], false, z.array(z.looseObject({ name: z.string() })).transform(dependencyParts)),
  /** CodeSystem/$find-matches's `property`: parts `code` (code), `value` (value[x]) and `subproperty`. */
  findProperty: kind(['part'], false, z.array(z.looseObject({ name: z.string() })).transform(findPropertyParts)),
};

/** The value[x] types a concept property may hold (R4 CodeSystem.concept.property.value[x]). */
export const PROPERTY_VALUE_FIELDS = ['valueCode', 'valueCoding', 'valueString', 'valueInteger', 'valueBoolean', 'valueDateTime', 'valueDecimal'] as const;

/** One `property` input of $find-matches: its code, its value (one value[x] field), whether it has subproperties. */
export interface FindProperty {
  readonly code: string;
  readonly value?: Readonly<Record<string, unknown>>;
  readonly subproperty: boolean;
}

function findPropertyParts(parts: { name: string }[], ctx: z.RefinementCtx): FindProperty {
  let code: string | undefined;
  let value: Record<string, unknown> | undefined;
  let subproperty = false;
  for (const [i, part] of parts.entries()) {
    const p = part as Record<string, unknown>;
    const fields = Object.keys(p).filter((k) => k.startsWith('value'));
    if (p.name === 'code' && typeof p.valueCode === 'string' && p.valueCode !== '' && fields.length === 1) code = p.valueCode;
    else if (p.name === 'value' && fields.length === 1 && (PROPERTY_VALUE_FIELDS as readonly string[]).includes(fields[0]!) && p[fields[0]!] !== null) value = { [fields[0]!]: p[fields[0]!] };
    else if (p.name === 'subproperty') subproperty = true;
    else {
      ctx.addIssue({ code: 'custom', path: [i], message: `each part must be 'code' (valueCode), 'value' (one of ${PROPERTY_VALUE_FIELDS.join(', ')}) or 'subproperty'` });
      return z.NEVER;
    }
  }
  if (code === undefined) {
    ctx.addIssue({ code: 'custom', message: "a property needs its 'code' part (valueCode)" });
    return z.NEVER;
  }
  return value === undefined ? { code, subproperty } : { code, value, subproperty };
}

/** One `dependency` input of $translate: the element it is about and its value. */
export interface Dependency {
  readonly element?: string;
  readonly concept?: z.infer<typeof CodeableConceptSchema>;
}

const DependencyPartSchema = z.union([
  z.object({ name: z.literal('element'), valueUri: z.string().min(1) }),
  z.object({ name: z.literal('concept'), valueCodeableConcept: CodeableConceptSchema }),
]);

function dependencyParts(parts: { name: string }[], ctx: z.RefinementCtx): Dependency {
  const out: { element?: string; concept?: Dependency['concept'] } = {};
  for (const [i, part] of parts.entries()) {
    const parsed = DependencyPartSchema.safeParse(part);
    if (!parsed.success) {
      ctx.addIssue({ code: 'custom', path: [i], message: "each part must be 'element' (valueUri) or 'concept' (valueCodeableConcept)" });
      return z.NEVER;
    }
    if ('valueUri' in parsed.data) out.element = parsed.data.valueUri;
    else out.concept = parsed.data.valueCodeableConcept;
  }
  return out;
}

export interface ParamSpec {
  readonly kind: ParamKind;
  readonly repeats?: boolean;
}
export type OperationSpec = Readonly<Record<string, ParamSpec>>;

/** The typed inputs of an operation, as declared by its spec. */
export type OperationInput<S extends OperationSpec> = {
  [K in keyof S]?: S[K]['repeats'] extends true ? z.infer<S[K]['kind']['schema']>[] : z.infer<S[K]['kind']['schema']>;
};

/** A FHIR dateTime input as the period it names; a malformed or impossible date is a zod issue (400). */
function toDatePeriod(text: string, ctx: z.RefinementCtx): DatePeriod {
  const period = parseDateTime(text);
  if (period !== null) return period;
  const hint = / \d{2}:\d{2}$/.test(text) ? " (a '+' in a URL query must be written %2B)" : '';
  ctx.addIssue({ code: 'custom', message: `'${text}' is not a FHIR dateTime (YYYY, YYYY-MM, YYYY-MM-DD or YYYY-MM-DDThh:mm:ss+zz:zz)${hint}` });
  return z.NEVER;
}

const ParametersSchema = z.object({
  resourceType: z.literal('Parameters', { error: "the body must be a FHIR Parameters resource (resourceType 'Parameters')" }),
  parameter: z.array(z.looseObject({ name: z.string() })).optional(),
});
type ParameterEntry = { name: string } & Record<string, unknown>;

/** The entries of a body ParametersSchema accepts, found without zod; undefined when zod must judge it. */
function plainEntries(body: unknown): readonly ParameterEntry[] | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const { resourceType, parameter } = body as Record<string, unknown>;
  if (resourceType !== 'Parameters') return undefined;
  if (parameter === undefined) return [];
  if (!Array.isArray(parameter)) return undefined;
  for (const e of parameter) {
    if (typeof e !== 'object' || e === null || Array.isArray(e) || typeof (e as Record<string, unknown>).name !== 'string') return undefined;
  }
  return parameter as ParameterEntry[];
}

/** Query parameters of every interaction (FHIR R4 http.html), never an operation's input. */
const GENERAL = new Set(['_format', '_pretty']);

/**
 * The declared inputs of one operation, read from a Parameters resource (POST) or from the
 * URL query (GET, primitive inputs only) and validated once with zod (FHIR R4 Operations 3.1.0.1).
 * A parameter the operation does not take is ignored (HL7's terminology test cases send R5 ones, `tx-resource` say),
 * or a 400 naming it under strict handling (`Prefer: handling=strict`), as a search's is.
 * Create one per operation at start-up; reading is then cheap per request.
 */
export class OperationParameters<S extends OperationSpec> {
  private readonly schemas = new Map<string, z.ZodType>();

  /** `operation`: its name in messages (`ValueSet/$expand`). */
  constructor(readonly operation: string, readonly spec: S) {
    for (const [name, param] of Object.entries(spec)) {
      this.schemas.set(name, param.repeats === true ? z.array(param.kind.schema) : param.kind.schema);
    }
  }

  /** Inputs from a Parameters resource body; unknown parameter names are ignored, or a 400 when `strict`. */
  fromBody(body: unknown, strict = false): OperationInput<S> {
    checkDepth(body, 'The request body');
    let entries = plainEntries(body);
    if (entries === undefined) {
      const parsed = ParametersSchema.safeParse(body);
      if (!parsed.success) throw zodToError('The request body', parsed.error);
      entries = parsed.data.parameter ?? [];
    }
    const raw: Record<string, unknown> = {};
    for (const entry of entries) {
      const name = entry.name;
      const param = this.spec[name];
      if (param === undefined) {
        if (strict) throw this.notTaken(name);
        continue;
      }
      collect(raw, name, param, valueOf(entry, name, param.kind));
    }
    return this.validate(raw);
  }

  /** Inputs from URL query parameters (the GET form); unknown names are ignored, or a 400 when `strict`. */
  fromQuery(query: URLSearchParams, strict = false): OperationInput<S> {
    const raw: Record<string, unknown> = {};
    for (const [name, text] of query) {
      const param = this.spec[name];
      if (param === undefined) {
        if (strict && !GENERAL.has(name)) throw this.notTaken(name);
        continue;
      }
      if (!param.kind.primitive) throw invalid(`the parameter '${name}' cannot be given in the URL; POST a Parameters resource`, [name]);
      collect(raw, name, param, fromText(text, param.kind));
    }
    return this.validate(raw);
  }

  /**
   * The URL query of a POST, whose inputs are the body's: when `strict`, a 400 naming a parameter in it
   * other than `_format` and `_pretty`, which would be ignored.
   */
  checkPostQuery(query: URLSearchParams, strict: boolean): void {
    if (!strict) return;
    for (const name of query.keys()) if (!GENERAL.has(name)) throw notSupported(`'${name}' in the URL of a POST to ${this.operation} is not read: inputs go in the Parameters body`, [name]);
  }

  private notTaken(name: string) {
    return notSupported(`'${name}' is not a parameter of ${this.operation}`, [name]);
  }

  /** Validates each given input with its kind's schema (only given ones: this is per request). */
  private validate(raw: Record<string, unknown>): OperationInput<S> {
    const inputs: Record<string, unknown> = {};
    for (const name in raw) {
      const value = raw[name];
      const param = this.spec[name]!;
      if (param.repeats !== true && param.kind.plain?.(value) === true) {
        inputs[name] = value;
        continue;
      }
      const result = (this.schemas.get(name) as z.ZodType).safeParse(value);
      if (!result.success) throw zodToError(`The parameter '${name}'`, result.error, name);
      inputs[name] = result.data;
    }
    return inputs as OperationInput<S>;
  }
}

function valueOf(entry: Record<string, unknown>, name: string, k: ParamKind): unknown {
  let present = 0;
  let field: string | undefined;
  for (const key in entry) {
    if (!key.startsWith('value') && key !== 'resource' && key !== 'part') continue;
    present++;
    if (field === undefined && k.fields.includes(key)) field = key;
  }
  if (present === 0) throw invalid(`the parameter '${name}' has no value`, [name]);
  if (field === undefined || present > 1) {
    throw invalid(`the parameter '${name}' must be given as one of ${k.fields.join(', ')}`, [name]);
  }
  return entry[field];
}

function fromText(text: string, k: ParamKind): unknown {
  if (k === P.boolean) return text === 'true' ? true : text === 'false' ? false : text;
  if (k === P.integer) return /^\d{1,15}$/.test(text) ? Number(text) : text;
  return text;
}

function collect(raw: Record<string, unknown>, name: string, param: ParamSpec, value: unknown): void {
  if (param.repeats === true) {
    const list = (raw[name] as unknown[] | undefined) ?? [];
    list.push(value);
    raw[name] = list;
  } else if (name in raw) {
    throw invalid(`the parameter '${name}' may be given only once`, [name]);
  } else {
    raw[name] = value;
  }
}
