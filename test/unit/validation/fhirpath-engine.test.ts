import { beforeAll, describe, expect, test } from 'bun:test';
import { readdirSync, statSync } from 'node:fs';
import fhirpath from 'fhirpath';
import r4 from 'fhirpath/fhir-context/r4';
import {
  compileCriterion, compileInvariant, compileTopicCriteria, compileValues, FhirPathEvaluationError, FhirPathSyntaxError, FhirPathTooCostly, UnsupportedFhirPath, type CompiledInvariant, type FhirPathTypes,
} from '../../../src/fhir/validation/fhirpath-engine.ts';
import { parseFhirPath } from '../../../src/fhir/validation/fhirpath-parse.ts';
import { elementType } from '../../../src/fhir/validation/model.ts';
import { loadR4Model, type Application, type R4Model } from '../../helpers/fhirpath-types.ts';

// FHIRPath.js reads a dateTime without offset in the process's time zone; Cinder in UTC.
process.env.TZ = 'UTC';

type Json = Record<string, unknown>;
let model: R4Model;
let types: FhirPathTypes;
beforeAll(async () => {
  model = await loadR4Model();
  types = model.types;
});

/** The invariants Cinder does not evaluate, and why. */
const UNSUPPORTED: Record<string, string> = {
  'txt-1': 'htmlChecks(): the validator checks Narrative.div natively',
  'txt-2': 'htmlChecks(): the validator checks Narrative.div natively',
  'ctm-1': 'resolve(): needs the referenced resource',
};

describe('the R4 core invariants', () => {
  test('each compiles, or is one of the few listed as unsupported', () => {
    expect(model.declared.length).toBeGreaterThanOrEqual(240);
    const unsupported = new Set<string>();
    for (const d of model.declared) {
      try {
        compileInvariant(d.expression, types);
      } catch (err) {
        if (!(err instanceof UnsupportedFhirPath)) throw new Error(`${d.key} (${d.path}): ${String(err)}`);
        unsupported.add(d.key);
      }
    }
    expect([...unsupported].sort()).toEqual(Object.keys(UNSUPPORTED).sort());
    expect(unsupported.size).toBeLessThanOrEqual(5);
  });
});

// ---------------------------------------------------------------------------------------------------
// Differential test against FHIRPath.js (HL7's JavaScript engine, R4 model)
// ---------------------------------------------------------------------------------------------------

type FhirPathFn = (data: unknown, vars: Json) => unknown[];

/**
 * Where the two engines differ on purpose: Cinder's answer there, else undefined. que-7 (`answer is Boolean`)
 * names the System type; FHIRPath.js answers false for a FHIR boolean, so it rejects the specification's own
 * Questionnaire-bb example, while HL7's Java validator (case-insensitive type names) and Cinder answer true.
 */
function knownDivergence(app: Application): boolean | undefined {
  const focus = app.focus as Json;
  switch (app.invariant.key) {
    case 'que-7': return focus.answerBoolean !== undefined ? true : undefined;
    // FHIRPath.js converts only UCUM quantities; it compares two others as JavaScript objects (`<=` is then
    // always true). Cinder, like HL7's Java validator, compares quantities of the same unit by value.
    case 'rng-2': return !isUcum(focus.low) && !isUcum(focus.high) ? false : undefined;
    default: return undefined;
  }
}

function isUcum(q: unknown): boolean {
  return (q as Json | undefined)?.system === 'http://unitsofmeasure.org';
}

interface Tally {
  resources: number;
  compared: number;
  failing: number;
  failingKeys: Set<string>;
  /** FHIRPath.js threw (an error: the invariant cannot be evaluated; Cinder must find an error too). */
  fhirpathErrors: number;
  /** Cinder's evaluation errors (each reported as the invariant failing), by invariant, type and error. */
  cinderErrors: Set<string>;
  divergences: number;
  mismatches: string[];
  /** Applications met so far, by invariant and focus type (sampled()). */
  seen: Map<string, number>;
}

const newTally = (): Tally => ({ resources: 0, compared: 0, failing: 0, failingKeys: new Set(), fhirpathErrors: 0, cinderErrors: new Set(), divergences: 0, mismatches: [], seen: new Map() });
const cinderFns = new Map<string, CompiledInvariant | null>();
const fhirpathFns = new Map<string, FhirPathFn>();

function cinderFor(expression: string): CompiledInvariant | null {
  let fn = cinderFns.get(expression);
  if (fn === undefined) {
    try {
      fn = compileInvariant(expression, types);
    } catch (err) {
      if (!(err instanceof UnsupportedFhirPath)) throw err;
      fn = null;
    }
    cinderFns.set(expression, fn);
  }
  return fn;
}

function fhirpathFor(focusType: string, expression: string): FhirPathFn {
  const key = `${focusType}|${expression}`;
  let fn = fhirpathFns.get(key);
  if (fn === undefined) {
    fn = fhirpath.compile({ base: focusType, expression } as never, r4 as never, { traceFn: () => {} } as never) as unknown as FhirPathFn;
    fhirpathFns.set(key, fn);
  }
  return fn;
}

/**
 * With CINDER_TEST_FULL=1 FHIRPath.js evaluates every application (about 1.2 million, most of the
 * suite's time: a minute on two cores); else a deterministic sample of them, spread over the whole
 * corpus: of each invariant on each focus type, the first SAMPLE_FIRST applications, then every second
 * up to twice that, every fourth up to four times, and so on. Every invariant is thus compared on every
 * type it applies to, the commoner ones across the whole corpus, and every application Cinder finds
 * failing is compared (a violation Cinder reports must be one FHIRPath.js sees).
 */
const FULL = process.env.CINDER_TEST_FULL === '1';
const SAMPLE_FIRST = 200;

function sampled(app: Application, tally: Tally): boolean {
  if (FULL) return true;
  const key = `${app.invariant.key}|${app.focusType}`;
  const n = tally.seen.get(key) ?? 0;
  tally.seen.set(key, n + 1);
  return n < SAMPLE_FIRST || n % (2 * 2 ** Math.floor(Math.log2(n / SAMPLE_FIRST))) === 0;
}

