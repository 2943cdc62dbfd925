/**
 * The FHIRPath (N1, http://hl7.org/fhirpath/N1/) lexer and parser: an expression becomes a small syntax
 * tree that `fhirpath-engine.ts` compiles once into closures. Precedence follows the grammar's
 * table (§ 6.7): `.`/`[]`, unary `+ -`, `* / div mod`, `+ - &`, `is as`, `|`, `< > <= >=`, `= ~ != !~`,
 * `in contains`, `and`, `or xor`, `implies`. Errors name the expression and the character position.
 */

/** A construct the engine does not evaluate (a function needing a server or terminology, an unknown one). */
export class UnsupportedFhirPath extends Error {
  constructor(readonly expression: string, readonly position: number, readonly construct: string) {
    super(`unsupported FHIRPath (${construct} at ${position}): ${expression}`);
    this.name = 'UnsupportedFhirPath';
  }
}

/** An expression that is not FHIRPath. */
export class FhirPathSyntaxError extends Error {
  constructor(readonly expression: string, readonly position: number, what: string) {
    super(`FHIRPath syntax error (${what} at ${position}): ${expression}`);
    this.name = 'FhirPathSyntaxError';
  }
}

/** A type specifier: `Quantity`, `FHIR.string`, `System.Boolean`. */
export interface TypeName {
  namespace: 'FHIR' | 'System' | undefined;
  name: string;
}

export type Literal =
  | { kind: 'string'; value: string }
  /** `text`: the number as written (`1.0`), whose precision a Decimal keeps (N1: `1.0.toString()` is '1.0'). */
  | { kind: 'number'; value: number; integer: boolean; text: string }
  | { kind: 'boolean'; value: boolean }
  | { kind: 'date' | 'dateTime' | 'time'; value: string }
  | { kind: 'quantity'; value: number; unit: string; text: string }
  | { kind: 'empty' };

export type Ast =
  | { kind: 'literal'; at: number; literal: Literal }
  | { kind: 'this' | 'index' | 'total'; at: number }
  | { kind: 'var'; at: number; name: string }
  /** `name`, or `target.name`; without a target the name is looked up on `$this` (or is a type name). */
  | { kind: 'member'; at: number; target: Ast | undefined; name: string }
  | { kind: 'call'; at: number; target: Ast | undefined; name: string; args: Ast[] }
  | { kind: 'indexer'; at: number; target: Ast; index: Ast }
  | { kind: 'unary'; at: number; op: '+' | '-'; operand: Ast }
  | { kind: 'binary'; at: number; op: BinaryOp; left: Ast; right: Ast }
  | { kind: 'type'; at: number; op: 'is' | 'as'; operand: Ast; type: TypeName };

export type BinaryOp =
  | '*' | '/' | 'div' | 'mod' | '+' | '-' | '&' | '|' | '<' | '>' | '<=' | '>=' | '=' | '~' | '!=' | '!~'
  | 'in' | 'contains' | 'and' | 'or' | 'xor' | 'implies';

interface Token {
  kind: 'ident' | 'delimited' | 'string' | 'number' | 'date' | 'var' | 'special' | 'op' | 'end';
  text: string;
  at: number;
}

const OPERATORS = ['<=', '>=', '!=', '!~', '(', ')', '[', ']', '{', '}', '.', ',', '=', '~', '<', '>', '|', '+', '-', '*', '/', '&'];
const DATE = /@(?:T\d{2}(?::\d{2}(?::\d{2}(?:\.\d+)?)?)?|\d{4}(?:-\d{2}(?:-\d{2})?)?(?:T(?:\d{2}(?::\d{2}(?::\d{2}(?:\.\d+)?)?)?)?(?:Z|[+-]\d{2}:\d{2})?)?)/y;
const NUMBER = /\d+(?:\.\d+)?/y;
const IDENT = /[A-Za-z_][A-Za-z0-9_]*/y;
const CALENDAR_UNITS = new Set([
  'year', 'years', 'month', 'months', 'week', 'weeks', 'day', 'days', 'hour', 'hours',
  'minute', 'minutes', 'second', 'seconds', 'millisecond', 'milliseconds',
]);

