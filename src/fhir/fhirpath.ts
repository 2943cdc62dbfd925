/**
 * The subset of FHIRPath that the R4 (and US Core) SearchParameter expressions use, compiled once per
 * expression into plain functions: paths, `|` unions, `ofType(T)` / `as(T)` (choice elements), `[n]`,
 * `.where(resolve() is T)`, `.where(<element> = '<text>')`, `exists()`, and the one boolean form R4 has
 * (`Patient.deceased.exists() and Patient.deceased != false`). `%resource` in composite components.
 * Anything else throws at compile time (a unit test compiles every definition).
 */
export type Json = Record<string, unknown>;

/** One compiled branch of a union, evaluated from the resource root (or from a composite's element). */
export interface CompiledPath {
  /** A canonical text of the path (without the `where(resolve() is T)` restriction): equal paths reach equal elements. */
  key: string;
  /** `where(resolve() is X)` at the end: only references to resource type X. */
  targetType?: string;
  /** The values reached, arrays flattened. */
  evaluate(node: unknown, root?: unknown): unknown[];
}

type Step = (nodes: unknown[], root: unknown) => unknown[];

/** FHIR data type names: a choice element `value[x]` is stored as `value` + one of these. */
const CHOICE_TYPES = [
  'Base64Binary', 'Boolean', 'Canonical', 'Code', 'Date', 'DateTime', 'Decimal', 'Id', 'Instant', 'Integer', 'Markdown', 'Oid',
  'PositiveInt', 'String', 'Time', 'UnsignedInt', 'Uri', 'Url', 'Uuid', 'Address', 'Age', 'Annotation', 'Attachment',
  'CodeableConcept', 'Coding', 'ContactPoint', 'Count', 'Distance', 'Duration', 'HumanName', 'Identifier', 'Money', 'Period',
  'Quantity', 'Range', 'Ratio', 'Reference', 'SampledData', 'Signature', 'Timing', 'ContactDetail', 'Contributor',
  'DataRequirement', 'Expression', 'ParameterDefinition', 'RelatedArtifact', 'TriggerDefinition', 'UsageContext', 'Dosage', 'Meta',
];
const CHOICE_SUFFIX = new Set(CHOICE_TYPES);

function push(out: unknown[], value: unknown): void {
  if (value === undefined || value === null) return;
  if (Array.isArray(value)) {
    for (const v of value) if (v !== undefined && v !== null) out.push(v);
  } else out.push(value);
}

/** `.name`: the element, or for a choice element `name[x]` whichever `name<Type>` is present. */
function child(name: string): Step {
  return (nodes) => {
    const out: unknown[] = [];
    for (const node of nodes) {
      if (node === null || typeof node !== 'object' || Array.isArray(node)) continue;
      const obj = node as Json;
      const direct = obj[name];
      if (direct !== undefined) {
        push(out, direct);
        continue;
      }
      for (const key in obj) {
        if (key.length > name.length && key.startsWith(name) && CHOICE_SUFFIX.has(key.slice(name.length))) push(out, obj[key]);
      }
    }
    return out;
  };
}

/** The type name FHIRPath's `ofType(T)` takes: FHIR primitives are lower case (`dateTime`), complex types capitalised. */
function choiceSuffix(type: string): string {
  return type[0]!.toUpperCase() + type.slice(1);
}

/** `name.ofType(T)`: the choice element `name<T>` only. */
function childOfType(name: string, type: string): Step {
  return child(name + choiceSuffix(type)) as Step;
}

/** `resolve() is T` on a Reference: its literal reference names type T (relative, absolute or contained '#'). */
function referencesType(node: unknown, type: string): boolean {
  const ref = (node as Json | null)?.reference;
  if (typeof ref !== 'string') return false;
  const path = ref.split(/[?#]/, 1)[0]!;
  const parts = path.split('/');
  // `.../Type/id` or `.../Type/id/_history/v`
  const at = parts.length >= 4 && parts[parts.length - 2] === '_history' ? parts.length - 4 : parts.length - 2;
  return at >= 0 && parts[at] === type;
}

const IDENT = '[A-Za-z_][A-Za-z0-9_]*';

interface Parser {
  text: string;
  at: number;
}

function fail(p: Parser, what: string): never {
  throw new Error(`unsupported FHIRPath expression (${what} at ${p.at}): ${p.text}`);
}

function skip(p: Parser): void {
  while (p.text[p.at] === ' ') p.at++;
}

function eat(p: Parser, token: string): boolean {
  skip(p);
  if (p.text.startsWith(token, p.at)) {
    p.at += token.length;
    return true;
  }
  return false;
}

function ident(p: Parser): string {
  skip(p);
  const m = new RegExp(`^${IDENT}`).exec(p.text.slice(p.at));
  if (!m) fail(p, 'identifier expected');
  p.at += m[0].length;
  return m[0];
}

function stringLiteral(p: Parser): string {
  skip(p);
  const m = /^'((?:[^'\\]|\\.)*)'/.exec(p.text.slice(p.at));
  if (!m) fail(p, 'string expected');
  p.at += m[0].length;
  return m[1]!.replace(/\\(.)/g, '$1');
}

