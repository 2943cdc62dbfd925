/**
 * `_filter` (FHIR R4 search_filter.html, trial use): a filter expression such as
 * `name co "pet" and (birthdate ge 2014-10-10 or not (gender eq male))`, compiled into the same
 * conditions as the other search parameters. Each test `path op value` is written as the search
 * parameter it stands for (`name:contains=pet`, `birthdate=ge2014-10-10`) and compiled by
 * parameterCondition, so a test means what that parameter means everywhere else, except where the page
 * says otherwise (ARCHITECTURE.md, "`_filter`"): string and token `eq` are case-insensitive, `ne` is
 * "An item in the set has an unequal value" (not the negation of `eq`), strings take `gt`/`lt`/`ge`/`le`
 * and dates `co`. `and`, `or` and `not` become the engine's own `and`, `or` and `not` conditions, and a
 * path through a reference (`subject.name`, `subject[gender eq male].name`) a chain.
 *
 * Not supported (a 400 naming `_filter`): the element filters of the page's "additional parameters"
 * (`related[...]`, `characteristic[...]`; R4 has no such search parameters), `co` on numbers and
 * quantities (the index keeps no number's precision), `ne` with a versioned canonical URL.
 */
import { FhirError, type FhirErrorOptions } from '../errors.ts';
import type { Condition, StringValue } from '../store/types.ts';
import { paramOf, type ParamType } from './definitions.ts';
import { chainOver, isTextParam, markWithin, namedTargets, namesNone, MAX_CHAIN_DEPTH, parameterCondition, referenceTargets, tokenComparison, type PendingCondition } from './search-compile.ts';
import { isAbsoluteReference } from './references.ts';

const KEY = '_filter';

/** A parsed filter: tests joined left to right by `and` / `or` (no precedence), `not (...)`. */
type FilterNode =
  | { kind: 'logic'; op: 'and' | 'or'; left: FilterNode; right: FilterNode }
  | { kind: 'not'; filter: FilterNode }
  | { kind: 'test'; path: PathStep[]; op: string; value: string };

/** One name of a path (`subject`), with the filter its targets must meet (`subject[gender eq male]`). */
interface PathStep {
  name: string;
  filter?: FilterNode;
}

/** The comparison operations of search_filter.html's table. */
const OPS = new Set(['eq', 'ne', 'co', 'sw', 'ew', 'gt', 'lt', 'ge', 'le', 'ap', 'sa', 'eb', 'pr', 'po', 'ss', 'sb', 'in', 'ni', 're']);

/** The namespaces the page predefines (`loinc|1234-5`, `5.4|ucum|mg`). */
const NAMESPACES: Record<string, string> = {
  loinc: 'http://loinc.org',
  snomed: 'http://snomed.info/sct',
  rxnorm: 'http://www.nlm.nih.gov/research/umls/rxnorm',
  ucum: 'http://unitsofmeasure.org',
};

/**
 * A value of a parameter of `kind` with a predefined namespace written out where the kind has its
 * system: a token's (`loinc|1234-5`: `http://loinc.org|1234-5`), a quantity's unit system (`5.4|ucum|mg`:
 * `5.4|http://unitsofmeasure.org|mg`), a composite's in each such component (`components`: their kinds,
 * after the first, a token).
 */
function withNamespaces(kind: ParamType, value: string, components: ParamType[] = []): string {
  switch (kind) {
    case 'token': {
      // Names in any case ("Values are never case sensitive").
      const ns = /^([A-Za-z]+)\|/.exec(value)?.[1];
      return ns !== undefined && Object.hasOwn(NAMESPACES, ns.toLowerCase()) ? NAMESPACES[ns.toLowerCase()] + value.slice(ns.length) : value;
    }
    case 'quantity': {
      const bar = value.indexOf('|');
      return bar < 0 ? value : value.slice(0, bar + 1) + withNamespaces('token', value.slice(bar + 1));
    }
    case 'composite':
      return value.split('$').map((part, i) => withNamespaces(i === 0 ? 'token' : components[i - 1] ?? 'string', part)).join('$');
    default:
      return value;
  }
}

/** Longest filter accepted, in characters; deeper nesting than MAX_NESTING is refused too. */
const MAX_LENGTH = 8192;
const MAX_NESTING = 32;

function invalid(message: string, options: FhirErrorOptions = {}): FhirError {
  return new FhirError('invalid', `_filter: ${message}`, { ...options, expression: [KEY] });
}