/** Evaluates every invariant that applies to `resource` with Cinder, and the sampled ones (sampled()) with FHIRPath.js too, and tallies the comparison. */
function compareEngines(resource: Json, label: string, tally: Tally): void {
  tally.resources++;
  // One memo per resource, as a validation walk shares one (InvariantContext.memo).
  const memo = new Map<object, unknown>();
  for (const app of model.applications(resource)) {
    // ele-1 on a primitive (the walk gives the bare value) is `hasValue()`: true (FHIRPath.js: false on xhtml, which
    // it does not count as a primitive), and most of the evaluations.
    if (app.invariant.key === 'ele-1' && (app.focus === null || typeof app.focus !== 'object')) continue;
    const cinder = cinderFor(app.invariant.expression);
    if (cinder === null) continue;
    // An evaluation error fails an invariant (reported, as HL7's validator reports it): the same answer as FHIRPath.js's error.
    let ours: boolean | 'error';
    try {
      ours = cinder(app.focus, app.focusType, { resource: app.resource, rootResource: app.rootResource, memo }) !== false;
    } catch (err) {
      if (!(err instanceof FhirPathEvaluationError)) throw err;
      ours = 'error';
      tally.cinderErrors.add(`${app.invariant.key} on ${app.focusType}: ${err.message}`);
    }
    if (ours !== true) {
      tally.failing++;
      tally.failingKeys.add(app.invariant.key);
    }
    if (!sampled(app, tally) && ours === true) continue;
    let theirs: boolean | 'error';
    try {
      const result = fhirpathFor(app.focusType, app.invariant.expression)(app.focus, { resource: app.resource, rootResource: app.rootResource });
      theirs = !(result.length === 1 && result[0] === false);
    } catch {
      tally.fhirpathErrors++;
      theirs = 'error';
    }
    tally.compared++;
    // FHIRPath.js's errors are its own (eld-19's `\@`, which its Unicode regular expressions refuse): Cinder holds there, or errs too.
    if (ours === theirs || (theirs === 'error' && ours === true)) continue;
    if (knownDivergence(app) === ours) tally.divergences++;
    else if (tally.mismatches.length < 20) {
      tally.mismatches.push(`${label} ${app.invariant.key} on ${app.focusType}: Cinder ${ours}, FHIRPath.js ${theirs}: ${JSON.stringify(app.focus).slice(0, 200)}`);
    }
  }
}

const EXAMPLES = new URL('../../../node_modules/hl7.fhir.r4.examples/', import.meta.url);
/** The package's collections of definitions (every resource, value set, ...): most of their entries are also its files. */
const COLLECTION_BYTES = 2_000_000;

function exampleFiles(): string[] {
  return readdirSync(EXAMPLES).filter((f) => f.endsWith('.json') && f !== 'package.json' && f !== 'ig-r4.json').sort();
}

async function readExample(file: string): Promise<Json | undefined> {
  const r = (await Bun.file(new URL(file, EXAMPLES)).json()) as Json;
  return typeof r.resourceType === 'string' ? r : undefined;
}

describe('differential test against FHIRPath.js on the R4 examples', () => {
  test('every applicable invariant gives the same answer on every example', async () => {
    const tally = newTally();
    const files = exampleFiles();
    const names = new Set(files);
    let alsoFiles = 0;
    for (const file of files) {
      const r = await readExample(file);
      if (r === undefined) continue;
      if (r.resourceType === 'Bundle' && statSync(new URL(file, EXAMPLES)).size > COLLECTION_BYTES) {
        // A collection's entries that are also files of the package are compared from those files.
        const entries = (r.entry as { resource?: Json }[]).filter((e) => !names.has(`${String(e.resource?.resourceType)}-${String(e.resource?.id)}.json`));
        alsoFiles += (r.entry as unknown[]).length - entries.length;
        r.entry = entries;
      }
      compareEngines(r, file, tally);
    }
    expect(tally.mismatches).toEqual([]);
    expect(alsoFiles).toBeGreaterThan(4000);
    expect(tally.resources).toBeGreaterThan(5200);
    expect(tally.compared).toBeGreaterThan(FULL ? 1_000_000 : 100_000);
    // The examples are valid but for the known divergence (que-7 in Questionnaire-bb); no invariant's evaluation fails on them.
    expect(tally.divergences).toBe(1);
    // dom-3's expression fails to evaluate on some (`single()`: FHIRPath.js errs there too); the walk checks dom-3 natively.
    expect([...tally.cinderErrors].filter((e) => !e.startsWith('dom-3 '))).toEqual([]);
    counts.examples = tally;
  }, 300_000);

  test('mutated copies that break invariants give the same answers, and some fail', async () => {
    const tally = newTally();
    for (const file of exampleFiles()) {
      if (statSync(new URL(file, EXAMPLES)).size > 200_000) continue;
      const r = await readExample(file);
      if (r === undefined) continue;
      for (const [name, mutate] of MUTATIONS) {
        const copy = structuredClone(r);
        if (mutate(copy)) compareEngines(copy, `${file} (${name})`, tally);
      }
    }
    expect(tally.mismatches).toEqual([]);
    expect(tally.failing).toBeGreaterThan(1000);
    expect(tally.failingKeys.size).toBeGreaterThan(60);
    for (const key of ['per-1', 'obs-6', 'obs-3', 'rng-2', 'qty-3', 'ext-1', 'ref-1', 'pat-1', 'tim-4', 'bdl-1', 'eld-2', 'sdf-8']) {
      expect(tally.failingKeys).toContain(key);
    }
    counts.mutations = tally;
  }, 300_000);
});

const counts: Record<string, Tally> = {};

/** Applies a mutation to every object of a resource (by its type); true when it changed something. */
function everywhere(change: (value: Json, type: string) => boolean): (r: Json) => boolean {
  return (r) => {
    let changed = false;
    for (const { value, type } of model.objects(r)) if (change(value, type)) changed = true;
    return changed;
  };
}

/** The element names an expression mentions (`low.exists() or high.exists()` -> low, high). */
function namesIn(expression: string): string[] {
  return [...expression.replace(/'(?:[^'\\]|\\.)*'/g, '').matchAll(/(?<![%$\w])[a-z][A-Za-z0-9]*/g)].map((m) => m[0]);
}

