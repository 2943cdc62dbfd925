import { parseCodeSystem, type CodeSystem } from './model/code-system.ts';
import { parseValueSet, type ValueSet } from './model/value-set.ts';
import type { TerminologySource } from './source.ts';
import { pickVersion } from './version.ts';

/** The CodeSystems and ValueSets a transaction writes, parsed (those that do not parse are left for validation to refuse). */
export interface WrittenTerminology {
  codeSystems: CodeSystem[];
  valueSets: ValueSet[];
}

/** The CodeSystems and ValueSets among `resources` (a transaction's entries), parsed; undefined when there are none. */
export function writtenTerminology(resources: readonly (Record<string, unknown> | undefined)[]): WrittenTerminology | undefined {
  const written: WrittenTerminology = { codeSystems: [], valueSets: [] };
  for (const r of resources) {
    try {
      if (r?.resourceType === 'CodeSystem') written.codeSystems.push(parseCodeSystem(r));
      else if (r?.resourceType === 'ValueSet') written.valueSets.push(parseValueSet(r));
    } catch {
      // Not a resource the terminology reads: the write's validation refuses it.
    }
  }
  return written.codeSystems.length || written.valueSets.length ? written : undefined;
}

/**
 * `under` (the tenant's stored terminology) as a transaction writing `written` leaves it (FHIR R4 http.html#trules:
 * a transaction's entries are processed as one unit): a written resource replaces the stored one of its id, and is
 * chosen among the versions of its canonical URL as the stored ones are (pickVersion). What it deletes is not seen.
 */
export function writtenSource(written: WrittenTerminology, under: TerminologySource): TerminologySource {
  const pick = async <T extends CodeSystem | ValueSet>(mine: T[], stored: Promise<T | null>, url: string, version?: string, asOf?: Parameters<TerminologySource['codeSystem']>[2]) => {
    const own = mine.filter((r) => r.url === url);
    const theirs = await stored;
    if (own.length === 0) return theirs;
    // The stored one is a candidate unless the transaction replaces it (its id).
    const candidates = theirs !== null && !mine.some((r) => r.id !== undefined && r.id === theirs.id) ? [...own, theirs] : own;
    return pickVersion(candidates, version, asOf);
  };
  return {
    codeSystem: (url, version, asOf) => pick(written.codeSystems, under.codeSystem(url, version, asOf), url, version, asOf),
    valueSet: (url, version, asOf) => pick(written.valueSets, under.valueSet(url, version, asOf), url, version, asOf),
    async codeSystemById(id) {
      return written.codeSystems.find((r) => r.id === id) ?? under.codeSystemById(id);
    },
    async valueSetById(id) {
      return written.valueSets.find((r) => r.id === id) ?? under.valueSetById(id);
    },
    async holds(type, id) {
      const mine = type === 'CodeSystem' ? written.codeSystems : written.valueSets;
      return mine.some((r) => r.id === id) || ((await under.holds?.(type, id)) ?? false);
    },
    changeToken: () => under.changeToken(),
  };
}
