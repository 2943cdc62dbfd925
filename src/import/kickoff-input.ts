import { FhirError } from '../errors.ts';
import { charsetOf, isAsciiLabel, isUtf8Label } from '../fhir/charset.ts';
import { REST_RESOURCE_TYPES } from '../fhir/resource-types.ts';
import { endpointUrl } from '../fhir/subscriptions/endpoint.ts';
import type { ImportInput, ImportSpec } from './spec.ts';

/** A validated `$import` request: what the job keeps as its spec, and the inputs' credential, kept apart (never in the status). */
export interface ImportRequest {
  spec: ImportSpec;
  /** `storageDetail.credentialHttpBasic`: `user:password`, sent as Basic authorization to each input's origin. */
  credential?: string;
}

/** The longest credentialHttpBasic taken. */
const MAX_CREDENTIAL = 4096;

type Json = Record<string, unknown>;

/** Inputs one `$import` may name. */
export const MAX_INPUTS = 1000;
/** The largest `storageDetail.maxBatchResourceCount` (`cinder import --batch-size` takes as many). */
const MAX_BATCH = 100_000;
const NDJSON_FORMATS = ['application/fhir+ndjson', 'application/ndjson', 'ndjson'];
const TYPES = new Set(REST_RESOURCE_TYPES);

function invalid(text: string, expression: string, category: 'invalid' | 'not-supported' = 'invalid'): FhirError {
  return new FhirError(category, text, { expression: [expression] });
}

/** The primitive value of a parameter (whichever `value[x]` it carries), or undefined. */
function primitive(p: Json): string | undefined {
  for (const [key, value] of Object.entries(p)) {
    if (key.startsWith('value') && (typeof value === 'string' || typeof value === 'number')) return String(value);
  }
  return undefined;
}

function stringOf(p: Json, at: string): string {
  const v = primitive(p);
  if (v === undefined || v.trim() === '') throw invalid(`${at} needs a value (valueCode, valueUri, valueUrl or valueString)`, at);
  return v.trim();
}

function partsOf(p: Json, at: string): Json[] {
  if (!Array.isArray(p.part) || p.part.some((x) => typeof x !== 'object' || x === null)) throw invalid(`${at} needs its parts (part)`, at);
  return p.part as Json[];
}

function readInput(p: Json, at: string): ImportInput {
  let type: string | undefined;
  let url: string | undefined;
  for (const part of partsOf(p, at)) {
    const name = part.name;
    if (name === 'type') type = stringOf(part, `${at}.type`);
    else if (name === 'url') url = stringOf(part, `${at}.url`);
    else throw invalid(`${at}: part '${String(name)}' is not known (an input has a type and a url)`, `${at}.${String(name)}`);
  }
  if (type === undefined) throw invalid(`${at} needs a type: the resource type of every line of the file`, `${at}.type`);
  if (!TYPES.has(type)) throw invalid(`${at}.type '${type}' is not an R4 resource type that can be stored`, `${at}.type`);
  if (url === undefined) throw invalid(`${at} needs a url: where the NDJSON file is fetched from`, `${at}.url`);
  const parsed = endpointUrl(url);
  if (typeof parsed === 'string') {
    const why = parsed.replace('(send them in Subscription.channel.header)', '(give a pre-signed URL instead)');
    throw invalid(`${at}.url ${why}`, `${at}.url`);
  }
  return { type, url: parsed.href };
}

/**
 * `credentialHttpBasic` (HAPI FHIR's): `user:password` as RFC 7617 has it (the user without a colon, no control
 * characters). Its value is never repeated in an error.
 */
function readCredential(part: Json, at: string): string {
  const value = primitive(part);
  if (value === undefined || value === '') throw invalid(`${at} needs a value 'user:password' (valueString)`, at);
  if (value.length > MAX_CREDENTIAL) throw invalid(`${at} holds more than ${MAX_CREDENTIAL} characters`, at);
  if (!/^[^:\x00-\x1f\x7f]+:[^\x00-\x1f\x7f]*$/.test(value)) throw invalid(`${at} must be 'user:password': a user name without a colon, a colon, then the password (no control characters)`, at);
  return value;
}