const MUTATIONS: [string, (r: Json) => boolean][] = [
  // Remove every element the invariants on a value name: "x.exists() or y.exists()" fails.
  ['strip the named elements', (r) => {
    let changed = false;
    for (const app of model.applications(r)) {
      if (app.focus === null || typeof app.focus !== 'object' || app.focus === r) continue;
      for (const name of namesIn(app.invariant.expression)) {
        const focus = app.focus as Json;
        for (const key of Object.keys(focus)) {
          if (key === name || (key.startsWith(name) && /^[A-Z]/.test(key.slice(name.length)))) {
            delete focus[key];
            changed = true;
          }
        }
      }
    }
    return changed;
  }],
  ['swap bounds', everywhere((v, type) => {
    if (type === 'Period' && v.start !== undefined && v.end !== undefined) [v.start, v.end] = [v.end, v.start];
    else if (type === 'Period' && v.start !== undefined) v.end = '1900';
    else if (type === 'Range' && v.low !== undefined && v.high !== undefined) [v.low, v.high] = [v.high, v.low];
    else if (type === 'Range') [v.low, v.high] = [{ value: 5, system: 'http://unitsofmeasure.org', code: 'g' }, { value: 4000, system: 'http://unitsofmeasure.org', code: 'mg' }];
    else if (type === 'Timing.repeat') Object.assign(v, { duration: -1, period: -2, offset: 5, periodMax: 3 });
    else if (type === 'MedicationDispense') Object.assign(v, { whenPrepared: '2020-02-01T10:00:00Z', whenHandedOver: '2020-01-01' });
    else if (type === 'Task') Object.assign(v, { authoredOn: '2021-01-01T10:00:00+01:00', lastModified: '2021-01-01T08:00:00Z' });
    else if (type === 'ElementDefinition' && v.max !== undefined) Object.assign(v, { min: 3, max: '2' });
    else return false;
    return true;
  })],
  ['add what an invariant forbids', everywhere((v, type) => {
    if (type === 'Observation') Object.assign(v, { dataAbsentReason: { text: 'unknown' }, valueString: 'x' });
    else if (type === 'Extension') v.extension = [{ url: 'http://example.org/x', valueBoolean: true }];
    else if (type === 'Reference') v.reference = '#not-contained';
    else if (type === 'Bundle') Object.assign(v, { total: 3, type: 'document' });
    else if (type === 'Bundle.entry') v.fullUrl = 'http://example.org/Patient/1/_history/2';
    else if (type === 'Quantity' || type === 'SimpleQuantity' || type === 'Age' || type === 'Duration') Object.assign(v, { code: 'mg', value: -1, system: undefined });
    else if (type === 'Patient.contact') for (const k of ['name', 'telecom', 'address', 'organization']) delete v[k];
    else if (type === 'StructureDefinition' && Array.isArray((v.snapshot as Json | undefined)?.element)) {
      ((v.snapshot as Json).element as Json[]).reverse();
    } else if (type === 'Questionnaire.item') Object.assign(v, { type: 'display', required: true, code: [{ code: 'x' }] });
    else if (type === 'Condition') Object.assign(v, { abatementString: 'gone', clinicalStatus: undefined });
    else return false;
    return true;
  })],
  // Primitive values with extensions only (`_start` without `start`), and as choice elements.
  ['values to extensions', everywhere((v) => {
    let changed = false;
    for (const key of Object.keys(v)) {
      const x = v[key];
      if (key.startsWith('_') || key === 'resourceType' || key === 'id' || key === 'url' || (typeof x !== 'string' && typeof x !== 'boolean')) continue;
      delete v[key];
      v[`_${key}`] = { extension: [{ url: 'http://example.org/absent', valueCode: 'unknown' }] };
      changed = true;
      break;
    }
    return changed;
  })],
  // Dates of different precision compare as empty: the invariant holds.
  ['partial dates', everywhere((v, type) => {
    if (type !== 'Period' || v.start === undefined) return false;
    Object.assign(v, { start: String(v.start).slice(0, 4), end: `${String(v.start).slice(0, 4)}-06-15T10:00:00Z` });
    return true;
  })],
];

// ---------------------------------------------------------------------------------------------------
// Operators and functions
// ---------------------------------------------------------------------------------------------------

/** `E` on `focus` as 'true', 'false', 'empty' or 'other' (an error, or not a single Boolean). */
function result(expression: string, focus: unknown = {}, focusType?: string, resource: unknown = focus): string {
  const ctx = { resource, rootResource: resource };
  // An evaluation error is 'other' (it fails the invariant: caught here as neither true nor false).
  const holds = (e: string) => {
    try {
      return compileInvariant(e, types)(focus, focusType, ctx);
    } catch (err) {
      if (!(err instanceof FhirPathEvaluationError)) throw err;
      return true;
    }
  };
  if (!holds(expression)) return 'false';
  if (!holds(`(${expression}).not()`)) return 'true';
  if (!holds(`(${expression}).exists()`)) return 'empty';
  return 'other';
}

describe('three-valued logic', () => {
  const values = { true: 'true', false: 'false', empty: '{}' } as const;
  type V = keyof typeof values;
  const and = (a: V, b: V): V => (a === 'false' || b === 'false' ? 'false' : a === 'true' && b === 'true' ? 'true' : 'empty');
  const or = (a: V, b: V): V => (a === 'true' || b === 'true' ? 'true' : a === 'false' && b === 'false' ? 'false' : 'empty');
  const xor = (a: V, b: V): V => (a === 'empty' || b === 'empty' ? 'empty' : a !== b ? 'true' : 'false');
  const implies = (a: V, b: V): V => (a === 'false' || b === 'true' ? 'true' : a === 'true' && b === 'false' ? 'false' : 'empty');
  for (const a of Object.keys(values) as V[]) {
    for (const b of Object.keys(values) as V[]) {
      test(`${a} op ${b}`, () => {
        expect(result(`${values[a]} and ${values[b]}`)).toBe(and(a, b));
        expect(result(`${values[a]} or ${values[b]}`)).toBe(or(a, b));
        expect(result(`${values[a]} xor ${values[b]}`)).toBe(xor(a, b));
        expect(result(`${values[a]} implies ${values[b]}`)).toBe(implies(a, b));
      });
    }
  }

  test('not() and singleton evaluation', () => {
    expect(result('true.not()')).toBe('false');
    expect(result('{}.not()')).toBe('empty');
    expect(result("'text'.not()")).toBe('false');
    // A collection of many in a Boolean context is an error: the invariant holds.
    expect(result("('a' | 'b') and true")).toBe('other');
    // The right operand is not evaluated when the left one decides.
    expect(result("false and ('a' | 'b').single().exists()")).toBe('false');
    expect(result("true or ('a' | 'b').single().exists()")).toBe('true');
  });
});

