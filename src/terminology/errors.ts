import { FhirError, type FhirErrorOptions } from '../errors.ts';
import type { TxIssueType } from './compile/membership.ts';
import type { DatePeriod } from './model/date-time.ts';

/** HL7's terminology issue types, as the reference servers put them in an issue's `details.coding`. */
export const TX_ISSUE_TYPE = 'http://hl7.org/fhir/tools/CodeSystem/tx-issue-type';

/**
 * `details.coding` of this tx-issue-type, and `expression` when there is one. A finding about the terminology (one
 * with a tx-issue-type) is shaped as the reference servers write it: HL7's catalogue key (`messageId`) in the
 * `operationoutcome-message-id` extension where one says it, and no `diagnostics` repeating `details.text`.
 */
function txOptions(type: TxIssueType | undefined, expression: readonly string[], messageId?: string): FhirErrorOptions {
  return {
    ...(type === undefined ? {} : { detailsCoding: { system: TX_ISSUE_TYPE, code: type }, diagnostics: false }),
    ...(expression.length > 0 ? { expression: [...expression] } : {}),
    ...(messageId === undefined ? {} : { messageId }),
  };
}

/**
 * The errors the terminology engine throws, as the shared FhirError (rendered as an
 * OperationOutcome by the one error handler): bad input 400 `invalid`, unknown instance 404,
 * an expansion over the size limit 400 `too-costly`. Those about the terminology rather than the request's
 * form carry HL7's tx-issue-type in `details.coding`, as the reference servers give it: a value set that
 * cannot be evaluated `vs-invalid`, something it needs that the server lacks `not-found`, a code system
 * version that `check-system-version` refuses `version-error`.
 */
export function invalid(message: string, expression: readonly string[] = [], type?: TxIssueType, messageId?: string): FhirError {
  return new FhirError('invalid', message, txOptions(type, expression, messageId));
}

/** A value set that cannot be evaluated as it is written (a cycle of imports, say): 400 `processing`, `vs-invalid`. */
export function unprocessable(message: string, expression: readonly string[] = [], messageId?: string): FhirError {
  return new FhirError('invalid', message, { issueCode: 'processing', ...txOptions('vs-invalid', expression, messageId) });
}

/** An input the operation does not take, under strict handling (`Prefer: handling=strict`): 400 `not-supported` naming it. */
export function notSupported(message: string, expression: readonly string[]): FhirError {
  return new FhirError('not-supported', message, { expression: [...expression] });
}

export function notFound(message: string): FhirError {
  return new FhirError('not-found', message);
}

/** What a request depends on (a code system version or a supplement a value set names) is not on the server: 400 `not-found`. */
export function missingDependency(message: string, expression: readonly string[] = [], messageId?: string): FhirError {
  return new FhirError('invalid', message, { issueCode: 'not-found', ...txOptions('not-found', expression, messageId) });
}

export function tooCostly(message: string): FhirError {
  return new FhirError('invalid', message, { issueCode: 'too-costly' });
}

/**
 * A CodeSystem or ValueSet named by canonical URL (and version) that resolves to nothing: 400 naming
 * it, with the context's date when no version pinned it (interface: $validate-code errors).
 */
export function canonicalNotFound(
  type: 'CodeSystem' | 'ValueSet', url: string, version: string | undefined, asOf: DatePeriod | undefined,
): FhirError {
  const name = version === undefined ? url : `${url}|${version}`;
  const when = version === undefined && asOf !== undefined ? ` as of ${asOf.text}` : '';
  // HL7's Unable_to_resolve_value_Set_ for a value set. The contract's 400 `invalid` (the reference servers: `not-found`),
  // `url` named as the input at fault.
  if (type === 'ValueSet') return invalid(`A definition for the value Set '${name}' could not be found${when}`, ['url'], 'not-found', 'Unable_to_resolve_value_Set_');
  return invalid(`${type} '${name}' could not be found${when}`, ['url'], 'not-found');
}
