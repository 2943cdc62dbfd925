/**
 * The FHIR R4 GraphQL schema (FHIR R4 graphql.html), generated from the R4 definitions Cinder ships:
 * the element table the validator uses (r4-table.json) and the search parameters (definitions.ts).
 * Every resource, data type and backbone element is an object type whose fields are its JSON names
 * (a choice element one field per type, `valueQuantity`), primitives mapped as graphql.html says
 * (integer, positiveInt, unsignedInt: Int; decimal: Float; boolean: Boolean; id: ID; the others:
 * String), a primitive's extensions as `_name`. The root has `{Type}(id)`, `{Type}List(...)` and
 * `{Type}Connection(...)` per type; a Reference has `resource(optional, type)`; a resource has its
 * reverse references, `{Type}List(_reference: param, ...)`. The schema holds no state: what resolvers
 * read goes through the request's GraphqlContext.
 */
import {
  GraphQLBoolean, GraphQLEnumType, GraphQLFloat, GraphQLID, GraphQLInt, GraphQLList, GraphQLNonNull, GraphQLObjectType, GraphQLScalarType, GraphQLSchema,
  GraphQLString, GraphQLUnionType, specifiedDirectives, type GraphQLFieldConfig, type GraphQLFieldResolver, type GraphQLFieldConfigArgumentMap, type GraphQLFieldConfigMap, type GraphQLOutputType,
} from 'graphql';
import rawTable from '../validation/r4-table.json' with { type: 'json' };
import type { ValidationTable } from '../validation/table.ts';
import { isDomainResource, paramsOf, referrersOf } from '../definitions.ts';
import { literalOf } from '../exact-json.ts';
import { REST_RESOURCE_TYPES } from '../resource-types.ts';
import { FHIR_DIRECTIVES } from './directives.ts';

const table = rawTable as unknown as ValidationTable;

/** A resource as JSON, as resolvers hand it on. */
export type Json = Record<string, unknown>;

/** A page of a `{Type}Connection` (graphql.html "Searching"). */
export interface ConnectionPage {
  type: string;
  rows: Json[];
  /** The `_cursor` of the next page, when there may be one; of the previous one, when known. */
  next?: string;
  previous?: string;
  offset?: number;
  pageSize: number;
  /** Counts the search's matches the request may see (asked only when `count` is selected). */
  count(): Promise<number | undefined>;
}

/** What resolvers read through: the request's reads and searches, with its access and its limits. */
export interface GraphqlContext {
  /** A read of `type/id` as the REST read answers it (its errors included). */
  read(type: string, id: string): Promise<Json>;
  /** A search of `type` with these parameters (R4 names) as the REST search runs it. */
  search(type: string, params: URLSearchParams): Promise<Json[]>;
  connection(type: string, params: URLSearchParams): Promise<ConnectionPage>;
  /** The resource a Reference names (graphql.html "Resource References"); null when there is none to resolve. */
  resolve(reference: Json, options: { optional: boolean; type?: string }): Promise<Json | null>;
  /** Counts a field of the answer (limits.ts GraphqlBudget.answer); false past the limit, when the field answers null. */
  answer(key: string | number, value: unknown): boolean;
  /**
   * Whether other resources refer to `resource` as `Type/id`: a stored resource, not a contained one (its
   * id is its container's local name, `#p2`), a Bundle's entry or a Parameters' part (copies, of this
   * server's resources or another's), nor one without an id.
   */
  referable(resource: Json): boolean;
}

/**
 * A field's resolver that counts the field in the answer first (GraphqlContext.answer) and answers null,
 * resolving nothing, once the answer is past its limit; the fields without a resolver of their own are
 * counted by execute.ts's field resolver, with their values.
 */
function charged<S, A>(resolve: (source: S, args: A, ctx: GraphqlContext) => unknown): GraphQLFieldResolver<S, GraphqlContext, A> {
  return (source, args, ctx, info) => (ctx.answer(info.path.key, undefined) ? resolve(source, args, ctx) : null);
}

/** The JSON names that are search parameter names in GraphQL (`address-city` is `address_city`: graphql.html). */
export function argName(param: string): string {
  return param.replace(/-/g, '_');
}

const rawJSON = (JSON as unknown as { rawJSON(text: string): object }).rawJSON;
const isRawJSON = (JSON as unknown as { isRawJSON(v: unknown): boolean }).isRawJSON;

/**
 * graphql.html's Float, which a FHIR decimal is, written as it was stored: a decimal keeps its precision
 * (datatypes.html: `1.50` is not `1.5`, `12345678901234567890.5` is not a double). Its fields resolve to
 * the stored literal (decimalResolver); serialize hands it to the answer's JSON as it is, and any other
 * value as GraphQL's Float does. It stands in for Float throughout the schema (one type of a name).
 */
