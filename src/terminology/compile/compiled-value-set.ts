import type { ValueSet } from '../model/value-set.ts';
import type { CompiledConceptSet } from './concept-set.ts';
import type { ExpansionIndex } from './expansion-index.ts';
import {
  type CodeSystemLookup,
  type CodingToCheck,
  type Member,
  type Membership,
  nonMember,
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
  private readonly excludeWarnings: readonly string[];

  constructor(parts: CompiledValueSetParts) {
    this.resource = parts.resource;
    const { url, version } = parts.resource;
    this.label = url === undefined ? 'the supplied ValueSet' : `'${url}${version === undefined ? '' : `|${version}`}'`;
    this.includes = parts.includes;
    this.excludes = parts.excludes;
    this.expansion = parts.expansion;
    this.inactiveAllowed = parts.resource.compose?.inactive !== false;
    this.excludeWarnings = parts.excludes.flatMap((set) =>
      set.missingImports().map((c) => `The ValueSet '${c}' named by ${set.where} could not be found, so it excluded nothing`),
    );
  }

  /** Membership of one coding. */
  async check(coding: CodingToCheck, lookup: CodeSystemLookup): Promise<Membership> {
    const found = this.expansion !== undefined ? await this.expansion.check(coding, lookup) : await this.checkCompose(coding, lookup);
    if (found.member && found.inactive && !this.inactiveAllowed) {
      return nonMember(`The code '${coding.code}' is inactive and the value set ${this.label} excludes inactive codes`);
    }
    return found;
  }

  private async checkCompose(coding: CodingToCheck, lookup: CodeSystemLookup): Promise<Membership> {
    const reasons: string[] = [];
    let hit: Member | undefined;
    for (const set of this.includes) {
      if (set.system !== undefined && set.system !== coding.system) continue;
      const m = await set.check(coding, lookup);
      if (m.member) {
        hit = m;
        break;
      }
      reasons.push(...m.reasons);
    }
    if (hit === undefined) return nonMember(...reasons);
    for (const set of this.excludes) {
      if (set.system !== undefined && set.system !== coding.system) continue;
      if ((await set.check(coding, lookup)).member) {
        return nonMember(`The code '${coding.code}' is excluded from ${this.label} by ${set.where}`);
      }
    }
    return withWarnings(hit, this.excludeWarnings);
  }
}
