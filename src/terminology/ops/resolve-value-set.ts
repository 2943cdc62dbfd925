import type { CompiledValueSet } from '../compile/compiled-value-set.ts';
import type { TerminologyContext } from '../context.ts';
import { invalid, notFound } from '../errors.ts';
import type { ValueSetTarget } from '../input/value-set-target.ts';

/**
 * Finds and compiles the ValueSet an operation targets. Not found by URL is a 400 naming it
 * (interface: ValueSet validate-code errors); not found by id is a 404 (instance level).
 */
export async function resolveValueSet(target: ValueSetTarget, ctx: TerminologyContext): Promise<CompiledValueSet> {
  if (target.kind === 'inline') return ctx.compile(target.resource);
  if (target.kind === 'id') {
    const byId = await ctx.valueSetById(target.id);
    if (byId === null) throw notFound(`ValueSet/${target.id} is not known`);
    return byId;
  }
  const compiled = await ctx.valueSet(target.url, target.version);
  if (compiled === null) {
    const name = target.version === undefined ? target.url : `${target.url}|${target.version}`;
    throw invalid(`ValueSet '${name}' could not be found`, ['url']);
  }
  return compiled;
}
