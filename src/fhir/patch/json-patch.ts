/**
 * JSON Patch (RFC 6902) over JSON Pointers (RFC 6901), for FHIR R4 patch with
 * `Content-Type: application/json-patch+json` (http.html#patch). A document that is not a JSON Patch is
 * a 400 `structure`; an operation that cannot be applied (a missing target) is a 400 `processing` naming
 * the operation's index, as HAPI FHIR answers it; a failing `test` is a 422 `processing` (see applyJsonPatch).
 */
import { FhirError } from '../../errors.ts';
import { cloneExact, literalOf, setLiteral, spliceExact, stringifyExact } from '../exact-json.ts';
import { compare, decimalRational } from '../rational.ts';

/** `literal`: a number value's text as written, when it is not String(value) (src/fhir/exact-json.ts). */
export type JsonPatchOperation =
  | { op: 'add' | 'replace' | 'test'; path: string; value: unknown; literal?: string }
  | { op: 'remove'; path: string }
  | { op: 'move' | 'copy'; from: string; path: string };

type Container = Record<string, unknown> | unknown[];

const OPS = new Set(['add', 'remove', 'replace', 'move', 'copy', 'test']);

/**
 * The most a JSON Patch's `copy` operations may duplicate together, in bytes of JSON (about): 16 MiB, the
 * largest resource body by default (CINDER_MAX_RESOURCE_BYTES). Every other operation brings no more
 * than the patch's own body, but a copy of an element into itself doubles it: 25 of them, a few hundred
 * bytes, would build a resource of 2^25 elements (minutes of the event loop, gigabytes of memory).
 */
export const MAX_COPIED_BYTES = 16 * 1024 * 1024;

function malformed(index: number, message: string): never {
  throw new FhirError('structure', `JSON Patch operation ${index}: ${message}`);
}

function pointer(index: number, op: Record<string, unknown>, member: 'path' | 'from'): string {
  const p = op[member];
  if (typeof p !== 'string') malformed(index, `'${member}' must be a string (a JSON Pointer)`);
  if (p !== '' && !p.startsWith('/')) malformed(index, `'${member}' '${p}' is not a JSON Pointer: it must be empty or start with '/'`);
  if (/~(?![01])/.test(p)) malformed(index, `'${member}' '${p}' has a '~' not followed by 0 or 1`);
  return p;
}

/** Checks that `body` is a JSON Patch document (an array of operation objects) and returns its operations. */
export function parseJsonPatch(body: unknown): JsonPatchOperation[] {
  if (!Array.isArray(body)) throw new FhirError('structure', 'A JSON Patch document must be a JSON array of operations');
  return body.map((raw, i): JsonPatchOperation => {
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) malformed(i, 'is not an object');
    const op = raw as Record<string, unknown>;
    if (typeof op.op !== 'string' || !OPS.has(op.op)) malformed(i, `'op' must be one of add, remove, replace, move, copy, test; got ${JSON.stringify(op.op)}`);
    const path = pointer(i, op, 'path');
    switch (op.op) {
      case 'remove':
        return { op: 'remove', path };
      case 'move':
      case 'copy':
        return { op: op.op, from: pointer(i, op, 'from'), path };
      default:
        if (!('value' in op)) malformed(i, `'${op.op}' needs a 'value'`);
        const literal = literalOf(op, 'value');
        return { op: op.op as 'add' | 'replace' | 'test', path, value: op.value, ...(literal !== undefined && { literal }) };
    }
  });
}

