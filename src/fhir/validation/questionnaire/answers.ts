/**
 * One answer of a QuestionnaireResponse item against its Questionnaire item (R4 questionnaire.html, the
 * item types): the `value[x]` type the item's `type` allows, `maxLength` and the constraints of the item's
 * extensions (constraints.ts), and for choice and open-choice
 * items the `answerOption`s (an open-choice item also takes free text) or, for a Coding, membership in
 * `answerValueSet`, which the terminology decides afterwards (the check is synchronous).
 */
import type { ValidationIssue } from '../validate.ts';
import { checkConstraints, type RegexBudget } from './constraints.ts';
import { containedMembership } from './contained-value-set.ts';
import type { QItem } from './prepared.ts';

type Json = Record<string, unknown>;

/** A coded answer whose membership in the item's answerValueSet the terminology decides. */
export interface PendingMembership {
  expression: string;
  valueSet: string;
  coding: { system?: string; code: string };
  linkId: string;
  /** An open-choice item: a coding outside the value set is a warning, not an error. */
  open: boolean;
}

const OPTION_TYPES = ['Coding', 'Integer', 'Date', 'Time', 'String', 'Reference'];

/** The `value[x]` types an answer to an item of each type may have. */
const ANSWER_TYPES: Record<string, readonly string[]> = {
  boolean: ['Boolean'],
  decimal: ['Decimal'],
  integer: ['Integer'],
  date: ['Date'],
  dateTime: ['DateTime'],
  time: ['Time'],
  string: ['String'],
  text: ['String'],
  url: ['Uri'],
  choice: OPTION_TYPES,
  'open-choice': OPTION_TYPES,
  attachment: ['Attachment'],
  reference: ['Reference'],
  quantity: ['Quantity'],
};

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** An answer's (or option's) value: its type (`Coding` of `valueCoding`) and value. */
export function valueOf(o: Json, prefix = 'value'): { type: string; value: unknown } | undefined {
  for (const k of Object.keys(o)) if (k.startsWith(prefix) && k.length > prefix.length && k[prefix.length]! >= 'A' && k[prefix.length]! <= 'Z') return { type: k.slice(prefix.length), value: o[k] };
  return undefined;
}

function sameOption(type: string, a: unknown, b: unknown): boolean {
  if (type === 'Coding') {
    const x = a as Json;
    const y = b as Json;
    return isObject(x) && isObject(y) && x.code === y.code && (x.system ?? null) === (y.system ?? null);
  }
  if (type === 'Reference') return isObject(a) && isObject(b) && a.reference === b.reference;
  return a === b;
}

function describeValue(type: string, v: unknown): string {
  if (type === 'Coding' && isObject(v)) return v.system === undefined ? `'${String(v.code)}'` : `'${String(v.system)}|${String(v.code)}'`;
  if (type === 'Reference' && isObject(v)) return `'${String(v.reference)}'`;
  return `'${String(v)}'`;
}

/** The problems of `answer` (at `path`) to `q`; answerValueSet codings go to `pending`. */
export function checkAnswer(q: QItem, answer: Json, path: string, issues: ValidationIssue[], pending: PendingMembership[], valueSets: ReadonlyMap<string, Json>, regexBudget: RegexBudget): void {
  const allowed = q.type === undefined ? undefined : ANSWER_TYPES[q.type];
  const v = valueOf(answer);
  if (allowed === undefined || v === undefined) return;
  if (!allowed.includes(v.type)) {
    issues.push({ severity: 'error', code: 'structure', expression: path, text: `The answer to the item '${q.linkId}' (type ${q.type}) must be a ${allowed.join(' or ')}, not a ${v.type}` });
    return;
  }
  if (q.maxLength !== undefined && v.type === 'String' && typeof v.value === 'string' && [...v.value].length > q.maxLength) {
    issues.push({ severity: 'error', code: 'value', expression: path, text: `The answer to the item '${q.linkId}' is longer than its maxLength of ${q.maxLength} characters` });
  }
  checkConstraints(q.constraints, q.linkId, v, path, issues, regexBudget, answer);
  if (q.type !== 'choice' && q.type !== 'open-choice') return;
  const open = q.type === 'open-choice';
  const options = Array.isArray(q.json.answerOption) ? q.json.answerOption.filter(isObject) : [];
  if (options.length > 0) {
    const matching = options.map((o) => valueOf(o)).filter((o) => o !== undefined && o.type === v.type);
    if (matching.some((o) => sameOption(v.type, o!.value, v.value))) return;
    // An open-choice item takes free text beside its options.
    if (open && v.type === 'String') return;
    const text = `The answer ${describeValue(v.type, v.value)} to the item '${q.linkId}' is not one of its answerOptions`;
    issues.push({ severity: open && v.type === 'Coding' ? 'warning' : 'error', code: 'code-invalid', expression: path, text });
    return;
  }
  const valueSet = q.json.answerValueSet;
  if (typeof valueSet !== 'string') return;
  if (v.type === 'Coding' && isObject(v.value) && typeof v.value.code === 'string') {
    const coding = typeof v.value.system === 'string' ? { system: v.value.system, code: v.value.code } : { code: v.value.code };
    if (!valueSet.startsWith('#')) {
      pending.push({ expression: path, valueSet, coding, linkId: q.linkId, open });
      return;
    }
    const given = `'${coding.system === undefined ? coding.code : `${coding.system}|${coding.code}`}'`;
    const vs = valueSets.get(valueSet.slice(1));
    const verdict = vs === undefined ? 'unknown' : containedMembership(vs, coding);
    if (verdict === 'member') return;
    if (verdict === 'unknown') {
      const why = vs === undefined ? 'the Questionnaire contains no such ValueSet' : 'it includes codes by filter, by other value sets or by whole code systems';
      issues.push({ severity: 'warning', code: 'not-supported', expression: path, text: `The answer ${given} to the item '${q.linkId}' was not checked against its answerValueSet ${valueSet}: ${why}` });
      return;
    }
    issues.push({ severity: open ? 'warning' : 'error', code: 'code-invalid', expression: path, text: `The answer ${given} to the item '${q.linkId}' is not in its answerValueSet ${valueSet}` });
    return;
  }
  if (open && v.type === 'String') return;
  issues.push({ severity: 'error', code: 'structure', expression: path, text: `The answer to the item '${q.linkId}' must be a Coding from the value set ${valueSet}${open ? ', or free text' : ''}, not a ${v.type}` });
}
