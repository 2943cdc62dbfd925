import { invalid } from '../errors.ts';
import type { ValueSet } from '../model/value-set.ts';
import { splitCanonical } from '../version.ts';

/** Which ValueSet an operation works on. */
export type ValueSetTarget =
  | { readonly kind: 'url'; readonly url: string; readonly version?: string }
  | { readonly kind: 'id'; readonly id: string }
  | { readonly kind: 'inline'; readonly resource: ValueSet };

export interface TargetInputs {
  readonly url?: string;
  readonly valueSetVersion?: string;
  readonly valueSet?: ValueSet;
}

/**
 * Interface rule 1: at type level the ValueSet comes from `url` (`url|version` accepted) or an
 * inline `valueSet`; at instance level (`ValueSet/{id}/$...`) the stored resource is used.
 */
export function valueSetTarget(i: TargetInputs, instanceId?: string): ValueSetTarget {
  if (instanceId !== undefined) return { kind: 'id', id: instanceId };
  if (i.url !== undefined) {
    const { url, version } = splitCanonical(i.url);
    return { kind: 'url', url, version: i.valueSetVersion ?? version };
  }
  if (i.valueSet !== undefined) return { kind: 'inline', resource: i.valueSet };
  throw invalid("the parameter 'url' (or an inline 'valueSet') is required when no ValueSet id is given in the path", ['url']);
}
