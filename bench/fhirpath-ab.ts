/**
 * The FHIRPath engine of two checkouts side by side, in one process, paired rounds (the order alternating A B, B A,
 * ..., the first round a warm-up), timed in CPU milliseconds of the process (on a shared machine wall time mostly
 * measures the others):
 *
 *   bun bench/fhirpath-ab.ts <checkout A> <checkout B> [--rounds 8]
 *
 * on every resource of the FHIR R4 specification's examples (`hl7.fhir.r4.examples`) and every R4 invariant that
 * applies to each of its values (the model of test/helpers/fhirpath-types.ts, as bench/fhirpath.ts):
 *
 * - `compile`: each distinct expression compiled anew (`compileInvariant`) and evaluated once for each focus type it
 *   applies to (its first application there), which builds its closures for that type: the compile-once cost a
 *   validator pays per process;
 * - `evaluate`: the compiled invariants evaluated on every tenth application (the steady state).
 *
 * Both checkouts must give the same results (each application's true, false or error). Prints each scenario's median
 * per checkout and the median of the rounds' B / A ratios.
 */
import { readdirSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { loadR4Model, type Application } from '../test/helpers/fhirpath-types.ts';

const { values, positionals } = parseArgs({ allowPositionals: true, options: { rounds: { type: 'string', default: '8' } } });
if (positionals.length !== 2) throw new Error('usage: bun bench/fhirpath-ab.ts <checkout A> <checkout B> [--rounds 8]');
const rounds = Number(values.rounds);
process.env.TZ = 'UTC';

type Compiled = (focus: unknown, focusType: string | undefined, ctx: Application) => boolean | undefined;
interface Engine {
  compileInvariant(expression: string, types: unknown): Compiled;
  UnsupportedFhirPath: new (...args: never[]) => Error;
}

const model = await loadR4Model();
const dir = new URL('../node_modules/hl7.fhir.r4.examples/', import.meta.url);
const applications: Application[] = [];
for (const file of readdirSync(dir).sort()) {
  if (!file.endsWith('.json') || file === 'package.json' || file === 'ig-r4.json') continue;
  const resource = (await Bun.file(new URL(file, dir)).json()) as Record<string, unknown>;
  if (typeof resource.resourceType === 'string') for (const app of model.applications(resource)) applications.push(app);
}
const expressions = [...new Set(applications.map((a) => a.invariant.expression))];
/** The first application of each expression to each focus type. */
const firsts = [...new Map(applications.map((a) => [`${a.focusType}|${a.invariant.expression}`, a] as const).reverse()).values()];
const sample = applications.filter((_, i) => i % 10 === 0);

/** Each application's answer under `fns`: its Boolean, or 'error'; '-' for an expression the engine does not evaluate. */
function answers(fns: Map<string, Compiled | null>, apps: Application[]): string[] {
  return apps.map((app) => {
    const fn = fns.get(app.invariant.expression);
    if (fn === null || fn === undefined) return '-';
    try {
      return String(fn(app.focus, app.focusType, app));
    } catch {
      return 'error';
    }
  });
}

function compileAll(engine: Engine): Map<string, Compiled | null> {
  const fns = new Map<string, Compiled | null>();
  for (const expression of expressions) {
    try {
      fns.set(expression, engine.compileInvariant(expression, model.types));
    } catch (err) {
      if (!(err instanceof engine.UnsupportedFhirPath)) throw err;
      fns.set(expression, null);
    }
  }
  return fns;
}

const scenarios = [
  { name: `compile (${expressions.length} expressions, ${firsts.length} focus types)`, run: (engine: Engine, compiled: Map<string, Compiled | null>) => answers(compileAll(engine), firsts) },
  { name: `evaluate (${sample.length} of ${applications.length} applications)`, run: (engine: Engine, compiled: Map<string, Compiled | null>) => answers(compiled, sample) },
];

const sides: { engine: Engine; compiled: Map<string, Compiled | null> }[] = [];
for (const checkout of positionals) {
  const engine = (await import(resolve(checkout, 'src/fhir/validation/fhirpath-engine.ts'))) as Engine;
  const compiled = compileAll(engine);
  answers(compiled, firsts);
  sides.push({ engine, compiled });
}

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
const times = scenarios.map(() => [[], []] as number[][]);
for (let round = 0; round <= rounds; round++) {
  for (const [k, scenario] of scenarios.entries()) {
    const got: string[][] = [];
    for (const i of round % 2 ? [1, 0] : [0, 1]) {
      const start = cpuMs();
      got[i] = scenario.run(sides[i]!.engine, sides[i]!.compiled);
      if (round > 0) times[k]![i]!.push(cpuMs() - start);
    }
    if (JSON.stringify(got[0]) !== JSON.stringify(got[1])) throw new Error(`${scenario.name}: the checkouts answer differently`);
  }
}
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor((v.length - 1) / 2)]!;
console.log(`\n### FHIRPath engine, R4 examples, ${rounds} rounds (median CPU ms; B / A: median of the rounds' ratios)\n`);
console.log(`| scenario | A: ${positionals[0]} | B: ${positionals[1]} | B / A |`);
console.log('|---|---:|---:|---:|');
for (const [k, scenario] of scenarios.entries()) {
  const [a, b] = times[k]!;
  console.log(`| ${scenario.name} | ${median(a!).toFixed(1)} | ${median(b!).toFixed(1)} | ${median(b!.map((x, r) => x / a![r]!)).toFixed(3)} |`);
}
