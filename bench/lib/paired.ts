/**
 * The paired rounds of an in-process A/B bench of scenarios (everything-ab.ts, everything-owners-ab.ts): each
 * round runs every scenario on each checkout, the order alternating round by round, the first round a warm-up;
 * two checkouts must give the same entries. Prints, for one store kind, each scenario's median ms per checkout and,
 * for two, the median of the rounds' B / A ratios.
 */
export interface PairedSide<S> {
  label: string;
  /** Runs scenario `s`; returns its entries for the comparison. */
  run(s: S): Promise<string[]>;
}

export async function pairedScenarios<S extends { name: string }>(kind: string, sides: PairedSide<S>[], scenarios: S[], rounds: number): Promise<void> {
  const times = sides.map(() => scenarios.map(() => [] as number[]));
  for (let round = 0; round <= rounds; round++) {
    for (const [k, s] of scenarios.entries()) {
      const order = round % 2 ? [...sides.keys()].reverse() : [...sides.keys()];
      const answers: string[][] = [];
      for (const i of order) {
        const start = performance.now();
        answers[i] = await sides[i]!.run(s);
        if (round > 0) times[i]![k]!.push(performance.now() - start);
      }
      if (answers.length === 2 && JSON.stringify(answers[0]) !== JSON.stringify(answers[1])) {
        throw new Error(`${s.name}: the checkouts answer differently (${answers[0]!.length} and ${answers[1]!.length} entries)`);
      }
    }
  }
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor((v.length - 1) / 2)]!;
  console.log(`\n### ${kind}, ${rounds} rounds (median ms${sides.length === 2 ? '; B / A: median of the rounds\' ratios' : ''})\n`);
  console.log(`| scenario | ${sides.map((s, i) => `${'AB'[i]}: ${s.label}`).join(' | ')}${sides.length === 2 ? ' | B / A |' : ' |'}`);
  console.log(`|---|${sides.map(() => '---:').join('|')}|${sides.length === 2 ? '---:|' : ''}`);
  for (const [k, s] of scenarios.entries()) {
    const cells = times.map((t) => median(t[k]!).toFixed(1));
    const ratio = sides.length === 2 ? ` ${median(times[1]![k]!.map((b, r) => b / times[0]![k]![r]!)).toFixed(3)} |` : '';
    console.log(`| ${s.name} | ${cells.join(' | ')} |${ratio}`);
  }
}

/**
 * pairedScenarios on each store kind in turn, a side opened per checkout directory (`open`, each on a database of its
 * own) and closed after that kind's rounds, even where they fail.
 */
export async function pairedCheckouts<S extends { name: string }, K extends string>(
  kinds: K[], dirs: string[], open: (dir: string, kind: K) => Promise<PairedSide<S> & { close(): Promise<void> }>, scenarios: S[], rounds: number,
): Promise<void> {
  for (const kind of kinds) {
    const sides: (PairedSide<S> & { close(): Promise<void> })[] = [];
    try {
      for (const dir of dirs) sides.push(await open(dir, kind));
      await pairedScenarios(kind, sides, scenarios, rounds);
    } finally {
      for (const s of sides) await s.close();
    }
  }
}
