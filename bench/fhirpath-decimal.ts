/**
 * The cost of FHIRPath Decimal arithmetic (fhirpath-math.ts `decimalArithmetic`) in checkouts side by side, in one
 * process: one invariant doing `* - + /` on the 200 Quantity values of an Observation's components (written with
 * two decimal places, as JSON gives them), each checkout's engine compiling it once.
 *
 *   bun bench/fhirpath-decimal.ts <checkout A> <checkout B> [<checkout C>...] [--evaluations 2000] [--rounds 7]
 *
 * Prints each checkout's best µs per evaluation and its ratio to the first.
 */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({ allowPositionals: true, options: { evaluations: { type: 'string', default: '2000' }, rounds: { type: 'string', default: '7' } } });
if (positionals.length < 2) throw new Error('usage: bun bench/fhirpath-decimal.ts <checkout A> <checkout B> [...]');
const n = Number(values.evaluations);
const expression = 'component.all(value.ofType(Quantity).value * 1.5 - 0.25 + value.ofType(Quantity).value / 3 < 1000)';
const observation = {
  resourceType: 'Observation', status: 'final', code: { text: 'x' },
  component: Array.from({ length: 200 }, (_, i) => ({ code: { text: 'c' }, valueQuantity: { value: Number((((i * 0.37) % 50) + 0.1).toFixed(2)), unit: 'mg' } })),
};
const ctx = { resource: observation, rootResource: observation };
type Fn = (focus: unknown, type: string, ctx: unknown) => unknown;
const fns: Fn[] = [];
for (const dir of positionals) {
  const engine = await import(resolve(dir, 'src/fhir/validation/fhirpath-engine.ts'));
  const { elementType } = await import(resolve(dir, 'src/fhir/validation/model.ts'));
  fns.push(engine.compileInvariant(expression, { elementType }) as Fn);
}
const best = fns.map(() => Infinity);
for (let round = 0; round < Number(values.rounds); round++) {
  fns.forEach((fn, i) => {
    const t = Bun.nanoseconds();
    for (let k = 0; k < n; k++) fn(observation, 'Observation', ctx);
    best[i] = Math.min(best[i]!, (Bun.nanoseconds() - t) / 1e6);
  });
}
console.log('| checkout | µs / evaluation | / first |\n|---|---:|---:|');
positionals.forEach((dir, i) => console.log(`| ${dir} | ${((best[i]! * 1000) / n).toFixed(1)} | ${(best[i]! / best[0]!).toFixed(2)} |`));