/**
 * Parameters that the types a test is on do not have (each with those types): a 400, unless the test
 * is inside a path through a reference to other target types that have them (pathCondition leaves
 * these types out).
 */
class NotAParameter extends FhirError {
  constructor(readonly lacking: ReadonlyMap<string, string[]>) {
    const text = [...lacking].sort((a, b) => b[1].length - a[1].length)
      .map(([param, types]) => `'${param}' is not a search parameter of ${types.join(' or ')}`).join('; ');
    super('invalid', `_filter: ${text}`, { expression: [KEY] });
  }

  static of(param: string, type: string): NotAParameter {
    return new NotAParameter(new Map([[param, [type]]]));
  }
}

/** `make()`, or undefined when it names parameters its type lacks, which are added to `lacking`. */
function unlessLacking(make: () => PendingCondition, lacking: Map<string, string[]>): PendingCondition | undefined {
  try {
    return make();
  } catch (err) {
    if (!(err instanceof NotAParameter)) throw err;
    for (const [param, types] of err.lacking) lacking.set(param, [...new Set([...(lacking.get(param) ?? []), ...types])]);
    return undefined;
  }
}

/** A recursive-descent parser of search_filter.html's grammar over one `_filter` value. */
class Parser {
  private pos = 0;
  private nesting = 0;

  constructor(private readonly text: string) {}

  parse(): FilterNode {
    const node = this.filter();
    this.space();
    if (this.pos < this.text.length) throw this.error(`unexpected '${this.text.slice(this.pos, this.pos + 20)}'`);
    return node;
  }

  private error(message: string): FhirError {
    return invalid(`${message} at character ${this.pos + 1}`);
  }

  private space(): void {
    while (this.pos < this.text.length && /\s/.test(this.text[this.pos]!)) this.pos++;
  }

  /** The word at the cursor (letters, digits, `_`, `-`), not consumed. */
  private peekWord(): string {
    return /^[A-Za-z0-9_-]*/.exec(this.text.slice(this.pos))![0];
  }

  private expect(ch: string): void {
    this.space();
    if (this.text[this.pos] !== ch) throw this.error(`expected '${ch}'`);
    this.pos++;
  }

  /** filter = term (("and" / "or") term)*, left to right. */
  private filter(): FilterNode {
    if (++this.nesting > MAX_NESTING) throw invalid(`nested more than ${MAX_NESTING} levels`, { issueCode: 'too-costly' });
    let node = this.term();
    for (;;) {
      this.space();
      const word = this.peekWord().toLowerCase();
      if (word !== 'and' && word !== 'or') break;
      this.pos += word.length;
      node = { kind: 'logic', op: word, left: node, right: this.term() };
    }
    this.nesting--;
    return node;
  }

  /** term = "not" "(" filter ")" / "(" filter ")" / paramExp. */
  private term(): FilterNode {
    this.space();
    if (this.text[this.pos] === '(') {
      this.pos++;
      const inner = this.filter();
      this.expect(')');
      return inner;
    }
    const word = this.peekWord();
    if (word.toLowerCase() === 'not' && /^\s*\(/.test(this.text.slice(this.pos + 3))) {
      this.pos += 3;
      this.expect('(');
      const inner = this.filter();
      this.expect(')');
      return { kind: 'not', filter: inner };
    }
    const path = this.path();
    if (!/\s/.test(this.text[this.pos] ?? '')) throw this.error(`expected a space and an operation after '${path.map((s) => s.name).join('.')}'`);
    this.space();
    const op = this.peekWord().toLowerCase();
    if (!OPS.has(op)) throw this.error(`unknown operation '${this.peekWord() || this.text.slice(this.pos, this.pos + 10)}' (expected one of ${[...OPS].join(', ')})`);
    this.pos += op.length;
    if (this.pos >= this.text.length) throw this.error(`expected a value after '${op}'`);
    if (!/\s/.test(this.text[this.pos]!)) throw this.error(`expected a space and a value after '${op}'`);
    this.space();
    return { kind: 'test', path, op, value: this.value() };
  }

  /** paramPath = paramName ("[" filter "]")? ("." paramPath)?. */
  private path(): PathStep[] {
    const steps: PathStep[] = [];
    for (;;) {
      const name = /^[A-Za-z_][A-Za-z0-9_-]*/.exec(this.text.slice(this.pos))?.[0];
      if (!name) throw this.error('expected a search parameter name');
      this.pos += name.length;
      const step: PathStep = { name };
      if (this.text[this.pos] === '[') {
        this.pos++;
        step.filter = this.filter();
        this.expect(']');
        if (this.text[this.pos] !== '.') throw this.error(`expected '.' and a parameter after '${name}[...]'`);
      }
      steps.push(step);
      if (this.text[this.pos] !== '.') return steps;
      this.pos++;
    }
  }

  /** compValue = a JSON string, or a token: non-space characters except `]` and `)`. */
  private value(): string {
    if (this.text[this.pos] === '"') {
      const m = /^"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/.exec(this.text.slice(this.pos));
      if (!m) throw this.error('unterminated or malformed string');
      this.pos += m[0].length;
      return JSON.parse(m[0]) as string;
    }
    const m = /^[^\s\])]+/.exec(this.text.slice(this.pos));
    if (!m) throw this.error('expected a value');
    this.pos += m[0].length;
    return m[0];
  }
}

