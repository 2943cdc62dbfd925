import { FhirError } from '../../errors.ts';
import { guardedTest } from '../../regex-guard.ts';
import { invalid } from '../errors.ts';
import type { ConceptSetFilter } from '../model/value-set.ts';
import type { CodeSystemIndex, ConceptEntry } from './code-system-index.ts';
import { propertyValueText } from './concept-roles.ts';

/**
 * The R4 FilterOperator value set, and R5's `child-of` (the direct children) and `descendent-leaf` (the descendants
 * that have none), which the reference servers evaluate in content written for R5 (an R4 ValueSet cannot name them:
 * the write is refused, so they arrive in a request's inline value set, or in data stored without validation).
 */
export const FILTER_OPERATORS = [
  '=',
  'is-a',
  'descendent-of',
  'is-not-a',
  'regex',
  'in',
  'not-in',
  'generalizes',
  'exists',
  'child-of',
  'descendent-leaf',
] as const;
export type FilterOperator = (typeof FILTER_OPERATORS)[number];

/** A filter whose operator and value have been checked (independent of any CodeSystem). */
export interface CheckedFilter {
  readonly property: string;
  readonly op: FilterOperator;
  readonly value: string;
  readonly regex: RegExp | undefined;
  readonly list: readonly string[];
  /** The filter's FHIRPath in its value set (`ValueSet.compose.include[0].filter[1]`), for issues' `expression`. */
  readonly path?: string | undefined;
}

/** The `expression` of an issue about an element of a value set's compose: its FHIRPath, when known. */
export const at = (path: string | undefined): string[] => (path === undefined ? [] : [path]);

export type ConceptPredicate = (entry: ConceptEntry) => boolean;

function isOperator(op: string): op is FilterOperator {
  return (FILTER_OPERATORS as readonly string[]).includes(op);
}

/**
 * Checks a compose filter when its ValueSet is compiled (R4 ValueSet.compose.include.filter):
 * an unknown operator, a missing value, a bad regex or a non-boolean `exists` value is a 400.
 */
export function checkFilter(filter: ConceptSetFilter, system: string, where: string, path?: string): CheckedFilter {
  const { property, op, value } = filter;
  const wrong = (text: string, element?: string) => invalid(`${where}: ${text}`, at(path === undefined || element === undefined ? path : `${path}.${element}`), 'vs-invalid');
  const located = at(path);
  if (op === undefined || op === '') throw wrong(`filter on '${property}' has no operator`, 'op');
  if (!isOperator(op)) throw wrong(`unknown filter operator '${op}'`, 'op');
  // HL7's UNABLE_TO_HANDLE_SYSTEM_FILTER_WITH_NO_VALUE in its words, the filter named by `expression` as the reference
  // servers give it; in a value set another imports (no `path`), after where the filter is.
  if (value === undefined || value === '') {
    const text = `The system ${system} filter with property = ${property}, op = ${op} has no value`;
    throw invalid(located.length === 0 ? `${where}: ${text}` : text, located, 'vs-invalid', 'UNABLE_TO_HANDLE_SYSTEM_FILTER_WITH_NO_VALUE');
  }
  if (op === 'exists' && value !== 'true' && value !== 'false') {
    throw wrong(`the value of an 'exists' filter must be 'true' or 'false', not '${value}'`, 'value');
  }
  const list = op === 'in' || op === 'not-in' ? splitList(value) : [value];
  if (list.length === 0) throw wrong(`filter '${property} ${op}' has an empty code list`, 'value');
  return { property, op, value, list, regex: op === 'regex' ? wholeStringRegex(value, where, path) : undefined, path };
}

function splitList(value: string): string[] {
  return value
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v !== '');
}

function wholeStringRegex(source: string, where: string, path: string | undefined): RegExp {
  try {
    return new RegExp(`^(?:${source})$`);
  } catch (cause) {
    throw invalid(`${where}: invalid regex '${source}': ${(cause as Error).message}`, at(path === undefined ? path : `${path}.value`), 'vs-invalid');
  }
}

/**
 * Compiles a checked filter into a predicate over the concepts of one CodeSystem.
 * `concept` and `code` filter on the code and the is-a hierarchy; other names filter on
 * concept properties (`parent`/`child` use the resolved hierarchy links).
 */
