/**
 * Runs the R4 JSON test cases of HL7's validator test suite (the public repository
 * `FHIR/fhir-test-cases`, folder `validator/`) through `POST {type}/$validate` of an in-process Cinder
 * and compares its verdict with the Java reference validator's expected outcome
 * (`validator/outcomes/java/...`):
 *
 *   bun bench/validator-tests.ts <validator-dir> [--name NAME]... [--verbose] [--json]
 *
 * A test agrees when both find errors (severity `error` or `fatal`) or both find none; wording and
 * locations are not compared, but `--verbose` prints both lists for each disagreement. Tests the
 * runner cannot reproduce are counted as not run: other FHIR versions, XML and other formats, logical
 * models, tests that load packages (implementation guides), supporting profiles, or validate against a
 * profile (test/unit/validation/profiles-test-cases.test.ts runs those Cinder can), and tests the
 * suite marks `use-test: false`. A resource that declares a profile of its own (`meta.profile`) is
 * run: Cinder checks the R4 core profiles it claims, and accepts others it does not have, whose errors
 * the reference includes, so a disagreement there is listed apart ("declares a profile").
 */
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createTestApp, fhirInit } from '../test/helpers/app.ts';

type Json = Record<string, any>;

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { name: { type: 'string', multiple: true }, verbose: { type: 'boolean' }, json: { type: 'boolean' } },
});
const dir = positionals[0];
if (!dir) throw new Error('usage: bun bench/validator-tests.ts <validator-dir> [--name NAME]... [--verbose] [--json]');
const readJson = (file: string): Json => JSON.parse(readFileSync(join(dir, file), 'utf8').replace(/^\uFEFF/, ''));

/** Settings whose tests Cinder's base validation cannot reproduce. */
const NOT_REPRODUCIBLE = ['allow-comments', 'security-checks', 'for-publication', 'best-practice', 'noHtmlInMarkdown', 'no-experimental-content', 'logical', 'packages', 'supporting', 'profiles', 'profile', 'bundle-param', 'ips', 'supporting5', 'package-map', 'fetcher', 'certificate'];

interface Outcome {
  name: string;
  module: string;
  status: 'agree' | 'missed' | 'extra' | 'not run';
  why?: string;
  expected?: string[];
  actual?: string[];
  declaresProfile?: boolean;
}

const isError = (i: Json) => i.severity === 'error' || i.severity === 'fatal';
const describe = (i: Json) => `${i.severity} ${i.code} ${JSON.stringify(i.expression?.[0] ?? i.location?.[0] ?? '')}: ${String(i.details?.text ?? i.diagnostics ?? '').slice(0, 200)}`;

const manifest = readJson('manifest.json');
const app = await createTestApp({ env: { CINDER_RATE_LIMITS: 'off' } });
const token = await app.token();
const results: Outcome[] = [];
try {
  for (const t of manifest['test-cases'] as Json[]) {
    if (values.name && !values.name.includes(t.name)) continue;
    const base = { name: t.name as string, module: (t.module ?? '') as string };
    const skip = (why: string) => results.push({ ...base, status: 'not run', why });
    if (t.version !== '4.0' && t.version !== '4.0.1') { skip(`version ${t.version ?? '5.0'}`); continue; }
    if (t['use-test'] === false) { skip('use-test false'); continue; }
    if (!String(t.file).endsWith('.json')) { skip('not JSON'); continue; }
    const setting = NOT_REPRODUCIBLE.find((k) => k in t);
    if (setting) { skip(`needs ${setting}`); continue; }
    if (t.validateContains === 'IGNORE') { skip('needs validateContains IGNORE'); continue; }
    // The expected outcome: a file of the Java validator's OperationOutcome, or (older tests) its error count inline.
    const inline = t.java !== null && typeof t.java === 'object';
    if (!t.java || (!inline && !existsSync(join(dir, 'outcomes', t.java))) || !existsSync(join(dir, t.file))) { skip('files missing'); continue; }
    let resource: Json;
    if (/"resourceType"\s*:\s*"Parameters"/.test(readFileSync(join(dir, t.file), 'utf8').slice(0, 200))) { skip('a Parameters resource (no endpoint to validate it at)'); continue; }
    try {
      resource = readJson(t.file);
    } catch {
      // The reference reads it as a fatal error; so must Cinder (a 400 on any write).
      resource = { unparseable: true };
    }
    const expected = inline
      ? Array.from({ length: Number(t.java.errorCount ?? 0) }, (_, i) => ({ severity: 'error', code: '?', details: { text: String(t.java.output?.[i] ?? '(inline count)') } }))
      : ((readJson(join('outcomes', t.java)).issue ?? []) as Json[]).filter(isError);
    let actual: Json[];
    if ('unparseable' in resource) {
      const res = await app.request(`${app.fhir()}/Basic/$validate`, fhirInit(token, 'POST', readFileSync(join(dir, t.file), 'utf8')));
      actual = res.status >= 400 ? (((await res.json()) as Json).issue ?? []) : [];
    } else {
      const type = typeof resource.resourceType === 'string' && /^[A-Z][A-Za-z]+$/.test(resource.resourceType) ? resource.resourceType : 'Basic';
      const res = await app.request(`${app.fhir()}/${type}/$validate`, fhirInit(token, 'POST', readFileSync(join(dir, t.file), 'utf8')));
      const body = (await res.json()) as Json;
      actual = (body.issue ?? []) as Json[];
    }
    actual = actual.filter(isError);
    const status = expected.length > 0 === actual.length > 0 ? 'agree' : expected.length > 0 ? 'missed' : 'extra';
    results.push({
      ...base, status,
      ...(status !== 'agree' && { expected: expected.map(describe), actual: actual.map(describe) }),
      ...(resource.meta?.profile && { declaresProfile: true }),
    });
  }
} finally {
  await app.close();
}

if (values.json) console.log(JSON.stringify(results, null, 2));
else {
  const count = (s: Outcome['status']) => results.filter((r) => r.status === s).length;
  const run = results.filter((r) => r.status !== 'not run');
  console.log(`run ${run.length}: agree ${count('agree')}, missed (reference finds errors, Cinder none) ${count('missed')}, extra (Cinder finds errors, reference none) ${count('extra')}`);
  const why = new Map<string, number>();
  for (const r of results.filter((r) => r.status === 'not run')) why.set(r.why!, (why.get(r.why!) ?? 0) + 1);
  console.log(`not run: ${[...why].map(([w, n]) => `${n} (${w})`).join(', ')}`);
  for (const r of run.filter((r) => r.status !== 'agree')) {
    console.log(`\n${r.status.toUpperCase()} ${r.name} [${r.module}]${r.declaresProfile ? ' (declares a profile)' : ''}`);
    if (values.verbose) {
      for (const e of r.expected ?? []) console.log(`  reference: ${e}`);
      for (const a of r.actual ?? []) console.log(`  cinder:    ${a}`);
    }
  }
}
