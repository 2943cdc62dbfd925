import { invalid } from '../errors.ts';
import type { ConceptDefinition } from '../model/code-system.ts';
import type { CodeSystemIndex, ConceptEntry } from './code-system-index.ts';
import type { CompiledConceptSet } from './concept-set.ts';
import type { CompiledValueSet } from './compiled-value-set.ts';
import { type CodeSystemLookup, systemLabel } from './membership.ts';

/** One code of an expansion, before paging. */
export interface ExpansionEntry {
  readonly system: string;
  readonly version?: string;
  readonly code: string;
  readonly display?: string;
  readonly abstract: boolean;
  readonly inactive: boolean;
  /** The CodeSystem's concept and the language of its display, when the code is in a known CodeSystem. */
  readonly concept?: { readonly definition: ConceptDefinition; readonly language: string | undefined };
}

/**
 * Lists the codes of a compiled ValueSet in definition order (R4 ValueSet 4.9.5 / $expand):
 * each include's candidates, filtered by its filters and imports, minus the excludes. Codes can
 * repeat when includes overlap; the caller de-duplicates. Enumeration is lazy, so a caller that
 * stops early (size limit) does not pay for the rest.
 */
export async function* enumerateValueSet(vs: CompiledValueSet, lookup: CodeSystemLookup): AsyncGenerator<ExpansionEntry> {
  if (vs.expansion !== undefined) {
    for (const item of vs.expansion.items) {
      if (item.inactive === true && !vs.inactiveAllowed) continue;
      const { system, version, code, display } = item;
      yield { system, version, code, display, abstract: item.abstract ?? false, inactive: item.inactive ?? false };
    }
    return;
  }
  for (const include of vs.includes) {
    for await (const entry of enumerateSet(include, lookup)) {
      if (entry.inactive && !vs.inactiveAllowed) continue;
      if (await excluded(vs, entry, lookup)) continue;
      yield entry;
    }
  }
}

/**
 * Whether an exclude removes the entry. An exclude pinned to a version that no include pins removes
 * the codes that version selects from every version (as the reference servers answer: excluding one
 * version of a code system from another is a diff); otherwise it is evaluated in the entry's version.
 */
async function excluded(vs: CompiledValueSet, entry: ExpansionEntry, lookup: CodeSystemLookup): Promise<boolean> {
  for (const set of vs.excludes) {
    if (set.system !== undefined && set.system !== entry.system) continue;
    const diff = set.version !== undefined && set.system !== undefined && !vs.includes.some((i) => i.system === set.system && i.version === set.version);
    const coding = diff ? { system: entry.system, code: entry.code } : entry;
    if ((await set.check(coding, lookup)).member) return true;
  }
  return false;
}

async function* enumerateSet(set: CompiledConceptSet, lookup: CodeSystemLookup): AsyncGenerator<ExpansionEntry> {
  const imports = set.imports.map((i) => i.compiled).filter((c) => c !== null);
  const missing = set.missingImports();
  if (missing.length > 0) {
    throw invalid(`${set.where}: the imported ValueSet '${missing[0]}' could not be found, so the expansion would be incomplete`);
  }
  // Without a system, the first import supplies the candidates and the others intersect.
  const [first, ...others] = imports;
  const candidates = set.system !== undefined ? systemCandidates(set, set.system, lookup) : first !== undefined ? enumerateValueSet(first, lookup) : [];
  const checks = set.system !== undefined ? imports : others;
  for await (const entry of candidates) {
    if (await inAll(checks, entry, lookup)) yield entry;
  }
}

async function inAll(valueSets: readonly CompiledValueSet[], entry: ExpansionEntry, lookup: CodeSystemLookup): Promise<boolean> {
  for (const vs of valueSets) {
    if (!(await vs.check(entry, lookup)).member) return false;
  }
  return true;
}

async function* systemCandidates(set: CompiledConceptSet, system: string, lookup: CodeSystemLookup): AsyncGenerator<ExpansionEntry> {
  const cs = await lookup.codeSystem(system, set.version);
  const listed = set.conceptList();
  if (cs === null || cs.content === 'not-present') {
    if (listed === undefined) throw invalid(`${set.where}: CodeSystem ${systemLabel(system, set.version, lookup.asOf)} is not available, so it cannot be expanded`);
    for (const c of listed) yield { system, version: set.version, code: c.code, display: c.display, abstract: false, inactive: false };
    return;
  }
  if (listed !== undefined) {
    for (const c of listed) {
      const e = cs.find(c.code);
      // A listed code missing from a fragment or example CodeSystem is not proof of absence.
      if (e !== undefined) yield entryOf(system, cs, e);
      else if (cs.content !== 'complete') yield { system, version: cs.version, code: c.code, display: c.display, abstract: false, inactive: false };
    }
    return;
  }
  const predicates = set.predicatesFor(cs);
  for (const e of cs.entries()) {
    if (predicates.every((p) => p(e))) yield entryOf(system, cs, e);
  }
}

function entryOf(system: string, cs: CodeSystemIndex, e: ConceptEntry): ExpansionEntry {
  const { definition } = e;
  const concept = { definition, language: cs.language };
  return { system, version: cs.version, code: e.code, display: definition.display, abstract: e.abstract, inactive: e.inactive, concept };
}
