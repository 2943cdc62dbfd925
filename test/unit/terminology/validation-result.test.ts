import { describe, expect, test } from 'bun:test';
import { txIssue } from '../../../src/terminology/compile/membership.ts';
import { validationParametersJson, type LocatedIssue } from '../../../src/terminology/ops/validation-result.ts';

const TX = 'http://hl7.org/fhir/tools/CodeSystem/tx-issue-type';

/** The answer's parameters by name, from the rendered text (which must be valid JSON). */
function parsed(json: string) {
  const body = JSON.parse(json) as { resourceType: string; parameter: unknown[] };
  expect(body.resourceType).toBe('Parameters');
  return body.parameter;
}

describe('validationParametersJson', () => {
  test('a true result without findings is result and display only', () => {
    expect(parsed(validationParametersJson({ result: true, display: 'Male', issues: [] }))).toEqual([
      { name: 'result', valueBoolean: true },
      { name: 'display', valueString: 'Male' },
    ]);
    expect(parsed(validationParametersJson({ result: true, issues: [] }))).toEqual([{ name: 'result', valueBoolean: true }]);
  });

  test('a false result carries message, display and a located issue', () => {
    const issue: LocatedIssue = { ...txIssue('error', 'code-invalid', 'not-in-vs', "The code 'C3' is not in the value set"), expression: 'code' };
    expect(parsed(validationParametersJson({ result: false, display: 'Concept 3', issues: [issue] }))).toEqual([
      { name: 'result', valueBoolean: false },
      { name: 'message', valueString: "The code 'C3' is not in the value set" },
      { name: 'display', valueString: 'Concept 3' },
      {
        name: 'issues',
        resource: {
          resourceType: 'OperationOutcome',
          issue: [{ severity: 'error', code: 'code-invalid', details: { coding: [{ system: TX, code: 'not-in-vs' }], text: "The code 'C3' is not in the value set" }, expression: ['code'] }],
        },
      },
    ]);
  });

  test('several findings: errors first, each text once in the message (not a note on a resource status), an issue without a location has no expression', () => {
    const info = txIssue('information', 'business-rule', 'status-check', 'Reference to draft ValueSet http://x/vs');
    const error: LocatedIssue = { ...txIssue('error', 'invalid', 'invalid-display', 'Wrong display'), expression: 'Coding.display' };
    const [, message, issues] = parsed(validationParametersJson({ result: false, issues: [info, error, error] })) as [unknown, { valueString: string }, { resource: { issue: unknown[] } }];
    expect(message.valueString).toBe('Wrong display');
    expect(issues.resource.issue).toEqual([
      { severity: 'error', code: 'invalid', details: { coding: [{ system: TX, code: 'invalid-display' }], text: 'Wrong display' }, expression: ['Coding.display'] },
      { severity: 'information', code: 'business-rule', details: { coding: [{ system: TX, code: 'status-check' }], text: 'Reference to draft ValueSet http://x/vs' } },
    ]);
  });

  test('texts that need escaping come back as they went in', () => {
    const awkward = 'quote " backslash \\ newline \n tab \t control \u0001 unicode é 漢 \u{1F600} lone \uD800 end';
    const issue: LocatedIssue = { ...txIssue('error', 'code-invalid', 'invalid-code', awkward), expression: 'Coding.code' };
    const json = validationParametersJson({ result: false, display: awkward, issues: [issue] });
    const [, message, display, issues] = parsed(json) as [unknown, { valueString: string }, { valueString: string }, { resource: { issue: { details: { text: string } }[] } }];
    expect(message.valueString).toBe(awkward);
    expect(display.valueString).toBe(awkward);
    expect(issues.resource.issue[0]!.details.text).toBe(awkward);
    expect(json).not.toContain('\n');
  });
});
