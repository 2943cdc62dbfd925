/**
 * Runs the HL7 terminology ecosystem test cases (the public repository `HL7/fhir-tx-ecosystem-ig`,
 * folder `tests/`) against an in-process Cinder and compares its answers with the reference
 * servers' expected ones:
 *
 *   bun bench/tx-tests.ts <tests-dir> [--suite NAME]... [--op validate-code,cs-validate-code,lookup,expand,translate]
 *                         [--strict] [--verbose] [--json]
 *
 * A test's expected answer is its `response:flat` (the harness's "flat" mode) where it has one, but for
 * a request that sends `excludeNested` false, which Cinder answers nested as the reference servers do.
 *
 * For each suite of `test-cases.json` that applies to every server (mode `general`, or none), a fresh
 * app and tenant get the suite's code systems and value sets (R5 JSON read as R4: elements R4 does not
 * have are dropped), then each test's request is POSTed (`ValueSet/$validate-code`,
 * `CodeSystem/$validate-code`, `CodeSystem/$lookup`, `ValueSet/$expand`, `ConceptMap/$translate`) with its `profile`
 * parameters and `Accept-Language`, when it uses only the input parameters R4 defines for the
 * operation (others, R5's `activeOnly` or `tx-resource` on $validate-code say, are counted as not
 * R4-applicable and not run). Compared, as the issue asks (exact wording need not match):
 * validate-code `result`, `display`, the presence of `message`, and the kinds of issues (severity and
 * code); an expected OperationOutcome means a 4xx, and a 4xx passes where the test names an
 * OperationOutcome as the other answer a server may give (`response2`), and a validate-code answer passes
 * when it agrees with either `response` or a `response2` Parameters; lookup `name`, `display` and the properties and
 * designations named; expand the set of codes and `total`; translate `result` and the set of matches (concept
 * system and code, with the equivalence where the test gives one for R4). Tests of other operations (batch,
 * compare, metadata) and of other modes are counted as not run.
 *
 * `--strict` compares instead the whole answer as HL7's own harness does (bench/tx-strict.ts: no element
 * the expected answer lacks, every element it has unless marked optional, templates for ids, times and
 * wording), against the expected answer less the elements R4 does not define. `--json --verbose` adds each
 * failing test's answer (`answer`).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { typeModel } from '../src/fhir/validation/model.ts';
import { compareStrict, scrub } from './tx-strict.ts';
import { createTestApp, fhirInit, type TestApp } from '../test/helpers/app.ts';

type Json = Record<string, any>;

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { suite: { type: 'string', multiple: true }, op: { type: 'string' }, verbose: { type: 'boolean' }, json: { type: 'boolean' }, strict: { type: 'boolean' } },
});
const dir = positionals[0];
if (!dir) throw new Error('usage: bun bench/tx-tests.ts <tests-dir> [--suite NAME]... [--op LIST] [--strict] [--verbose] [--json]');
const ops = new Set((values.op ?? 'validate-code,cs-validate-code,lookup,expand,translate').split(','));
// Some files start with a byte order mark.
const read = (file: string): Json => JSON.parse(readFileSync(join(dir, file), 'utf8').replace(/^\uFEFF/, ''));

/** The resource as R4 has it: elements R4 does not define (R5 additions) are dropped, recursively. */
function toR4(value: unknown, type: string): unknown {
  if (Array.isArray(value)) return value.map((v) => toR4(v, type));
  if (value === null || typeof value !== 'object') return value;
  const v = value as Json;
  const actual = type === 'Resource' && typeof v.resourceType === 'string' ? v.resourceType : type;
  const model = typeModel(actual);
  if (!model) return value;
  const out: Json = {};
  for (const [key, child] of Object.entries(v)) {
    // The comparison's own markers (`$optional$`, ...) stay.
    if (key === 'resourceType' || key.startsWith('$')) out[key] = child;
    else if (model.slots.has(key)) out[key] = toR4(child, model.slots.get(key)!.type);
    else if (key.startsWith('_') && model.slots.get(key.slice(1))?.primitive) out[key] = child;
  }
  return out;
}

/** The comparison's `$optional$` markers: an element that may be absent. */
const optional = (v: unknown) => v !== null && typeof v === 'object' && '$optional$' in (v as Json);

