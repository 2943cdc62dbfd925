/**
 * FHIR R4 `$graphql` (graphql.html), read-only: a query parsed, checked against the schema and the
 * limits, and run with the request's access. Its answer is GraphQL's `{data, errors}`; a resolver's
 * FhirError (a read's 403 or 404, a search's 400) is an error with its field's path and its FHIR
 * status and issue code in `extensions`. Mutations and subscriptions are refused.
 */
import {
  defaultFieldResolver, execute, getNullableType, GraphQLError, isListType, isTypeSubTypeOf, Kind, parse, specifiedRules, typeFromAST, validate, VariablesInAllowedPositionRule,
  type ASTVisitor, type DocumentNode, type ExecutionResult, type FragmentDefinitionNode, type GraphQLInputType, type GraphQLSchema,
  type OperationDefinitionNode, type SelectionSetNode, type ValidationContext, type VariableNode,
} from 'graphql';
import { FhirError, storeFailureAsFhir } from '../../errors.ts';
import type { FhirDeps, FhirRequest } from '../crud.ts';
import { graphqlContext } from './context.ts';
import { applyFhirDirectives, sliceSourceResolver, usesFhirDirectives } from './directives.ts';
import { introspections, type IntrospectionRunner } from './introspection.ts';
import { GraphqlBudget, MAX_QUERY_CHARS, MAX_QUERY_TOKENS, shapeProblem } from './limits.ts';
import type { FhirGraphqlSchema, GraphqlContext, Json } from './schema.ts';