describe('dates, dateTimes and times', () => {
  test('comparison at the common precision; different precision and equal -> empty', () => {
    expect(result('@2020 < @2020-01-02')).toBe('empty');
    expect(result('@2019 < @2020-01-02')).toBe('true');
    expect(result('@2020-01-02 < @2020')).toBe('empty');
    expect(result('@2020-01 = @2020-01-15')).toBe('empty');
    expect(result('@2020-02 = @2020-01-15')).toBe('false');
    expect(result('@2020-01-01T10:00:00Z = @2020-01-01T12:00:00+02:00')).toBe('true');
    expect(result('@2020-01-01T10:00:00Z < @2020-01-01T11:00:00+02:00')).toBe('false');
    // Seconds and milliseconds are one precision.
    expect(result('@2020-01-01T10:00:00Z = @2020-01-01T10:00:00.000Z')).toBe('true');
    expect(result('@2020-01-01T10:00:00Z < @2020-01-01T10:00:00.500Z')).toBe('true');
    // A day against a time normalised to UTC.
    expect(result('@2020-01-01 < @2020-01-02T01:00:00+05:00')).toBe('empty');
    expect(result('@2020-01-01 < @2020-01-02T06:00:00+05:00')).toBe('true');
    expect(result('@T10:00 < @T10:30:00')).toBe('true');
    expect(result('@T10 = @T10:30')).toBe('empty');
    expect(result('@2020-01-01 ~ @2020-01-01T00:00:00Z')).toBe('false');
  });

  test('FHIR date elements are compared as dates, not text (per-1, mdd-1)', () => {
    const per1 = model.declared.find((d) => d.key === 'per-1')!.expression;
    expect(result(per1, { start: '2020-01-01', end: '2020-01-01T10:00:00Z' }, 'Period')).toBe('empty');
    expect(result(per1, { start: '2020-01-02', end: '2020-01-01T10:00:00Z' }, 'Period')).toBe('false');
    expect(result(per1, { start: '2020-01-01T10:00:00+01:00', end: '2020-01-01T09:30:00Z' }, 'Period')).toBe('true');
    expect(result(per1, { start: '2021', end: '2020-12-31' }, 'Period')).toBe('false');
    expect(result(per1, { start: '2020', end: '2020-12-31' }, 'Period')).toBe('empty');
    // A value with extensions only has no value: the first branch holds.
    expect(result(per1, { _start: { extension: [{ url: 'u', valueCode: 'x' }] }, end: '2020' }, 'Period')).toBe('true');
    const mdd1 = model.declared.find((d) => d.key === 'mdd-1')!.expression;
    const dispense = (whenPrepared: string, whenHandedOver: string) => ({ resourceType: 'MedicationDispense', whenPrepared, whenHandedOver });
    // 2020-01-01T23:00:00-02:00 is 2020-01-02 in UTC: the same day, different precision.
    expect(result(mdd1, dispense('2020-01-02', '2020-01-01T23:00:00-02:00'), 'MedicationDispense')).toBe('empty');
    expect(result(mdd1, dispense('2020-01-02', '2020-01-02T23:00:00-02:00'), 'MedicationDispense')).toBe('true');
    expect(result(mdd1, dispense('2020-01-02T10:00:00Z', '2020-01-02T09:00:00Z'), 'MedicationDispense')).toBe('false');
  });
});

