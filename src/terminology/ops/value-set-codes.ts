import { enumerateValueSet } from '../compile/enumerate.ts';
import type { TerminologyContext } from '../context.ts';
import { splitCanonical } from '../version.ts';
import { resolveValueSet } from './resolve-value-set.ts';

/**
 * The distinct system and code pairs of the ValueSet `canonical` (`url` or `url|version`), as search's
 * `:in` and `:not-in` use them: at most `limit + 1`, so that a caller can tell "more than `limit`"
 * without enumerating the rest. An unknown ValueSet is the terminology engine's 400.
 */
export async function valueSetCodes(terminology: TerminologyContext, canonical: string, limit: number): Promise<{ system: string; code: string }[]> {
  const { url, version } = splitCanonical(canonical);
  const vs = await resolveValueSet({ kind: 'url', url, version }, terminology);
  const seen = new Set<string>();
  const out: { system: string; code: string }[] = [];
  for await (const { system, code } of enumerateValueSet(vs, terminology)) {
    const key = `${system}|${code}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ system, code });
    if (out.length > limit) break;
  }
  return out;
}
