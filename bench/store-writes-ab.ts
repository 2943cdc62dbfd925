/**
 * The store's write of two checkouts on PostgreSQL in one process, in turn, without HTTP or validation: what a write
 * transaction costs this process (CPU) and takes (wall), where the statements a write sends are a larger share than
 * through the API (bench/inprocess-ab.ts --route update):
 *
 *   bun bench/store-writes-ab.ts <checkout A> <checkout B>
 *
 * Each checkout opens its own store (its `test/helpers/stores.ts`) on a PostgreSQL database of its own (dropped at the
 * end) and writes rounds of 400 transactions (`current()` of one of 100 Patients, then `put()` of its next version with
 * one token row), A then B, B then A on the next round, after a warm-up round; prints the lower quartile and median µs
 * a write of each and the ratios B / A of the medians.
 */
import { resolve } from 'node:path';
const [A, B] = process.argv.slice(2).map((d) => resolve(d));
if (A === undefined || B === undefined) {
  console.error('usage: bun bench/store-writes-ab.ts <checkout A> <checkout B>');
  process.exit(2);
}
const ROUNDS = 8, PER = 400;
async function side(dir: string) {
  const { storeTargets } = await import(`${dir}/test/helpers/stores.ts`);
  const { version } = await import(`${dir}/test/store/contract/fixtures.ts`);
  const target = (await storeTargets({ main: false })).find((x: { kind: string }) => x.kind === 'postgres');
  const store = (await target.migrated()).open();
  await store.migrate();
  let n = 0;
  const write = (i: number) => store.resources.write('t1', async (w: any) => {
    const cur = await w.current('Patient', `p${i % 100}`);
    await w.put(version('Patient', `p${i % 100}`, { versionId: (cur?.versionId ?? 0) + 1, index: [{ param: 'identifier', system: 's', value: `v${n++}` }] }));
  });
  for (let i = 0; i < 100; i++) await write(i);
  return { dir, write, cpu: [] as number[], wall: [] as number[], close: async () => { await store.close(); await target.cleanup(); } };
}
const sides = [await side(A!), await side(B!)];
for (let r = 0; r < ROUNDS + 1; r++) {
  for (const s of r % 2 ? [...sides].reverse() : sides) {
    const c0 = process.cpuUsage(); const t0 = performance.now();
    for (let i = 0; i < PER; i++) await s.write(i);
    const c = process.cpuUsage(c0);
    if (r > 0) { s.cpu.push((c.user + c.system) / PER); s.wall.push((performance.now() - t0) * 1000 / PER); }
  }
}
const med = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor((v.length - 1) / 2)]!;
const lq = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor((v.length - 1) / 4)]!;
for (const s of sides) console.log(`${s.dir}: CPU µs lq ${lq(s.cpu).toFixed(0)} median ${med(s.cpu).toFixed(0)}; wall µs lq ${lq(s.wall).toFixed(0)} median ${med(s.wall).toFixed(0)}`);
console.log(`B/A CPU median ${(med(sides[1]!.cpu) / med(sides[0]!.cpu)).toFixed(3)}, wall median ${(med(sides[1]!.wall) / med(sides[0]!.wall)).toFixed(3)}`);
for (const s of sides) await s.close();