const param = (p: Json | undefined, name: string) => (p?.parameter as Json[] | undefined)?.find((x) => x.name === name);
const valueOf = (p: Json | undefined) => (p ? Object.entries(p).find(([k]) => k.startsWith('value'))?.[1] : undefined);

function issueKinds(outcome: Json | undefined, withOptional: boolean): string[] {
  const issues = ((outcome?.issue ?? []) as Json[]).filter((i) => withOptional || !optional(i));
  return [...new Set(issues.map((i) => `${i.severity}:${i.code}`))].sort();
}

/** Differences between an expected and an actual validate-code Parameters; empty when they agree. */
function compareValidate(expected: Json, actual: Json): string[] {
  const out: string[] = [];
  const er = valueOf(param(expected, 'result'));
  const ar = valueOf(param(actual, 'result'));
  if (er !== ar) out.push(`result ${ar} (expected ${er}${ar === false ? `; message: ${String(valueOf(param(actual, 'message'))).slice(0, 200)}` : ''})`);
  const ed = param(expected, 'display');
  if (ed && !optional(ed) && valueOf(param(actual, 'display')) !== valueOf(ed)) out.push(`display ${JSON.stringify(valueOf(param(actual, 'display')))} (expected ${JSON.stringify(valueOf(ed))})`);
  const em = param(expected, 'message');
  if (em && !optional(em) && !param(actual, 'message')) out.push('no message');
  if (!em && er === true && param(actual, 'message') && !param(expected, 'issues')) out.push('a message where none is expected');
  const ei = param(expected, 'issues');
  const ai = param(actual, 'issues');
  if (ei && !optional(ei)) {
    const want = issueKinds(ei.resource, false);
    const got = issueKinds(ai?.resource, true);
    const missing = want.filter((k) => !got.includes(k));
    const allowed = issueKinds(ei.resource, true);
    const extra = got.filter((k) => !allowed.includes(k) && k.startsWith('error'));
    if (missing.length || extra.length) out.push(`issues ${JSON.stringify(got)} (expected ${JSON.stringify(want)})`);
  } else if (!ei && ai && issueKinds(ai.resource, true).some((k) => k.startsWith('error'))) out.push(`error issues where none are expected: ${JSON.stringify(issueKinds(ai.resource, true))}`);
  return out;
}

function codesOf(contains: Json[] | undefined, out = new Set<string>()): Set<string> {
  for (const c of contains ?? []) {
    if (optional(c)) continue;
    if (c.code !== undefined) out.add(`${c.system}|${c.code}`);
    codesOf(c.contains, out);
  }
  return out;
}

function compareExpand(expected: Json, actual: Json): string[] {
  const out: string[] = [];
  const want = codesOf(expected.expansion?.contains);
  const got = codesOf(actual.expansion?.contains);
  const missing = [...want].filter((c) => !got.has(c));
  const extra = [...got].filter((c) => !want.has(c));
  if (missing.length || extra.length) out.push(`codes: missing ${JSON.stringify(missing.slice(0, 5))}, extra ${JSON.stringify(extra.slice(0, 5))}`);
  const total = expected.expansion?.total;
  if (typeof total === 'number' && actual.expansion?.total !== total) out.push(`total ${actual.expansion?.total} (expected ${total})`);
  return out;
}

function compareLookup(expected: Json, actual: Json): string[] {
  const out: string[] = [];
  for (const name of ['name', 'display']) {
    const e = param(expected, name);
    if (e && !optional(e) && valueOf(param(actual, name)) !== valueOf(e)) out.push(`${name} ${JSON.stringify(valueOf(param(actual, name)))} (expected ${JSON.stringify(valueOf(e))})`);
  }
  const partCode = (x: Json) => valueOf(((x.part ?? []) as Json[]).find((q) => q.name === 'code')) as string;
  const props = (p: Json, withOptional: boolean) =>
    new Set(((p.parameter ?? []) as Json[]).filter((x) => x.name === 'property' && (withOptional || !optional(x))).map(partCode));
  const missing = [...props(expected, false)].filter((c) => !props(actual, true).has(c));
  if (missing.length) out.push(`properties missing: ${missing.join(', ')}`);
  const designations = (p: Json) => ((p.parameter ?? []) as Json[]).filter((x) => x.name === 'designation' && !optional(x)).length;
  if (designations(actual) < designations(expected)) out.push(`designations ${designations(actual)} (expected ${designations(expected)})`);
  return out;
}

