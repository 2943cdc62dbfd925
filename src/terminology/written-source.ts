import { parseCodeSystem, type CodeSystem } from './model/code-system.ts';
import { parseValueSet, type ValueSet } from './model/value-set.ts';
import type { TerminologySource } from './source.ts';
import { compareVersions, pickVersion, versionsOf } from './version.ts';

/** The CodeSystems and ValueSets a transaction writes, parsed (those that do not parse are left for validation to refuse). */
export interface WrittenTerminology {
  codeSystems: CodeSystem[];
  valueSets: ValueSet[];
  /** The ids of the stored CodeSystems and ValueSets it deletes. */
  deleted?: { codeSystems: ReadonlySet<string>; valueSets: ReadonlySet<string> };
}

/**
 * The CodeSystems and ValueSets among `resources` (a transaction's entries), parsed, and those of `deleted` (its
 * DELETE entries' targets); undefined when there are none.
 */
export function writtenTerminology(
  resources: readonly (Record<string, unknown> | undefined)[], deleted: readonly { type: string; id: string }[] = [],
): WrittenTerminology | undefined {
  const ids = (type: string) => new Set(deleted.filter((d) => d.type === type).map((d) => d.id));
  const gone = { codeSystems: ids('CodeSystem'), valueSets: ids('ValueSet') };
  const written: WrittenTerminology = { codeSystems: [], valueSets: [], ...((gone.codeSystems.size || gone.valueSets.size) && { deleted: gone }) };
  for (const r of resources) {
    try {
      if (r?.resourceType === 'CodeSystem') written.codeSystems.push(parseCodeSystem(r));
      else if (r?.resourceType === 'ValueSet') written.valueSets.push(parseValueSet(r));
    } catch {
      // Not a resource the terminology reads: the write's validation refuses it.
    }
  }
  return written.codeSystems.length || written.valueSets.length || written.deleted ? written : undefined;
}

/**
 * `under` (the tenant's stored terminology) as a transaction writing `written` leaves it (FHIR R4 http.html#trules:
 * a transaction's entries are processed as one unit): a written resource replaces the stored one of its id, and is
 * chosen among the versions of its canonical URL as the stored ones are (pickVersion). One it deletes is not found
 * (nor, by its canonical URL, another stored version of that URL: the stored source gives its choice alone).
 */
export function writtenSource(written: WrittenTerminology, under: TerminologySource): TerminologySource {
  const pick = async <T extends CodeSystem | ValueSet>(
    mine: T[], gone: ReadonlySet<string> | undefined, stored: Promise<T | null>, url: string, version?: string, asOf?: Parameters<TerminologySource['codeSystem']>[2],
  ) => {
    const own = mine.filter((r) => r.url === url);
    const found = await stored;
    // The stored one is a candidate unless the transaction replaces it (its id) or deletes it.
    const theirs = found !== null && !(found.id !== undefined && (gone?.has(found.id) || mine.some((r) => r.id === found.id))) ? found : null;
    if (own.length === 0) return theirs;
    return pickVersion(theirs !== null ? [...own, theirs] : own, version, asOf);
  };
  const byId = async <T extends CodeSystem | ValueSet>(mine: T[], gone: ReadonlySet<string> | undefined, id: string, stored: () => Promise<T | null>) =>
    mine.find((r) => r.id === id) ?? (gone?.has(id) ? null : stored());
  const { deleted } = written;
  return {
    codeSystem: (url, version, asOf) => pick(written.codeSystems, deleted?.codeSystems, under.codeSystem(url, version, asOf), url, version, asOf),
    async codeSystemVersions(url) {
      const stored = (await under.codeSystemVersions?.(url)) ?? [];
      return [...new Set([...versionsOf(written.codeSystems.filter((r) => r.url === url)), ...stored])].sort(compareVersions);
    },
    valueSet: (url, version, asOf) => pick(written.valueSets, deleted?.valueSets, under.valueSet(url, version, asOf), url, version, asOf),
    codeSystemById: (id) => byId(written.codeSystems, deleted?.codeSystems, id, () => under.codeSystemById(id)),
    valueSetById: (id) => byId(written.valueSets, deleted?.valueSets, id, () => under.valueSetById(id)),
    async holds(type, id) {
      const mine = type === 'CodeSystem' ? written.codeSystems : written.valueSets;
      return mine.some((r) => r.id === id) || ((await under.holds?.(type, id)) ?? false);
    },
    changeToken: () => under.changeToken(),
  };
}