export function compileFilter(filter: CheckedFilter, cs: CodeSystemIndex, where: string): ConceptPredicate {
  if (filter.property === 'concept' || filter.property === 'code') return codePredicate(filter, cs, where);
  const role = cs.roles.get(filter.property);
  if (!cs.propertyCodes.has(filter.property) && role === undefined) {
    throw invalid(`${where}: CodeSystem '${cs.url}' has no property '${filter.property}' to filter on`, at(filter.path === undefined ? undefined : `${filter.path}.property`), 'vs-invalid');
  }
  const name = filter.property;
  const valuesOf = (e: ConceptEntry): readonly string[] => {
    if (role === 'parent') return e.parents;
    if (role === 'child') return e.children;
    if (role === 'inactive') return [String(e.inactive)];
    const values: string[] = [];
    // notSelectable (or v3 `abstract`) filters match the concepts that state the property, as the
    // reference servers answer: a concept without it is neither selectable nor not.
    if (role === 'notSelectable' && !(e.definition.property ?? []).some((p) => p.code === name)) return e.abstract ? ['true'] : [];
    for (const p of e.definition.property ?? []) {
      const text = p.code === name ? propertyValueText(p) : undefined;
      if (text !== undefined) values.push(text);
    }
    return values;
  };
  return propertyPredicate(filter, cs, valuesOf, where);
}

/**
 * A `regex` filter whose pattern backtracks without end and has no linear-time form (regex-guard.ts): a
 * 400 `too-costly` naming the filter where a value set is expanded or searched with; `$validate-code`
 * answers it as a code that could not be checked (result false), as the reference servers may.
 */
export class RegexTooCostly extends FhirError {
  constructor(readonly pattern: string, property: string, where: string, path: string | undefined) {
    super('invalid', `${where}: filter '${property} regex ${pattern}' is too costly to evaluate (its pattern backtracks without end)`, {
      issueCode: 'too-costly', expression: at(path),
    });
  }
}

/**
 * `re.test(value)` for a filter's regex, held to regex-guard.ts: a pattern that backtracks without end is
 * answered by its linear-time automaton, or, where it has none (a back reference, a lookaround), throws
 * RegexTooCostly.
 */
function regexTest(filter: CheckedFilter, where: string): (value: string) => boolean {
  const re = filter.regex as RegExp;
  const refuse = () => new RegexTooCostly(filter.value, filter.property, where, filter.path);
  return (value) => guardedTest(re, value, refuse);
}

function codePredicate(filter: CheckedFilter, cs: CodeSystemIndex, where: string): ConceptPredicate {
  const target = cs.find(filter.value);
  const v = target?.code ?? filter.value;
  switch (filter.op) {
    case '=':
      return (e) => e.code === v;
    case 'is-a':
      return target === undefined ? () => false : cs.isAOf(target);
    case 'descendent-of': {
      if (target === undefined) return () => false;
      const isA = cs.isAOf(target);
      return (e) => e !== target && isA(e);
    }
    case 'is-not-a': {
      if (target === undefined) return () => true;
      const isA = cs.isAOf(target);
      return (e) => !isA(e);
    }
    case 'generalizes':
      return target === undefined ? () => false : cs.ancestorsOf(target);
    case 'child-of':
      return target === undefined ? () => false : (e) => e.parents.includes(target.code);
    case 'descendent-leaf': {
      if (target === undefined) return () => false;
      const isA = cs.isAOf(target);
      return (e) => e !== target && e.children.length === 0 && isA(e);
    }
    case 'in':
    case 'not-in': {
      const set = new Set(filter.list.map((c) => cs.find(c)?.code ?? c));
      return filter.op === 'in' ? (e) => set.has(e.code) : (e) => !set.has(e.code);
    }
    case 'regex': {
      const test = regexTest(filter, where);
      return (e) => test(e.code);
    }
    case 'exists': {
      const all = filter.value === 'true';
      return () => all;
    }
  }
}

function propertyPredicate(
  filter: CheckedFilter,
  cs: CodeSystemIndex,
  valuesOf: (e: ConceptEntry) => readonly string[],
  where: string,
): ConceptPredicate {
  const v = filter.value;
  switch (filter.op) {
    case '=':
      return (e) => valuesOf(e).includes(v);
    case 'is-a':
      return (e) => valuesOf(e).some((x) => cs.subsumes(v, x));
    case 'descendent-of':
      return (e) => valuesOf(e).some((x) => x !== v && cs.subsumes(v, x));
    case 'is-not-a':
      return (e) => !valuesOf(e).some((x) => cs.subsumes(v, x));
    case 'generalizes':
      return (e) => valuesOf(e).some((x) => cs.subsumes(x, v));
    case 'child-of':
      return (e) => valuesOf(e).some((x) => cs.find(x)?.parents.includes(v) === true);
    case 'descendent-leaf':
      return (e) => valuesOf(e).some((x) => x !== v && cs.subsumes(v, x) && cs.find(x)?.children.length === 0);
    case 'in':
    case 'not-in': {
      const set = new Set(filter.list);
      const hit = (e: ConceptEntry): boolean => valuesOf(e).some((x) => set.has(x));
      return filter.op === 'in' ? hit : (e) => !hit(e);
    }
    case 'regex': {
      const test = regexTest(filter, where);
      return (e) => valuesOf(e).some(test);
    }
    case 'exists': {
      const wanted = filter.value === 'true';
      return (e) => valuesOf(e).length > 0 === wanted;
    }
  }
}
