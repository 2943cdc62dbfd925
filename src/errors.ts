import { StoreTimeoutError, StoreUnavailableError, StoreValueError } from './store/interface/errors.ts';

/**
 * Domain errors with a stable code and an HTTP status. One handler (src/http/errors.ts) renders them:
 * OAuthError as `{error, error_description}`, FhirError as an OperationOutcome.
 */

/** FHIR error categories and their HTTP status / OperationOutcome `issue.code`, in one table. */
export const FHIR_CATEGORIES = {
  invalid: { status: 400, code: 'invalid' },
  structure: { status: 400, code: 'structure' },
  required: { status: 400, code: 'required' },
  value: { status: 400, code: 'value' },
  'not-supported': { status: 400, code: 'not-supported' },
  unauthorized: { status: 401, code: 'login' },
  forbidden: { status: 403, code: 'forbidden' },
  'not-found': { status: 404, code: 'not-found' },
  'method-not-allowed': { status: 405, code: 'not-supported' },
  'not-acceptable': { status: 406, code: 'not-supported' },
  conflict: { status: 409, code: 'conflict' },
  gone: { status: 410, code: 'deleted' },
  precondition: { status: 412, code: 'conflict' },
  'too-large': { status: 413, code: 'too-costly' },
  'unsupported-media': { status: 415, code: 'not-supported' },
  unprocessable: { status: 422, code: 'processing' },
  /** A resource that breaks FHIR's rules (validation). */
  'invalid-resource': { status: 422, code: 'invalid' },
  'too-many': { status: 429, code: 'throttled' },
  exception: { status: 500, code: 'exception' },
  unavailable: { status: 503, code: 'transient' },
} as const;

export type FhirCategory = keyof typeof FHIR_CATEGORIES;

/** HL7's tooling extension naming the catalogue message (`Messages.properties` key) an issue is, as the reference servers give it. */
export const MESSAGE_ID_EXTENSION = 'http://hl7.org/fhir/StructureDefinition/operationoutcome-message-id';

export interface FhirIssue {
  /** Only HL7's `operationoutcome-message-id` (MESSAGE_ID_EXTENSION), for terminology's findings. */
  extension?: { url: string; valueString: string }[];
  severity: 'fatal' | 'error' | 'warning' | 'information';
  code: string;
  diagnostics?: string;
  /** `coding`: a finer kind of the issue from a code system of its own (HL7's tx-issue-type for terminology). */
  details?: { coding?: { system: string; code: string }[]; text: string };
  expression?: string[];
  /** Where in a text input (R4 `issue.location`, as HAPI FHIR writes it: `Line[12]`), for problems no FHIRPath can name. */
  location?: string[];
}

export interface FhirErrorOptions {
  /** FHIRPath expressions of the offending elements. */
  expression?: string[];
  /** Extra response headers (e.g. `Retry-After`, `WWW-Authenticate`). */
  headers?: Record<string, string>;
  /** Overrides the issue code implied by the category. */
  issueCode?: string;
  /** A coding of the issue's kind, in `details.coding` (HL7's tx-issue-type, say). */
  detailsCoding?: { system: string; code: string };
  /** HL7's catalogue key of the message, as the `operationoutcome-message-id` extension of the issue. */
  messageId?: string;
  /**
   * Whether the issue repeats its text in `diagnostics` (the default). Terminology's refusals leave it out, as the
   * reference servers' answers have none (HL7's harness counts an element the expected answer lacks as a difference).
   */
  diagnostics?: boolean;
  /** More issues after the first. */
  issues?: FhirIssue[];
  /** The issues in full, in place of the one made from the message (validation: one issue per problem). */
  outcome?: FhirIssue[];
  cause?: unknown;
}

export class FhirError extends Error {
  override name = 'FhirError';
  readonly status: number;
  readonly issues: FhirIssue[];
  readonly headers: Record<string, string>;

  constructor(readonly category: FhirCategory, message: string, options: FhirErrorOptions = {}) {
    super(message, { cause: options.cause });
    const def = FHIR_CATEGORIES[category];
    this.status = def.status;
    this.headers = options.headers ?? {};
    const first: FhirIssue = {
      ...(options.messageId === undefined ? {} : { extension: [{ url: MESSAGE_ID_EXTENSION, valueString: options.messageId }] }),
      severity: 'error',
      code: options.issueCode ?? def.code,
      details: options.detailsCoding === undefined ? { text: message } : { coding: [{ ...options.detailsCoding }], text: message },
    };
    if (options.diagnostics !== false) first.diagnostics = message;
    if (options.expression) first.expression = options.expression;
    this.issues = options.outcome ?? [first, ...(options.issues ?? [])];
  }
}

/**
 * RFC 6749 section 5.2 error codes plus RFC 6750 / 7009 / OIDC ones that Cinder uses, and `not_found`
 * (404: no route, or what `POST /oauth2/launch` names does not exist). The token endpoint answers only the
 * interface contract's five (a refused scope there is `invalid_request`); `invalid_scope` is the
 * authorization endpoint's (RFC 6749 4.1.2.1).
 */
export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'invalid_scope'
  | 'unsupported_token_type'
  | 'invalid_token'
  | 'insufficient_scope'
  | 'access_denied'
  | 'unsupported_response_type'
  | 'server_error'
  | 'temporarily_unavailable'
  | 'login_required'
  | 'request_not_supported'
  | 'request_uri_not_supported'
  | 'slow_down'
  | 'not_found';

export class OAuthError extends Error {
  override name = 'OAuthError';
  constructor(
    readonly error: OAuthErrorCode,
    readonly description?: string,
    readonly status = 400,
    readonly headers: Record<string, string> = {},
    options?: { cause?: unknown },
  ) {
    super(description ? `${error}: ${description}` : error, options);
  }
}

/** Seconds a client is asked to wait after a 503 for an unavailable database (probes run every 0.5 s). */
export const UNAVAILABLE_RETRY_AFTER = '2';

/** A store failure that is no fault of the request, in words and headers; undefined for any other error. */
export function storeFailure(err: unknown): { text: string; headers: Record<string, string>; issueCode?: string } | undefined {
  if (err instanceof StoreUnavailableError) {
    return { text: 'The database is temporarily unavailable; retry shortly', headers: { 'Retry-After': UNAVAILABLE_RETRY_AFTER } };
  }
  // No `Retry-After`: the same request is likely to run as long again.
  if (err instanceof StoreTimeoutError) {
    return { text: 'The database cancelled the request\'s statement (its time limit was reached); narrow the search or retry later', headers: {}, issueCode: 'timeout' };
  }
  return undefined;
}

/**
 * A store failure as the FHIR API answers it (StoreUnavailableError: 503 `transient` with
 * `Retry-After`; StoreTimeoutError: 503 `timeout`; StoreValueError: 400 `invalid`), for a response
 * or a batch entry's; undefined for any other error.
 */
export function storeFailureAsFhir(err: unknown): FhirError | undefined {
  if (err instanceof StoreValueError) {
    return new FhirError('invalid', err.message, { cause: err });
  }
  const f = storeFailure(err);
  return f && new FhirError('unavailable', f.text, { headers: f.headers, ...(f.issueCode && { issueCode: f.issueCode }), cause: err });
}