function sticky(re: RegExp, text: string, at: number): string | undefined {
  re.lastIndex = at;
  return re.exec(text)?.[0];
}

/** Reads a quoted text (string literal or delimited identifier) from `at` (the opening quote); returns the end. */
function quoted(text: string, at: number, quote: string, fail: (at: number, what: string) => never): number {
  let i = at + 1;
  while (i < text.length && text[i] !== quote) i += text[i] === '\\' ? 2 : 1;
  if (i >= text.length) fail(at, 'unterminated literal');
  return i + 1;
}

/** Resolves the escapes of a string literal's or delimited identifier's body (§ 5.2.3 String). */
export function unescapeText(body: string): string {
  return body.replace(/\\(u[0-9a-fA-F]{4}|.)/g, (_, c: string) => {
    switch (c) {
      case 'r': return '\r';
      case 'n': return '\n';
      case 't': return '\t';
      case 'f': return '\f';
      default: return c.length > 1 ? String.fromCharCode(parseInt(c.slice(1), 16)) : c;
    }
  });
}

function tokenize(text: string, fail: (at: number, what: string) => never): Token[] {
  const tokens: Token[] = [];
  let at = 0;
  while (at < text.length) {
    const c = text[at]!;
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
      at++;
      continue;
    }
    if (c === '/' && (text[at + 1] === '/' || text[at + 1] === '*')) {
      const end = text[at + 1] === '/' ? text.indexOf('\n', at) : text.indexOf('*/', at + 2);
      // A block comment must be closed (`2 + 2 /* not finished` is no expression); a line comment ends with the text.
      if (end < 0 && text[at + 1] === '*') fail(at, 'unterminated comment');
      at = end < 0 ? text.length : end + (text[at + 1] === '/' ? 1 : 2);
      continue;
    }
    const start = at;
    if (c === "'" || c === '`') {
      at = quoted(text, at, c, fail);
      tokens.push({ kind: c === "'" ? 'string' : 'delimited', text: unescapeText(text.slice(start + 1, at - 1)), at: start });
    } else if (c === '@') {
      const date = sticky(DATE, text, at);
      if (date === undefined || date.length === 1) fail(at, 'date/time literal expected');
      at += date.length;
      tokens.push({ kind: 'date', text: date.slice(1), at: start });
    } else if (c === '%') {
      at++;
      if (text[at] === "'" || text[at] === '`') {
        const q = text[at]!;
        at = quoted(text, at, q, fail);
        tokens.push({ kind: 'var', text: unescapeText(text.slice(start + 2, at - 1)), at: start });
      } else {
        // `%vs-name` and `%ext-name` (FHIR's ValueSet and extension URL constants) carry a hyphen.
        const name = sticky(/(?:vs|ext)-[A-Za-z0-9_.-]+|[A-Za-z_][A-Za-z0-9_]*/y, text, at);
        if (name === undefined) fail(at, 'variable name expected');
        at += name.length;
        tokens.push({ kind: 'var', text: name, at: start });
      }
    } else if (c === '$') {
      const name = sticky(IDENT, text, at + 1);
      if (name === undefined) fail(at, "'$this', '$index' or '$total' expected");
      at += 1 + name.length;
      tokens.push({ kind: 'special', text: name, at: start });
    } else if (c >= '0' && c <= '9') {
      const n = sticky(NUMBER, text, at)!;
      at += n.length;
      tokens.push({ kind: 'number', text: n, at: start });
    } else if (/[A-Za-z_]/.test(c)) {
      const name = sticky(IDENT, text, at)!;
      at += name.length;
      tokens.push({ kind: 'ident', text: name, at: start });
    } else {
      const op = OPERATORS.find((o) => text.startsWith(o, at));
      if (op === undefined) fail(at, `unexpected '${c}'`);
      at += op.length;
      tokens.push({ kind: 'op', text: op, at: start });
    }
  }
  tokens.push({ kind: 'end', text: '', at: text.length });
  return tokens;
}