describe('quantities (rng-2, age-1)', () => {
  test('~ on quantities: values rounded to the less precise, converted into its unit; = exact', () => {
    expect(result("1.5 'g' ~ 1.54 'g'")).toBe('true');
    expect(result("1.5 'g' ~ 1.56 'g'")).toBe('false');
    expect(result("1.5 'g' = 1.54 'g'")).toBe('false');
    // 1000.4 mg is 1.0004 g: 1 g at its precision, a whole gram; 1499 mg is no 1.5 g in whole milligrams, either way round.
    expect(result("1 'g' ~ 1000.4 'mg'")).toBe('true');
    expect(result("1000.4 'mg' ~ 1 'g'")).toBe('true');
    expect(result("1 'g' = 1000.4 'mg'")).toBe('false');
    expect(result("1499 'mg' ~ 1.5 'g'")).toBe('false');
    expect(result("1.5 'g' ~ 1499 'mg'")).toBe('false');
    expect(result("1.5 'g' ~ 1500 'mg'")).toBe('true');
    // Temperatures by their offsets: 37 Cel is 98.6 [degF].
    expect(result("37 'Cel' ~ 98.6 '[degF]'")).toBe('true');
    expect(result("37.0 'Cel' ~ 98.64 '[degF]'")).toBe('true');
    // Units of different dimensions are not equivalent; nor are quantities without a number.
    expect(result("1 'g' ~ 1 'mL'")).toBe('false');
    expect(result("1 'g' !~ 1 'mL'")).toBe('true');
    // FHIR Quantities: UCUM codes, and the same unit text without a code.
    expect(result('low ~ high', { low: { value: 2.5, system: 'http://unitsofmeasure.org', code: 'mg' }, high: { value: 2.54, system: 'http://unitsofmeasure.org', code: 'mg' } }, 'Range')).toBe('true');
    expect(result('low ~ high', { low: { value: 2.5, system: 'http://unitsofmeasure.org', code: 'mg' }, high: { value: 2540.4, system: 'http://unitsofmeasure.org', code: 'ug' } }, 'Range')).toBe('true');
    expect(result('low ~ high', { low: { value: 2.5, system: 'http://unitsofmeasure.org', code: 'mg' }, high: { value: 2504, system: 'http://unitsofmeasure.org', code: 'ug' } }, 'Range')).toBe('false');
    expect(result('low ~ high', { low: { value: 2.5, unit: 'tablet' }, high: { value: 2.46, unit: 'tablet' } }, 'Range')).toBe('true');
    expect(result('low ~ high', { low: { value: 2.5, unit: 'tablet' }, high: { value: 2.46, unit: 'capsule' } }, 'Range')).toBe('false');
  });

  const rng2 = () => model.declared.find((d) => d.key === 'rng-2')!.expression;
  const ucum = (value: number, code: string) => ({ value, system: 'http://unitsofmeasure.org', code });
  test('same units compare by value, UCUM units by their scale, others are empty', () => {
    expect(result(rng2(), { low: ucum(1, 'mg'), high: ucum(2, 'mg') }, 'Range')).toBe('true');
    expect(result(rng2(), { low: ucum(5, 'mg'), high: ucum(1, 'mg') }, 'Range')).toBe('false');
    expect(result(rng2(), { low: ucum(2, 'g'), high: ucum(1500, 'mg') }, 'Range')).toBe('false');
    expect(result(rng2(), { low: ucum(1, 'g'), high: ucum(1500, 'mg') }, 'Range')).toBe('true');
    expect(result(rng2(), { low: ucum(1, 'g'), high: ucum(1, 'mL') }, 'Range')).toBe('empty');
    expect(result(rng2(), { low: { value: 3, unit: 'tablets' }, high: { value: 2, unit: 'tablets' } }, 'Range')).toBe('false');
    expect(result(rng2(), { low: { ...ucum(3, 'g'), comparator: '>' }, high: ucum(2, 'g') }, 'Range')).toBe('empty');
    // No unit on either side: plain numbers, as HL7's validator compares them (a probability Range of 0.2 to 0.9).
    expect(result(rng2(), { low: { value: 0.2 }, high: { value: 0.9 } }, 'Range')).toBe('true');
    expect(result(rng2(), { low: { value: 0.9 }, high: { value: 0.2 } }, 'Range')).toBe('false');
    expect(result(rng2(), { low: { value: 0.2 }, high: ucum(0.9, '%') }, 'Range')).toBe('empty');
    // One code and the same unit text on both sides: ordered by value, as HL7's validator orders them by their unit texts.
    expect(result(rng2(), { low: { ...ucum(1, 'mg'), unit: 'mg' }, high: { value: 5, unit: 'mg' } }, 'Range')).toBe('true');
    expect(result(rng2(), { low: { value: 5, unit: 'mg' }, high: { ...ucum(1, 'mg'), unit: 'mg' } }, 'Range')).toBe('false');
    expect(result(rng2(), { low: { ...ucum(1, 'g'), unit: 'x' }, high: { ...ucum(1, 'mL'), unit: 'x' } }, 'Range')).toBe('empty');
    expect(result(rng2(), { low: { ...ucum(1, 'mg'), unit: 'mg' }, high: { value: 5, unit: 'milligram' } }, 'Range')).toBe('empty');
    // Differing unit texts: an uncoded side whose text is a UCUM unit is that unit, the other side's code or one converted to it.
    expect(result(rng2(), { low: { value: 1, unit: 'mg/dL' }, high: { ...ucum(5, 'mg/dL'), unit: 'milligram per deciliter' } }, 'Range')).toBe('true');
    expect(result(rng2(), { low: { value: 7, unit: 'mg/dL' }, high: { ...ucum(5, 'mg/dL'), unit: 'milligram per deciliter' } }, 'Range')).toBe('false');
    expect(result(rng2(), { low: { ...ucum(500, 'mg'), unit: 'milligram' }, high: { value: 2, unit: 'g' } }, 'Range')).toBe('true');
    expect(result(rng2(), { low: { ...ucum(5000, 'mg'), unit: 'milligram' }, high: { value: 2, unit: 'g' } }, 'Range')).toBe('false');
    expect(result(rng2(), { low: { value: 500, unit: 'mg' }, high: { value: 2, unit: 'g' } }, 'Range')).toBe('true');
    // What names no UCUM unit, or another dimension, or a text under another system, orders nothing.
    expect(result(rng2(), { low: { value: 1, unit: 'tablet' }, high: { value: 2, unit: 'tablets' } }, 'Range')).toBe('empty');
    expect(result(rng2(), { low: { value: 1, unit: 'g' }, high: { ...ucum(2, 'mL'), unit: 'millilitre' } }, 'Range')).toBe('empty');
    expect(result(rng2(), { low: { value: 1, unit: 'mg', system: 'http://snomed.info/sct' }, high: { ...ucum(2, 'g'), unit: 'gram' } }, 'Range')).toBe('empty');
  });

  test('compound UCUM units compare in their canonical units: quotients, products, exponents, annotations, 10*n, temperatures', () => {
    // 80 mg/dL is 0.8 g/L: below 1 g/L, above 0.5 g/L.
    expect(result(rng2(), { low: ucum(80, 'mg/dL'), high: ucum(1, 'g/L') }, 'Range')).toBe('true');
    expect(result(rng2(), { low: ucum(80, 'mg/dL'), high: ucum(0.5, 'g/L') }, 'Range')).toBe('false');
    // An uncoded side whose text is a compound UCUM unit, converted too.
    expect(result(rng2(), { low: { value: 80, unit: 'mg/dL' }, high: { ...ucum(1, 'g/L'), unit: 'gram per litre' } }, 'Range')).toBe('true');
    expect(result(rng2(), { low: { value: 120, unit: 'mg/dL' }, high: { ...ucum(1, 'g/L'), unit: 'gram per litre' } }, 'Range')).toBe('false');
    // Products and exponents: 1 kg.m/s2 is 1 N; 1 m2 is 10,000 cm2.
    expect(result(rng2(), { low: ucum(900, 'g.m.s-2'), high: ucum(1, 'N') }, 'Range')).toBe('true');
    expect(result(rng2(), { low: ucum(1, 'm2'), high: ucum(9000, 'cm2') }, 'Range')).toBe('false');
    // 10*n and annotations: 4.5 10*9/L is 4500 {cells}/uL; a rate per minute in seconds.
    expect(result(rng2(), { low: ucum(4.5, '10*9/L'), high: ucum(4600, '{cells}/uL') }, 'Range')).toBe('true');
    expect(result(rng2(), { low: ucum(4.5, '10*9/L'), high: ucum(4400, '{cells}/uL') }, 'Range')).toBe('false');
    expect(result(rng2(), { low: ucum(60, '{beats}/min'), high: ucum(1.5, '/s') }, 'Range')).toBe('true');
    // Customary units: 150 [lb_av] is 68.04 kg; mm[Hg] and kPa.
    expect(result(rng2(), { low: ucum(68, 'kg'), high: ucum(150, '[lb_av]') }, 'Range')).toBe('true');
    expect(result(rng2(), { low: ucum(69, 'kg'), high: ucum(150, '[lb_av]') }, 'Range')).toBe('false');
    expect(result(rng2(), { low: ucum(120, 'mm[Hg]'), high: ucum(16.1, 'kPa') }, 'Range')).toBe('true');
    // Every atom of UCUM's essence: 2 [psi] is 13.79 kPa; an arbitrary unit with its own prefixed forms; a logarithm (pH) with nothing.
    expect(result(rng2(), { low: ucum(2, '[psi]'), high: ucum(14, 'kPa') }, 'Range')).toBe('true');
    expect(result(rng2(), { low: ucum(2, '[psi]'), high: ucum(13, 'kPa') }, 'Range')).toBe('false');
    expect(result(rng2(), { low: ucum(3, '[CFU]/mL'), high: ucum(2000, '[CFU]/L') }, 'Range')).toBe('false');
    expect(result(rng2(), { low: ucum(3, '[CFU]/mL'), high: ucum(2000, '[PFU]/L') }, 'Range')).toBe('empty');
    expect(result(rng2(), { low: ucum(7, '[pH]'), high: ucum(1, 'mol/L') }, 'Range')).toBe('empty');
    // Special units by their offsets: 37 Cel is 98.6 [degF].
    expect(result(rng2(), { low: ucum(37, 'Cel'), high: ucum(99, '[degF]') }, 'Range')).toBe('true');
    expect(result(rng2(), { low: ucum(37, 'Cel'), high: ucum(98, '[degF]') }, 'Range')).toBe('false');
    // Different dimensions, and units without a canonical form, stay unordered.
    expect(result(rng2(), { low: ucum(80, 'mg/dL'), high: ucum(5, 'mmol/L') }, 'Range')).toBe('empty');
    expect(result(rng2(), { low: ucum(1, 'Cel/h'), high: ucum(2, 'K/h') }, 'Range')).toBe('empty');
    // FHIRPath's own quantity literals and `=` convert the same way.
    expect(result("1 'g/L' = 100 'mg/dL'", {}, 'Range')).toBe('true');
    expect(result("1 'g/L' > 99 'mg/dL'", {}, 'Range')).toBe('true');
    const age1 = model.declared.find((d) => d.key === 'age-1')!.expression;
    expect(result(age1, { value: -1, system: 'http://unitsofmeasure.org', code: 'a' }, 'Age')).toBe('false');
    expect(result(age1, { value: 3, system: 'http://unitsofmeasure.org', code: 'a' }, 'Age')).toBe('true');
  });
});

