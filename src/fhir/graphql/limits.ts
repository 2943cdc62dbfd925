/**
 * The limits of a `$graphql` request: of its text (characters, tokens), of its shape (depth, fields
 * with aliases and fragments expanded) and of what it reads (resources, characters of them, searches).
 * A query past them is refused with a GraphQL error before it runs, or stops with one as it runs:
 * never a hang, never a 500.
 */
import { FhirError } from '../../errors.ts';
import { Kind, type DocumentNode, type FragmentDefinitionNode, type SelectionSetNode } from 'graphql';
import { MAX_BUNDLE_READ_CHARS } from '../bundle-reads.ts';

/** The most characters of query text. */
export const MAX_QUERY_CHARS = 64 * 1024;
/** The most lexical tokens of query text (graphql-js stops parsing past it). */
export const MAX_QUERY_TOKENS = 10_000;
/** The deepest nesting of selection sets (fragments expanded), but below an introspection field. */
export const MAX_DEPTH = 12;
/** The most fields a query selects, aliases and each use of a fragment counted. */
export const MAX_FIELDS = 2_000;
/** The most resources one request reads, and searches it runs. */
export const MAX_RESOURCES = 10_000;
export const MAX_SEARCHES = 200;
/**
 * The most characters of an answer (its field names and values as counted by GraphqlBudget.answer), twice
 * what a request may read: aliases and fragments select one value many times over, and a query of 1.3 KB
 * that selected a 200 KB narrative 1,881 times answered 385 MB (a 16 MB one would pass any string's length).
 */
export const MAX_ANSWER_CHARS = 2 * MAX_BUNDLE_READ_CHARS;

/** What is left for one request to read (GraphqlBudget), spent as it runs; past it a 400 `too-costly` (a GraphQL error). */
export class GraphqlBudget {
  private chars = MAX_BUNDLE_READ_CHARS;
  private resources = MAX_RESOURCES;
  private searches = MAX_SEARCHES;
  private answerChars = MAX_ANSWER_CHARS;

  charge(chars: number): void {
    this.chars -= chars;
    if (this.chars < 0) throw costly(`read more than ${MAX_BUNDLE_READ_CHARS} characters of resources`);
  }

  read(n: number): void {
    this.resources -= n;
    if (this.resources < 0) throw costly(`read more than ${MAX_RESOURCES} resources`);
  }

  search(): void {
    if (--this.searches < 0) throw costly(`ran more than ${MAX_SEARCHES} searches`);
  }

  /**
   * Counts a field of the answer, its name and `value` (a string by its length, a list by its strings',
   * anything else a few characters: the fields of its objects count themselves); false once the answer is past MAX_ANSWER_CHARS, when the field resolves to null (so
   * nothing below it is resolved) and the request answers `exceeded` alone.
   */
  answer(key: string | number, value: unknown): boolean {
    if (this.answerChars < 0) return false;
    this.answerChars -= String(key).length + 4 + answerChars(value);
    return this.answerChars >= 0;
  }

  /** The error of an answer past MAX_ANSWER_CHARS, if it is. */
  get exceeded(): FhirError | undefined {
    return this.answerChars < 0 ? costly(`would answer more than ${MAX_ANSWER_CHARS} characters (aliases and fragments select a value once per use)`) : undefined;
  }
}

/** The characters a field's value adds to the answer, but for what its own fields add: a string's, a list's strings'. */
function answerChars(value: unknown): number {
  if (typeof value === 'string') return value.length;
  if (!Array.isArray(value)) return 4;
  let n = 2;
  for (const item of value) n += (typeof item === 'string' ? item.length : 0) + 4;
  return n;
}

const costly = (what: string) => new FhirError('invalid', `The query ${what}; ask for less in one request`, { issueCode: 'too-costly' });

/**
 * The first limit `doc` exceeds (depth or fields, fragments expanded as they are used), or undefined.
 * The walk stops at the first excess, so a fragment that spreads itself many times over costs no more.
 */
export function shapeProblem(doc: DocumentNode): string | undefined {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of doc.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  let fields = 0;
  let problem: string | undefined;
  const walk = (set: SelectionSetNode, depth: number, via: ReadonlySet<string>): void => {
    if (problem) return;
    if (Number.isFinite(depth) && depth > MAX_DEPTH) {
      problem = `The query nests selections deeper than ${MAX_DEPTH} levels`;
      return;
    }
    for (const s of set.selections) {
      if (problem) return;
      if (s.kind === Kind.FIELD) {
        if (++fields > MAX_FIELDS) {
          problem = `The query selects more than ${MAX_FIELDS} fields (aliases and fragments counted as used)`;
          return;
        }
        // Introspection (`__schema`, `__type`) reads no resource: its depth is free (GraphiQL's query nests `ofType` some 10 levels).
        if (s.selectionSet) walk(s.selectionSet, s.name.value.startsWith('__') ? -Infinity : depth + 1, via);
      } else if (s.kind === Kind.INLINE_FRAGMENT) {
        walk(s.selectionSet, depth, via);
      } else {
        const f = fragments.get(s.name.value);
        // An unknown or cyclic fragment is the validator's to name.
        if (f && !via.has(f.name.value)) walk(f.selectionSet, depth, new Set([...via, f.name.value]));
      }
    }
  };
  for (const d of doc.definitions) {
    if (d.kind === Kind.OPERATION_DEFINITION) walk(d.selectionSet, 1, new Set());
  }
  return problem;
}
