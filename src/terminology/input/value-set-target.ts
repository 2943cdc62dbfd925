import { invalid } from '../errors.ts';
import type { ValueSet } from '../model/value-set.ts';
import { splitCanonical } from '../version.ts';

/** Which ValueSet an operation works on. */
export type ValueSetTarget =
  | { readonly kind: 'url'; readonly url: string; readonly version?: string }
  | { readonly kind: 'id'; readonly id: string; readonly url?: string; readonly version?: string }
  | { readonly kind: 'inline'; readonly resource: ValueSet };

export interface TargetInputs {
  readonly url?: string;
  readonly valueSetVersion?: string;
  readonly valueSet?: ValueSet;
}

/**
 * Interface rule 1: at type level the ValueSet comes from `url` (`url|version` accepted, which a
 * `valueSetVersion` given too must agree with) or an
 * inline `valueSet`; at instance level (`ValueSet/{id}/$...`) the stored resource is used, and a
 * `url` or `valueSetVersion` given as well must be its own (checked by resolveValueSet).
 */
export function valueSetTarget(i: TargetInputs, instanceId?: string): ValueSetTarget {
  const canonical = i.url === undefined ? undefined : splitCanonical(i.url);
  if (canonical?.version !== undefined && i.valueSetVersion !== undefined && canonical.version !== i.valueSetVersion) {
    throw invalid(`'valueSetVersion' is '${i.valueSetVersion}', but 'url' names version '${canonical.version}'`, ['valueSetVersion']);
  }
  const version = i.valueSetVersion ?? canonical?.version;
  if (instanceId !== undefined) {
    if (i.valueSet !== undefined) throw invalid("an inline 'valueSet' cannot be given with a ValueSet id in the path", ['valueSet']);
    return { kind: 'id', id: instanceId, url: canonical?.url, version };
  }
  if (canonical !== undefined) return { kind: 'url', url: canonical.url, version };
  if (i.valueSet !== undefined) return { kind: 'inline', resource: i.valueSet };
  throw invalid("the parameter 'url' (or an inline 'valueSet') is required when no ValueSet id is given in the path", ['url']);
}