/** A translate answer's matches as `system|code equivalence` (the equivalence left out where R4 need not give it). */
function matchesOf(p: Json): Set<string> {
  const out = new Set<string>();
  for (const m of ((p.parameter ?? []) as Json[]).filter((x) => x.name === 'match' && !optional(x))) {
    const parts = (m.part ?? []) as Json[];
    const concept = parts.find((x) => x.name === 'concept')?.valueCoding as Json | undefined;
    const eq = parts.find((x) => x.name === 'equivalence');
    // `$optional$: "version:5"` marks what only R5 may leave out.
    const r4 = eq && (!optional(eq) || eq.$optional$ === 'version:5') ? ` ${eq.valueCode}` : '';
    out.add(`${concept?.system}|${concept?.code}${r4}`);
  }
  return out;
}

function compareTranslate(expected: Json, actual: Json): string[] {
  const out: string[] = [];
  const er = valueOf(param(expected, 'result'));
  const ar = valueOf(param(actual, 'result'));
  if (er !== ar) out.push(`result ${ar} (expected ${er})`);
  const want = matchesOf(expected);
  const got = [...matchesOf(actual)];
  const missing = [...want].filter((w) => !got.some((g) => g === w || g.startsWith(`${w} `)));
  if (missing.length) out.push(`matches missing ${JSON.stringify(missing)} (got ${JSON.stringify(got)})`);
  return out;
}

/**
 * The input parameters FHIR R4 defines for each operation: a test that sends others is not R4-applicable.
 * And on $validate-code the code system versions R4 defines for $expand (`system-version`, ...), which
 * the reference servers and Cinder take there too.
 */
const R4_PARAMETERS: Record<string, Set<string>> = {
  'validate-code': new Set(['url', 'context', 'valueSet', 'valueSetVersion', 'code', 'system', 'systemVersion', 'display', 'coding', 'codeableConcept', 'date', 'abstract', 'displayLanguage', 'system-version', 'check-system-version', 'force-system-version']),
  'cs-validate-code': new Set(['url', 'codeSystem', 'code', 'version', 'display', 'coding', 'codeableConcept', 'date', 'abstract', 'displayLanguage']),
  lookup: new Set(['code', 'system', 'version', 'coding', 'date', 'displayLanguage', 'property']),
  expand: new Set([
    'url', 'valueSet', 'valueSetVersion', 'context', 'contextDirection', 'filter', 'date', 'offset', 'count', 'includeDesignations', 'designation',
    'includeDefinition', 'activeOnly', 'excludeNested', 'excludeNotForUI', 'excludePostCoordinated', 'displayLanguage', 'exclude-system',
    'system-version', 'check-system-version', 'force-system-version',
  ]),
  translate: new Set(['url', 'conceptMap', 'conceptMapVersion', 'code', 'system', 'version', 'source', 'coding', 'codeableConcept', 'target', 'targetsystem', 'dependency', 'reverse']),
};

const PATHS: Record<string, string> = {
  'validate-code': 'ValueSet/$validate-code', 'cs-validate-code': 'CodeSystem/$validate-code', lookup: 'CodeSystem/$lookup', expand: 'ValueSet/$expand',
  translate: 'ConceptMap/$translate',
};

interface Outcome {
  suite: string;
  test: string;
  operation: string;
  status: 'pass' | 'fail' | 'not run';
  why?: string;
  /** A failing test's answer, with `--json --verbose`. */
  answer?: Json;
}

