/**
 * R4 invariants that walk a whole large resource, timed in fresh processes, two checkouts in turn:
 *
 *   bun bench/fhirpath-large.ts <checkout A> <checkout B> [--runs 4] [--evaluations 8] [--concepts 100000]
 *
 * Each run starts one process per checkout (A B, then B A, ...), each compiling the R4 invariants with
 * its own engine (`src/fhir/validation/fhirpath-engine.ts`) and the validator's type model, and timing
 * `--evaluations` evaluations of each of:
 *
 * - csd-1 (`concept.code.combine($this.descendants().concept.code).isDistinct()`) on a CodeSystem of
 *   `--concepts` concepts nested ten to a parent (bench/lib/terminology.ts), each with a display;
 * - que-2 (`descendants().linkId.isDistinct()`) on a Questionnaire of a tenth as many items, nested five
 *   to a group, each with text, a code and an answer option;
 * - sdf-16 (`... snapshot.element.id.trace('ids').isDistinct()`) on a StructureDefinition whose snapshot
 *   has a tenth as many elements.
 *
 * Prints, per checkout and invariant, the first evaluation of each process (cold: before the JIT and
 * heap settle) and the median of the others (warm), in milliseconds of the process's CPU time (its
 * collector's threads included; wall time on a shared machine mostly measures the others): the median
 * over runs of each.
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    runs: { type: 'string', default: '4' },
    evaluations: { type: 'string', default: '8' },
    concepts: { type: 'string', default: '100000' },
    child: { type: 'boolean', default: false },
  },
});
const evaluations = Number(values.evaluations);
const concepts = Number(values.concepts);

type Json = Record<string, unknown>;

function questionnaire(size: number): Json {
  const items: Json[] = Array.from({ length: size }, (_, i) => ({
    linkId: `q${i}`,
    text: `Question ${i}`,
    type: 'choice',
    code: [{ system: 'http://example.org/q', code: `c${i}` }],
    answerOption: [{ valueCoding: { system: 'http://example.org/a', code: 'y', display: 'Yes' } }],
  }));
  for (let i = 1; i < size; i++) {
    const parent = items[Math.floor((i - 1) / 5)]!;
    parent.type = 'group';
    delete parent.answerOption;
    ((parent.item ??= []) as Json[]).push(items[i]!);
  }
  return { resourceType: 'Questionnaire', status: 'active', item: [items[0]] };
}

function structureDefinition(size: number): Json {
  const element = Array.from({ length: size }, (_, i) => ({
    id: i === 0 ? 'Basic' : `Basic.extension:e${i}`,
    path: i === 0 ? 'Basic' : 'Basic.extension',
    min: 0,
    max: '1',
    type: i === 0 ? undefined : [{ code: 'Extension', profile: [`http://example.org/e${i}`] }],
  }));
  return { resourceType: 'StructureDefinition', url: 'http://example.org/sd', name: 'Big', status: 'active', kind: 'resource', abstract: false, type: 'Basic', snapshot: { element } };
}

async function child(dir: string): Promise<void> {
  const engine = await import(`${dir}/src/fhir/validation/fhirpath-engine.ts`);
  const { elementType } = await import(`${dir}/src/fhir/validation/model.ts`);
  const { generatedCodeSystem } = await import(`${dir}/bench/lib/terminology.ts`);
  const types = { elementType };
  // Through JSON text, as a request's body reaches the validator.
  const parsed = (r: Json): Json => JSON.parse(JSON.stringify(r)) as Json;
  const cases: [string, string, Json, string][] = [
    ['csd-1', 'concept.code.combine($this.descendants().concept.code).isDistinct()', parsed(generatedCodeSystem(concepts)), 'CodeSystem'],
    ['que-2', 'descendants().linkId.isDistinct()', parsed(questionnaire(concepts / 10)), 'Questionnaire'],
    ['sdf-16', "snapshot.element.all(id.exists()) and snapshot.element.id.trace('ids').isDistinct()", parsed(structureDefinition(concepts / 10)), 'StructureDefinition'],
  ];
  const out: Record<string, number[]> = {};
  for (const [key, expression, resource, type] of cases) {
    const fn = engine.compileInvariant(expression, types, false, true);
    const times: number[] = [];
    for (let i = 0; i < evaluations; i++) {
      const t0 = process.cpuUsage();
      const holds = fn(resource, type, { resource, rootResource: resource, memo: new Map() });
      const t = process.cpuUsage(t0);
      times.push((t.user + t.system) / 1000);
      if (holds !== true) throw new Error(`${key} does not hold on the generated ${type}`);
    }
    out[key] = times;
  }
  console.log(JSON.stringify(out));
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

if (values.child) {
  await child(resolve(positionals[0]!));
} else {
  if (positionals.length !== 2) {
    console.error('usage: bun bench/fhirpath-large.ts <checkout A> <checkout B> [--runs 4] [--evaluations 8] [--concepts 100000]');
    process.exit(2);
  }
  const dirs = positionals.map((p) => resolve(p));
  const cold = new Map<string, number[]>();
  const warm = new Map<string, number[]>();
  for (let run = 0; run < Number(values.runs); run++) {
    const order = run % 2 === 0 ? [0, 1] : [1, 0];
    for (const side of order) {
      const p = Bun.spawnSync([process.execPath, import.meta.path, dirs[side]!, '--child', '--evaluations', String(evaluations), '--concepts', String(concepts)], { stderr: 'inherit' });
      if (p.exitCode !== 0) throw new Error(`${dirs[side]}: exit ${p.exitCode}`);
      const times = JSON.parse(p.stdout.toString()) as Record<string, number[]>;
      for (const [key, ts] of Object.entries(times)) {
        const k = `${side}|${key}`;
        (cold.get(k) ?? cold.set(k, []).get(k)!).push(ts[0]!);
        (warm.get(k) ?? warm.set(k, []).get(k)!).push(median(ts.slice(1)));
      }
      console.error(`run ${run + 1} ${side === 0 ? 'A' : 'B'}: ${Object.entries(times).map(([k, ts]) => `${k} ${ts.map((t) => t.toFixed(0)).join(' ')}`).join('; ')}`);
    }
  }
  console.log('| invariant | A cold ms | B cold ms | B / A | A warm ms | B warm ms | B / A |');
  console.log('|---|---:|---:|---:|---:|---:|---:|');
  for (const key of ['csd-1', 'que-2', 'sdf-16']) {
    const [ac, bc, aw, bw] = [median(cold.get(`0|${key}`)!), median(cold.get(`1|${key}`)!), median(warm.get(`0|${key}`)!), median(warm.get(`1|${key}`)!)];
    console.log(`| ${key} | ${ac.toFixed(1)} | ${bc.toFixed(1)} | ${(bc / ac).toFixed(2)} | ${aw.toFixed(1)} | ${bw.toFixed(1)} | ${(bw / aw).toFixed(2)} |`);
  }
}
