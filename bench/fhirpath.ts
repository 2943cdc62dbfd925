/**
 * Invariant evaluation cost per resource: Cinder's compiled FHIRPath engine
 * (src/fhir/validation/fhirpath-engine.ts) beside HL7's FHIRPath.js (`fhirpath`, R4 model), both
 * compiled once per expression, on every resource of the FHIR R4 specification's examples
 * (`hl7.fhir.r4.examples`), each evaluating every invariant that applies to each of its values.
 *
 *   bun bench/fhirpath.ts [--rounds 5] [--fhirpath-rounds 1]
 *
 * Two sets of invariants: the ones the validator evaluates with the engine, and all of them
 * (with ele-1, ext-1 and dom-2..dom-6, which the validator checks natively). Cinder's figure is the
 * best of its rounds (FHIRPath.js's of its own).
 */
import { readdirSync } from 'node:fs';
import { parseArgs } from 'node:util';
import fhirpath from 'fhirpath';
import r4 from 'fhirpath/fhir-context/r4';
import { compileInvariant, UnsupportedFhirPath, type CompiledInvariant } from '../src/fhir/validation/fhirpath-engine.ts';
import { loadR4Model, type Application } from '../test/helpers/fhirpath-types.ts';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '5' }, 'fhirpath-rounds': { type: 'string', default: '1' } } });
const rounds = Number(values.rounds);
const fhirpathRounds = Number(values['fhirpath-rounds']);

process.env.TZ = 'UTC';
const NATIVE = new Set(['ele-1', 'ext-1', 'dom-2', 'dom-3', 'dom-4', 'dom-5', 'dom-6']);
const CONFORMANCE = new Set([
  'StructureDefinition', 'ValueSet', 'CodeSystem', 'ConceptMap', 'SearchParameter', 'OperationDefinition', 'CapabilityStatement',
  'ImplementationGuide', 'NamingSystem', 'CompartmentDefinition', 'StructureMap', 'GraphDefinition', 'MessageDefinition', 'TerminologyCapabilities',
]);

type FhirPathFn = (data: unknown, vars: Record<string, unknown>) => unknown[];
interface Evaluation {
  app: Application;
  cinder: CompiledInvariant;
  fhirpath: FhirPathFn;
}
interface Resource {
  group: string;
  all: Evaluation[];
  engine: Evaluation[];
}

const model = await loadR4Model();
const dir = new URL('../node_modules/hl7.fhir.r4.examples/', import.meta.url);
const cinderFns = new Map<string, CompiledInvariant | null>();
const fhirpathFns = new Map<string, FhirPathFn>();
const resources: Resource[] = [];
for (const file of readdirSync(dir).sort()) {
  if (!file.endsWith('.json') || file === 'package.json' || file === 'ig-r4.json') continue;
  const resource = (await Bun.file(new URL(file, dir)).json()) as Record<string, unknown>;
  if (typeof resource.resourceType !== 'string') continue;
  const type = resource.resourceType;
  const group = type === 'Bundle' ? 'Bundle' : CONFORMANCE.has(type) ? 'conformance and terminology' : 'clinical, administrative, financial';
  const r: Resource = { group, all: [], engine: [] };
  for (const app of model.applications(resource)) {
    const { expression } = app.invariant;
    let cinder = cinderFns.get(expression);
    if (cinder === undefined) {
      try {
        cinder = compileInvariant(expression, model.types);
      } catch (err) {
        if (!(err instanceof UnsupportedFhirPath)) throw err;
        cinder = null;
      }
      cinderFns.set(expression, cinder);
    }
    if (cinder === null) continue;
    const key = `${app.focusType}|${expression}`;
    let fp = fhirpathFns.get(key);
    if (fp === undefined) {
      fp = fhirpath.compile({ base: app.focusType, expression } as never, r4 as never, { traceFn: () => {} } as never) as unknown as FhirPathFn;
      fhirpathFns.set(key, fp);
    }
    const e = { app, cinder, fhirpath: fp };
    r.all.push(e);
    if (!NATIVE.has(app.invariant.key)) r.engine.push(e);
  }
  resources.push(r);
}

function runCinder(list: Evaluation[]): void {
  for (const { app, cinder } of list) cinder(app.focus, app.focusType, app);
}

function runFhirpath(list: Evaluation[]): void {
  for (const { app, fhirpath: fp } of list) {
    try {
      fp(app.focus, { resource: app.resource, rootResource: app.rootResource });
    } catch {
      // An error is an evaluation that holds.
    }
  }
}

/** Best total ms of `n` rounds of `run` over the evaluations of `group`. */
function best(run: (list: Evaluation[]) => void, group: Resource[], pick: (r: Resource) => Evaluation[], n: number): number {
  let min = Infinity;
  for (let i = 0; i < n; i++) {
    const t = Bun.nanoseconds();
    for (const r of group) run(pick(r));
    min = Math.min(min, (Bun.nanoseconds() - t) / 1e6);
  }
  return min;
}

const groups = ['clinical, administrative, financial', 'conformance and terminology', 'Bundle'];
for (const [title, pick] of [
  ['Invariants the validator evaluates with the engine', (r: Resource) => r.engine],
  ['All R4 invariants (with ele-1, ext-1, dom-2..dom-6)', (r: Resource) => r.all],
] as const) {
  console.log(`\n${title}\n`);
  console.log('| resources | count | evaluations | Cinder µs / resource | FHIRPath.js µs / resource | FHIRPath.js / Cinder |');
  console.log('|---|---:|---:|---:|---:|---:|');
  for (const group of [...groups, 'all']) {
    const list = resources.filter((r) => group === 'all' || r.group === group);
    const evaluations = list.reduce((n, r) => n + pick(r).length, 0);
    runCinder(list.flatMap(pick)); // warm-up
    const cinder = best(runCinder, list, pick, rounds);
    const fp = best(runFhirpath, list, pick, fhirpathRounds);
    const perResource = (ms: number) => ((ms * 1000) / list.length).toFixed(1);
    console.log(`| ${group} | ${list.length} | ${evaluations} | ${perResource(cinder)} | ${perResource(fp)} | ${(fp / cinder).toFixed(1)} |`);
  }
}
