/**
 * Two checkouts' full-text words in one process, in turn: the CPU time of `textIndexOf` (the words of `_text` and
 * `_content` a write stores, src/fhir/text-index.ts), on bodies of ASCII text and of text beyond it, so that a change
 * of how words are folded is measured where it costs (non-ASCII text) and where it should not (ASCII):
 *
 *   bun bench/text-words-ab.ts <checkout A> <checkout B> [--rounds N] [--per-round N]
 *
 * Bodies: a generated Patient and Observation (ASCII); the R4 example blood-pressure Observation (ASCII narrative);
 * a Patient with a Scandinavian, Polish, German and Greek narrative and names (about 1 kB, most words with a letter
 * beyond ASCII, `ß` and capital Greek among them), and one with the Scandinavian and Polish words alone; a CodeSystem of 2,000 concepts whose displays are such words (about 120 kB). Rounds alternate A B, B A,
 * ..., the first two discarded as warm-up, each body's round timed after a full collection; prints each body's median
 * µs per call on each side and the ratio B / A of the medians, and whether both sides give the same words.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { generatePatientRecord, generateShared, resolveOptions } from './lib/generator.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { rounds: { type: 'string', default: '20' }, 'per-round': { type: 'string', default: '2000' } },
});
if (positionals.length !== 2) {
  console.error('usage: bun bench/text-words-ab.ts <checkout A> <checkout B> [--rounds N] [--per-round N]');
  process.exit(2);
}
const rounds = Number(values.rounds);
const perRound = Number(values['per-round']);

type Json = Record<string, unknown>;
type Words = (resource: Json) => unknown;

const options = resolveOptions({ patients: 1, seed: 'text-words-bench' });
const record = generatePatientRecord(options, generateShared(options), 0) as Json[];
const first = (type: string) => record.find((r) => r.resourceType === type)!;
const example = (file: string) => JSON.parse(readFileSync(new URL(`../node_modules/hl7.fhir.r4.examples/${file}`, import.meta.url), 'utf8')) as Json;
const NORDIC = 'Søren Kierkegaard bor i Østerbro med Åse Bjørnstad og Æsa Þórsdóttir; Łukasz Dąbrowski besøger Hauptstraße 5 i Straßburg. ' +
  'ΟΔΟΣ ΑΘΗΝΑΣ, Guðrún Ólafsdóttir, Ðorđe Đoković, Œdipe cœur, Ħamrun. ';
const XHTML = 'http://www.w3.org/1999/xhtml';
const nordic: Json = {
  resourceType: 'Patient', id: 'n', text: { status: 'generated', div: `<div xmlns="${XHTML}"><p>${NORDIC.repeat(4)}</p></div>` },
  name: [{ family: 'Bjørnstad', given: ['Søren', 'Åse'] }], address: [{ line: ['Østerbrogade 12'], city: 'København' }],
};
const SCANDINAVIAN = 'Søren Kierkegaard bor i Østerbro med Åse Bjørnstad og Æsa Þórsdóttir; Łukasz Dąbrowski besøger Guðrún Ólafsdóttir. ';
const scandinavian: Json = { ...nordic, id: 's', text: { status: 'generated', div: `<div xmlns="${XHTML}"><p>${SCANDINAVIAN.repeat(5)}</p></div>` } };
const words = NORDIC.split(/\s+/).filter(Boolean);
const codeSystem: Json = {
  resourceType: 'CodeSystem', id: 'cs', url: 'http://example.org/cs', status: 'active', content: 'complete',
  concept: Array.from({ length: 2000 }, (_, i) => ({ code: `c${i}`, display: `${words[i % words.length]} ${words[(i * 7) % words.length]} ${i}` })),
};

const bodies: [string, Json][] = [
  ['generated Patient (ASCII)', first('Patient')],
  ['generated Observation (ASCII)', first('Observation')],
  ['R4 example blood pressure (ASCII narrative)', example('Observation-blood-pressure.json')],
  ['Patient, Nordic/German/Greek narrative (1 kB)', nordic],
  ['Patient, Nordic narrative without ß or Greek (0.7 kB)', scandinavian],
  ['CodeSystem, 2,000 such displays (120 kB)', codeSystem],
];

const sides = await Promise.all(positionals.map(async (dir) => {
  const { textIndexOf } = await import(`${resolve(dir)}/src/fhir/text-index.ts`);
  return { dir: resolve(dir), words: textIndexOf as Words };
}));
const times = sides.map(() => bodies.map(() => [] as number[]));

for (let round = 0; round < rounds + 2; round++) {
  const order = round % 2 === 0 ? [0, 1] : [1, 0];
  for (const s of order) {
    bodies.forEach(([name, body], b) => {
      Bun.gc(true);
      const n = name.startsWith('CodeSystem') ? Math.max(1, Math.floor(perRound / 100)) : perRound;
      const start = Bun.nanoseconds();
      for (let i = 0; i < n; i++) sides[s]!.words(body);
      if (round >= 2) times[s]![b]!.push((Bun.nanoseconds() - start) / n / 1000);
    });
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`A = ${sides[0]!.dir}\nB = ${sides[1]!.dir}\n${rounds} rounds of ${perRound} calls per body and side (the CodeSystem a hundredth)\n`);
console.log('| body | A µs (median) | B µs (median) | B / A | same words |');
console.log('|---|---|---|---|---|');
bodies.forEach(([name, body], b) => {
  const [a, bb] = [median(times[0]![b]!), median(times[1]![b]!)];
  const same = JSON.stringify(sides[0]!.words(body)) === JSON.stringify(sides[1]!.words(body));
  console.log(`| ${name} | ${a.toFixed(2)} | ${bb.toFixed(2)} | ${(bb / a).toFixed(3)} | ${same ? 'yes' : 'no'} |`);
});