const FLOAT = new GraphQLScalarType({
  name: 'Float',
  description: GraphQLFloat.description,
  specifiedByURL: GraphQLFloat.specifiedByURL,
  serialize: (v) => (isRawJSON(v) ? v : GraphQLFloat.serialize(v)),
  parseValue: (v) => GraphQLFloat.parseValue(v),
  parseLiteral: (node, variables) => GraphQLFloat.parseLiteral(node, variables),
});

/** The stored literal of a number held at `holder[key]` (exact-json.ts), as raw JSON; else the number. */
const exactNumber = (holder: unknown, key: string | number, v: unknown): unknown => {
  const literal = typeof v === 'number' ? literalOf(holder, key) : undefined;
  return literal === undefined || !Object.is(Number(literal), v) ? v : rawJSON(literal);
};

/** A decimal element's resolver: its value (each item of a list) with the literal it was stored with. */
const decimalResolver: GraphQLFieldResolver<Json, GraphqlContext> = (source, _args, ctx, info) => {
  if (!ctx.answer(info.path.key, undefined)) return null;
  const v = source[info.fieldName];
  return Array.isArray(v) ? v.map((item, i) => exactNumber(v, i, item)) : exactNumber(source, info.fieldName, v);
};

const SCALARS: Record<string, GraphQLOutputType> = {
  boolean: GraphQLBoolean, integer: GraphQLInt, positiveInt: GraphQLInt, unsignedInt: GraphQLInt, decimal: FLOAT, id: GraphQLID,
};
const PRIMITIVES = new Set(['base64Binary', 'boolean', 'canonical', 'code', 'date', 'dateTime', 'decimal', 'id', 'instant', 'integer', 'markdown', 'oid',
  'positiveInt', 'string', 'time', 'unsignedInt', 'uri', 'url', 'uuid', 'xhtml']);

/** The GraphQL name of a table type (`Patient.contact`: `PatientContact`). */
function typeName(name: string): string {
  return name.split('.').map((s, i) => (i === 0 ? s : s[0]!.toUpperCase() + s.slice(1))).join('');
}

const capital = (s: string) => s[0]!.toUpperCase() + s.slice(1);

/**
 * A search parameter's argument: `[String]`, as the FHIR GraphQL schema HL7 generates declares search
 * parameters, so that one parameter takes several conditions, ANDed as a repeated REST parameter
 * (`PatientList(birthdate: ["ge1970", "lt1990"])`). A single value is a one-item list (GraphQL input
 * coercion), so `name: "smith"` is as before, and a `String` variable is taken there too
 * (singleValueForList in execute.ts), as clients written for a `String` argument send it.
 */
const REPEATABLE = { type: new GraphQLList(GraphQLString) };

/**
 * Common search arguments (search.html), then the type's own parameters: repeatable strings, but
 * `_filter` and `_sort` (one value each; `_count`, `_offset`: Int).
 */
function searchArgs(type: string, connection: boolean): GraphQLFieldConfigArgumentMap {
  const args: GraphQLFieldConfigArgumentMap = {
    _id: REPEATABLE, _lastUpdated: REPEATABLE, _filter: { type: GraphQLString }, _content: REPEATABLE,
    _sort: { type: GraphQLString }, _count: { type: GraphQLInt }, _offset: { type: GraphQLInt },
  };
  if (isDomainResource(type)) args._text = REPEATABLE;
  if (connection) args._cursor = { type: GraphQLString };
  for (const p of paramsOf(type)) {
    if (p.type === 'special' && p.code !== 'near') continue;
    args[argName(p.code)] = REPEATABLE;
  }
  return args;
}

/**
 * The arguments of a reverse reference besides `_reference`: the common ones, `_filter` for any other
 * criterion. All the type's parameters on each of the some 2,000 reverse fields would make the
 * introspection answer some 35 MB; with these it stays a few MB.
 */
const REVERSE_ARGS: GraphQLFieldConfigArgumentMap = {
  _id: REPEATABLE, _lastUpdated: REPEATABLE, _filter: { type: GraphQLString }, _sort: { type: GraphQLString },
  _count: { type: GraphQLInt }, _offset: { type: GraphQLInt },
};

/**
 * Search arguments as the REST query a search runs (`address_city` back to `address-city`), a list's
 * values as the parameter repeated (null items dropped).
 */
export function searchParams(type: string, args: Record<string, unknown>): URLSearchParams {
  const names = new Map(paramsOf(type).map((p) => [argName(p.code), p.code]));
  const out = new URLSearchParams();
  for (const [k, v] of Object.entries(args)) {
    if (v === undefined || v === null || k === '_reference') continue;
    for (const item of Array.isArray(v) ? v : [v]) if (item !== null && item !== undefined) out.append(names.get(k) ?? k, String(item));
  }
  return out;
}

