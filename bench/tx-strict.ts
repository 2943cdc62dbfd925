/**
 * The whole-answer comparison of HL7's own test harness (the validator's `-txtests`: `TxTester`,
 * `TxTesterScrubbers`, `CompareUtilities`), for `bench/tx-tests.ts --strict`. Every element of the
 * answer must be one the expected answer has, and every element the expected answer has must be in the
 * answer unless it is marked optional (`$optional$` on an object, `$optional-properties$` naming
 * members, `*` all of them, and an array whose items are all marked may be absent); `$optional$` as
 * the harness reads it for an R4 server (isOptional); arrays are compared without regard to order (the
 * harness sorts both sides), `$count-arrays$` compares only their lengths; string templates: `$$`
 * (anything), `$instant$`, `$date$`, `$uuid$`, `$id$`, `$string$`, `$url$`, `$token$`, `$semver$`,
 * `$version$` (the server's FHIR version, 4.0.1, also within a value),
 * `$choice:a|b$`, `$fragments:a|b$` and `$external:n:a|b$` (without the harness's per-server strings:
 * the fragments, case-insensitive).
 *
 * Before comparing, as the harness does, the answer loses its narrative and `meta` and the extensions
 * with absolute URLs the harness does not manage (everywhere but in `ValueSet.compose`), and an
 * expansion loses its `excludeNested` parameter when the request did not send one. The expected answer
 * is in R5; elements R4 does not define are dropped from it (an R4 server cannot send them), by the
 * caller.
 */
type Json = Record<string, any>;

const MANAGED_EXTENSIONS = new Set([
  'http://hl7.org/fhir/StructureDefinition/codesystem-alternate',
  'http://hl7.org/fhir/StructureDefinition/codesystem-conceptOrder',
  'http://hl7.org/fhir/StructureDefinition/codesystem-label',
  'http://hl7.org/fhir/StructureDefinition/coding-sctdescid',
  'http://hl7.org/fhir/StructureDefinition/itemWeight',
  'http://hl7.org/fhir/StructureDefinition/rendering-style',
  'http://hl7.org/fhir/StructureDefinition/rendering-xhtml',
  'http://hl7.org/fhir/StructureDefinition/translation',
  'http://hl7.org/fhir/StructureDefinition/valueset-concept-definition',
  'http://hl7.org/fhir/StructureDefinition/valueset-conceptOrder',
  'http://hl7.org/fhir/StructureDefinition/valueset-deprecated',
  'http://hl7.org/fhir/StructureDefinition/valueset-label',
  'http://hl7.org/fhir/StructureDefinition/valueset-supplement',
  'http://hl7.org/fhir/StructureDefinition/alternate-code-use',
  'http://hl7.org/fhir/StructureDefinition/alternate-code-status',
  // A concept's or designation's standards status: the expected answers repeat it on `contains` and its designations
  // (extensions-echo-all, vs-deprecation), so the harness cannot be dropping it.
  'http://hl7.org/fhir/StructureDefinition/structuredefinition-standards-status',
  // An expansion that is not closed (a fragment's codes), as the expected answers give it (fragment-expansion).
  'http://hl7.org/fhir/StructureDefinition/valueset-unclosed',
  'http://hl7.org/fhir/StructureDefinition/valueset-unclosed-reason',
  // An issue's catalogue key: required by some expected answers, optional (`!tx.fhir.org`) in the others, so kept.
  'http://hl7.org/fhir/StructureDefinition/operationoutcome-message-id',
  'http://hl7.org/fhir/test/CodeSystem/de-multi',
  'http://hl7.org/fhir/test/CodeSystem/en-multi',
  'http://hl7.org/fhir/test/StructureDefinition/unknown-extension-1',
  'http://hl7.org/fhir/test/StructureDefinition/unknown-extension-3',
  'http://hl7.org/fhir/test/StructureDefinition/unknown-extension-4',
  'http://hl7.org/fhir/test/StructureDefinition/unknown-extension-5',
  'http://hl7.org/fhir/test/ValueSet/extensions-bad-supplement',
  'http://hl7.org/fhir/test/ValueSet/simple-all',
  'http://hl7.org/fhir/test/ValueSet/simple-enumerated',
  'http://hl7.org/fhir/test/ValueSet/simple-filter-isa',
]);
const managed = (url: unknown) => typeof url !== 'string' || !/^[a-z][a-z0-9+.-]*:/i.test(url) || MANAGED_EXTENSIONS.has(url);

