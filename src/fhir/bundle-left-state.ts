/**
 * A condition searched against the state a transaction leaves (FHIR R4 http 3.1.0.11.2, "Conditional References"),
 * where its chains or `_has` read what the transaction writes. The store holds the state before the transaction, so a
 * link is rewritten to its meaning after it: `_has:Observation:subject:code=x` becomes "a stored Observation the
 * transaction keeps (neither updates, patches nor deletes) with code x refers to it, or it is one the written
 * Observations with code x refer to"; a chain `subject:Patient.identifier=a` becomes "its subject is a stored Patient
 * the transaction keeps with that identifier, or one of the written Patients that have it". The written resources are
 * matched with the same compiled conditions, evaluated in memory (search-match.ts), their own links read the same way,
 * so the store's answer and theirs together are the search of that state, as HAPI FHIR resolves a conditional
 * reference against the resources its transaction writes.
 */
import type { Condition, ResourceVersion, SearchQuery } from '../store/types.ts';
import type { TransactionWrite, WrittenResources } from './bundle-conditional.ts';
import { findResources } from './core-search.ts';
import type { FhirDeps, FhirRequest } from './crud.ts';
import { canonicalCondition, namedCanonicals, namingCanonicals } from './search-canonical.ts';
import { matchConditions, type MatchContext } from './search-match.ts';
import { keptInReach, rowsFilled } from './search.ts';

/** The stored and written resources as a transaction leaves them, for conditions whose links read its writes. */
export class LeftState {
  /** Chains and `_has` of written resources matched in memory look their other side up here: stored and written alike. */
  readonly ctx: MatchContext;
  /** By type and conditions: the written resources meeting them, each set matched once. */
  private readonly met = new Map<string, Promise<TransactionWrite[]>>();

  /**
   * `written`: the transaction's writes, held without a lookup of their own (WrittenResources narrows a `_has` by the
   * stored referrers alone, which would leave out the resources only written ones refer to). `now`: their lastUpdated.
   */
  constructor(
    private readonly deps: FhirDeps,
    private readonly req: FhirRequest,
    private readonly written: WrittenResources,
    private readonly now: number,
  ) {
    const base = written.ctx.base;
    this.ctx = { exists: (q) => this.exists(q), ...(base !== undefined && { base }) };
  }

  /**
   * The first `count` stored resources `query` (compiled, as the token may run it) finds in the state left: its links
   * rewritten, the stored resources the transaction replaces left out (their written versions are matched by meeting()),
   * kept in reach as a search keeps them (keptInReach). Returns the store query it ran, to be searched again at the commit.
   */
  async stored(query: SearchQuery, count: number): Promise<{ rows: ResourceVersion[]; query: SearchQuery }> {
    const ran: SearchQuery = { ...query, where: [...(await this.rewrite(query.where ?? [], query.type)), ...this.kept(query.type)], sort: [], count };
    const keep = keptInReach(this.deps, this.req, query.type, ran.compartment);
    const rows = keep === undefined ? await findResources(this.deps, this.req.tenant, ran) : (await rowsFilled(this.deps, this.req, ran, keep, (q) => findResources(this.deps, this.req.tenant, q))).map((k) => k.row);
    return { rows, query: ran };
  }

  /** The written resources of `type` that meet `where` in the state left (their links read stored and written resources). */
  meeting(type: string, where: readonly Condition[]): Promise<TransactionWrite[]> {
    const key = `${type}\u0000${JSON.stringify(where)}`;
    let found = this.met.get(key);
    if (found === undefined) {
      found = (async () => {
        const out: TransactionWrite[] = [];
        for (const w of await this.written.candidates(type, [...where])) {
          if (await matchConditions({ ...w.resource!, id: w.id }, this.now, [...where], this.ctx, this.written.rows(w))) out.push(w);
        }
        return out;
      })();
      this.met.set(key, found);
    }
    return found;
  }

  /** Whether a resource of `q.type` meets `q.where` in the state left: a written one, or a stored one the transaction keeps. */
  private async exists(q: SearchQuery): Promise<boolean> {
    if ((await this.meeting(q.type, q.where ?? [])).length > 0) return true;
    const where = [...(await this.rewrite(q.where ?? [], q.type)), ...this.kept(q.type)];
    return (await findResources(this.deps, this.req.tenant, { ...q, where, count: 1 })).length > 0;
  }

  /** No stored resource of `type` the transaction updates, patches or deletes: its stored version is not in the state left. */
  private kept(type: string): Condition[] {
    const replaced = this.written.replaced(type);
    return replaced.size === 0 ? [] : [{ kind: 'id', ids: [...replaced], not: true }];
  }

  /** `where`, conditions on resources of `type`, with each chain and `_has` (at any depth) read in the state left. */
  private async rewrite(where: readonly Condition[], type: string): Promise<Condition[]> {
    const out: Condition[] = [];
    for (const c of where) out.push(await this.rewritten(c, type));
    return out;
  }

  private async rewritten(c: Condition, type: string): Promise<Condition> {
    switch (c.kind) {
      case 'chain': {
        // Its target a stored one kept that meets the link, or a written one that does.
        const stored: Condition = { ...c, where: [...(await this.rewrite(c.where, c.targetType)), ...this.kept(c.targetType)] };
        const met = await this.meeting(c.targetType, c.where);
        const canonicals = c.canonical ? canonicalsOf(met, this.written) : undefined;
        if (met.length === 0 || canonicals?.size === 0) return stored;
        const written: Condition = canonicals !== undefined
          ? namingCanonicals(c.param, canonicals)
          : { kind: 'token', param: c.param, values: met.map((w) => ({ system: c.targetType, value: w.id })), reference: true };
        return { kind: 'or', any: [stored, written] };
      }
      case 'has': {
        // Named by a stored referrer kept that meets the link, or by a written one that does.
        const stored: Condition = { ...c, where: [...(await this.rewrite(c.where, c.type)), ...this.kept(c.type)] };
        const rows = (await this.meeting(c.type, c.where)).flatMap((w) => this.written.rows(w).tokens.filter((e) => e.param === c.param));
        const written: Condition | undefined = c.canonical
          ? named(namedCanonicals(rows.filter((e) => e.system === '').map((e) => e.value)))
          : ids(rows.filter((e) => e.system === type).map((e) => e.value));
        return written === undefined ? stored : { kind: 'or', any: [stored, written] };
      }
      case 'or': return { ...c, any: await this.rewrite(c.any, type) };
      case 'and': return { ...c, all: await this.rewrite(c.all, type) };
      case 'not': return { ...c, condition: await this.rewritten(c.condition, type) };
      default: return c;
    }
  }
}

/** The canonical resources among `met`: url → their versions, as a canonical reference names them. */
function canonicalsOf(met: TransactionWrite[], written: WrittenResources): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const w of met) {
    const tokens = written.rows(w).tokens;
    const versions = tokens.filter((e) => e.param === 'version').map((e) => e.value);
    for (const e of tokens) if (e.param === 'url' && e.system === '') out.set(e.value, [...(out.get(e.value) ?? []), ...versions]);
  }
  return out;
}

const named = (canonicals: string[]): Condition | undefined => (canonicals.length === 0 ? undefined : canonicalCondition(canonicals));
const ids = (values: string[]): Condition | undefined => (values.length === 0 ? undefined : { kind: 'id', ids: [...new Set(values)] });