/** Binary operators by precedence level, loosest first. */
const LEVELS: readonly (readonly string[])[] = [
  ['implies'],
  ['or', 'xor'],
  ['and'],
  ['in', 'contains'],
  ['=', '~', '!=', '!~'],
  ['<', '>', '<=', '>='],
  ['|'],
  // 'is' / 'as' sit here (type expressions), handled in `typeExpression`.
  ['+', '-', '&'],
  ['*', '/', 'div', 'mod'],
];
const TYPE_LEVEL = 7;

/** Parses `expression` into its syntax tree; throws FhirPathSyntaxError on malformed input. */
/**
 * The most tokens an expression may have, and how deeply its parentheses, function arguments, indexes
 * and signs may nest. Parsing and compiling recurse on both (a chain `a.where(x).where(x)...` or
 * `x and x and ...` is as deep as it is long), so an expression past them (a tenant's profile invariant, a
 * FHIRPath Patch path: 10,000 parentheses) overflowed the stack, a 500 on every write claiming the
 * profile. R4's own invariants have at most 348 characters and nest 4 deep.
 */
const MAX_TOKENS = 4096;
const MAX_NESTING = 64;

export function parseFhirPath(expression: string): Ast {
  const fail = (at: number, what: string): never => {
    throw new FhirPathSyntaxError(expression, at, what);
  };
  const tokens = tokenize(expression, fail);
  // The last token ends the text.
  if (tokens.length > MAX_TOKENS + 1) fail(tokens[MAX_TOKENS]!.at, `more than ${MAX_TOKENS} tokens, the most an expression may have`);
  let pos = 0;
  let depth = 0;
  /** `parse()`, one level deeper in parentheses, arguments, indexes or signs: at most MAX_NESTING. */
  const nested = <T>(at: number, parse: () => T): T => {
    if (++depth > MAX_NESTING) fail(at, `nested more than ${MAX_NESTING} deep, the most an expression may be`);
    try {
      return parse();
    } finally {
      depth--;
    }
  };
  const peek = (): Token => tokens[pos]!;
  const isOp = (text: string): boolean => {
    const t = tokens[pos]!;
    return (t.kind === 'op' || t.kind === 'ident') && t.text === text;
  };
  const expect = (text: string): Token => {
    if (!isOp(text)) fail(peek().at, `'${text}' expected`);
    return tokens[pos++]!;
  };

  function binary(level: number): Ast {
    if (level === TYPE_LEVEL) return typeExpression();
    if (level === LEVELS.length + 1) return unary();
    const ops = LEVELS[level < TYPE_LEVEL ? level : level - 1]!;
    let left = binary(level + 1);
    for (;;) {
      const t = peek();
      if (!((t.kind === 'op' || t.kind === 'ident') && ops.includes(t.text))) return left;
      pos++;
      const right = binary(level + 1);
      left = { kind: 'binary', at: t.at, op: t.text as BinaryOp, left, right };
    }
  }

  function typeExpression(): Ast {
    let operand = binary(TYPE_LEVEL + 1);
    while (isOp('is') || isOp('as')) {
      const t = tokens[pos++]!;
      operand = { kind: 'type', at: t.at, op: t.text as 'is' | 'as', operand, type: typeName() };
    }
    return operand;
  }

  function typeName(): TypeName {
    const first = identifier();
    if (isOp('.') && (first === 'FHIR' || first === 'System')) {
      pos++;
      return { namespace: first, name: identifier() };
    }
    return { namespace: undefined, name: first };
  }

  function identifier(): string {
    const t = peek();
    if (t.kind !== 'ident' && t.kind !== 'delimited') fail(t.at, 'identifier expected');
    pos++;
    return t.text;
  }

  function unary(): Ast {
    const t = peek();
    if (t.kind === 'op' && (t.text === '+' || t.text === '-')) {
      pos++;
      return { kind: 'unary', at: t.at, op: t.text, operand: nested(t.at, unary) };
    }
    return postfix(term());
  }

  function postfix(start: Ast): Ast {
    let node = start;
    for (;;) {
      if (isOp('.')) {
        pos++;
        node = invocation(node);
      } else if (peek().kind === 'op' && peek().text === '[') {
        const at = tokens[pos++]!.at;
        const index = nested(at, () => binary(0));
        expect(']');
        node = { kind: 'indexer', at, target: node, index };
      } else return node;
    }
  }

  /** `name` or `name(args)`, on `target` (undefined: on `$this`). */
  function invocation(target: Ast | undefined): Ast {
    const t = peek();
    if (t.kind === 'special') return special(target);
    const name = identifier();
    if (peek().kind === 'op' && peek().text === '(') {
      pos++;
      const args: Ast[] = [];
      if (!(peek().kind === 'op' && peek().text === ')')) {
        args.push(nested(t.at, () => binary(0)));
        while (isOp(',')) {
          pos++;
          args.push(nested(t.at, () => binary(0)));
        }
      }
      expect(')');
      return { kind: 'call', at: t.at, target, name, args };
    }
    return { kind: 'member', at: t.at, target, name };
  }

  function special(target: Ast | undefined): Ast {
    const t = tokens[pos++]!;
    if (target !== undefined) fail(t.at, `'$${t.text}' after '.'`);
    if (t.text === 'this') return { kind: 'this', at: t.at };
    if (t.text === 'index') return { kind: 'index', at: t.at };
    if (t.text === 'total') return { kind: 'total', at: t.at };
    return fail(t.at, `unknown '$${t.text}'`);
  }

  function term(): Ast {
    const t = peek();
    switch (t.kind) {
      case 'string':
        pos++;
        return { kind: 'literal', at: t.at, literal: { kind: 'string', value: t.text } };
      case 'number':
        pos++;
        return numberOrQuantity(t);
      case 'date':
        pos++;
        return { kind: 'literal', at: t.at, literal: dateLiteral(t.text) };
      case 'var':
        pos++;
        return { kind: 'var', at: t.at, name: t.text };
      case 'special':
        return special(undefined);
      case 'ident':
        if (t.text === 'true' || t.text === 'false') {
          pos++;
          return { kind: 'literal', at: t.at, literal: { kind: 'boolean', value: t.text === 'true' } };
        }
        return invocation(undefined);
      case 'delimited':
        return invocation(undefined);
      case 'op':
        if (t.text === '(') {
          pos++;
          const inner = nested(t.at, () => binary(0));
          expect(')');
          return inner;
        }
        if (t.text === '{') {
          pos++;
          expect('}');
          return { kind: 'literal', at: t.at, literal: { kind: 'empty' } };
        }
        return fail(t.at, `unexpected '${t.text}'`);
      default:
        return fail(t.at, 'unexpected end');
    }
  }

  function numberOrQuantity(t: Token): Ast {
    const value = Number(t.text);
    const next = peek();
    if (next.kind === 'string' || (next.kind === 'ident' && CALENDAR_UNITS.has(next.text))) {
      pos++;
      return { kind: 'literal', at: t.at, literal: { kind: 'quantity', value, unit: next.text, text: t.text } };
    }
    return { kind: 'literal', at: t.at, literal: { kind: 'number', value, integer: !t.text.includes('.'), text: t.text } };
  }

  const root = binary(0);
  if (peek().kind !== 'end') fail(peek().at, `unexpected '${peek().text}'`);
  return root;
}

function dateLiteral(text: string): Literal {
  if (text.startsWith('T')) return { kind: 'time', value: text.slice(1) };
  if (text.includes('T')) return { kind: 'dateTime', value: text.endsWith('T') ? text.slice(0, -1) : text };
  return { kind: 'date', value: text };
}
