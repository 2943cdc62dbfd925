import { FhirError } from '../errors.ts';
import type { TerminologyContext } from './context.ts';
import type { DatePeriod } from './model/date-time.ts';
import type { ValueSet } from './model/value-set.ts';
import type { CompiledValueSet } from './compile/compiled-value-set.ts';

/**
 * `ctx` for a request that may not read the tenant's CodeSystems: a ValueSet operation (`$expand`,
 * `$validate-code`) that needs a code system the tenant stores itself (`owns`, by canonical url, any version) is a
 * 403 naming it, while R4 core's code systems (shared by every tenant, no one's record) are read as before. A
 * ValueSet, inline or stored, names any code system it likes, so without this a token that reads ValueSets and
 * not CodeSystems listed a tenant CodeSystem's codes, displays and designations by expanding a ValueSet of it.
 * Each url is asked once per request. `absent`: such a code system is answered as unknown instead of a 403, for an
 * operation that reads it only to add a display (`$translate`'s concepts).
 */
export function withoutTenantCodeSystems(ctx: TerminologyContext, owns: (url: string) => Promise<boolean>, absent = false): TerminologyContext {
  const asked = new Map<string, Promise<boolean>>();
  const owned = (url: string) => {
    let p = asked.get(url);
    if (p === undefined) asked.set(url, (p = owns(url)));
    return p;
  };
  return guarded(ctx, owned, absent);
}

function guarded(ctx: TerminologyContext, owned: (url: string) => Promise<boolean>, absent: boolean): TerminologyContext {
  return {
    reach: absent ? 'tenant code systems absent' : 'tenant code systems refused',
    asOf: ctx.asOf,
    ...(ctx.versions === undefined ? {} : { versions: ctx.versions }),
    codeSystem: (url: string, version?: string) =>
      owned(url).then((own) => {
        if (own && absent) return null;
        if (own) throw unreadable(url);
        return ctx.codeSystem(url, version);
      }),
    codeSystemById: (id: string) => ctx.codeSystemById(id),
    // The tenant's own versions are listed only where its code system may be read (else: none, or a 403, as codeSystem).
    codeSystemVersions: (url: string) =>
      owned(url).then((own) => {
        if (own && absent) return [];
        if (own) throw unreadable(url);
        return ctx.codeSystemVersions?.(url);
      }),
    valueSet: (url: string, version?: string) => ctx.valueSet(url, version),
    valueSetById: (id: string): Promise<CompiledValueSet | null> => ctx.valueSetById(id),
    compile: (vs: ValueSet) => ctx.compile(vs),
    at: (date: DatePeriod | undefined) => guarded(date === ctx.asOf ? ctx : ctx.at(date), owned, absent),
  };
}

function unreadable(url: string): FhirError {
  return new FhirError('forbidden', `The access token's scopes do not allow read of CodeSystem, and this operation needs the tenant's CodeSystem ${url}`);
}