/** The reference tokens of a JSON Pointer, unescaped (`~1` is `/`, then `~0` is `~`). */
function tokens(path: string): string[] {
  return path === '' ? [] : path.slice(1).split('/').map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** An array index token: `0` or digits without a leading zero. */
function arrayIndex(token: string, length: number, allowEnd: boolean): number | undefined {
  if (allowEnd && token === '-') return length;
  if (!/^(0|[1-9][0-9]*)$/.test(token)) return undefined;
  const n = Number(token);
  return n < length || (allowEnd && n === length) ? n : undefined;
}

function isContainer(v: unknown): v is Container {
  return v !== null && typeof v === 'object';
}

class Failure extends Error {}
class TooMuchCopied extends Error {}

/** The value at `path`; Failure when there is none. */
function get(doc: unknown, path: string): unknown {
  let node = doc;
  for (const t of tokens(path)) {
    if (Array.isArray(node)) {
      const i = arrayIndex(t, node.length, false);
      if (i === undefined) throw new Failure(`${path} does not exist (no element '${t}' in an array of ${node.length})`);
      node = node[i];
    } else if (isContainer(node) && Object.hasOwn(node, t)) node = (node as Record<string, unknown>)[t];
    else throw new Failure(`${path} does not exist`);
  }
  return node;
}

/** The container holding the last token of `path` (which must not be the root) and that token. */
function parentOf(doc: unknown, path: string): { parent: Container; key: string } {
  const all = tokens(path);
  const key = all.pop()!;
  const parentPath = all.length === 0 ? '' : '/' + all.map((t) => t.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');
  const parent = get(doc, parentPath);
  if (!isContainer(parent)) throw new Failure(`${parentPath || 'the document'} is not an object or array, so ${path} cannot be reached`);
  return { parent, key };
}

/** The recorded literal of the number at `path`, if any. */
function literalAt(doc: unknown, path: string): string | undefined {
  if (path === '') return undefined;
  const { parent, key } = parentOf(doc, path);
  return literalOf(parent, key);
}

/** Adds `value` at `path`; `literal`: its text, when a number's is not String(value). */
function add(doc: unknown, path: string, value: unknown, literal?: string): unknown {
  if (path === '') return value;
  const { parent, key } = parentOf(doc, path);
  if (Array.isArray(parent)) {
    const i = arrayIndex(key, parent.length, true);
    if (i === undefined) throw new Failure(`'${key}' is not an index of ${path}'s array of ${parent.length} (0-${parent.length} or '-')`);
    spliceExact(parent, i, 0, [value], [literal]);
  } else {
    parent[key] = value;
    setLiteral(parent, key, literal);
  }
  return doc;
}

function remove(doc: unknown, path: string): unknown {
  if (path === '') throw new Failure('the whole document cannot be removed');
  get(doc, path);
  const { parent, key } = parentOf(doc, path);
  if (Array.isArray(parent)) spliceExact(parent, Number(key), 1);
  else {
    delete parent[key];
    setLiteral(parent, key, undefined);
  }
  return doc;
}

/**
 * Replaces the value at `path` (which must exist) where it stands: an object's member keeps its place among
 * the others (FHIR JSON's order is not significant, but a client diffing the stored text sees only the change).
 */
function replace(doc: unknown, path: string, value: unknown, literal?: string): unknown {
  get(doc, path);
  if (path === '') return value;
  const { parent, key } = parentOf(doc, path);
  if (Array.isArray(parent)) spliceExact(parent, Number(key), 1, [value], [literal]);
  else {
    parent[key] = value;
    setLiteral(parent, key, literal);
  }
  return doc;
}

/**
 * RFC 6902 4.6's equality of `test`: numbers numerically equal as written (`aText`, `bText`: their literals when
 * not String(value)), objects with the same members in any order, arrays item by item, anything else identical.
 */
function deepEqual(a: unknown, aText: string | undefined, b: unknown, bText: string | undefined): boolean {
  if (typeof a === 'number' && typeof b === 'number') {
    // Numerically equal as written (`1.5`, `1.50`, `15e-1`), not as doubles: a decimal keeps its precision.
    const x = decimalRational(aText ?? String(a));
    const y = decimalRational(bText ?? String(b));
    return x !== undefined && y !== undefined ? compare(x, y) === 0 : a === b;
  }
  if (a === b) return true;
  if (!isContainer(a) || !isContainer(b) || Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => Object.hasOwn(b, k) && deepEqual((a as Record<string, unknown>)[k], literalOf(a, k), (b as Record<string, unknown>)[k], literalOf(b, k)));
}

/** The length of `value` as JSON, about (escapes aside); once it exceeds `budget`, a value above it. */
function jsonSize(value: unknown, budget: number): number {
  let size = 0;
  const stack = [value];
  while (stack.length > 0 && size <= budget) {
    const v = stack.pop();
    if (typeof v === 'string') size += v.length + 2;
    else if (v === null || typeof v !== 'object') size += String(v).length;
    else if (Array.isArray(v)) {
      size += 1 + v.length;
      for (const x of v) stack.push(x);
    } else {
      size += 1;
      for (const k in v) {
        size += k.length + 4;
        stack.push((v as Record<string, unknown>)[k]);
      }
    }
  }
  return size;
}

/** What the operations applied so far have copied. */
interface Copied {
  bytes: number;
}

function applyOne(doc: unknown, op: JsonPatchOperation, copied: Copied): unknown {
  switch (op.op) {
    case 'add':
      return add(doc, op.path, cloneExact(op.value), op.literal);
    case 'remove':
      return remove(doc, op.path);
    case 'replace':
      return replace(doc, op.path, cloneExact(op.value), op.literal);
    case 'move': {
      if (op.path === op.from) return (get(doc, op.from), doc);
      if (op.path.startsWith(op.from + '/')) throw new Failure(`${op.from} cannot be moved into its own child ${op.path}`);
      const value = get(doc, op.from);
      const literal = literalAt(doc, op.from);
      return add(remove(doc, op.from), op.path, value, literal);
    }
    case 'copy': {
      const value = get(doc, op.from);
      copied.bytes += jsonSize(value, MAX_COPIED_BYTES - copied.bytes);
      if (copied.bytes > MAX_COPIED_BYTES) throw new TooMuchCopied();
      return add(doc, op.path, cloneExact(value), literalAt(doc, op.from));
    }
    case 'test': {
      const actual = get(doc, op.path);
      const text = literalAt(doc, op.path);
      if (!deepEqual(actual, text, op.value, op.literal)) throw new Failure(`test failed: ${op.path || 'the document'} is ${text ?? stringifyExact(actual)}, not ${op.literal ?? stringifyExact(op.value)}`);
      return doc;
    }
  }
}

/**
 * Applies `operations` in order to a copy of `doc` (RFC 6902 section 4) and returns it; `doc` is never
 * changed. The first operation that cannot be applied is an error naming it and nothing applies: a
 * failing `test` (its value differs, or its target is missing) a 422, as FHIR's http.html has it ("In the
 * case of a failing JSON Patch test interaction, the server returns a 422 Unprocessable Entity", R5; R4
 * applies the patch "following the relevant PATCH specification", whose RFC 5789 2.2 allows 422 or 409,
 * and Cinder's 409 says a concurrent write may be retried), any other a 400 as HAPI FHIR answers it, as
 * is the copy that takes the copies past MAX_COPIED_BYTES (`too-costly`). Numbers keep their literals
 * (exact-json.ts) where they move, and take the operations' own.
 */
export function applyJsonPatch(doc: unknown, operations: readonly JsonPatchOperation[]): unknown {
  let out = cloneExact(doc);
  const copied: Copied = { bytes: 0 };
  operations.forEach((op, i) => {
    try {
      out = applyOne(out, op, copied);
    } catch (err) {
      if (err instanceof TooMuchCopied) {
        const text = `JSON Patch operation ${i} (${op.op} ${op.path}) cannot be applied: the patch's copies would duplicate more than ${MAX_COPIED_BYTES} bytes, the most one patch may copy`;
        throw new FhirError('invalid', text, { issueCode: 'too-costly' });
      }
      if (!(err instanceof Failure)) throw err;
      const text = `JSON Patch operation ${i} (${op.op} ${op.path}) cannot be applied: ${err.message}`;
      throw new FhirError(op.op === 'test' ? 'unprocessable' : 'invalid', text, { issueCode: 'processing' });
    }
  });
  return out;
}
