/**
 * The boolean syntax of one `_text` or `_content` value (R4 search.html, "_content and _text": "logical
 * operations such as AND, OR", as in `(bone OR liver) and metastases`): words, `AND` (also implied
 * between adjacent terms), `OR`, parentheses and quoted groups, operators in any case, AND binding
 * tighter than OR (`a OR b c` is `a OR (b AND c)`). The expression is compiled to the condition model's
 * form, an OR of ANDs of words (its disjunctive normal form), so both databases and the in-memory matcher
 * read it as they read `,`-separated values. Neither index keeps positions, so a quoted "phrase" is its
 * words ANDed, in which `and`, `or` and `not` are words. `NOT` and `-word` are refused (a 400): FTS5's
 * NOT needs a positive term beside it, and the condition model holds no negated words.
 */
import type { TextQuery, TextTerm } from '../store/types.ts';
import { FhirError } from '../errors.ts';
import { TEXT_MAX_QUERY_WORDS, textPartTerms } from './text-index.ts';

/** The most alternatives (ANDs of words) one value may expand to: `(a OR b) (c OR d)` is 4. */
export const TEXT_MAX_QUERY_CLAUSES = 32;

type Token = { kind: 'and' | 'or' | 'open' | 'close' } | { kind: 'words'; terms: TextTerm[] };

const OPERATORS: Record<string, 'and' | 'or' | 'not'> = { and: 'and', or: 'or', not: 'not' };

/** One `_text` or `_content` value (no `,`): an OR of ANDs of words, and the expression as written. */
export interface ParsedTextQuery {
  alternatives: TextTerm[][];
  query: TextQuery;
}

/** Words ANDed, or ORed: one alone is itself. */
const joined = (kind: 'all' | 'any', parts: TextQuery[]): TextQuery =>
  parts.length === 1 ? parts[0]! : kind === 'all' ? { all: parts } : { any: parts };

/** The terms of one `_text` or `_content` value (no `,`): an OR of ANDs of words, and the expression. */
export function parseTextQuery(key: string, raw: string): ParsedTextQuery {
  const fail = (why: string) => new FhirError('invalid', `'${key}': ${why} in '${raw}'`, { expression: [key] });
  const tokens = tokenize(key, raw, fail);
  const words = tokens.reduce((n, t) => n + (t.kind === 'words' ? t.terms.length : 0), 0);
  if (words === 0) throw new FhirError('invalid', `'${key}' needs at least one word (letters or digits)`, { expression: [key] });
  if (words > TEXT_MAX_QUERY_WORDS) {
    throw new FhirError('invalid', `'${key}' has ${words} words; at most ${TEXT_MAX_QUERY_WORDS} are supported`, { issueCode: 'too-costly', expression: [key] });
  }
  let at = 0;
  const peek = () => tokens[at];
  const startsOperand = (t: Token | undefined) => t !== undefined && (t.kind === 'words' || t.kind === 'open');

  function or(): ParsedTextQuery {
    const first = and();
    let out = first.alternatives;
    const parts = [first.query];
    while (peek()?.kind === 'or') {
      at++;
      if (!startsOperand(peek())) throw fail('OR needs a term on each side');
      const right = and();
      out = out.concat(right.alternatives);
      parts.push(right.query);
      if (out.length > TEXT_MAX_QUERY_CLAUSES) throw tooMany();
    }
    return { alternatives: out, query: joined('any', parts) };
  }
  function and(): ParsedTextQuery {
    const first = operand();
    let out = first.alternatives;
    const parts = [first.query];
    for (;;) {
      const t = peek();
      if (t?.kind === 'and') {
        at++;
        if (!startsOperand(peek())) throw fail('AND needs a term on each side');
      } else if (!startsOperand(t)) {
        return { alternatives: out, query: joined('all', parts) };
      }
      const right = operand();
      out = out.flatMap((l) => right.alternatives.map((r) => [...l, ...r]));
      parts.push(right.query);
      if (out.length > TEXT_MAX_QUERY_CLAUSES) throw tooMany();
    }
  }
  function operand(): ParsedTextQuery {
    const t = tokens[at++];
    if (t?.kind === 'words') return { alternatives: [t.terms], query: joined('all', t.terms) };
    if (t?.kind === 'open') {
      if (peek()?.kind === 'close') throw fail('empty parentheses');
      const inner = or();
      if (tokens[at++]?.kind !== 'close') throw fail('unbalanced parentheses');
      return inner;
    }
    if (t?.kind === 'close') throw fail('unbalanced parentheses');
    throw fail(`${t ? t.kind.toUpperCase() : 'the expression'} needs a term on each side`);
  }
  const tooMany = () =>
    new FhirError('invalid', `'${key}' expands to more than ${TEXT_MAX_QUERY_CLAUSES} alternatives`, { issueCode: 'too-costly', expression: [key] });

  const out = or();
  if (at < tokens.length) throw fail(tokens[at]!.kind === 'close' ? 'unbalanced parentheses' : 'an operator needs a term on each side');
  return out;
}

/** Operators, parentheses and groups of words (a bare run of characters, or a quoted string). */
function tokenize(key: string, raw: string, fail: (why: string) => FhirError): Token[] {
  const out: Token[] = [];
  const words = (s: string) => {
    const terms = s.split(/\s+/).flatMap(textPartTerms);
    if (terms.length) out.push({ kind: 'words', terms });
  };
  let i = 0;
  while (i < raw.length) {
    const c = raw[i]!;
    if (/\s/.test(c)) {
      i++;
    } else if (c === '(' || c === ')') {
      out.push({ kind: c === '(' ? 'open' : 'close' });
      i++;
    } else if (c === '"') {
      const end = raw.indexOf('"', i + 1);
      if (end < 0) throw fail('unbalanced quotes');
      words(raw.slice(i + 1, end));
      i = end + 1;
    } else {
      let end = i;
      while (end < raw.length && !/[\s()"]/.test(raw[end]!)) end++;
      const part = raw.slice(i, end);
      const op = OPERATORS[part.toLowerCase()];
      if (op === 'not' || /^-[\p{L}\p{N}]/u.test(part)) {
        const hint = op === 'not' ? `; "${part}" in quotes is the word` : '';
        throw new FhirError('not-supported', `'${key}': NOT and -word are not supported ('${part}'${hint})`, { expression: [key] });
      }
      if (op) out.push({ kind: op });
      else words(part);
      i = end;
    }
  }
  return out;
}
