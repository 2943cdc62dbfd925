/**
 * A SubscriptionTopic resourceTrigger's `fhirPathCriteria` (R5 subscriptiontopic.html, the Backport IG's
 * `extension-SubscriptionTopic.resourceTrigger`): a FHIRPath expression over `%previous` (the version the
 * write replaced; empty for a create) and `%current` (the version written; empty for a delete), evaluated by
 * the validation's FHIRPath engine (src/fhir/validation/fhirpath-engine.ts) as a client's expression.
 *
 * It is compiled once, when the topic is parsed: an expression that is not FHIRPath, or that needs what a
 * write's matching cannot give (`resolve()`, which would read other resources inside the write's
 * transaction; `memberOf()`; `now()`/`today()`, whose answer would not be the write's), is refused with a
 * 422 naming the element. It is evaluated inside the write's transaction, after queryCriteria, with a budget
 * of MAX_VISITS values: a run-time error (more than one result, `single()` on many, past the budget) does
 * not fail the write; it is logged and the trigger does not pass.
 */
import { FhirError } from '../../errors.ts';
import type { Logger } from '../../log.ts';
import { compileTopicCriteria, FhirPathEvaluationError, FhirPathSyntaxError, UnsupportedFhirPath, type CompiledTopicCriteria, type TopicVersions } from '../validation/fhirpath-engine.ts';
import { parseFhirPath, type Ast } from '../validation/fhirpath-parse.ts';
import { FHIRPATH_TYPES } from '../validation/model.ts';

/** The most values one evaluation of a fhirPathCriteria may visit. */
export const MAX_VISITS = 100_000;

const TYPES = FHIRPATH_TYPES;

/**
 * Compiled expressions by their text: topics are parsed again wherever they are read (the hub's set, activation,
 * a full-resource Bundle), and an expression is compiled once for all of them. At most MAX_COMPILED are kept
 * (then the memory starts afresh); a compiled expression holds no state of an evaluation.
 */
const compiled = new Map<string, CompiledTopicCriteria>();
const MAX_COMPILED = 1_000;

/** `expression` compiled, or a 422 naming `at` (the fhirPathCriteria extension) with the engine's reason. */
export function compileFhirPathCriteria(expression: string, at: string): CompiledTopicCriteria {
  const known = compiled.get(expression);
  if (known) return known;
  try {
    const test = compileTopicCriteria(expression, TYPES);
    if (compiled.size >= MAX_COMPILED) compiled.clear();
    compiled.set(expression, test);
    return test;
  } catch (err) {
    if (err instanceof FhirPathSyntaxError || err instanceof UnsupportedFhirPath) {
      throw new FhirError('unprocessable', `SubscriptionTopic.resourceTrigger.fhirPathCriteria '${expression}' cannot be evaluated by Cinder: ${err.message}`, { expression: [at] });
    }
    throw err;
  }
}

/** Whether `ast` names the variable `name` anywhere (`%previous`, `` %`previous` ``). */
function namesVariable(ast: unknown, name: string): boolean {
  if (ast === null || typeof ast !== 'object') return false;
  if (Array.isArray(ast)) return ast.some((a) => namesVariable(a, name));
  const node = ast as Partial<Extract<Ast, { kind: 'var' }>>;
  if (node.kind === 'var' && node.name === name) return true;
  return Object.values(ast).some((v) => namesVariable(v, name));
}

/**
 * Whether a fhirPathCriteria compileFhirPathCriteria accepted reads `%previous`: a write's matching reads the version
 * it replaced (its whole stored text, which may be MiBs) for it only then (hub.ts). The expression parses, as it compiled.
 */
export function readsPrevious(expression: string): boolean {
  return namesVariable(parseFhirPath(expression), 'previous');
}

/**
 * Whether a trigger's fhirPathCriteria holds (a single `true`) for a write of `type`; an expression that cannot
 * be evaluated on these versions is logged (with the topic and the resource) and does not hold.
 */
export function fhirPathHolds(test: CompiledTopicCriteria, type: string, versions: TopicVersions, log: Logger, about: Record<string, unknown>): boolean {
  try {
    return test(type, versions, { left: MAX_VISITS, limit: MAX_VISITS, what: 'a fhirPathCriteria' }) === true;
  } catch (err) {
    // FhirPathEvaluationError (FhirPathTooCostly among them) as FHIRPath defines them; anything else the same way: never the write's failure.
    const reason = err instanceof FhirPathEvaluationError ? err.message : err;
    log.warn('a SubscriptionTopic fhirPathCriteria could not be evaluated: the trigger does not pass', { ...about, err: reason });
    return false;
  }
}