/** The answer as the harness compares it: no narrative, no `meta`, only the extensions it manages. */
export function scrub(answer: Json, request: Json): Json {
  const out = structuredClone(answer);
  delete out.text;
  delete out.meta;
  const visit = (v: unknown, inCompose: boolean): void => {
    if (Array.isArray(v)) return v.forEach((x) => visit(x, inCompose));
    if (v === null || typeof v !== 'object') return;
    const o = v as Json;
    if (!inCompose) {
      for (const key of ['extension', 'modifierExtension']) {
        if (!Array.isArray(o[key])) continue;
        o[key] = (o[key] as Json[]).filter((e) => managed(e.url));
        if (!o[key].length) delete o[key];
      }
    }
    for (const [key, child] of Object.entries(o)) if (key === 'resource' || typeof child === 'object') visit(child, inCompose || key === 'compose');
  };
  visit(out, false);
  const sent = ((request.parameter ?? []) as Json[]).some((p) => p.name === 'excludeNested');
  if (out.resourceType === 'ValueSet' && !sent && Array.isArray(out.expansion?.parameter)) {
    out.expansion.parameter = (out.expansion.parameter as Json[]).filter((p) => p.name !== 'excludeNested');
    if (!out.expansion.parameter.length) delete out.expansion.parameter;
  }
  return out;
}

/**
 * Whether an expected item may be absent, as the harness reads `$optional$` for an R4 server outside its
 * special modes: `true`; `!mode` (optional unless that mode is on); `warning:...`; `version:4`. Not
 * `false`, nor a mode the run does not have (`version:5`: only an R5 server may leave it out).
 */
const R4_MODES = new Set(['version:4']);
function isOptional(v: unknown): boolean {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  const flag = (v as Json)['$optional$'];
  if (typeof flag === 'boolean') return flag;
  if (typeof flag !== 'string') return false;
  return flag.startsWith('!') || flag.startsWith('warning:') || R4_MODES.has(flag);
}
/** An expected array whose items are all marked `$optional$` (whatever its value) may be absent altogether. */
const allMarked = (v: unknown) => Array.isArray(v) && v.every((x) => x === null || typeof x !== 'object' || '$optional$' in (x as Json));
const CONTROL = new Set(['$optional$', '$optional-properties$', '$count-arrays$', 'fhir_comments']);

function matchesString(actual: string, expected: string): boolean {
  // `$version$` inside a value is the FHIR version of the server (the harness's variable): 4.0.1.
  if (!(expected.startsWith('$') && expected.endsWith('$') && expected.length > 1)) return actual === expected.replaceAll('$version$', '4.0.1');
  const body = expected.slice(1, -1);
  const fragmentsIn = (list: string) => list.split('|').every((f) => actual.toLowerCase().includes(f.toLowerCase()));
  if (body.startsWith('choice:')) return body.slice(7).split('|').includes(actual);
  if (body.startsWith('fragments:')) return fragmentsIn(body.slice(10));
  if (body.startsWith('external:')) {
    const parts = body.split(':');
    return parts.length <= 2 || fragmentsIn(parts.slice(2).join(':'));
  }
  switch (body) {
    case '$': return true;
    case 'instant': return /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/.test(actual);
    case 'uuid': return /^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(actual);
    case 'id': return /^[A-Za-z0-9\-.]{1,64}$/.test(actual);
    case 'date': return /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2}))?$/.test(actual);
    case 'string': return actual === actual.trim();
    case 'url': return /^(https?:\/\/|www\.)\S*$/.test(actual);
    case 'token': return /^[0-9a-zA-Z_][0-9a-zA-Z_.\-]*$/.test(actual);
    case 'semver': return /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$/.test(actual);
    case 'version': return actual === '4.0.1';
    default: return actual === expected;
  }
}

