import type { SyncOrAsync } from '../../sync-or-async.ts';
import { expansionParameter, type ValueSet } from '../model/value-set.ts';
import { compareVersions, matchesVersion } from '../version.ts';
import type { CompiledConceptSet } from './concept-set.ts';
import type { ExpansionIndex } from './expansion-index.ts';
import {
  type Checked,
  checkLoading,
  type CodeSystemLookup,
  type CodingToCheck,
  conceptStatus,
  inactiveConceptFound,
  type LoadedCodeSystems,
  type Member,
  type Membership,
  nonMember,
  NotLoaded,
  type TxIssue,
  txIssue,
} from './membership.ts';

let compilations = 0;

/** The displays a member's concept has in its code system version (display and designations). */
function displaysOf(m: Member): string[] {
  const d = m.entry?.definition;
  return [...m.displays, ...(d?.display === undefined ? [] : [d.display]), ...(d?.designation ?? []).map((x) => x.value)];
}

export interface CompiledValueSetParts {
  readonly resource: ValueSet;
  readonly includes: readonly CompiledConceptSet[];
  readonly excludes: readonly CompiledConceptSet[];
  /** Set when the ValueSet has no compose and is defined by its expansion. */
  readonly expansion?: ExpansionIndex;
  /** The value set the request supplies (`valueSet`), not a stored one: a refusal about it names the element at fault. */
  readonly supplied?: boolean;
}

/**
 * A ValueSet compiled into a membership test without expanding it (R4 ValueSet 4.9.5):
 * a coding is a member when one include admits it and no exclude does; inactive codes are
 * members unless `compose.inactive` is false.
 */
export class CompiledValueSet {
  /**
   * Unique among the value sets compiled in this process. A compilation stands for the tenant's
   * terminology as it was then (every change drops it and compiles anew), so answers about it may be
   * kept under this number (validate-value-set-code.ts).
   */
  readonly serial = ++compilations;
  readonly resource: ValueSet;
  readonly label: string;
  readonly includes: readonly CompiledConceptSet[];
  readonly excludes: readonly CompiledConceptSet[];
  readonly expansion: ExpansionIndex | undefined;
  readonly supplied: boolean;
  readonly inactiveAllowed: boolean;
  /**
   * How the versions of one code system meet (the `versionsMatch` expansion parameter on `compose`, as tx.fhir.org
   * reads it): true, a code is one concept whatever the version (its expansion lists it once, in the latest version
   * that has it, and an exclude pinned to one version removes the code from every version); false, each version's
   * code is its own (an exclude removes only its own version's); undefined, the default: includes list each
   * version's codes, and an exclude pinned to a version no include pins removes them from every version.
   */
  readonly versionsMatch: boolean | undefined;
  /** Systems that several includes name in different versions ("overload"): a code may be in more than one. */
  readonly overloaded: ReadonlySet<string>;

  constructor(parts: CompiledValueSetParts) {
    this.resource = parts.resource;
    this.supplied = parts.supplied === true;
    const { url, version } = parts.resource;
    this.label = url === undefined ? 'the supplied ValueSet' : `'${url}${version === undefined ? '' : `|${version}`}'`;
    this.includes = parts.includes;
    this.excludes = parts.excludes;
    this.expansion = parts.expansion;
    this.inactiveAllowed = parts.resource.compose?.inactive !== false;
    const versionsMatch = expansionParameter(parts.resource, 'versionsMatch');
    this.versionsMatch = versionsMatch === 'true' ? true : versionsMatch === 'false' ? false : undefined;
    const versions = new Map<string, Set<string | undefined>>();
    for (const set of parts.includes) if (set.system !== undefined) (versions.get(set.system) ?? versions.set(set.system, new Set()).get(set.system)!).add(set.version);
    this.overloaded = new Set([...versions].filter(([, v]) => v.size > 1).map(([system]) => system));
  }

  /**
   * Whether an exclude removes its codes from every version of its system (a diff) rather than from its own version:
   * with `versionsMatch` true always, false never, and by default when it pins a version no include pins.
   */
  diffs(set: CompiledConceptSet): boolean {
    if (set.version === undefined || set.system === undefined || this.versionsMatch === false) return false;
    return this.versionsMatch === true || !this.includes.some((i) => i.system === set.system && i.version === set.version);
  }

