/**
 * FHIR R4 `$graphql` (graphql.html), read-only: a query parsed, checked against the schema and the
 * limits, and run with the request's access. Its answer is GraphQL's `{data, errors}`; a resolver's
 * FhirError (a read's 403 or 404, a search's 400) is an error with its field's path and its FHIR
 * status and issue code in `extensions`. Mutations and subscriptions are refused.
 */
import { execute, GraphQLError, Kind, parse, specifiedRules, validate, type DocumentNode, type ExecutionResult, type GraphQLSchema, type OperationDefinitionNode } from 'graphql';
import { FhirError, storeFailureAsFhir } from '../../errors.ts';
import type { FhirDeps, FhirRequest } from '../crud.ts';
import { graphqlContext } from './context.ts';
import { applyFhirDirectives, usesFhirDirectives } from './directives.ts';
import { GraphqlBudget, MAX_QUERY_CHARS, MAX_QUERY_TOKENS, shapeProblem } from './limits.ts';
import type { FhirGraphqlSchema, Json } from './schema.ts';

/** A GraphQL request (GraphQL over HTTP): its document, variables and the operation to run. */
export interface GraphqlRequest {
  query: string;
  variables?: Record<string, unknown> | undefined;
  operationName?: string | undefined;
}

/** An instance-level request's focus: the resource read first, the query's root. */
export interface GraphqlFocus {
  type: string;
  id: string;
}

export interface GraphqlAnswer {
  data?: Record<string, unknown> | null;
  errors?: Record<string, unknown>[];
}

const refused = (message: string): GraphqlAnswer => ({ errors: [{ message }] });

/** Parses and checks a query against `schema` and the limits: the document, or the errors that refuse it. */
function checked(schema: GraphQLSchema, request: GraphqlRequest): DocumentNode | GraphqlAnswer {
  if (request.query.length > MAX_QUERY_CHARS) return refused(`The query is longer than ${MAX_QUERY_CHARS} characters`);
  let doc: DocumentNode;
  try {
    doc = parse(request.query, { maxTokens: MAX_QUERY_TOKENS, noLocation: false });
  } catch (err) {
    if (err instanceof GraphQLError) return { errors: [err.toJSON() as unknown as Record<string, unknown>] };
    throw err;
  }
  const ops = doc.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
  const op = request.operationName ? ops.find((o) => o.name?.value === request.operationName) : ops.length === 1 ? ops[0] : undefined;
  if (op && op.operation !== 'query') return refused(`Cinder's $graphql is read-only: ${op.operation}s are not supported (use the REST API to write)`);
  const problem = shapeProblem(doc);
  if (problem) return refused(problem);
  const errors = validate(schema, doc, specifiedRules, { maxErrors: 20 });
  if (errors.length) return { errors: errors.map((e) => e.toJSON() as unknown as Record<string, unknown>) };
  return doc;
}

/**
 * A resolver's error as GraphQL renders it: a client's (a FhirError below 500: a read refused, a search's
 * bad value, a limit) with its status and issue code; anything else (the database unavailable, a bug) is
 * rethrown and answers the whole request as the REST API would (503 with Retry-After, 500).
 */
function rendered(e: GraphQLError): Record<string, unknown> {
  const original = e.originalError;
  const fhir = original instanceof FhirError ? original : original ? storeFailureAsFhir(original) : undefined;
  if (original && !(original instanceof GraphQLError) && (!fhir || fhir.status >= 500)) throw original;
  const json = e.toJSON() as unknown as Record<string, unknown>;
  if (fhir) {
    json.message = fhir.message;
    json.extensions = { status: fhir.status, code: fhir.issues[0]?.code ?? 'exception' };
  }
  return json;
}

/** Whether every operation of `doc` selects introspection fields alone (`__schema`, `__type`, `__typename`): it reads no resource. */
function introspectionOnly(doc: DocumentNode): boolean {
  return doc.definitions.every((d) => d.kind !== Kind.OPERATION_DEFINITION || d.selectionSet.selections.every((s) => s.kind === Kind.FIELD && s.name.value.startsWith('__')));
}

/** The most introspection answers kept (per app): GraphiQL asks the same one at every start, some 11 MB and a second or two to compute. */
const KEPT_INTROSPECTIONS = 8;

/** Runs a `$graphql` request: system level, or on the resource `focus` (instance level). */
export async function runGraphql(deps: FhirDeps, req: FhirRequest, schemas: FhirGraphqlSchema, request: GraphqlRequest, focus?: GraphqlFocus): Promise<GraphqlAnswer> {
  const schema = focus ? schemas.instance(focus.type) : schemas.system;
  const doc = checked(schema, request);
  if (!('kind' in doc)) return doc;
  if (!focus && introspectionOnly(doc)) {
    // The same for every tenant and token: the schema's description alone.
    const key = JSON.stringify([request.query, request.variables ?? null, request.operationName ?? null]);
    const kept = schemas.introspections.get(key);
    if (kept) return kept;
    const answer = await run(deps, req, schema, doc, request);
    if (schemas.introspections.size >= KEPT_INTROSPECTIONS) schemas.introspections.delete(schemas.introspections.keys().next().value!);
    schemas.introspections.set(key, answer);
    return answer;
  }
  return run(deps, req, schema, doc, request, focus);
}

async function run(deps: FhirDeps, req: FhirRequest, schema: GraphQLSchema, doc: DocumentNode, request: GraphqlRequest, focus?: GraphqlFocus): Promise<GraphqlAnswer> {
  const context = graphqlContext(deps, req, new GraphqlBudget());
  // The focus is read as a REST read reads it: its 403, 404 or 410 refuses the request (FhirError, an OperationOutcome).
  const root: Json | undefined = focus ? await context.read(focus.type, focus.id) : undefined;
  const result: ExecutionResult = await execute({
    schema, document: doc, rootValue: root, contextValue: context,
    variableValues: request.variables ?? null, operationName: request.operationName ?? null,
  });
  const answer: GraphqlAnswer = { data: (result.data as Record<string, unknown> | null | undefined) ?? null };
  const errors = (result.errors ?? []).map(rendered);
  if (answer.data && usesFhirDirectives(doc)) {
    const ops = doc.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
    const op = request.operationName ? ops.find((o) => o.name?.value === request.operationName) : ops[0];
    if (op) errors.push(...applyFhirDirectives(doc, op, answer.data).map((e) => ({ message: e.message, path: e.path })));
  }
  if (errors.length) answer.errors = errors;
  return answer;
}
