import { FhirError } from '../errors.ts';
import { isResourceType } from '../fhir/resource-types.ts';

/** Kick-off parameters as sent, before validation (Bulk Data 2.0 "Query Parameters"). */
export interface ExportInput {
  /** Where the parameters were read: `GET` from a query string (a GET's, or a POST's without a body), `POST` from a Parameters body. */
  method: 'GET' | 'POST';
  outputFormat: string[];
  since: string[];
  types: string[];
  typeFilters: string[];
  elements: string[];
  patients: string[];
  includeAssociatedData: string[];
  /** Names of parameters Cinder does not know. */
  unknown: string[];
  /** List parameters given that name nothing (`_type=`, `_type=,`), which would otherwise read as absent. */
  empty: string[];
}

/** Parameters the FHIR layer handles before us (`_format`) and are not export parameters. */
const PASS_THROUGH = new Set(['_format', '_pretty']);

function emptyInput(method: ExportInput['method']): ExportInput {
  return { method, outputFormat: [], since: [], types: [], typeFilters: [], elements: [], patients: [], includeAssociatedData: [], unknown: [], empty: [] };
}

/** The comma-separated list parameters (repeats are one list: Bulk Data 2.0 kick-off) and their field. */
const LISTS = { _type: 'types', _typeFilter: 'typeFilters', _elements: 'elements', includeAssociatedData: 'includeAssociatedData' } as const;

function isList(name: string): name is keyof typeof LISTS {
  return Object.hasOwn(LISTS, name);
}

/** Records the list parameters of `given` that name nothing once every value is read (ExportInput.empty). */
function noteEmpty(input: ExportInput, given: Set<keyof typeof LISTS>): ExportInput {
  input.empty = [...given].filter((name) => input[LISTS[name]].length === 0);
  return input;
}

function list(value: string): string[] {
  return value.split(',').map((s) => s.trim()).filter(Boolean);
}

/**
 * `_typeFilter` holds comma-separated, individually URL-encoded queries; a client that encoded the
 * whole value leaves no literal commas, so decoded values are split again before `Type?`.
 */
export function splitTypeFilters(decoded: string): string[] {
  return decoded.split(/,(?=[A-Z][A-Za-z]+\?)/).map((s) => s.trim()).filter(Boolean);
}

/**
 * Decoded `_typeFilter` pieces, split at the literal commas of the query string, put back together where a
 * comma was within a query's value: a client that left its query unencoded (`Observation?code=A,B`, which
 * Bulk Data 2.0 asks to be encoded) sent a value's comma as it sends the list's. A piece that starts no
 * query (no `Type?` before it, nor a resource type alone) continues the one before; before, it was taken
 * for a query of its own and refused ("'B' is not a resource type").
 */
function joinValues(pieces: string[]): string[] {
  const out: string[] = [];
  for (const piece of pieces) {
    const text = piece.trim();
    // `word?` starts a query even when the word is no type (`observation?code=x`), so that it is still refused by name.
    const starts = text === '' || /^[A-Za-z][A-Za-z0-9]*\?/.test(text) || isResourceType(text);
    if (starts || out.length === 0) out.push(piece);
    else out[out.length - 1] += `,${piece}`;
  }
  return out;
}

function decode(raw: string, name: string): string {
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch {
    throw new FhirError('invalid', `Malformed percent-encoding in ${name}`, { expression: [name] });
  }
}

function add(input: ExportInput, name: string, value: string, rawTypeFilter?: string): void {
  switch (name) {
    case '_outputFormat': input.outputFormat.push(value); break;
    case '_since': input.since.push(value); break;
    case '_type': input.types.push(...list(value)); break;
    case '_elements': input.elements.push(...list(value)); break;
    case 'includeAssociatedData': input.includeAssociatedData.push(...list(value)); break;
    case 'patient': input.patients.push(value); break;
    case '_typeFilter': {
      const pieces = rawTypeFilter === undefined ? [value] : joinValues(rawTypeFilter.split(',').map((p) => decode(p, name)));
      input.typeFilters.push(...pieces.flatMap(splitTypeFilters));
      break;
    }
    default: if (!PASS_THROUGH.has(name)) input.unknown.push(name);
  }
}

