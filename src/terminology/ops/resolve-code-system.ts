import type { CodeSystemIndex } from '../compile/code-system-index.ts';
import type { TerminologyContext } from '../context.ts';
import { systemLabel } from '../compile/membership.ts';
import { invalid, notFound } from '../errors.ts';

/** The stored CodeSystem of an instance-level operation (`CodeSystem/{id}/$...`); 404 when unknown. */
export async function codeSystemInstance(ctx: TerminologyContext, id: string): Promise<CodeSystemIndex> {
  const cs = await ctx.codeSystemById(id);
  if (cs === null) throw notFound(`CodeSystem/${id} is not known`);
  return cs;
}

/** The CodeSystem an operation names by `system` (and `version`), or the stored one at instance level. */
export type CodeSystemTarget = { readonly system: string; readonly version?: string } | { readonly instance: CodeSystemIndex };

/** The CodeSystem of `target`; a 404 when none is known by that system (and version). */
export async function targetCodeSystem(target: CodeSystemTarget, ctx: TerminologyContext): Promise<CodeSystemIndex> {
  if ('instance' in target) return target.instance;
  const { system, version } = target;
  const cs = await ctx.codeSystem(system, version);
  if (cs === null) throw notFound(`CodeSystem ${systemLabel(system, version, ctx.asOf)} is not known`);
  return cs;
}

/** Names of the inputs that may repeat the instance's identity, for messages. */
export interface IdentityParams {
  readonly system: string;
  readonly version: string;
}

/**
 * At instance level the CodeSystem is the one in the path: a system or version the client
 * names as well must be that CodeSystem's (a 400 otherwise, rather than a silent choice).
 */
export function checkSameCodeSystem(cs: CodeSystemIndex, system: string | undefined, version: string | undefined, params: IdentityParams): void {
  const path = `CodeSystem/${cs.resource.id ?? ''}`;
  if (system !== undefined && system !== cs.url) {
    throw invalid(`'${params.system}' is '${system}', but ${path} is the CodeSystem '${cs.url}'`, [params.system]);
  }
  if (version !== undefined && version !== cs.version) {
    const has = cs.version === undefined ? 'has no version' : `is version '${cs.version}'`;
    throw invalid(`'${params.version}' is '${version}', but ${path} ${has}`, [params.version]);
  }
}