/**
 * `storageDetail` (HAPI FHIR's): `type` http or https (where the files are), `maxBatchResourceCount`, and
 * `credentialHttpBasic` (returned, to be kept apart from the spec: see ImportRequest).
 */
function readStorageDetail(p: Json, spec: ImportSpec, request: { credential?: string }): void {
  for (const part of partsOf(p, 'storageDetail')) {
    const name = String(part.name);
    const at = `storageDetail.${name}`;
    if (name === 'type') {
      const type = stringOf(part, at).toLowerCase();
      if (type !== 'https' && type !== 'http') throw invalid(`${at} '${type}' is not supported: inputs are fetched over http or https`, at, 'not-supported');
    } else if (name === 'maxBatchResourceCount') {
      const n = stringOf(part, at);
      if (!/^\d+$/.test(n) || Number(n) < 1 || Number(n) > MAX_BATCH) throw invalid(`${at} must be a whole number from 1 to ${MAX_BATCH}`, at);
      spec.batchSize = Number(n);
    } else if (name === 'credentialHttpBasic') {
      request.credential = readCredential(part, at);
    } else {
      throw invalid(`${at} is not a storageDetail Cinder knows (type, maxBatchResourceCount, credentialHttpBasic)`, at);
    }
  }
}

/**
 * Reads the Parameters body of `$import` (HAPI FHIR's shape): `inputFormat` (NDJSON), `inputSource`,
 * `storageDetail`, and one `input` {type, url} per file. Every problem is a 400 naming the parameter.
 */
export function importRequestFrom(body: unknown): ImportRequest {
  const b = body as Json | undefined;
  if (!b || typeof b !== 'object' || b.resourceType !== 'Parameters') throw invalid('$import takes a Parameters resource naming its inputs', 'Parameters');
  const params = b.parameter;
  if (!Array.isArray(params) || params.some((p) => typeof p !== 'object' || p === null)) throw invalid('$import takes a Parameters resource with at least one input', 'Parameters.parameter');
  const spec: ImportSpec = { inputs: [] };
  const request: ImportRequest = { spec };
  for (const p of params as Json[]) {
    const name = String(p.name);
    if (name === 'inputFormat') {
      const format = stringOf(p, 'inputFormat');
      if (!NDJSON_FORMATS.includes(format.split(';')[0]!.trim().toLowerCase())) {
        throw invalid(`inputFormat '${format}' is not supported: inputs are application/fhir+ndjson`, 'inputFormat', 'not-supported');
      }
      // NDJSON is UTF-8 (Bulk Data, R4 nd-json.html) and is read so: a format naming another charset would have its
      // text misread line by line (ASCII reads the same in UTF-8).
      const charset = charsetOf(format);
      if (charset !== undefined && !isUtf8Label(charset) && !isAsciiLabel(charset)) {
        throw invalid(`inputFormat '${format}' declares charset ${charset || '(empty)'}: inputs are read in UTF-8 only (FHIR NDJSON is UTF-8); send them in UTF-8, with charset=utf-8 or no charset`, 'inputFormat', 'not-supported');
      }
    } else if (name === 'inputSource') {
      spec.inputSource = stringOf(p, 'inputSource');
    } else if (name === 'storageDetail') {
      readStorageDetail(p, spec, request);
    } else if (name === 'input') {
      spec.inputs.push(readInput(p, `input[${spec.inputs.length}]`));
    } else {
      throw invalid(`Parameter '${name}' is not supported by $import (inputFormat, inputSource, storageDetail, input)`, name);
    }
  }
  if (spec.inputs.length === 0) throw invalid('$import needs at least one input {type, url}', 'input');
  if (spec.inputs.length > MAX_INPUTS) throw invalid(`$import takes at most ${MAX_INPUTS} inputs (got ${spec.inputs.length})`, 'input');
  return request;
}
