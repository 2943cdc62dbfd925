/**
 * A QuestionnaireResponse against its Questionnaire (R4 questionnaireresponse.html, questionnaire.html),
 * as HL7's validator checks one: items match the Questionnaire's by `linkId` at the same nesting and in its
 * order; an item it does not have is an error; `text` that differs is a warning; a non-repeating item
 * appears, and a non-repeating question is answered, once; group items have items but no answers, display
 * items neither, a question's nested items stand under its answers; required items are present and
 * answered when the response is `completed` or `amended` (a warning before); an item that `enableWhen`
 * disables has no answers; answers have the type the item's `type` asks for (answers.ts) and keep to the
 * constraints of the item's extensions (constraints.ts; minOccurs and maxOccurs counted here). Every issue is
 * at the response's element (`QuestionnaireResponse.item[0].answer[1]`) and names the linkId.
 */
import type { ValidationIssue } from '../validate.ts';
import { checkAnswer, type PendingMembership } from './answers.ts';
import { REGEX_VISITS } from './constraints.ts';
import { AnswerIndex, ENABLE_WHEN_VISITS, isEnabled, type Scope } from './enable-when.ts';
import { MAX_QUESTIONNAIRE_NODES, type PreparedQuestionnaire, type QItem } from './prepared.ts';

type Json = Record<string, unknown>;

