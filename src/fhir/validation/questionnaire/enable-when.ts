/**
 * Whether a Questionnaire item is enabled in a response (R4 Questionnaire.item.enableWhen and
 * enableBehavior): each condition compares the answers given to the item it names (`question`, a linkId)
 * with its `answer[x]` by `operator` (exists, =, !=, >, <, >=, <=); `all` needs every condition true,
 * `any` one of them. The answers looked at are those of the nearest enclosing part of the response that
 * holds the question (the same repetition of a repeating group, else further out), as HL7's validator
 * reads them. Every item and answer visited is charged to a budget shared by the whole check.
 */
import { valueOf } from './answers.ts';
import type { QItem } from './prepared.ts';

type Json = Record<string, unknown>;

/** Where an item stands in the response: the objects holding it (the response, items, answers), innermost last. */
export type Scope = readonly Json[];

export interface EnableBudget {
  left: number;
  /** Set once the budget ran out: what is left is not evaluated. */
  exhausted: boolean;
}

/** How many items and answers enableWhen evaluation may visit for one response. */
export const ENABLE_WHEN_VISITS = 1_000_000;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function objects(v: unknown): Json[] {
  return Array.isArray(v) ? v.filter(isObject) : [];
}

/** The answer values (`answer[x]` objects) of each linkId under a part of the response, built once per part. */
export class AnswerIndex {
  private readonly byPart = new WeakMap<Json, Map<string, Json[]>>();
  constructor(readonly budget: EnableBudget) {}

  /** The answers to `linkId` in the nearest part of `scope` that holds an item with it (none: no such item). */
  answersOf(scope: Scope, linkId: string): Json[] | undefined {
    for (let i = scope.length - 1; i >= 0; i--) {
      const found = this.index(scope[i]!).get(linkId);
      if (found !== undefined) return found;
    }
    return undefined;
  }

  private index(part: Json): Map<string, Json[]> {
    let m = this.byPart.get(part);
    if (m !== undefined) return m;
    m = new Map();
    const stack: Json[] = [...objects(part.item), ...objects(part.answer).flatMap((a) => objects(a.item))];
    while (stack.length > 0) {
      if (--this.budget.left < 0) {
        this.budget.exhausted = true;
        break;
      }
      const item = stack.pop()!;
      const answers = objects(item.answer);
      if (typeof item.linkId === 'string') {
        const list = m.get(item.linkId) ?? [];
        list.push(...answers);
        m.set(item.linkId, list);
      }
      stack.push(...objects(item.item));
      for (const a of answers) stack.push(...objects(a.item));
    }
    this.byPart.set(part, m);
    return m;
  }
}

/** Whether `q` is enabled where `scope` stands; true when it has no enableWhen, or the budget ran out. */
export function isEnabled(q: QItem, scope: Scope, answers: AnswerIndex): boolean {
  const conditions = objects(q.json.enableWhen);
  if (conditions.length === 0) return true;
  const any = q.json.enableBehavior === 'any';
  for (const c of conditions) {
    if (answers.budget.exhausted) return true;
    const met = conditionMet(c, scope, answers);
    if (any && met) return true;
    if (!any && !met) return false;
  }
  return !any;
}

function conditionMet(c: Json, scope: Scope, index: AnswerIndex): boolean {
  const given = typeof c.question === 'string' ? (index.answersOf(scope, c.question) ?? []) : [];
  const expected = valueOf(c, 'answer');
  if (expected === undefined) return false;
  if (c.operator === 'exists') return expected.value === true ? given.length > 0 : given.length === 0;
  const values = given.map((a) => valueOf(a, 'value')).filter((v): v is { type: string; value: unknown } => v !== undefined);
  index.budget.left -= values.length;
  if (index.budget.left < 0) {
    index.budget.exhausted = true;
    return true;
  }
  switch (c.operator) {
    case '=':
      return values.some((v) => compare(v, expected) === 0);
    case '!=':
      return !values.some((v) => compare(v, expected) === 0);
    case '>':
      return values.some((v) => (compare(v, expected) ?? 0) > 0);
    case '<':
      return values.some((v) => (compare(v, expected) ?? 0) < 0);
    case '>=':
      return values.some((v) => { const r = compare(v, expected); return r !== undefined && r >= 0; });
    case '<=':
      return values.some((v) => { const r = compare(v, expected); return r !== undefined && r <= 0; });
    default:
      return false;
  }
}

const NUMERIC = new Set(['Decimal', 'Integer']);
const TEMPORAL = new Set(['Date', 'DateTime']);

/** An answer against an enableWhen value: <0, 0, >0, or undefined when they cannot be compared (other types, units). */
export function compare(a: { type: string; value: unknown }, b: { type: string; value: unknown }): number | undefined {
  if (NUMERIC.has(a.type) && NUMERIC.has(b.type)) return order(Number(a.value), Number(b.value));
  if (TEMPORAL.has(a.type) && TEMPORAL.has(b.type)) return temporal(String(a.value), String(b.value));
  if (a.type !== b.type) return undefined;
  switch (a.type) {
    case 'Coding': {
      const x = a.value as Json;
      const y = b.value as Json;
      return x.code === y.code && (x.system === undefined || y.system === undefined || x.system === y.system) ? 0 : undefined;
    }
    case 'Quantity': {
      const x = a.value as Json;
      const y = b.value as Json;
      const unit = (q: Json) => (q.code ?? q.unit) as unknown;
      if (unit(x) !== unit(y) || (x.system !== undefined && y.system !== undefined && x.system !== y.system)) return undefined;
      return order(Number(x.value), Number(y.value));
    }
    case 'Reference':
      return (a.value as Json).reference === (b.value as Json).reference ? 0 : undefined;
    case 'Boolean':
      return a.value === b.value ? 0 : undefined;
    case 'Time':
    case 'String':
      return order(String(a.value), String(b.value));
    default:
      return undefined;
  }
}

function order<T extends number | string>(x: T, y: T): number {
  return x < y ? -1 : x > y ? 1 : 0;
}

/** Two dates or dateTimes by instant when both carry a time with a zone, else by their text at the shorter precision. */
function temporal(x: string, y: string): number | undefined {
  if (x.length > 10 && y.length > 10) {
    const a = Date.parse(x);
    const b = Date.parse(y);
    if (!Number.isNaN(a) && !Number.isNaN(b)) return order(a, b);
  }
  const n = Math.min(x.length, y.length, 10);
  return order(x.slice(0, n), y.slice(0, n));
}
