import type { ValueSet } from '../model/value-set.ts';
import type { CompiledConceptSet } from './concept-set.ts';
import type { ExpansionIndex } from './expansion-index.ts';
import {
  type Checked,
  checkLoading,
  type CodeSystemLookup,
  type CodingToCheck,
  type LoadedCodeSystems,
  type Member,
  type Membership,
  nonMember,
  NotLoaded,
  type TxIssue,
  txIssue,
  withWarnings,
} from './membership.ts';

export interface CompiledValueSetParts {
  readonly resource: ValueSet;
  readonly includes: readonly CompiledConceptSet[];
  readonly excludes: readonly CompiledConceptSet[];
  /** Set when the ValueSet has no compose and is defined by its expansion. */
  readonly expansion?: ExpansionIndex;
}

/**
 * A ValueSet compiled into a membership test without expanding it (R4 ValueSet 4.9.5):
 * a coding is a member when one include admits it and no exclude does; inactive codes are
 * members unless `compose.inactive` is false.
 */
export class CompiledValueSet {
  readonly resource: ValueSet;
  readonly label: string;
  readonly includes: readonly CompiledConceptSet[];
  readonly excludes: readonly CompiledConceptSet[];
  readonly expansion: ExpansionIndex | undefined;
  readonly inactiveAllowed: boolean;
  private readonly excludeWarnings: readonly TxIssue[];

  constructor(parts: CompiledValueSetParts) {
    this.resource = parts.resource;
    const { url, version } = parts.resource;
    this.label = url === undefined ? 'the supplied ValueSet' : `'${url}${version === undefined ? '' : `|${version}`}'`;
    this.includes = parts.includes;
    this.excludes = parts.excludes;
    this.expansion = parts.expansion;
    this.inactiveAllowed = parts.resource.compose?.inactive !== false;
    this.excludeWarnings = parts.excludes.flatMap((set) =>
      set.missingImports().map((c) => txIssue('warning', 'not-found', 'not-found', `The ValueSet '${c}' named by ${set.where} could not be found, so it excluded nothing`)),
    );
  }

  /** Membership of one coding (synchronous when the CodeSystems it needs are loaded, see checkLoading). */
  check(coding: CodingToCheck, lookup: CodeSystemLookup): Promise<Membership> {
    return checkLoading((loaded) => this.checkLoaded(coding, loaded), lookup);
  }

  /** Membership of one coding, or the CodeSystem that must be loaded to decide it. */
  checkLoaded(coding: CodingToCheck, loaded: LoadedCodeSystems): Checked {
    const found = this.expansion !== undefined ? this.expansion.check(coding, loaded) : this.checkCompose(coding, loaded);
    if (found instanceof NotLoaded) return found;
    if (found.member && found.inactive && !this.inactiveAllowed) {
      return nonMember(
        txIssue('error', 'business-rule', 'code-rule', `The code '${coding.code}' is inactive and the value set ${this.label} excludes inactive codes`),
        txIssue('warning', 'business-rule', 'status-check', `The code '${coding.code}' is inactive`),
      );
    }
    return found;
  }

  private checkCompose(coding: CodingToCheck, loaded: LoadedCodeSystems): Checked {
    const reasons: TxIssue[] = [];
    let hit: Member | undefined;
    for (const set of this.includes) {
      if (set.system !== undefined && set.system !== coding.system) continue;
      const m = set.checkLoaded(coding, loaded);
      if (m instanceof NotLoaded) return m;
      if (m.member) {
        hit = m;
        break;
      }
      reasons.push(...m.reasons);
    }
    if (hit === undefined) return nonMember(...reasons);
    for (const set of this.excludes) {
      if (set.system !== undefined && set.system !== coding.system) continue;
      const m = set.checkLoaded(coding, loaded);
      if (m instanceof NotLoaded) return m;
      if (m.member) return nonMember(txIssue('information', 'code-invalid', 'this-code-not-in-vs', `The code '${coding.code}' is excluded from ${this.label} by ${set.where}`));
    }
    return withWarnings(hit, this.excludeWarnings);
  }
}
