/**
 * The alignment of two lists for `$diff` (diff.ts): which items of the from-list stay (equal, or changed
 * in place), and the `insert`, `move` and `delete` steps, with their indexes as they apply one after
 * another (fhirpatch.html), that turn it into the to-list. Items are compared by an id that two items
 * share exactly when they are equal (item-ids.ts).
 *
 * The equal items that stay are a longest common subsequence of the two lists: after the common head
 * and tail are set aside, one over what is left by dynamic programming, while the diff has filled fewer
 * than MAX_ALIGN_CELLS cells; past it the rest is compared by position, as HAPI FHIR compares lists, so that
 * two long lists made to differ everywhere cost linear time. An item the LCS leaves out in one place and an
 * equal one it leaves out in another is a `move`; the others left out between the same two kept items are
 * paired by position (changed in place: compared element by element), and what remains is inserted or
 * deleted.
 */

/**
 * The most cells (the lengths of two lists multiplied, their common head and tail set aside) the LCS
 * of one diff may fill, over all its lists: 16 MB of table at most and some tens of milliseconds. Two
 * lists of 2,000 items, the diff's only ones, are aligned whatever they hold; longer ones that differ
 * throughout, or lists past what the diff's others used, are compared by position, so that no pair of resources (a list in each of
 * many items, say) makes the time quadratic in their size.
 */
export const MAX_ALIGN_CELLS = 4_000_000;

/** What the alignments of one diff may still fill (MAX_ALIGN_CELLS at its start). */
export interface AlignBudget {
  cells: number;
}

export type Step =
  | { kind: 'insert'; j: number; index: number }
  | { kind: 'move'; source: number; destination: number }
  | { kind: 'delete'; i: number; index: number };

export interface Alignment {
  /** Items changed in place, [from index, to index]: to be compared element by element. */
  changed: Array<[number, number]>;
  /** The inserts and moves in the order they apply, then the deletes, last first. */
  steps: Step[];
}

/** The pairs [i, j] of a longest common subsequence of `a` and `b` (numbers standing for keys). */
function lcs(a: Int32Array, b: Int32Array): Array<[number, number]> {
  const n = a.length;
  const m = b.length;
  const w = m + 1;
  // len[i * w + j]: the LCS length of a[i..] and b[j..].
  const len = new Uint32Array((n + 1) * w);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      len[i * w + j] = a[i] === b[j] ? len[(i + 1) * w + j + 1]! + 1 : Math.max(len[(i + 1) * w + j]!, len[i * w + j + 1]!);
    }
  }
  const out: Array<[number, number]> = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) out.push([i++, j++]);
    else if (len[(i + 1) * w + j]! >= len[i * w + j + 1]!) i++;
    else j++;
  }
  return out;
}

/** Counts of occupied places before a place, as places are filled and emptied (a Fenwick tree). */
class Occupancy {
  private readonly tree: Int32Array;
  constructor(size: number) {
    this.tree = new Int32Array(size + 1);
  }
  set(at: number, delta: number): void {
    for (let x = at + 1; x < this.tree.length; x += x & -x) this.tree[x]! += delta;
  }
  before(at: number): number {
    let sum = 0;
    for (let x = at; x > 0; x -= x & -x) sum += this.tree[x]!;
    return sum;
  }
}