/** GraphQL's own directives (`@include`, `@skip`...) and graphql.html's (directives.ts). */
const DIRECTIVES = [...specifiedDirectives, ...FHIR_DIRECTIVES];

/** Builds the schema once per app (a few hundred milliseconds, then shared by every request). */
export class FhirGraphqlSchema {
  private readonly objects = new Map<string, GraphQLObjectType>();
  private readonly connections = new Map<string, GraphQLObjectType>();
  private readonly referenceEnums = new Map<string, GraphQLEnumType>();
  private readonly argsCache = new Map<string, GraphQLFieldConfigArgumentMap>();
  private readonly instanceSchemas = new Map<string, GraphQLSchema>();
  readonly resourceUnion: GraphQLUnionType;
  readonly elementType: GraphQLObjectType;
  readonly system: GraphQLSchema;

  constructor() {
    this.elementType = new GraphQLObjectType({
      name: 'ElementBase',
      description: "A primitive value's id and extensions (its JSON `_name`)",
      fields: () => ({ id: { type: GraphQLString }, extension: { type: new GraphQLList(this.object('Extension')) } }),
    });
    const resources = Object.keys(table.types).filter((t) => table.types[t]!.kind === 'resource');
    this.resourceUnion = new GraphQLUnionType({
      name: 'ResourceList',
      description: 'Any resource: select its fields with `... on Type`',
      types: () => resources.map((t) => this.object(t)),
      resolveType: (value: Json) => (typeof value.resourceType === 'string' ? value.resourceType : undefined),
    });
    this.system = new GraphQLSchema({ query: this.queryType(), types: [this.resourceUnion], directives: DIRECTIVES });
  }

  /** The schema of `[base]/[type]/[id]/$graphql`: the resource is the root (graphql.html "Instance level"). */
  instance(type: string): GraphQLSchema {
    let s = this.instanceSchemas.get(type);
    if (!s) this.instanceSchemas.set(type, (s = new GraphQLSchema({ query: this.object(type), types: [this.resourceUnion], directives: DIRECTIVES })));
    return s;
  }

  private queryType(): GraphQLObjectType {
    return new GraphQLObjectType({
      name: 'Query',
      fields: () => {
        const fields: GraphQLFieldConfigMap<unknown, GraphqlContext> = {};
        for (const type of REST_RESOURCE_TYPES) {
          fields[type] = {
            type: this.object(type),
            args: { id: { type: new GraphQLNonNull(GraphQLID) } },
            resolve: charged((_s, args: { id: string }, ctx) => ctx.read(type, args.id)),
          };
          fields[`${type}List`] = {
            type: new GraphQLList(this.object(type)),
            args: this.args(type, false),
            resolve: charged((_s, args: Record<string, unknown>, ctx) => ctx.search(type, searchParams(type, args))),
          };
          fields[`${type}Connection`] = {
            type: this.connection(type),
            args: this.args(type, true),
            resolve: charged((_s, args: Record<string, unknown>, ctx) => ctx.connection(type, searchParams(type, args))),
          };
        }
        return fields;
      },
    });
  }

  private args(type: string, connection: boolean): GraphQLFieldConfigArgumentMap {
    const key = `${type}:${connection}`;
    let a = this.argsCache.get(key);
    if (!a) this.argsCache.set(key, (a = searchArgs(type, connection)));
    return a;
  }

  /** `{Type}Connection` (graphql.html "Searching"): the page's cursors and entries, `count` on demand. */
  private connection(type: string): GraphQLObjectType {
    let c = this.connections.get(type);
    if (c) return c;
    const edge = new GraphQLObjectType({
      name: `${type}ConnectionEdge`,
      fields: () => ({
        mode: { type: GraphQLString, resolve: charged(() => 'match') },
        score: { type: FLOAT, resolve: charged(() => null) },
        resource: { type: this.object(type), resolve: charged((e: Json) => e) },
      }),
    });
    c = new GraphQLObjectType({
      name: `${type}Connection`,
      fields: {
        count: { type: GraphQLInt, resolve: charged((p: ConnectionPage) => p.count()) },
        offset: { type: GraphQLInt, resolve: charged((p: ConnectionPage) => p.offset ?? null) },
        pagesize: { type: GraphQLInt, resolve: charged((p: ConnectionPage) => p.pageSize) },
        first: { type: GraphQLString, resolve: charged(() => null) },
        previous: { type: GraphQLString, resolve: charged((p: ConnectionPage) => p.previous ?? null) },
        next: { type: GraphQLString, resolve: charged((p: ConnectionPage) => p.next ?? null) },
        last: { type: GraphQLString, resolve: charged(() => null) },
        edges: { type: new GraphQLList(edge), resolve: charged((p: ConnectionPage) => p.rows) },
      },
    });
    this.connections.set(type, c);
    return c;
  }