describe('choice elements and types', () => {
  const obs = { resourceType: 'Observation', status: 'final', code: { text: 'x' }, valueQuantity: { value: 7, unit: 'mg', system: 'http://unitsofmeasure.org', code: 'mg' } };
  const str = { resourceType: 'Observation', status: 'final', code: { text: 'x' }, valueString: 'high' };
  test('`value` finds valueQuantity and knows its type', () => {
    expect(result('value.exists()', obs, 'Observation')).toBe('true');
    expect(result('value is Quantity', obs, 'Observation')).toBe('true');
    expect(result('value.is(FHIR.Quantity)', obs, 'Observation')).toBe('true');
    expect(result('value is string', obs, 'Observation')).toBe('false');
    expect(result('value.ofType(Quantity).value > 5', obs, 'Observation')).toBe('true');
    expect(result("(value as Quantity).unit = 'mg'", obs, 'Observation')).toBe('true');
    expect(result('Observation.value.as(Quantity).value = 7', obs, 'Observation')).toBe('true');
    expect(result('value.value < 5', obs, 'Observation')).toBe('false');
    expect(result("value = 'high'", str, 'Observation')).toBe('true');
    expect(result('value is string', str, 'Observation')).toBe('true');
    expect(result('value.is(System.String)', str, 'Observation')).toBe('false');
    expect(result('value.ofType(Quantity).exists()', str, 'Observation')).toBe('false');
    expect(result('Patient.id.exists()', obs, 'Observation')).toBe('false');
  });

  test('subtypes: Age is a Quantity, code is a string, canonical a uri, a resource a DomainResource', () => {
    const fmh = { resourceType: 'FamilyMemberHistory', ageAge: { value: 40, system: 'http://unitsofmeasure.org', code: 'a' } };
    expect(result('age is Quantity', fmh, 'FamilyMemberHistory')).toBe('true');
    expect(result('age is Age', fmh, 'FamilyMemberHistory')).toBe('true');
    expect(result('status is string', { resourceType: 'Observation', status: 'final' }, 'Observation')).toBe('true');
    expect(result('$this is DomainResource', obs, 'Observation')).toBe('true');
    expect(result('$this is Resource', { resourceType: 'Bundle' }, 'Bundle')).toBe('true');
    expect(result('$this is DomainResource', { resourceType: 'Bundle' }, 'Bundle')).toBe('false');
    expect(result("'a' is String", {})).toBe('true');
    expect(result('1 is System.Integer and 1.5 is Decimal', {})).toBe('true');
  });

  test('resources in Bundle.entry and contained are typed by resourceType', () => {
    const bundle = { resourceType: 'Bundle', type: 'collection', entry: [{ resource: { resourceType: 'Patient', birthDate: '1970' } }, { resource: obs }] };
    expect(result('entry.first().resource.is(Patient)', bundle, 'Bundle')).toBe('true');
    expect(result('entry.resource.ofType(Patient).birthDate < @1980', bundle, 'Bundle')).toBe('true');
    expect(result('entry.resource.ofType(Observation).value.value = 7', bundle, 'Bundle')).toBe('true');
    expect(result("entry.resource.where($this is Observation).status = 'final'", bundle, 'Bundle')).toBe('true');
    const withContained = { resourceType: 'Patient', contained: [{ resourceType: 'Organization', id: 'o1' }], managingOrganization: { reference: '#o1' } };
    const ref1 = model.declared.find((d) => d.key === 'ref-1')!.expression;
    expect(result(ref1, withContained.managingOrganization, 'Reference', withContained)).toBe('true');
    expect(result(ref1, { reference: '#o2' }, 'Reference', withContained)).toBe('false');
    expect(result("contained.ofType(Organization).id = 'o1'", withContained, 'Patient')).toBe('true');
    expect(result('contained.ofType(Organization).id', withContained, 'Patient')).toBe('true');
    expect(result('contained.ofType(Patient).id', withContained, 'Patient')).toBe('empty');
  });
});

describe('primitive values with extensions', () => {
  const ext = { url: 'http://example.org/reason', valueCode: 'unknown' };
  test('a `_name` sibling alone: the element exists, has no value, has extensions', () => {
    const p = { resourceType: 'Patient', _birthDate: { extension: [ext] } };
    expect(result('birthDate.exists()', p, 'Patient')).toBe('true');
    expect(result('birthDate.hasValue()', p, 'Patient')).toBe('false');
    expect(result('birthDate.extension.exists()', p, 'Patient')).toBe('true');
    expect(result("birthDate.extension('http://example.org/reason').value = 'unknown'", p, 'Patient')).toBe('true');
    expect(result("birthDate.extension('http://example.org/other').exists()", p, 'Patient')).toBe('false');
    expect(result('birthDate.children().count() = 1', p, 'Patient')).toBe('true');
  });

  test('a value with extensions, and arrays paired by position', () => {
    const p = { resourceType: 'Patient', birthDate: '1970-01-01', _birthDate: { id: 'b', extension: [ext] }, name: [{ given: ['Ann', null, 'Eve'], _given: [null, { extension: [ext] }, null] }] };
    expect(result('birthDate.hasValue() and birthDate.extension.exists()', p, 'Patient')).toBe('true');
    expect(result("birthDate.id = 'b' and birthDate = @1970-01-01", p, 'Patient')).toBe('true');
    // A date is not a string: equal text is not an equal value.
    expect(result("birthDate = '1970-01-01'", p, 'Patient')).toBe('false');
    expect(result('name.given.count() = 3', p, 'Patient')).toBe('true');
    expect(result('name.given[1].hasValue()', p, 'Patient')).toBe('false');
    expect(result("name.given[2] = 'Eve'", p, 'Patient')).toBe('true');
    expect(result("name.given.where(extension.exists()).count() = 1 and name.given.where(hasValue()).count() = 2", p, 'Patient')).toBe('true');
  });
});

