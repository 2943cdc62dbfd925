import { Hono, type Context } from 'hono';
import { refusal } from './options.ts';
import { FhirError } from '../errors.ts';
import type { CapabilityContribution } from '../fhir/capability.ts';
import type { FhirDeps } from '../fhir/crud.ts';
import type { GraphqlFocus, GraphqlRequest } from '../fhir/graphql/execute.ts';
import type { FhirGraphqlSchema } from '../fhir/graphql/schema.ts';
import { checkRestType, checkTypeAndId } from '../fhir/resource.ts';
import { REST_RESOURCE_TYPES } from '../fhir/resource-types.ts';
import { readLimited } from './body.ts';
import { GRAPHQL_RESPONSE, graphqlResponseType } from './fhir-response.ts';
import type { AppEnv } from './env.ts';

export interface GraphqlRouteDeps {
  fhir: FhirDeps;
  /** The most bytes of a POSTed body. */
  maxBodyBytes: number;
}

/** `$graphql` at system and instance level (R4 lists it as OperationDefinition Resource-graphql). */
export const graphqlCapability: CapabilityContribution = {
  operations: [
    { name: 'graphql', definition: 'http://hl7.org/fhir/OperationDefinition/Resource-graphql' },
    { name: 'graphql', definition: 'http://hl7.org/fhir/OperationDefinition/Resource-graphql', types: [...REST_RESOURCE_TYPES] },
  ],
};

/**
 * The executor and schema, with the `graphql` package under them, loaded on the first `$graphql` request
 * (a dynamic import, which `bun build --compile` bundles like a static one): loading them took a tenth of
 * a second or more of every process's start, and most processes never answer `$graphql`.
 */
let engine: Promise<{ runGraphql: typeof import('../fhir/graphql/execute.ts').runGraphql; FhirGraphqlSchema: typeof FhirGraphqlSchema }> | undefined;
const graphqlEngine = () =>
  (engine ??= Promise.all([import('../fhir/graphql/execute.ts'), import('../fhir/graphql/schema.ts')]).then(([e, s]) => ({ runGraphql: e.runGraphql, FhirGraphqlSchema: s.FhirGraphqlSchema })));

const invalid = (message: string, expression: string) => new FhirError('invalid', message, { expression: [expression] });

/** A JSON object's optional member of a type, or a 400 naming it. */
function member<T>(body: Record<string, unknown>, name: string, is: (v: unknown) => v is T, what: string): T | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (!is(v)) throw invalid(`'${name}' must be ${what}`, name);
  return v;
}

const isString = (v: unknown): v is string => typeof v === 'string';
const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The variables of a GET (`variables` as JSON text), or a 400. */
function jsonVariables(text: string | null): Record<string, unknown> | undefined {
  if (text === null || text === '') return undefined;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw invalid("'variables' must be a JSON object", 'variables');
  }
  if (v === null) return undefined;
  if (!isObject(v)) throw invalid("'variables' must be a JSON object", 'variables');
  return v;
}

/**
 * The GraphQL request of an HTTP request (GraphQL over HTTP): GET with `query`, `variables`,
 * `operationName` in the URL; POST with `application/json` `{query, variables, operationName}` or
 * `application/graphql` (the query as the body). A request without a query is a 400.
 */
async function graphqlRequest(c: Context<AppEnv>, maxBodyBytes: number): Promise<GraphqlRequest> {
  const url = new URL(c.req.url).searchParams;
  // HEAD is GET without the content (RFC 9110 9.3.2): its query is in the URL too.
  if (c.req.method === 'GET' || c.req.method === 'HEAD') {
    const query = url.get('query');
    if (!query) throw invalid("A GET to $graphql takes the query in the parameter 'query'", 'query');
    return { query, variables: jsonVariables(url.get('variables')), operationName: url.get('operationName') ?? undefined, viaGet: true };
  }
  const media = (c.req.header('content-type') ?? '').split(';', 1)[0]!.trim().toLowerCase();
  // The media type before the body: one of another type is its 415 whatever its bytes (a 400 were they not UTF-8).
  if (media !== 'application/graphql' && media !== 'application/json' && media !== 'application/graphql+json') {
    throw new FhirError('unsupported-media', 'A POST to $graphql takes application/json ({query, variables, operationName}) or application/graphql');
  }
  const text = await readLimited(c.req.raw, maxBodyBytes);
  if (media === 'application/graphql') {
    if (!text.trim()) throw invalid('The body holds no query', 'query');
    return { query: text, variables: jsonVariables(url.get('variables')), operationName: url.get('operationName') ?? undefined };
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new FhirError('invalid', 'The body is not JSON');
  }
  if (!isObject(body)) throw new FhirError('invalid', 'The body must be a JSON object {query, variables, operationName}');
  const query = member(body, 'query', isString, 'a string');
  if (!query) throw invalid("The body has no 'query'", 'query');
  return { query, variables: member(body, 'variables', isObject, 'a JSON object'), operationName: member(body, 'operationName', isString, 'a string') };
}

/**
 * `[base]/$graphql` and `[base]/[Type]/[id]/$graphql` (FHIR R4 graphql.html), by GET or POST. Answers
 * `{data, errors}` as `application/json`, or as `application/graphql-response+json` when Accept prefers it
 * (GraphQL over HTTP); a request that cannot run (its token, a malformed body, an
 * instance it may not read) is an OperationOutcome with the usual status.
 */
export function graphqlRoutes(deps: GraphqlRouteDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  // Built on first use: some 700 object types, shared by every request of this app.
  let schemas: FhirGraphqlSchema | undefined;
  const answer = async (c: Context<AppEnv>, focus?: GraphqlFocus) => {
    const type = graphqlResponseType(c.req.header('accept'), c.req.url.includes('_format=') ? (c.req.query('_format') ?? null) : null);
    const request = await graphqlRequest(c, deps.maxBodyBytes);
    const { runGraphql, FhirGraphqlSchema } = await graphqlEngine();
    schemas ??= new FhirGraphqlSchema();
    const reply = await runGraphql(deps.fhir, { tenant: c.get('tenant'), access: c.get('access') }, schemas, request, focus);
    // GraphQL over HTTP: in its own media type a request error (no `data`: the query did not parse, validate
    // or pass the limits) is a 400; in application/json every GraphQL response is a 200.
    const status = type === GRAPHQL_RESPONSE && reply.requestError ? 400 : 200;
    return new Response(reply.text, { status, headers: { 'Content-Type': `${type}; charset=utf-8` } });
  };
  const refuse = refusal((c: Context<AppEnv>) => {
    throw new FhirError('method-not-allowed', `${c.req.method} is not supported on $graphql`, { headers: { Allow: 'GET, HEAD, POST' } });
  });
  app.on(['GET', 'POST'], '/$graphql', (c) => answer(c));
  app.on(['GET', 'POST'], '/:type/:id/$graphql', (c) => {
    const { type, id } = c.req.param();
    checkRestType(type);
    checkTypeAndId(type, id);
    return answer(c, { type, id });
  });
  app.on(['PUT', 'DELETE', 'PATCH'], ['/$graphql', '/:type/:id/$graphql'], refuse);
  return app;
}