export interface ResponseResult {
  issues: ValidationIssue[];
  /** Coded answers the terminology decides (answerValueSet). */
  pending: PendingMembership[];
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function list(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

class Check {
  readonly issues: ValidationIssue[] = [];
  readonly pending: PendingMembership[] = [];
  readonly answers = new AnswerIndex({ left: ENABLE_WHEN_VISITS, exhausted: false });
  readonly regexBudget = { left: REGEX_VISITS, exhausted: false };
  constructor(readonly q: PreparedQuestionnaire, readonly completed: boolean) {}
  add(severity: 'error' | 'warning', code: ValidationIssue['code'], expression: string, text: string): void {
    this.issues.push({ severity, code, expression, text });
  }
  /** An error once the response is completed, a warning before. */
  addWhenCompleted(code: ValidationIssue['code'], expression: string, text: string): void {
    this.add(this.completed ? 'error' : 'warning', code, expression, text);
  }
}

/** How many items and answers `qr` holds, counted up to `limit + 1`. */
function countNodes(qr: Json, limit: number): number {
  let n = 0;
  const stack: unknown[] = [...list(qr.item)];
  while (stack.length > 0 && n <= limit) {
    const item = stack.pop();
    n++;
    if (!isObject(item)) continue;
    stack.push(...list(item.item));
    for (const a of list(item.answer)) {
      n++;
      if (isObject(a)) stack.push(...list(a.item));
    }
  }
  return n;
}

/** The problems of `qr` (at FHIRPath `at`) against the Questionnaire `q`. */
export function checkResponse(qr: Json, q: PreparedQuestionnaire, at: string): ResponseResult {
  if (q.tooLarge) {
    return { issues: [{ severity: 'error', code: 'too-costly', expression: `${at}.questionnaire`, text: `The Questionnaire ${q.label} has more than ${MAX_QUESTIONNAIRE_NODES} items: responses to it are not checked against it` }], pending: [] };
  }
  if (countNodes(qr, MAX_QUESTIONNAIRE_NODES) > MAX_QUESTIONNAIRE_NODES) {
    return { issues: [{ severity: 'error', code: 'too-costly', expression: `${at}.item`, text: `The QuestionnaireResponse has more than ${MAX_QUESTIONNAIRE_NODES} items and answers, more than Cinder checks against the Questionnaire ${q.label}` }], pending: [] };
  }
  const check = new Check(q, qr.status === 'completed' || qr.status === 'amended');
  // The Questionnaire's unusable extension values, once per response, where the Questionnaire is named.
  for (const problem of q.problems) check.add('warning', 'not-supported', `${at}.questionnaire`, `The Questionnaire ${q.label}: ${problem}`);
  checkItems(check, q.items, q.index, qr, at, [qr]);
  if (check.answers.budget.exhausted) {
    check.add('error', 'too-costly', `${at}.item`, `Evaluating the enableWhen conditions of the Questionnaire ${q.label} over this response took more than ${ENABLE_WHEN_VISITS} steps: the rest were taken as enabled`);
  }
  if (check.regexBudget.exhausted) {
    check.add('error', 'too-costly', `${at}.item`, `Testing the answers of this response against the regex extensions of the Questionnaire ${q.label} would take more than ${REGEX_VISITS} steps: the rest were not tested`);
  }
  return { issues: check.issues, pending: check.pending };
}

/** The items of `part` (the response, an item or an answer, at `path`) against the Questionnaire items `qItems`. */
function checkItems(check: Check, qItems: QItem[], index: Map<string, number>, part: Json, path: string, scope: Scope): void {
  const byLinkId = new Map<string, { item: Json; path: string }[]>();
  let last = -1;
  let lastLinkId = '';
  for (const [i, item] of list(part.item).entries()) {
    if (!isObject(item) || typeof item.linkId !== 'string') continue;
    const at = `${path}.item[${i}]`;
    const linkId = item.linkId;
    const position = index.get(linkId);
    if (position === undefined) {
      const elsewhere = check.q.byLinkId.get(linkId);
      if (elsewhere === undefined) check.add('error', 'structure', at, `The Questionnaire ${check.q.label} has no item with linkId '${linkId}'`);
      else check.add('error', 'structure', at, `The item '${linkId}' is in the wrong place: the Questionnaire ${check.q.label} has it elsewhere`);
      continue;
    }
    if (position < last) check.add('error', 'structure', at, `The item '${linkId}' is out of order: the Questionnaire has it before the item '${lastLinkId}'`);
    else {
      last = position;
      lastLinkId = linkId;
    }
    const seen = byLinkId.get(linkId) ?? [];
    seen.push({ item, path: at });
    byLinkId.set(linkId, seen);
  }
  for (const q of qItems) {
    const found = byLinkId.get(q.linkId);
    const enabled = isEnabled(q, scope, check.answers);
    if (found === undefined) {
      if (enabled && q.required && q.type !== 'display') check.addWhenCompleted('required', path, `The required item '${q.linkId}' is missing`);
      continue;
    }
    if (found.length > 1 && !q.repeats) check.add('error', 'structure', found[1]!.path, `The item '${q.linkId}' does not repeat, but appears ${found.length} times`);
    if (q.type === 'group') checkOccurs(check, q, found.length, `appears ${found.length} time${found.length === 1 ? '' : 's'}`, path, found.map((f) => f.path), enabled);
    for (const f of found) {
      const answered = list(f.item.answer).length > 0 || list(f.item.item).length > 0;
      if (!enabled && answered) check.addWhenCompleted('invariant', f.path, `The item '${q.linkId}' is not enabled (its enableWhen conditions are not met), but has answers`);
      checkItem(check, q, f.item, f.path, scope, enabled);
    }
  }
}

function checkItem(check: Check, q: QItem, item: Json, path: string, scope: Scope, enabled: boolean): void {
  if (typeof item.text === 'string' && q.text !== undefined && item.text !== q.text) {
    check.add('warning', 'value', `${path}.text`, `The text of the item '${q.linkId}' differs from the Questionnaire's ('${q.text}')`);
  }
  const answers = list(item.answer);
  const children = list(item.item);
  if (q.type === 'group' || q.type === 'display') {
    if (answers.length > 0) check.add('error', 'structure', `${path}.answer[0]`, `The item '${q.linkId}' is a ${q.type} item: it has no answers`);
    if (q.type === 'display') {
      if (children.length > 0) check.add('error', 'structure', `${path}.item[0]`, `The item '${q.linkId}' is a display item: it has no items`);
      return;
    }
    if (q.required && enabled && children.length === 0) check.addWhenCompleted('required', path, `The required group '${q.linkId}' has no items`);
    checkItems(check, q.children, q.childIndex, item, path, [...scope, item]);
    return;
  }
  if (children.length > 0) check.add('error', 'structure', `${path}.item[0]`, `The items nested in the question '${q.linkId}' belong under its answers (answer.item), not under the item`);
  if (answers.length === 0 && q.required && enabled) check.addWhenCompleted('required', path, `The required item '${q.linkId}' has no answer`);
  if (answers.length > 1 && !q.repeats) check.add('error', 'structure', `${path}.answer[1]`, `The item '${q.linkId}' does not repeat, but has ${answers.length} answers`);
  checkOccurs(check, q, answers.length, `has ${answers.length} answer${answers.length === 1 ? '' : 's'}`, path, answers.map((_, i) => `${path}.answer[${i}]`), enabled);
  for (const [i, answer] of answers.entries()) {
    if (!isObject(answer)) continue;
    const at = `${path}.answer[${i}]`;
    checkAnswer(q, answer, at, check.issues, check.pending, check.q.valueSets, check.regexBudget);
    if (list(answer.item).length > 0 || q.children.length > 0) checkItems(check, q.children, q.childIndex, answer, at, [...scope, item, answer]);
  }
}

/**
 * `questionnaire-minOccurs` and `-maxOccurs` of a repeating item (constraints.ts): how many times a group
 * appears in its parent (at `path`), or how many answers a question has (the item at `path`). Too many is
 * an error at the first one too many; too few (when there is one at all: none is the `required` check's
 * business) is an error once the response is completed, as a missing required item is.
 */
function checkOccurs(check: Check, q: QItem, n: number, said: string, path: string, each: string[], enabled: boolean): void {
  const { minOccurs, maxOccurs } = q.constraints;
  if (!q.repeats) return;
  if (maxOccurs !== undefined && n > maxOccurs) check.add('error', 'structure', each[maxOccurs]!, `The item '${q.linkId}' ${said}, more than its maxOccurs of ${maxOccurs}`);
  if (minOccurs !== undefined && enabled && n > 0 && n < minOccurs) check.addWhenCompleted('required', path, `The item '${q.linkId}' ${said}, fewer than its minOccurs of ${minOccurs}`);
}
