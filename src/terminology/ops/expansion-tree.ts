import type { ConceptEntry } from '../compile/code-system-index.ts';
import type { CodeSystemLookup } from '../compile/membership.ts';

/** What nesting needs of an expansion's code. */
export interface Nestable {
  readonly system: string;
  readonly version?: string;
  readonly code: string;
  readonly contains?: readonly Nestable[];
}

/**
 * An expansion's codes nested under their nearest ancestor in it (FHIR R4 ValueSet-expand
 * `excludeNested` false: `expansion.contains.contains`), as the reference servers nest them: the
 * hierarchy is the code system's (nested concepts, `parent`/`child` properties); a code whose ancestors
 * are not in the expansion stays at the top, a code of several parents goes under the nearest one found
 * first. The order within each level is the expansion's. Should the code system's links make a code its
 * own ancestor, the codes are returned flat rather than lost.
 */
export async function nestContains<T extends Nestable>(flat: readonly T[], lookup: CodeSystemLookup): Promise<T[]> {
  const key = (system: string, version: string | undefined, code: string) => `${system}|${version ?? ''}|${code}`;
  const at = new Map(flat.map((c, i) => [key(c.system, c.version, c.code), i]));
  const parent = new Array<number>(flat.length).fill(-1);
  for (const [i, c] of flat.entries()) {
    const cs = await lookup.codeSystem(c.system, c.version);
    const entry = cs?.find(c.code);
    if (entry !== undefined) parent[i] = nearestIn(entry, (code) => at.get(key(c.system, c.version, code)), i);
  }
  const children = flat.map((): number[] => []);
  const roots: number[] = [];
  for (let i = 0; i < flat.length; i++) (parent[i] === -1 ? roots : children[parent[i]!]!).push(i);
  let placed = 0;
  const build = (i: number): T => {
    placed++;
    const below = children[i]!;
    return below.length === 0 ? flat[i]! : { ...flat[i]!, contains: below.map(build) };
  };
  const tree = roots.map(build);
  return placed === flat.length ? tree : [...flat];
}

/** The index of the nearest ancestor of `entry` that is in the expansion (breadth first), or -1. */
function nearestIn(entry: ConceptEntry, indexOf: (code: string) => number | undefined, self: number): number {
  const seen = new Set<ConceptEntry>([entry]);
  let level: readonly ConceptEntry[] = entry.parentEntries;
  while (level.length > 0) {
    const next: ConceptEntry[] = [];
    for (const p of level) {
      if (seen.has(p)) continue;
      seen.add(p);
      const i = indexOf(p.code);
      if (i !== undefined && i !== self) return i;
      next.push(...p.parentEntries);
    }
    level = next;
  }
  return -1;
}