/** Aligns a list of item ids `ai` (the from-list) with `bi` (the to-list), by LCS when `budget` has the cells left. */
export function align(ai: Int32Array, bi: Int32Array, budget: AlignBudget): Alignment {
  const n = ai.length;
  const m = bi.length;
  let head = 0;
  while (head < n && head < m && ai[head] === bi[head]) head++;
  let tail = 0;
  while (tail < n - head && tail < m - head && ai[n - 1 - tail] === bi[m - 1 - tail]) tail++;
  const midA = ai.subarray(head, n - tail);
  const midB = bi.subarray(head, m - tail);
  const cells = midA.length * midB.length;
  const aligned = cells <= budget.cells;
  if (aligned) budget.cells -= cells;
  const matches: Array<[number, number]> = [];
  for (let k = 0; k < head; k++) matches.push([k, k]);
  if (aligned) for (const [i, j] of lcs(midA, midB)) matches.push([i + head, j + head]);
  for (let k = tail; k > 0; k--) matches.push([n - k, m - k]);

  // What each item becomes: for a, the to-index it stays or moves to (-1: deleted); for b, the from-index it came from (-1: inserted).
  const toOf = new Int32Array(n).fill(-1);
  const fromOf = new Int32Array(m).fill(-1);
  for (const [i, j] of matches) {
    toOf[i] = j;
    fromOf[j] = i;
  }
  const moved = new Uint8Array(m);
  if (aligned) {
    // An item left out here and an equal one left out there: a move. (Two in one gap would lengthen the LCS.)
    const free = new Map<number, number[]>();
    for (let i = n - 1; i >= 0; i--) {
      if (toOf[i] !== -1) continue;
      const list = free.get(ai[i]!);
      if (list) list.push(i);
      else free.set(ai[i]!, [i]);
    }
    for (let j = 0; j < m; j++) {
      if (fromOf[j] !== -1) continue;
      const i = free.get(bi[j]!)?.pop();
      if (i === undefined) continue;
      toOf[i] = j;
      fromOf[j] = i;
      moved[j] = 1;
    }
  }
  // Between two items kept equal, those left out on both sides are paired by position: changed in place.
  const changed: Array<[number, number]> = [];
  let i = 0;
  let j = 0;
  for (;;) {
    while (i < n && toOf[i] !== -1 && moved[toOf[i]!] === 1) i++;
    while (j < m && moved[j] === 1) j++;
    const aFree = i < n && toOf[i] === -1;
    const bFree = j < m && fromOf[j] === -1;
    if (aFree && bFree) {
      toOf[i] = j;
      fromOf[j] = i;
      changed.push([i++, j++]);
    } else if (aFree) i++; // deleted
    else if (bFree) j++; // inserted
    else if (i < n && j < m) {
      i++; // kept equal
      j++;
    } else break;
  }
  return { changed, steps: steps(n, m, toOf, fromOf, moved) };
}

/**
 * The inserts and moves, in to-list order, each putting its item right after the one before it in the
 * to-list (the kept items are in order already), then the deletes, last first: indexes counted as the
 * list stands when each applies, places tracked in one order of slots (the from-list's items, and after
 * each to-item the slot of the next one inserted or moved there).
 */
function steps(n: number, m: number, toOf: Int32Array, fromOf: Int32Array, moved: Uint8Array): Step[] {
  // Slots 0..n-1 are the from-list's items; n + j the place to-item j is inserted or moved to. A linked order.
  const next = new Int32Array(n + m).fill(-1);
  for (let k = 0; k + 1 < n; k++) next[k] = k + 1;
  let first = n > 0 ? 0 : -1;
  let last = -1;
  for (let j = 0; j < m; j++) {
    const from = fromOf[j]!;
    if (from !== -1 && !moved[j]) {
      last = from;
      continue;
    }
    const slot = n + j;
    if (last === -1) {
      next[slot] = first;
      first = slot;
    } else {
      next[slot] = next[last]!;
      next[last] = slot;
    }
    last = slot;
  }
  const position = new Int32Array(n + m);
  let p = 0;
  for (let s = first; s !== -1; s = next[s]!) position[s] = p++;
  const occupied = new Occupancy(p);
  for (let k = 0; k < n; k++) occupied.set(position[k]!, 1);
  const out: Step[] = [];
  for (let j = 0; j < m; j++) {
    const from = fromOf[j]!;
    if (from !== -1 && !moved[j]) continue;
    const to = position[n + j]!;
    if (from === -1) {
      out.push({ kind: 'insert', j, index: occupied.before(to) });
    } else {
      const source = occupied.before(position[from]!);
      occupied.set(position[from]!, -1);
      const destination = occupied.before(to);
      if (source !== destination) out.push({ kind: 'move', source, destination });
    }
    occupied.set(to, 1);
  }
  const gone: number[] = [];
  for (let k = 0; k < n; k++) if (toOf[k] === -1) gone.push(k);
  for (let g = gone.length - 1; g >= 0; g--) {
    const k = gone[g]!;
    out.push({ kind: 'delete', i: k, index: occupied.before(position[k]!) });
    occupied.set(position[k]!, -1);
  }
  return out;
}
