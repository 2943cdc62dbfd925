import type { CompiledValueSet } from '../compile/compiled-value-set.ts';
import type { TerminologyContext } from '../context.ts';
import { canonicalNotFound, invalid, notFound } from '../errors.ts';
import type { ValueSetTarget } from '../input/value-set-target.ts';
import type { SyncOrAsync } from '../../sync-or-async.ts';

/**
 * Finds and compiles the ValueSet an operation targets. Not found by URL (or by URL as of the
 * context's date) is a 400 naming it (interface: ValueSet validate-code errors); not found by id
 * is a 404 (instance level). At once when the ValueSet is loaded (by URL), else as a promise.
 */
export function resolveValueSet(target: ValueSetTarget, ctx: TerminologyContext): SyncOrAsync<CompiledValueSet> {
  if (target.kind === 'inline') return ctx.compile(target.resource);
  if (target.kind === 'id') return instance(target, ctx);
  const compiled = ctx.valueSet(target.url, target.version);
  return compiled instanceof Promise ? compiled.then((c) => found(c, target, ctx)) : found(compiled, target, ctx);
}

function found(compiled: CompiledValueSet | null, target: ValueSetTarget & { kind: 'url' }, ctx: TerminologyContext): CompiledValueSet {
  if (compiled === null) throw canonicalNotFound('ValueSet', target.url, target.version, ctx.asOf);
  return compiled;
}

/** The stored ValueSet of `ValueSet/{id}/$...`; a `url` or `valueSetVersion` given too must be its own. */
async function instance(target: ValueSetTarget & { kind: 'id' }, ctx: TerminologyContext): Promise<CompiledValueSet> {
  const compiled = await ctx.valueSetById(target.id);
  if (compiled === null) throw notFound(`ValueSet/${target.id} is not known`);
  const { url, version } = compiled.resource;
  if (target.url !== undefined && target.url !== url) {
    throw invalid(`'url' is '${target.url}', but ValueSet/${target.id} has the url '${url ?? '(none)'}'`, ['url']);
  }
  if (target.version !== undefined && target.version !== version) {
    throw invalid(`'valueSetVersion' is '${target.version}', but ValueSet/${target.id} is version '${version ?? '(none)'}'`, ['valueSetVersion']);
  }
  return compiled;
}