/** Where an answer differs from the expected one (every difference found), empty when it agrees. */
export function compareStrict(expected: unknown, actual: unknown, path = '', countOnly = false): string[] {
  if (Array.isArray(expected) || Array.isArray(actual)) {
    if (!Array.isArray(expected) || !Array.isArray(actual)) return [`${path}: array against non-array`];
    if (countOnly) return expected.length === actual.length ? [] : [`${path}: ${actual.length} items (expected ${expected.length})`];
    return compareArrays(expected, actual, path);
  }
  if (expected !== null && typeof expected === 'object') {
    if (actual === null || typeof actual !== 'object') return [`${path}: ${JSON.stringify(actual)} (expected an object)`];
    const e = expected as Json;
    const a = actual as Json;
    const optionalNames = new Set<string>(e['$optional-properties$'] ?? []);
    const countOnlys = new Set<string>(e['$count-arrays$'] ?? []);
    const out: string[] = [];
    for (const [key, value] of Object.entries(a)) {
      if (key === 'fhir_comments') continue;
      if (!(key in e)) out.push(`${path}.${key}: not expected (${JSON.stringify(value).slice(0, 120)})`);
      else out.push(...compareStrict(e[key], value, `${path}.${key}`, countOnlys.has(key)));
    }
    for (const key of Object.keys(e)) if (!CONTROL.has(key) && !optionalNames.has(key) && !optionalNames.has('*') && !(key in a) && !allMarked(e[key])) out.push(`${path}.${key}: missing (expected ${JSON.stringify(e[key]).slice(0, 120)})`);
    return out;
  }
  if (typeof expected === 'string' && typeof actual === 'string') return matchesString(actual, expected) ? [] : [`${path}: ${JSON.stringify(actual).slice(0, 160)} (expected ${JSON.stringify(expected).slice(0, 160)})`];
  return expected === actual ? [] : [`${path}: ${JSON.stringify(actual)} (expected ${JSON.stringify(expected)})`];
}

/**
 * Each item of the answer matched to a distinct expected item (a bipartite matching: order does not
 * count). An item that matches none is reported with its differences from the nearest expected item.
 */
function compareArrays(expected: unknown[], actual: unknown[], path: string): string[] {
  const at = `${path}[]`;
  const diffs = actual.map((a) => expected.map((e) => compareStrict(e, a, at)));
  const fits = diffs.map((row) => row.flatMap((d, j) => (d.length ? [] : [j])));
  const owner = new Array<number>(expected.length).fill(-1);
  const assign = (i: number, seen: Set<number>): boolean => {
    for (const j of fits[i]!) {
      if (seen.has(j)) continue;
      seen.add(j);
      if (owner[j] === -1 || assign(owner[j]!, seen)) return (owner[j] = i), true;
    }
    return false;
  };
  const out: string[] = [];
  const unmatched: number[] = [];
  for (let i = 0; i < actual.length; i++) if (!assign(i, new Set())) unmatched.push(i);
  const free = expected.map((_, j) => j).filter((j) => owner[j] === -1);
  for (const i of unmatched) {
    const near = free.map((j) => diffs[i]![j]!).sort((x, y) => x.length - y.length)[0];
    out.push(...(near ?? [`${at} not expected: ${JSON.stringify(actual[i]).slice(0, 160)}`]));
  }
  const missed = free.filter((j) => !isOptional(expected[j]));
  if (missed.length > unmatched.length) out.push(`${at}: ${missed.length - unmatched.length} expected items missing, e.g. ${JSON.stringify(expected[missed[missed.length - 1]!]).slice(0, 160)}`);
  return out;
}