/** Reads the parameters of a GET kick-off from the raw query string (commas in `_typeFilter` matter before decoding). */
export function inputFromQuery(search: string): ExportInput {
  const input = emptyInput('GET');
  const given = new Set<keyof typeof LISTS>();
  for (const pair of search.replace(/^\?/, '').split('&')) {
    if (!pair) continue;
    const eq = pair.indexOf('=');
    const name = decode(eq < 0 ? pair : pair.slice(0, eq), 'query');
    const raw = eq < 0 ? '' : pair.slice(eq + 1);
    if (isList(name)) given.add(name);
    add(input, name, decode(raw, name), name === '_typeFilter' ? raw : undefined);
  }
  return noteEmpty(input, given);
}

type ParamEntry = Record<string, unknown> & { name?: unknown };

function entryValue(p: ParamEntry): string | undefined {
  for (const [k, v] of Object.entries(p)) {
    if (!k.startsWith('value')) continue;
    if (typeof v === 'string') return v;
    if (k === 'valueReference' && v && typeof (v as { reference?: unknown }).reference === 'string') {
      return (v as { reference: string }).reference;
    }
  }
  return undefined;
}

/** The names of the export parameters in a query string (`_format` and `_pretty` are the FHIR layer's). */
function urlParameters(search: string): string[] {
  const names = new Set<string>();
  for (const pair of search.replace(/^\?/, '').split('&')) {
    if (!pair) continue;
    const eq = pair.indexOf('=');
    const name = decode(eq < 0 ? pair : pair.slice(0, eq), 'query');
    if (!PASS_THROUGH.has(name)) names.add(name);
  }
  return [...names];
}

/**
 * Reads a POST kick-off: its parameters in a Parameters body (Bulk Data 2.0), or, with no body (or a
 * Parameters holding none), in its URL as a GET's, read by the same rules (inputFromQuery: MedplumClient's
 * `bulkExport` posts `$export?_type=...` without a body, as HAPI FHIR and Medplum take it). Both at once
 * is a 400 naming the URL's parameters, never one set ignored: ignoring `_type` or `_since` would
 * silently export more than the client asked for, and merging two lists of one parameter is a guess.
 */
export function inputFromPost(body: unknown, search = ''): ExportInput {
  const inUrl = urlParameters(search);
  const empty = body === undefined || (isParameters(body) && (body.parameter === undefined || (Array.isArray(body.parameter) && body.parameter.length === 0)));
  if (empty && inUrl.length > 0) return inputFromQuery(search);
  if (body === undefined) return inputFromParameters({ resourceType: 'Parameters' });
  if (inUrl.length > 0 && isParameters(body)) {
    throw new FhirError('invalid', `A POST kick-off takes its parameters in the URL or in its Parameters body, not both: move ${inUrl.map((n) => `'${n}'`).join(', ')} into the body, or send no body`, {
      expression: inUrl,
    });
  }
  return inputFromParameters(body);
}

function isParameters(body: unknown): body is { resourceType: 'Parameters'; parameter?: unknown } {
  return body !== null && typeof body === 'object' && (body as { resourceType?: unknown }).resourceType === 'Parameters';
}

/** Reads a POST kick-off's Parameters resource (Bulk Data 2.0: parameters in a FHIR Parameters body). */
export function inputFromParameters(body: unknown): ExportInput {
  const b = body as { resourceType?: unknown; parameter?: unknown } | null;
  if (!b || typeof b !== 'object' || b.resourceType !== 'Parameters') {
    throw new FhirError('invalid', 'A POST kick-off takes a Parameters resource');
  }
  if (b.parameter !== undefined && !Array.isArray(b.parameter)) {
    throw new FhirError('structure', 'Parameters.parameter must be an array', { expression: ['Parameters.parameter'] });
  }
  const input = emptyInput('POST');
  const given = new Set<keyof typeof LISTS>();
  for (const [i, p] of ((b.parameter ?? []) as ParamEntry[]).entries()) {
    const where = `Parameters.parameter[${i}]`;
    if (!p || typeof p.name !== 'string') throw new FhirError('structure', `${where} has no name`, { expression: [where] });
    const value = entryValue(p);
    if (value === undefined) throw new FhirError('invalid', `${where} (${p.name}) has no usable value`, { expression: [where] });
    if (isList(p.name)) given.add(p.name);
    add(input, p.name, value);
  }
  return noteEmpty(input, given);
}
