import { FhirError } from '../errors.ts';

/** Kick-off parameters as sent, before validation (Bulk Data 2.0 "Query Parameters"). */
export interface ExportInput {
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
      const pieces = rawTypeFilter === undefined ? [value] : rawTypeFilter.split(',').map((p) => decode(p, name));
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

/**
 * A POST kick-off takes its parameters in the body (Bulk Data 2.0), and its manifest `request` leaves
 * the URL's out: a parameter in its URL is refused (a 400 naming it), never ignored, since ignoring
 * `_type` or `_since` would silently export more than the client asked for.
 */
function refuseUrlParameters(search: string): void {
  const names = new Set<string>();
  for (const pair of search.replace(/^\?/, '').split('&')) {
    if (!pair) continue;
    const eq = pair.indexOf('=');
    const name = decode(eq < 0 ? pair : pair.slice(0, eq), 'query');
    if (!PASS_THROUGH.has(name)) names.add(name);
  }
  if (!names.size) return;
  const list = [...names];
  throw new FhirError('invalid', `A POST kick-off takes its parameters in the Parameters body, not in the URL: move ${list.map((n) => `'${n}'`).join(', ')} into the body, or use GET`, {
    expression: list,
  });
}

/**
 * Reads a POST kick-off's Parameters resource (Bulk Data 2.0: parameters in a FHIR Parameters body);
 * `search` is the URL's query string, which may hold only `_format` and `_pretty`.
 */
export function inputFromParameters(body: unknown, search = ''): ExportInput {
  refuseUrlParameters(search);
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