async function runSuite(suite: Json): Promise<Outcome[]> {
  const results: Outcome[] = [];
  const app: TestApp = await createTestApp({ env: { CINDER_VALIDATION: 'off', CINDER_RATE_LIMITS: 'off' } });
  try {
    const token = await app.token();
    // Several versions of one code system share an id in the suites' files; a server stores each as a resource of its own.
    const ids = new Set<string>();
    for (const file of suite.setup as string[]) {
      const r = toR4(read(file), 'Resource') as Json;
      if (r.id !== undefined) {
        let id = r.id as string;
        for (let n = 2; ids.has(`${r.resourceType}/${id}`); n++) id = `${r.id}-${n}`;
        ids.add(`${r.resourceType}/${id}`);
        r.id = id;
      }
      const res = r.id === undefined
        ? await app.request(`${app.fhir()}/${r.resourceType}`, fhirInit(token, 'POST', r))
        : await app.request(`${app.fhir()}/${r.resourceType}/${r.id}`, fhirInit(token, 'PUT', r));
      if (res.status >= 300) console.error(`${suite.name}: setup ${file}: ${res.status} ${(await res.text()).slice(0, 200)}`);
    }
    for (const t of suite.tests as Json[]) {
      const base = { suite: suite.name, test: t.name, operation: t.operation };
      if (!ops.has(t.operation)) {
        results.push({ ...base, status: 'not run', why: `operation ${t.operation}` });
        continue;
      }
      if (t.mode) {
        results.push({ ...base, status: 'not run', why: `mode ${t.mode}` });
        continue;
      }
      let request: Json;
      let expected: Json;
      try {
        request = toR4(read(t.request), 'Resource') as Json;
        // The harness's "flat" mode (a test's `response:flat`) for what Cinder answers flat; the nested
        // answer where the request asks for one (`excludeNested` false), which Cinder gives.
        const nestAsked = ((request.parameter ?? []) as Json[]).some((p) => p.name === 'excludeNested' && p.valueBoolean === false);
        expected = read(nestAsked ? t.response : (t['response:flat'] ?? t.response));
      } catch (err) {
        results.push({ ...base, status: 'not run', why: `unreadable test files: ${(err as Error).message}` });
        continue;
      }
      if (t.profile) request.parameter = [...(request.parameter ?? []), ...(read(t.profile).parameter as Json[]).filter((p) => p.name !== 'uuid')];
      const notR4 = ((request.parameter ?? []) as Json[]).map((p) => p.name as string).filter((n) => !R4_PARAMETERS[t.operation]!.has(n));
      if (notR4.length) {
        results.push({ ...base, status: 'not run', why: `not R4: ${[...new Set(notR4)].join(', ')}` });
        continue;
      }
      const headers: Record<string, string> = {};
      if (t['Accept-Language']) headers['Accept-Language'] = t['Accept-Language'];
      if (t.header) headers[t.header.name] = t.header.value;
      const res = await app.request(`${app.fhir()}/${PATHS[t.operation]}`, fhirInit(token, 'POST', request, headers));
      const actual = (await res.json()) as Json;
      let diffs: string[];
      // A test may name an error as the other answer a server may give (`response2`: the regex-bad
      // suite's catastrophic patterns, which "servers have the option to succeed, or to refuse").
      const refusalAllowed = typeof t.response2 === 'string' && read(t.response2).resourceType === 'OperationOutcome';
      if (refusalAllowed && res.status >= 400 && res.status < 500) diffs = [];
      else if (values.strict) {
        const want = t['http-code'] ?? (expected.resourceType === 'OperationOutcome' ? '4xx' : '2xx');
        const other = typeof t.response2 === 'string' ? (toR4(read(t.response2), 'Resource') as Json) : undefined;
        const d = compareStrict(toR4(expected, 'Resource'), scrub(actual, request));
        diffs = String(res.status)[0] !== want[0] ? [`status ${res.status} (expected ${want})`] : [];
        if (d.length && !(other && !compareStrict(other, scrub(actual, request)).length)) diffs.push(...d);
      } else if (expected.resourceType === 'OperationOutcome') {
        const want = t['http-code'] ?? '4xx';
        diffs = String(res.status)[0] === want[0] ? [] : [`status ${res.status} (expected ${want}): ${JSON.stringify(actual).slice(0, 160)}`];
      } else if (res.status >= 300) {
        diffs = [`status ${res.status}: ${JSON.stringify(actual.issue?.[0]?.details?.text ?? actual).slice(0, 200)}`];
      } else if (t.operation === 'expand') diffs = compareExpand(expected, actual);
      else if (t.operation === 'lookup') diffs = compareLookup(expected, actual);
      else if (t.operation === 'translate') diffs = compareTranslate(expected, actual);
      else {
        diffs = compareValidate(expected, actual);
        // Or the other answer the test allows (`response2`: regex-bad's "the regex could not be executed").
        const other = typeof t.response2 === 'string' ? read(t.response2) : undefined;
        if (diffs.length && other?.resourceType === 'Parameters' && compareValidate(other, actual).length === 0) diffs = [];
      }
      results.push({ ...base, status: diffs.length ? 'fail' : 'pass', ...(diffs.length ? { why: diffs.join('; ') } : {}), ...(diffs.length && values.verbose ? { answer: actual } : {}) });
    }
  } finally {
    await app.close();
  }
  return results;
}