  /** Whether codes of several versions meet as one concept in this value set (versionsMatch true, or an exclude that diffs). */
  get versionsMerged(): boolean {
    return this.versionsMatch === true || (this.versionsMatch === undefined && this.excludes.some((set) => this.diffs(set)));
  }

  /** Membership of one coding: at once when the CodeSystems it needs are loaded, else as a promise (see checkLoading). */
  check(coding: CodingToCheck, lookup: CodeSystemLookup): SyncOrAsync<Membership> {
    return checkLoading((loaded) => this.checkLoaded(coding, loaded), lookup);
  }

  /** Membership of one coding, or the CodeSystem that must be loaded to decide it. */
  checkLoaded(coding: CodingToCheck, loaded: LoadedCodeSystems): Checked {
    const found = this.expansion !== undefined ? this.expansion.check(coding, loaded) : this.checkCompose(coding, loaded);
    if (found instanceof NotLoaded) return found;
    if (found.member && found.inactive && !this.inactiveAllowed) {
      // HL7's STATUS_CODE_WARNING_CODE and INACTIVE_CONCEPT_FOUND, as the reference servers answer.
      return nonMember(
        txIssue('error', 'business-rule', 'code-rule', `The concept '${coding.code}' is valid but is not active`, 'STATUS_CODE_WARNING_CODE'),
        inactiveConceptFound(coding.code, conceptStatus(found.entry)),
      );
    }
    return found;
  }

  private checkCompose(coding: CodingToCheck, loaded: LoadedCodeSystems): Checked {
    const reasons: TxIssue[] = [];
    let hit: Member | undefined;
    const overloaded = this.overloaded.has(coding.system);
    for (const set of this.includes) {
      if (set.system !== undefined && set.system !== coding.system) continue;
      const m = set.checkLoaded(coding, loaded);
      if (m instanceof NotLoaded) return m;
      if (m.member) {
        if (!overloaded) {
          hit = m;
          break;
        }
        // Several versions of the system included: the code counts in the latest version that has it,
        // and a display of any of those versions is a valid one; a display only an older version has
        // names that version, whose display and version the answer then carries (as the reference
        // servers answer).
        const [newer, older] = hit === undefined || compareVersions(m.cs?.version ?? '', hit.cs?.version ?? '') > 0 ? [m, hit] : [hit, m];
        if (older === undefined) hit = newer;
        else if (coding.display !== undefined && !displaysOf(newer).includes(coding.display) && displaysOf(older).includes(coding.display)) hit = older;
        else hit = { ...newer, olderDisplays: [...(newer.olderDisplays ?? []), ...displaysOf(older), ...(older.olderDisplays ?? [])] };
        continue;
      }
      reasons.push(...m.reasons);
    }
    if (hit === undefined) {
      // An include of the coding's own version decided: the other versions' mismatches say nothing more.
      const ownVersion = overloaded && coding.version !== undefined && this.includes.some((set) => set.system === coding.system && set.version !== undefined && matchesVersion(set.version, coding.version!));
      return nonMember(...(ownVersion ? reasons.filter((r) => r.type !== 'vs-invalid') : reasons));
    }
    for (const set of this.excludes) {
      if (set.system !== undefined && set.system !== coding.system) continue;
      // An exclude that names a ValueSet the server does not have may exclude the code: whether the code is in is unknown.
      const missing = set.missingImports()[0];
      if (missing !== undefined) {
        return nonMember(txIssue('error', 'not-found', 'not-found', `The ValueSet '${missing}' named by ${set.where} could not be found, so whether it excludes the code '${coding.code}' is unknown`));
      }
      // Versions kept apart (versionsMatch false): the exclude removes the code only from its own version.
      const m = set.checkLoaded(this.versionsMatch === false ? { ...coding, version: hit.cs?.version } : coding, loaded);
      if (m instanceof NotLoaded) return m;
      // Not in the value set, said as of any code outside it (no note of the exclude, as the reference servers answer).
      if (m.member) return nonMember();
    }
    return hit;
  }
}