/** Escapes a filter value as one search value (`,` `\` always; `$` and `|` where they would split it). */
function escaped(value: string, keep: { bar?: boolean; dollar?: boolean }): string {
  const special = `\\\\,${keep.dollar ? '' : '$'}${keep.bar ? '' : '|'}`;
  return value.replace(new RegExp(`[${special}]`, 'g'), (ch) => `\\${ch}`);
}

type TokenCondition = Extract<Condition, { kind: 'token' }>;

/** `_filter`'s string operations as StringValue matches on the normalised value (`sw` and `co` are the parameter's own and `:contains`). */
const STRING_MATCHES: Record<string, StringValue['match']> = { eq: 'equal', ne: 'unequal', ew: 'suffix', gt: 'gt', ge: 'ge', lt: 'lt', le: 'le' };

/**
 * The condition of a test on the parameter `name` of `type`: that of the search parameter (key and raw
 * value) it stands for, or one made from it (string, token, reference and uri `eq` / `ne`, string
 * orderings, date `po` and `co`); `pr` is `:missing` negated.
 */
function testCondition(type: string, name: string, op: string, value: string, now: number, depth: number): PendingCondition {
  const param = (key: string, raw: string) => parameterCondition(type, key, raw, now, depth);
  const refuse = (what: string) => invalid(`'${op}' is not supported on ${what} ('${name} ${op} ...')`, { issueCode: 'not-supported' });
  const not = (c: PendingCondition): PendingCondition => ({ kind: 'not', condition: c as Condition });
  if (name === '_id') {
    if (op === 'eq') return param('_id', escaped(value, {}));
    if (op === 'ne') return param('_id:not', escaped(value, {}));
    throw refuse('_id');
  }
  if (name === '_list') {
    if (op === 'eq') return param('_list', escaped(value, {}));
    throw refuse('_list');
  }
  if (isTextParam(type, name)) {
    if (op === 'eq' || op === 'co') return param(name, escaped(value, {}));
    throw refuse(name);
  }
  const def = name === '_lastUpdated' ? undefined : paramOf(type, name);
  if (!def && name !== '_lastUpdated') throw NotAParameter.of(name, type);
  const kind = def?.type ?? 'date';
  if (op === 'pr') {
    // "Values are never case sensitive": `TRUE` too.
    const present = value.toLowerCase();
    if (present !== 'true' && present !== 'false') throw invalid(`'pr' takes true or false, not '${value}'`);
    if (!def) throw refuse('_lastUpdated');
    return param(`${name}:missing`, present === 'true' ? 'false' : 'true');
  }
  switch (kind) {
    case 'string': {
      // The parameter's normalised values (case- and accent-insensitive), one of which is enough: `sw` and
      // `co` as the parameter and `:contains`; `eq` the whole value, `ne` one unequal to it, `ew` its end,
      // `gt`, `ge`, `lt`, `le` by code points ("of starting character (trimmed)").
      const ordering = op === 'gt' || op === 'ge' || op === 'lt' || op === 'le';
      const raw = escaped(ordering ? value.trim() : value, {});
      if (op === 'sw') return param(name, raw);
      if (op === 'co') return param(`${name}:contains`, raw);
      const match = Object.hasOwn(STRING_MATCHES, op) ? STRING_MATCHES[op]! : undefined;
      if (match === undefined) throw refuse('a string parameter');
      const c = param(name, raw) as Condition & { kind: 'string' };
      return { ...c, values: c.values.map((v) => ({ ...v, match })) };
    }
    case 'token': {
      const raw = escaped(withNamespaces(kind, value), { bar: true });
      if (op === 'eq' || op === 'ne') return tokenComparison(def!, raw, op === 'ne');
      const modifier = { in: ':in', ni: ':not-in', ss: ':below', sb: ':above' }[op];
      if (modifier === undefined) throw refuse('a token parameter');
      return param(name + modifier, raw);
    }
    case 'reference': {
      const raw = escaped(value, { bar: true });
      if (op === 'eq' || op === 're') return param(name, raw);
      if (op !== 'ne') throw refuse('a reference parameter');
      // A versioned canonical's rows are its URL with and without the version, which no row alone tells apart.
      if (isAbsoluteReference(value) && value.lastIndexOf('|') > value.lastIndexOf('/')) {
        throw invalid(`'ne' is not supported with a versioned canonical URL ('${name} ne ${value}')`, { issueCode: 'not-supported' });
      }
      // A reference of the parameter (`patient`: a `subject` that is a Patient) unequal to the value.
      const target = def!.storedAs?.target;
      return { ...(param(name, raw) as TokenCondition), unequal: true, ...(target !== undefined && { systems: [target] }) };
    }
    case 'uri': {
      const raw = escaped(value, { bar: true });
      if (op === 'eq') return param(name, raw);
      if (op === 'ne') return { ...(param(name, raw) as TokenCondition), unequal: true };
      if (op === 'sw' || op === 'ss') return param(`${name}:below`, raw);
      if (op === 'sb') return param(`${name}:above`, raw);
      throw refuse('a uri parameter');
    }
    case 'date': case 'number': case 'quantity': {
      const raw = escaped(withNamespaces(kind, value), { bar: kind === 'quantity' });
      if (!/^[0-9+\-.]/.test(value)) throw invalid(`'${value}' is not a ${kind} value for '${name}'`);
      if (['eq', 'ne', 'gt', 'lt', 'ge', 'le', 'sa', 'eb', 'ap'].includes(op)) return param(name, op + raw);
      if ((op === 'po' || op === 'co') && kind === 'date') {
        // `po` overlaps: the stored period and the value's own one share an instant (`ap`'s test,
        // unwidened); `co`: "An item in the set's implicit period includes the stated value".
        const c = param(name, `eq${raw}`) as Condition & { kind: 'date' | 'lastUpdated' };
        return { ...c, tests: c.tests.map((t) => ({ ...t, op: op === 'po' ? ('ap' as const) : ('co' as const) })) };
      }
      throw refuse(`a ${kind} parameter`);
    }
    case 'composite': {
      const raw = escaped(withNamespaces(kind, value, def!.components?.map((c) => c.type)), { bar: true, dollar: true });
      if (op === 'eq') return param(name, raw);
      // A pair of values, and none equal: one unequal pair beside an equal one is not told apart (the
      // code-value composites keep no rows of pairs, and a UCUM quantity's pair has two rows).
      if (op === 'ne') return { kind: 'and', all: [param(`${name}:missing`, 'false') as Condition, not(param(name, raw)) as Condition] };
      throw refuse('a composite parameter');
    }
    case 'special':
      if (op === 'eq') return param(name, escaped(value, { bar: true }));
      throw refuse(`'${name}'`);
  }
}