const cases = read('test-cases.json');
const all: Outcome[] = [];
for (const suite of cases.suites as Json[]) {
  if (values.suite && !values.suite.includes(suite.name)) continue;
  if (suite.mode && suite.mode !== 'general') {
    for (const t of suite.tests as Json[]) all.push({ suite: suite.name, test: t.name, operation: t.operation, status: 'not run', why: `suite mode ${suite.mode}` });
    continue;
  }
  all.push(...(await runSuite(suite)));
}

if (values.json) console.log(JSON.stringify(all, null, 2));
else {
  const by = new Map<string, Record<string, [number, number]>>();
  for (const r of all) {
    if (r.status === 'not run') continue;
    const row = by.get(r.suite) ?? {};
    const cell = (row[r.operation] ??= [0, 0]);
    cell[1]++;
    if (r.status === 'pass') cell[0]++;
    by.set(r.suite, row);
  }
  const opsShown = [...ops];
  console.log(`| suite | ${opsShown.join(' | ')} |`);
  console.log(`|---|${opsShown.map(() => '---:').join('|')}|`);
  const totals: Record<string, [number, number]> = {};
  for (const [suite, row] of by) {
    console.log(`| ${suite} | ${opsShown.map((o) => (row[o] ? `${row[o]![0]}/${row[o]![1]}` : '')).join(' | ')} |`);
    for (const o of opsShown) if (row[o]) ((totals[o] ??= [0, 0])[0] += row[o]![0], (totals[o]![1] += row[o]![1]));
  }
  console.log(`| **total** | ${opsShown.map((o) => (totals[o] ? `${totals[o]![0]}/${totals[o]![1]} (${Math.round((100 * totals[o]![0]) / totals[o]![1])}%)` : '')).join(' | ')} |`);
  const notRun = new Map<string, number>();
  for (const r of all.filter((x) => x.status === 'not run')) {
    const why = r.why!.startsWith('not R4') ? 'uses input parameters R4 does not define' : r.why!.startsWith('unreadable') ? 'test files missing' : r.why!;
    notRun.set(why, (notRun.get(why) ?? 0) + 1);
  }
  console.log(`\nNot run: ${[...notRun].map(([why, n]) => `${n} (${why})`).join(', ')}`);
  if (values.verbose) for (const r of all.filter((x) => x.status !== 'pass')) console.log(`${r.status === 'fail' ? 'FAIL' : 'SKIP'} ${r.suite} ${r.test} [${r.operation}]: ${r.why}`);
  if (values.strict) {
    // The kinds of difference (the path, without values), with the number of failing tests that show each.
    const kinds = new Map<string, number>();
    for (const r of all.filter((x) => x.status === 'fail')) {
      for (const k of new Set(r.why!.split('; ').map((d) => d.replace(/ \(.*$|: .*$/s, '')))) kinds.set(k, (kinds.get(k) ?? 0) + 1);
    }
    const versionOnly = all.filter((x) => x.status === 'fail' && x.why!.split('; ').every((d) => /^\.expansion(\.contains\[\])+\.version/.test(d)));
    console.log(`\n${versionOnly.length} of the failing expansions differ only in giving \`contains.version\` where the reference servers leave it out (one version of the system in the expansion).`);
    console.log('\nDifferences by kind (failing tests):');
    for (const [k, n] of [...kinds].sort((a, b) => b[1] - a[1])) console.log(`${String(n).padStart(4)}  ${k}`);
  }
}
process.exit(0);
