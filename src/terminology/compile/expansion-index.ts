import type { ExpansionContains } from '../model/value-set.ts';
import { type Checked, type CodingToCheck, type LoadedCodeSystems, memberOf, nonMember, NotLoaded } from './membership.ts';

/** A ValueSet.expansion.contains entry that names a code (abstract grouping entries may not). */
export type ExpansionItem = ExpansionContains & { readonly system: string; readonly code: string };

/**
 * Membership by a ValueSet's stored expansion, used when the ValueSet has no `compose`
 * (R4 ValueSet 4.9.7: an expansion-only value set is defined by its expansion).
 */
export class ExpansionIndex {
  readonly items: readonly ExpansionItem[];
  private readonly byKey = new Map<string, ExpansionItem[]>();

  constructor(contains: readonly ExpansionContains[]) {
    const items: ExpansionItem[] = [];
    flatten(contains, items);
    this.items = items;
    for (const item of items) {
      const key = keyOf(item.system, item.code);
      const list = this.byKey.get(key);
      if (list === undefined) this.byKey.set(key, [item]);
      else list.push(item);
    }
  }

  /** Checks a coding against the expansion, enriching it from the CodeSystem when known. */
  check(coding: CodingToCheck, loaded: LoadedCodeSystems): Checked {
    const candidates = this.byKey.get(keyOf(coding.system, coding.code)) ?? [];
    const item = candidates.find((i) => i.version === undefined || coding.version === undefined || i.version === coding.version);
    if (item === undefined) return nonMember();
    const version = item.version ?? coding.version;
    const cs = loaded.get(item.system, version);
    if (cs === undefined) return new NotLoaded(item.system, version);
    const entry = cs?.find(item.code);
    return memberOf(item.system, item.code, {
      entry,
      cs: cs ?? undefined,
      listed: item,
      abstract: item.abstract,
      inactive: item.inactive,
    });
  }
}

function keyOf(system: string, code: string): string {
  return `${system}\u0000${code}`;
}

function flatten(contains: readonly ExpansionContains[], out: ExpansionItem[]): void {
  for (const c of contains) {
    if (c.system !== undefined && c.code !== undefined) out.push({ ...c, system: c.system, code: c.code });
    if (c.contains !== undefined) flatten(c.contains, out);
  }
}