/**
 * A test's path: one parameter, or a reference parameter followed (chained) by the rest. A chain reaches
 * the target types that have the parameters of its rest and of its `[filter]`: one that lacks them
 * holds no match (`subject[gender eq male].name`: Patients, not Locations), and only when no target
 * type has them is the path a 400.
 */
function pathCondition(type: string, path: PathStep[], op: string, value: string, now: number, depth: number): PendingCondition {
  if (depth > MAX_CHAIN_DEPTH) throw invalid(`chains more than ${MAX_CHAIN_DEPTH} levels`, { issueCode: 'too-costly' });
  const [step, ...rest] = path as [PathStep, ...PathStep[]];
  if (rest.length === 0) return testCondition(type, step.name, op, value, now, depth);
  // `pr false` through a chain: the set the path reaches is empty, which holds too where there is no
  // reference at all (search_filter.html: "pr: the set is empty or not"); the chain's own `:missing`
  // would ask for a referenced resource without the value.
  if (op === 'pr' && value === 'false') return { kind: 'not', condition: pathCondition(type, path, op, 'true', now, depth) as Condition };
  const def = paramOf(type, step.name);
  if (!def) throw NotAParameter.of(step.name, type);
  if (def.type !== 'reference') throw invalid(`'${step.name}' is a ${def.type} parameter of ${type}, not a reference to chain through`);
  if (referenceTargets(def).length === 0) throw invalid(`'${step.name}' may refer to any type; chain it with the search parameter '${step.name}:Type.${rest[0]!.name}'`);
  const targets = namedTargets(def, referenceTargets(def));
  if (targets.length === 0) throw invalid(namesNone(def, referenceTargets(def)));
  const where = new Map<string, Condition[]>();
  const lacking = new Map<string, string[]>();
  for (const t of targets) {
    const filter = step.filter && unlessLacking(() => nodeCondition(t, step.filter!, now, depth + 1), lacking);
    const next = unlessLacking(() => pathCondition(t, rest, op, value, now, depth + 1), lacking);
    if (next && (filter || !step.filter)) where.set(t, [...(filter ? [filter] : []), next] as Condition[]);
  }
  if (where.size === 0) throw new NotAParameter(lacking);
  return chainOver(def, [...where.keys()], (t) => where.get(t)!);
}