/** A GraphQL request (GraphQL over HTTP): its document, variables and the operation to run. */
export interface GraphqlRequest {
  query: string;
  variables?: Record<string, unknown> | undefined;
  operationName?: string | undefined;
  /** Sent by GET, which may not run a mutation (GraphQL over HTTP: 405). */
  viaGet?: boolean | undefined;
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

/**
 * GraphQL's VariablesInAllowedPosition, but a variable of a type may also stand for a list of that type
 * (a `String` variable in a search argument `[String]`): the value a client sends for it is then a
 * single condition, which searchParams reads as a one-item list. GraphQL coerces a literal single value
 * into a one-item list already; this takes a variable the same way, so queries written for a server
 * whose search arguments are `String` (`query($name: String) { PatientList(name: $name) }`) still validate.
 */
function singleValueForList(context: ValidationContext): ASTVisitor {
  const schema = context.getSchema();
  let usages: Map<VariableNode, GraphQLInputType | undefined> | undefined;
  const locationOf = (node: VariableNode) => {
    if (!usages) {
      usages = new Map();
      for (const d of context.getDocument().definitions) {
        if (d.kind === Kind.OPERATION_DEFINITION) for (const u of context.getRecursiveVariableUsages(d)) usages.set(u.node, u.type ?? undefined);
      }
    }
    return usages.get(node);
  };
  const allowed = (error: GraphQLError): boolean => {
    const [definition, use] = error.nodes ?? [];
    if (definition?.kind !== Kind.VARIABLE_DEFINITION || use?.kind !== Kind.VARIABLE) return false;
    const location = locationOf(use);
    const variable = typeFromAST(schema, definition.type);
    if (!location || !variable || !isListType(location) || isListType(getNullableType(variable))) return false;
    return isTypeSubTypeOf(schema, variable, location.ofType);
  };
  const filtered = Object.create(context, { reportError: { value: (error: GraphQLError) => allowed(error) || context.reportError(error) } }) as ValidationContext;
  return VariablesInAllowedPositionRule(filtered);
}

/**
 * `@slice` on a field that is no list (graphql.html slices "a list of repeating elements"; HL7's engine refuses
 * it): refused with the query, whatever the resource holds. Answered as it was, a single element was renamed by
 * its one value and a primitive or an absent element answered as if the directive were not there (null, no error).
 */
function sliceOnLists(context: ValidationContext): ASTVisitor {
  return {
    Field(node) {
      if (!node.directives?.some((d) => d.name.value === 'slice')) return;
      const def = context.getFieldDef();
      if (def && !isListType(getNullableType(def.type))) {
        context.reportError(new GraphQLError(`@slice applies to a repeating element (a list): ${node.name.value} is not one`, { nodes: node }));
      }
    },
  };
}

const RULES = [...specifiedRules.map((rule) => (rule === VariablesInAllowedPositionRule ? singleValueForList : rule)), sliceOnLists];

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
  const op = chosenOperation(doc, request.operationName);
  if (op?.operation === 'mutation' && request.viaGet) {
    // GraphQL over HTTP: "GET requests MUST NOT be used for executing mutation operations" (405, execution halted).
    throw new FhirError('method-not-allowed', 'A GraphQL mutation is not sent by GET (GraphQL over HTTP); Cinder\'s $graphql is read-only, so it runs none: use the REST API to write', {
      headers: { Allow: 'POST' }, expression: ['query'],
    });
  }
  if (op && op.operation !== 'query') return refused(`Cinder's $graphql is read-only: ${op.operation}s are not supported (use the REST API to write)`);
  const problem = shapeProblem(doc);
  if (problem) return refused(problem);
  const errors = validate(schema, doc, RULES, { maxErrors: 20 });
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

/** The operation a request runs: the one named, or the only one; undefined when neither (execute names the problem). */
function chosenOperation(doc: DocumentNode, operationName: string | undefined): OperationDefinitionNode | undefined {
  const ops = doc.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
  return operationName ? ops.find((o) => o.name?.value === operationName) : ops.length === 1 ? ops[0] : undefined;
}

/** The names of the fields `op` selects at its root, through fragments (spread or inline). */
function rootFieldNames(doc: DocumentNode, op: OperationDefinitionNode): Set<string> {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of doc.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  const names = new Set<string>();
  const seen = new Set<string>();
  const walk = (set: SelectionSetNode): void => {
    for (const s of set.selections) {
      if (s.kind === Kind.FIELD) names.add(s.name.value);
      else if (s.kind === Kind.INLINE_FRAGMENT) walk(s.selectionSet);
      else if (!seen.has(s.name.value)) {
        seen.add(s.name.value);
        const f = fragments.get(s.name.value);
        if (f) walk(f.selectionSet);
      }
    }
  };
  walk(op.selectionSet);
  return names;
}

/** A `$graphql` answer as JSON text; `requestError` when it has no `data` (the query was refused before it ran: GraphQL over HTTP's request error). */
export interface GraphqlReply {
  text: string;
  requestError: boolean;
}

const reply = (answer: GraphqlAnswer): GraphqlReply => ({ text: JSON.stringify(answer), requestError: !('data' in answer) });

/**
 * Runs a `$graphql` request: system level, or on the resource `focus` (instance level). A query that
 * introspects the schema (`__schema`, `__type`) is answered by the introspection thread (introspection.ts)
 * and selects nothing else: resources are read here, introspection there.
 */
export async function runGraphql(deps: FhirDeps, req: FhirRequest, schemas: FhirGraphqlSchema, request: GraphqlRequest, focus?: GraphqlFocus, runner: IntrospectionRunner = introspections): Promise<GraphqlReply> {
  const schema = focus ? schemas.instance(focus.type) : schemas.system;
  const doc = checked(schema, request);
  if (!('kind' in doc)) return reply(doc);
  const op = chosenOperation(doc, request.operationName);
  const names = op ? rootFieldNames(doc, op) : new Set<string>();
  if (names.has('__schema') || names.has('__type')) {
    const other = [...names].filter((n) => !n.startsWith('__'));
    if (other.length) {
      return reply(refused(`A query that introspects the schema (__schema, __type) selects nothing else: ask for ${other.join(', ')} in another request`));
    }
    // The focus is read as a REST read reads it (its 403, 404 or 410), though the answer does not show it.
    if (focus) await graphqlContext(deps, req, new GraphqlBudget()).read(focus.type, focus.id);
    const text = await runner.answer({ document: doc, variables: request.variables, operationName: request.operationName, focusType: focus?.type });
    return { text, requestError: false };
  }
  return reply(await run(deps, req, schema, doc, request, focus));
}

async function run(deps: FhirDeps, req: FhirRequest, schema: GraphQLSchema, doc: DocumentNode, request: GraphqlRequest, focus?: GraphqlFocus): Promise<GraphqlAnswer> {
  const budget = new GraphqlBudget();
  const context = graphqlContext(deps, req, budget);
  // The focus is read as a REST read reads it: its 403, 404 or 410 refuses the request (FhirError, an OperationOutcome).
  const root: Json | undefined = focus ? await context.read(focus.type, focus.id) : undefined;
  // graphql.html's directives reshape the answer afterwards; `@slice` reads the raw elements it slices, kept as they resolve.
  const directives = usesFhirDirectives(doc);
  const sliceSources = new Map<string, unknown>();
  const resolveField = directives ? sliceSourceResolver(sliceSources) : defaultFieldResolver;
  const result: ExecutionResult = await execute({
    schema, document: doc, rootValue: root, contextValue: context,
    variableValues: request.variables ?? null, operationName: request.operationName ?? null,
    // Each field is counted in the answer with its value (the fields with resolvers of their own count themselves: schema.ts `charged`).
    fieldResolver: (source, args, ctx: GraphqlContext, info) => {
      const value: unknown = resolveField(source, args, ctx, info);
      return ctx.answer(info.path.key, value) ? value : null;
    },
  });
  // An answer past its limit is refused whole: its fields past the limit resolved to null, and it is not the data asked for.
  const exceeded = budget.exceeded;
  if (exceeded) return { data: null, errors: [{ message: exceeded.message, extensions: { status: exceeded.status, code: 'too-costly' } }] };
  // No data at all: the operation could not run (one the document does not hold, or several without operationName), a request error.
  if (result.data === undefined) return { errors: (result.errors ?? []).map(rendered) };
  const answer: GraphqlAnswer = { data: result.data as Record<string, unknown> | null };
  const errors = (result.errors ?? []).map(rendered);
  if (answer.data && directives) {
    const op = chosenOperation(doc, request.operationName);
    if (op) errors.push(...applyFhirDirectives(doc, op, answer.data, sliceSources, request.variables, deps.clock).map((e) => ({ message: e.message, path: e.path })));
  }
  if (errors.length) answer.errors = errors;
  return answer;
}