describe('functions', () => {
  const q = {
    resourceType: 'Questionnaire',
    status: 'draft',
    item: [
      { linkId: '1', type: 'group', item: [{ linkId: '1.1', type: 'string' }, { linkId: '1.2', type: 'boolean' }] },
      { linkId: '2', type: 'display', text: 'It\'s "quoted"' },
    ],
  };
  const cases: [string, string][] = [
    ['item.count() = 2 and item.item.count() = 2', 'true'],
    ["item.where(type = 'group').item.select(linkId) = ('1.1' | '1.2')", 'true'],
    ['item.all(linkId.exists()) and item.item.all(type.exists())', 'true'],
    ["item.exists(type = 'display') and item.exists(type = 'choice').not()", 'true'],
    ['descendants().linkId.isDistinct() and descendants().linkId.count() = 4', 'true'],
    ["(item.linkId | item.linkId).count() = 2 and item.linkId.combine(item.linkId).count() = 4 and item.linkId.union('3').count() = 3", 'true'],
    ["item.linkId.distinct().count() = 2 and ('a' | 'a' | 'b').count() = 2", 'true'],
    ["item.first().linkId = '1' and item.last().linkId = '2' and item.tail().linkId = '2' and item.skip(1).take(1).linkId = '2'", 'true'],
    ['item.single().exists()', 'other'],
    ["item.where(linkId = '2').single().type = 'display'", 'true'],
    ["iif(status = 'draft', 'd', 'x') = 'd' and iif(false, 1).empty()", 'true'],
    ["item[1].text = 'It\\'s \"quoted\"'", 'true'],
    ["'a\\tb'.length() = 3 and '\\u0041' = 'A' and 'x\\\\y'.length() = 3", 'true'],
    ["'abcdef'.substring(2, 2) = 'cd' and 'abc'.substring(5).empty() and 'abc'.indexOf('c') = 2", 'true'],
    ["'Hello'.startsWith('He') and 'Hello'.endsWith('lo') and 'Hello'.contains('ell') and 'Hello'.lower() = 'hello' and 'Hello'.upper() = 'HELLO'", 'true'],
    ["'a.b.c'.replace('.', '/') = 'a/b/c' and 'Patient.name'.replaceMatches('\\\\..*', '') = 'Patient'", 'true'],
    ["'urn:oid:1.2'.matches('^urn:oid:[0-9.]+$') and 'ab'.matches('b')", 'true'],
    ["'12'.toInteger() + 1 = 13 and '1.5'.toInteger().empty() and 1.5.toString() = '1.5' and true.toString() = 'true'", 'true'],
    ["'a' & {} & 'b' = 'ab' and ('a' + 'b') = 'ab' and (1 + 2 * 3) = 7 and 7 div 2 = 3 and 7 mod 2 = 1", 'true'],
    ["'display' in ('group' | 'display') and ('group' | 'display') contains 'group' and ('x' in {}).not()", 'true'],
    ["item.select($index) = (0 | 1) and item.where($index = 1).linkId = '2'", 'true'],
    ['item.linkId.trace(\'ids\').count() = 2 and %resource.item.count() = 2 and %rootResource.status = \'draft\'', 'true'],
    ["%ucum = 'http://unitsofmeasure.org' and %context.status = 'draft'", 'true'],
    ["item.`type`.first() = 'group'", 'true'],
    ["(item.linkId | '9').intersect('1' | '9').count() = 2 and ('1' | '2').exclude('2') = '1'", 'true'],
    ["item.select(type = 'group').allTrue().not() and item.select(type = 'x').allFalse() and item.select(type = 'group').anyTrue()", 'true'],
    ['children().count() = 3 and item.children().count() = 7', 'true'],
    ['item.linkId.subsetOf(descendants().linkId) and descendants().linkId.supersetOf(item.linkId)', 'true'],
    ["item.item.repeat(item).empty() and item.repeat(item).linkId.count() = 2", 'true'],
    ["'a' ~ 'A' and 'a\tb' ~ 'A b' and ('a b' ~ 'A  b').not() and 1.0 ~ 1 and ('a' !~ 'b')", 'true'],
    ["{} = {}", 'empty'],
    ["status in ('draft' | 'active') and (status in ('x' | 'y')).not() and ('1' | 1 | '1').count() = 2 and status != 'active'", 'true'],
    ["item.where(linkId).count() = 2 and item.where(type = 'group' or {}).count() = 1", 'true'],
    ["('a' | 'b') = ('a' | 'b') and ('a' | 'b') != ('b' | 'a')", 'true'],
    // Membership in more than 8 items goes by key: the same answers as item by item.
    ["5 in (1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 | 10) and ('5' in (1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 | 10)).not() and '5' in (1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 | 10).select(toString())", 'true'],
    ["@2020-01-01 in (@2019 | @2020-01-01 | @2021 | @2022 | @2023 | @2024 | @2025 | @2026 | @2027 | @2028) and (@2020 in (@2020-01-01 | @2021 | @2022 | @2023 | @2024 | @2025 | @2026 | @2027 | @2028 | @2029)).not()", 'true'],
    ['item.first() in item.combine(item).combine(item).combine(item).combine(item) and item.intersect(item.combine(item).combine(item).combine(item).combine(item)).count() = 2', 'true'],
    ["item.exclude(item.combine(item).combine(item).combine(item).combine(item)).empty() and item.linkId.subsetOf(item.linkId.combine('a' | 'b' | 'c' | 'd' | 'e' | 'f' | 'g' | 'h'))", 'true'],
    ["(true | false).combine(true | false).combine(true | false).combine(true | false).combine(true | false) contains false and (1.5 | 2.5 | 3 | 4 | 5 | 6 | 7 | 8 | 9 | 10) contains 1.50", 'true'],
  ];
  for (const [expression, expected] of cases) {
    test(expression, () => expect(result(expression, q, 'Questionnaire')).toBe(expected));
  }
});