function nodeCondition(type: string, node: FilterNode, now: number, depth: number): PendingCondition {
  switch (node.kind) {
    case 'test': return pathCondition(type, node.path, node.op, node.value, now, depth);
    case 'not': return { kind: 'not', condition: nodeCondition(type, node.filter, now, depth) as Condition };
    case 'logic': {
      // Left to right: `a and b or c` is `(a and b) or c`; runs of one operation are flattened.
      const left = nodeCondition(type, node.left, now, depth);
      const right = nodeCondition(type, node.right, now, depth);
      const parts = (c: PendingCondition): PendingCondition[] =>
        node.op === 'and' ? (c.kind === 'and' ? c.all : [c]) : c.kind === 'or' ? c.any : [c];
      const all = [...parts(left), ...parts(right)] as Condition[];
      if (node.op === 'and') return { kind: 'and', all };
      const any = mergedValues(all);
      return any.length === 1 ? any[0]! : { kind: 'or', any };
    }
  }
}

/**
 * ORed alternatives with one parameter's values joined into one condition (`code eq a or code eq b`
 * is `code=a,b`, as the values of one parameter are ORed), which the planner counts as one and a bulk
 * export's page reads through the codes' rows (src/store/snapshot-window.ts).
 */
function mergedValues(any: Condition[]): Condition[] {
  const out: Condition[] = [];
  const at = new Map<string, number>();
  for (const c of any) {
    // An `unequal` token's values are one value's forms, which a row must all differ from.
    const key = c.kind === 'token' ? (c.not || c.unequal ? undefined : `${c.kind}|${c.param}|${c.reference ?? ''}|${c.fold ?? ''}`)
      : c.kind === 'string' || c.kind === 'date' || c.kind === 'number' ? `${c.kind}|${c.param}` : undefined;
    const i = key === undefined ? undefined : at.get(key);
    if (i === undefined) {
      if (key !== undefined) at.set(key, out.length);
      out.push(c);
      continue;
    }
    const prev = out[i]!;
    if (prev.kind === 'token' && c.kind === 'token') out[i] = { ...prev, values: [...prev.values, ...c.values] };
    else if (prev.kind === 'string' && c.kind === 'string') out[i] = { ...prev, values: [...prev.values, ...c.values] };
    else if (prev.kind === 'date' && c.kind === 'date') out[i] = { ...prev, tests: [...prev.tests, ...c.tests] };
    else if (prev.kind === 'number' && c.kind === 'number') out[i] = { ...prev, tests: [...prev.tests, ...c.tests] };
  }
  return out;
}

/**
 * The condition of one `_filter` value on resources of `type`. Errors are 400s naming `_filter`, the
 * unknown parameters among them (inside a filter, ignoring one would change what `not` and `or` mean).
 */
export function filterCondition(type: string, raw: string, now: number): PendingCondition {
  if (raw.length > MAX_LENGTH) throw invalid(`longer than ${MAX_LENGTH} characters`, { issueCode: 'too-costly' });
  const node = new Parser(raw).parse();
  try {
    return markWithin(nodeCondition(type, node, now, 0), KEY);
  } catch (err) {
    if (!(err instanceof FhirError) || err.status >= 500 || err.message.startsWith('_filter: ')) throw err;
    const code = err.issues[0]?.code;
    throw new FhirError(err.category, `_filter: ${err.message}`, { expression: [KEY], cause: err, ...(code ? { issueCode: code } : {}) });
  }
}