/** The criterion of a `where(...)`: `resolve() is T` or `<element> = '<text>'`. */
function whereStep(p: Parser): { step: Step; targetType?: string } {
  if (eat(p, 'resolve()')) {
    if (!eat(p, 'is')) fail(p, "'is' expected");
    const type = ident(p);
    if (!eat(p, ')')) fail(p, "')' expected");
    return { step: (nodes) => nodes.filter((n) => referencesType(n, type)), targetType: type };
  }
  const element = ident(p);
  if (!eat(p, '=')) fail(p, "'=' expected");
  const text = stringLiteral(p);
  if (!eat(p, ')')) fail(p, "')' expected");
  const get = child(element);
  return { step: (nodes) => nodes.filter((n) => get([n], undefined).some((v) => v === text)) };
}

/** One path: `[%resource.|Type.]a.b.ofType(X).where(...)[0]...`, optionally parenthesised. */
function path(p: Parser, resourceType: string | undefined): { path: CompiledPath; applies: boolean } {
  skip(p);
  const parens = eat(p, '(');
  const steps: Step[] = [];
  const keyParts: string[] = [];
  let targetType: string | undefined;
  let applies = true;
  const fromRoot = eat(p, '%resource');
  const name = (n: string): void => {
    if (n === 'ofType' || n === 'as') {
      if (!eat(p, '(')) fail(p, "'(' expected");
      const type = ident(p);
      if (!eat(p, ')')) fail(p, "')' expected");
      const prev = keyParts.pop();
      if (prev === undefined) fail(p, 'ofType without an element');
      steps.pop();
      steps.push(childOfType(prev, type));
      keyParts.push(prev + choiceSuffix(type));
    } else if (n === 'where') {
      if (!eat(p, '(')) fail(p, "'(' expected");
      const from = p.at;
      const w = whereStep(p);
      steps.push(w.step);
      if (w.targetType) targetType = w.targetType;
      else keyParts.push(`where(${p.text.slice(from, p.at)}`);
    } else if (n === 'exists' || n === 'resolve' || n === 'first') {
      fail(p, `${n}() in a path`);
    } else {
      steps.push(child(n));
      keyParts.push(n);
    }
  };
  if (!fromRoot) {
    const first = ident(p);
    if (resourceType !== undefined && /^[A-Z]/.test(first)) {
      applies = first === resourceType || first === 'Resource' || first === 'DomainResource';
    } else name(first);
  }
  const rest = (): void => {
    for (;;) {
      skip(p);
      if (p.text[p.at] === '[') {
        const m = /^\[(\d+)\]/.exec(p.text.slice(p.at));
        if (!m) fail(p, 'index expected');
        p.at += m[0].length;
        const n = Number(m[1]);
        steps.push((nodes) => (n < nodes.length ? [nodes[n]] : []));
        keyParts.push(`[${n}]`);
        continue;
      }
      if (!eat(p, '.')) break;
      name(ident(p));
    }
  };
  rest();
  if (parens) {
    if (!eat(p, ')')) fail(p, "')' expected");
    rest();
  }
  const key = (fromRoot ? '%resource.' : '') + keyParts.join('.');
  const evaluate = (node: unknown, root?: unknown): unknown[] => {
    let nodes: unknown[] = [fromRoot ? (root ?? node) : node];
    for (const step of steps) {
      nodes = step(nodes, root);
      if (nodes.length === 0) break;
    }
    return nodes;
  };
  return { path: targetType ? { key, targetType, evaluate } : { key, evaluate }, applies };
}

/** `X.exists() and X != false`: R4's `deceased`, true when present and not `false`. */
const PRESENT_AND_NOT_FALSE = new RegExp(`^(${IDENT})\\.(${IDENT})\\.exists\\(\\) and \\1\\.\\2 != false$`);

/**
 * Compiles the branches of `expression` that apply to `resourceType` (`Type.a | Other.b`); with
 * `resourceType` undefined the expression is relative (a composite's component). Unsupported syntax throws.
 */
export function compileExpression(expression: string, resourceType?: string): CompiledPath[] {
  const special = PRESENT_AND_NOT_FALSE.exec(expression.trim());
  if (special) {
    if (resourceType !== undefined && special[1] !== resourceType) return [];
    const get = child(special[2]!);
    return [{
      key: `${special[2]}.exists()`,
      evaluate: (node) => {
        const values = get([node], undefined);
        return [values.length > 0 && !values.every((v) => v === false)];
      },
    }];
  }
  const p: Parser = { text: expression, at: 0 };
  const paths: CompiledPath[] = [];
  for (;;) {
    const { path: compiled, applies } = path(p, resourceType);
    if (applies) paths.push(compiled);
    skip(p);
    if (p.at >= p.text.length) break;
    if (!eat(p, '|')) fail(p, "'|' expected");
  }
  return paths;
}

/** Every value reached by `path` from `resource`. */
export function evaluatePath(resource: Json, path: CompiledPath): unknown[] {
  return path.evaluate(resource, resource);
}