describe('compilation and run-time errors', () => {
  test('a syntax error names the expression and the position', () => {
    expect(() => compileInvariant('name.exists(', types)).toThrow(FhirPathSyntaxError);
    expect(() => compileInvariant('name.exists(', types)).toThrow(/at 12\): name\.exists\($/);
    expect(() => compileInvariant("name = 'x", types)).toThrow(/unterminated literal at 7/);
    expect(() => compileInvariant('a.where(b', types)).toThrow(FhirPathSyntaxError);
    expect(() => compileInvariant('first(1)', types)).toThrow(/first\(\) takes 0 argument/);
    expect(() => compileInvariant("code.matches('[')", types)).toThrow(/invalid regular expression.* at 13\)/);
  });

  test('a construct needing a server or terminology is UnsupportedFhirPath, with its position', () => {
    for (const [expression, at] of [['subject.resolve() is Patient', 8], ["code.memberOf('http://x')", 5], ['conformsTo(\'http://x\')', 0], ['%terminologies.exists()', 0]] as const) {
      expect(() => compileInvariant(expression, types)).toThrow(UnsupportedFhirPath);
      expect(() => compileInvariant(expression, types)).toThrow(new RegExp(` at ${at}\\): `));
    }
    expect(() => compileInvariant('foo()', types)).toThrow(/unknown function foo\(\)/);
  });

  test('an evaluation gives a Boolean or throws FhirPathEvaluationError (the invariant fails), nothing else, whatever the focus', () => {
    const fns = model.declared.map((d) => { try { return compileInvariant(d.expression, types); } catch { return undefined; } }).filter((f) => f !== undefined);
    for (const focus of [null, undefined, 0, 'x', [], [1, 2], { resourceType: 'Unknown', a: [null] }, { start: 5, end: {} }, { value: 'NaN' }]) {
      for (const fn of fns) {
        for (const type of [undefined, 'Period', 'Patient', 'Questionnaire.item']) {
          try {
            expect(typeof fn(focus, type, { resource: focus, rootResource: undefined })).toBe('boolean');
          } catch (err) {
            expect(err).toBeInstanceOf(FhirPathEvaluationError);
          }
        }
      }
    }
  });

  test("a run-time error is thrown as FhirPathEvaluationError, an R4 invariant's too (it held until the fifty-fifth session)", () => {
    const patient = { resourceType: 'Patient', name: [{ given: ['a', 'b'] }] };
    expect(() => compileInvariant("name.given.single() = 'a'", types)(patient, 'Patient', { resource: patient, rootResource: patient })).toThrow(FhirPathEvaluationError);
    expect(() => compileInvariant("name.given.single() = 'a'", types)(patient, 'Patient', { resource: patient, rootResource: patient })).toThrow('single() on many');
    expect(compileInvariant("name.given.first() = 'a'", types)(patient, 'Patient', { resource: patient, rootResource: patient })).toBe(true);
  });

  test("the engine's own fault while evaluating a client's expression is a FhirPathEvaluationError naming it, never another error", () => {
    // A model that fails where it is asked at run time (the type of an untyped item's member): an engine fault.
    const faulty = { elementType: (owner: string, name: string) => { if (name === 'given') throw new TypeError('the model failed'); return elementType(owner, name); } };
    const patient = { resourceType: 'Patient', name: [{ given: ['a'] }] };
    const ctx = { resource: patient, rootResource: patient };
    const values = compileValues('%resource.name.given', faulty);
    expect(() => values(patient, undefined, ctx)).toThrow(FhirPathEvaluationError);
    expect(() => values(patient, undefined, ctx)).toThrow('the evaluation failed (the model failed)');
    const criterion = compileCriterion(parseFhirPath("%resource.name.given = 'a'"), "%resource.name.given = 'a'", faulty);
    expect(() => criterion(patient, undefined, 0, ctx)).toThrow(FhirPathEvaluationError);
    const topic = compileTopicCriteria("%current.name.given = 'a'", faulty);
    expect(() => topic('Patient', { previous: undefined, current: patient }, { left: 1000, limit: 1000 })).toThrow(FhirPathEvaluationError);
    const invariant = compileInvariant("%resource.name.given = 'a'", faulty, true, true);
    expect(() => invariant(patient, undefined, ctx)).toThrow(FhirPathEvaluationError);
    // One stack too deep is said so.
    const deep = { elementType: () => { throw new RangeError('Maximum call stack size exceeded'); } };
    expect(() => compileValues('%resource.name', deep)(patient, undefined, ctx)).toThrow('the expression nests too deeply to evaluate');
  });
});

describe('the counts', () => {
  test('the differential test compared evaluations, some of them failing', () => {
    const examples = counts.examples;
    const mutations = counts.mutations;
    if (examples === undefined || mutations === undefined) return;
    expect(examples.compared + mutations.compared).toBeGreaterThan(FULL ? 1_000_000 : 200_000);
    expect(mutations.failing).toBeGreaterThan(0);
    if (process.env.FHIRPATH_COUNTS) {
      console.log(JSON.stringify({
        examples: { ...examples, failingKeys: [...examples.failingKeys].sort(), cinderErrors: [...examples.cinderErrors].sort() },
        mutations: { ...mutations, failingKeys: [...mutations.failingKeys].sort(), cinderErrors: [...mutations.cinderErrors].sort() },
      }));
    }
  });
});

describe('a SubscriptionTopic fhirPathCriteria under its budget', () => {
  const current = { resourceType: 'Patient', id: 'p', name: [{ family: 'a'.repeat(1_000) }] };
  const run = (expression: string) => compileTopicCriteria(expression, { elementType })('Patient', { previous: undefined, current }, { left: 10_000, limit: 10_000 });

  test('repeat() counts each level it finds, so a projection that never ends stops at the budget', () => {
    // Each level a new value: it never ends. (`repeat($this)` ends: the node it finds again is no new item.)
    expect(() => run('%current.name.count().repeat($this + 1).count() > 0')).toThrow(FhirPathTooCostly);
    expect(run('%current.repeat($this).count() = 1')).toBe(true);
    expect(run("%current.name.repeat(family).count() = 1")).toBe(true);
  });

  test('=, ~, <, | and union() are charged the size of what they compare: comparing two large values again and again stops at the budget', () => {
    const version = () => ({ resourceType: 'Patient', id: 'p', text: { status: 'generated', div: `<div xmlns="http://www.w3.org/1999/xhtml">${'a'.repeat(100_000)}</div>` }, name: Array.from({ length: 50 }, (_, i) => ({ family: `f${i}` })) });
    const versions = { previous: version(), current: version() };
    const evaluate = (expression: string) => compileTopicCriteria(expression, { elementType })('Patient', versions, { left: 10_000, limit: 10_000 });
    for (const op of ['=', '~', '>=']) {
      expect(() => evaluate(`%current.name.where(%current.text.div ${op} %previous.text.div).count() > 0`)).toThrow(FhirPathTooCostly);
    }
    // Elements and resources are compared member by member, and keyed whole by `|`, union() and distinct().
    expect(() => evaluate('%current.name.where(%current = %previous).count() > 0')).toThrow(FhirPathTooCostly);
    expect(() => evaluate('%current.name.where((%current.text | %previous.text).count() = 1).count() > 0')).toThrow(FhirPathTooCostly);
    expect(() => evaluate('%current.name.where(%current.text.union(%previous.text).count() = 1).count() > 0')).toThrow(FhirPathTooCostly);
    expect(evaluate('%current.text.div = %previous.text.div')).toBe(true);
    expect(evaluate('(%current.text | %previous.text).count() = 1')).toBe(true);
  });

  test('toInteger() and toDecimal() are charged the string they read', () => {
    const digits = { resourceType: 'Patient', id: 'p', extension: [{ url: 'http://example.org/x', valueString: `${'1'.repeat(100_000)}x` }], name: Array.from({ length: 50 }, (_, i) => ({ family: `f${i}` })) };
    const evaluate = (expression: string) => compileTopicCriteria(expression, { elementType })('Patient', { previous: undefined, current: digits }, { left: 10_000, limit: 10_000 });
    for (const f of ['toInteger', 'toDecimal']) {
      expect(() => evaluate(`%current.name.select(%current.extension.value.${f}()).empty()`)).toThrow(FhirPathTooCostly);
      expect(evaluate(`%current.extension.value.${f}().empty()`)).toBe(true);
    }
  });

  test('replace() is charged the string it would make before it makes it', () => {
    expect(() => run("%current.name.family.replace('a', '" + 'b'.repeat(1_000) + "').length() > 0")).toThrow(FhirPathTooCostly);
    expect(run("%current.name.family.replace('a', 'bb').length() = 2000")).toBe(true);
  });
});