  /** The object type of a table type (resource, data type, backbone element, profile of a data type). */
  object(name: string): GraphQLObjectType {
    let o = this.objects.get(name);
    if (o) return o;
    const def = table.types[name]!;
    o = new GraphQLObjectType({
      name: typeName(name),
      ...(def.kind === 'backbone' ? { description: `${name} (a backbone element)` } : {}),
      fields: () => this.fields(name),
    });
    this.objects.set(name, o);
    return o;
  }

  private fields(name: string): GraphQLFieldConfigMap<Json, GraphqlContext> {
    const def = table.types[name]!;
    const fields: GraphQLFieldConfigMap<Json, GraphqlContext> = {};
    if (def.kind === 'resource') fields.resourceType = { type: GraphQLString, resolve: charged(() => name) };
    for (const [element, e] of Object.entries(def.e)) {
      const types = Array.isArray(e.t) ? e.t : [e.t];
      const many = e.max === '*';
      for (const t of types) {
        const json = Array.isArray(e.t) ? element + capital(t) : element;
        const base = this.elementOutput(t);
        fields[json] = { type: many ? new GraphQLList(base) : base, ...(t === 'decimal' ? { resolve: decimalResolver } : {}) };
        if (PRIMITIVES.has(t) && !e.bare) fields[`_${json}`] = { type: many ? new GraphQLList(this.elementType) : this.elementType };
      }
    }
    if (name === 'Reference') fields.resource = this.referenceField();
    if (def.kind === 'resource') Object.assign(fields, this.reverseFields(name));
    return fields;
  }

  private elementOutput(t: string): GraphQLOutputType {
    if (t === 'Resource') return this.resourceUnion;
    if (PRIMITIVES.has(t)) return SCALARS[t] ?? GraphQLString;
    return this.object(t);
  }

  /** `Reference.resource(optional, type)` (graphql.html "Resource References"). */
  private referenceField(): GraphQLFieldConfig<Json, GraphqlContext> {
    return {
      type: this.resourceUnion,
      description: 'The resource this reference names; `type`: only one of that type; `optional`: null rather than an error when it cannot be read',
      args: { optional: { type: GraphQLBoolean }, type: { type: GraphQLString } },
      resolve: charged((ref: Json, args: { optional?: boolean | null; type?: string | null }, ctx) =>
        ctx.resolve(ref, { optional: args.optional === true, ...(args.type ? { type: args.type } : {}) })),
    };
  }

  /**
   * Reverse references (graphql.html "Reverse References"): `{Source}List(_reference: param, ...)` for each
   * type with a reference parameter that may name `target`, the resources of that type referring to it.
   */
  private reverseFields(target: string): GraphQLFieldConfigMap<Json, GraphqlContext> {
    const bySource = new Map<string, string[]>();
    for (const { source, param } of referrersOf(target)) {
      if (!REST_RESOURCE_TYPES.includes(source)) continue;
      (bySource.get(source) ?? bySource.set(source, []).get(source)!).push(param);
    }
    const fields: GraphQLFieldConfigMap<Json, GraphqlContext> = {};
    for (const [source] of bySource) {
      fields[`${source}List`] = {
        type: new GraphQLList(this.object(source)),
        description: `The ${source} resources that refer to this one through the search parameter _reference`,
        args: { _reference: { type: new GraphQLNonNull(this.referenceEnum(source)) }, ...REVERSE_ARGS },
        resolve: charged((focus: Json, args: Record<string, unknown>, ctx) => {
          // A contained resource's id names it within its container alone, a Bundle's entry is a copy: `Patient/{id}` is another resource (or none).
          if (!ctx.referable(focus)) return [];
          const params = searchParams(source, args);
          params.append(String(args._reference), `${target}/${String(focus.id)}`);
          return ctx.search(source, params);
        }),
      };
    }
    return fields;
  }

  /** The reference parameters of `source`, as `_reference`'s values (`based-on` as `based_on`). */
  private referenceEnum(source: string): GraphQLEnumType {
    let e = this.referenceEnums.get(source);
    if (!e) {
      const values = Object.fromEntries(paramsOf(source).filter((p) => p.type === 'reference').map((p) => [argName(p.code), { value: p.code }]));
      this.referenceEnums.set(source, (e = new GraphQLEnumType({ name: `${source}ReferenceParam`, values })));
    }
    return e;
  }
}
