import type { CodeSystemIndex } from '../compile/code-system-index.ts';
import type { CodeSystemLookup } from '../compile/membership.ts';
import { FhirError } from '../../errors.ts';
import { invalid, TX_ISSUE_TYPE } from '../errors.ts';
import { matchesVersion, splitCanonical } from '../version.ts';
import { then } from '../../sync-or-async.ts';

/**
 * The code system versions an `$expand` request asks for (FHIR R4 ValueSet-expand `system-version`,
 * `check-system-version`, `force-system-version`), each a canonical `url|version` whose version may be
 * a wildcard pattern (`1.0.x`), by system URL.
 */
export interface SystemVersions {
  /** Used where the value set (or one it imports) does not pin a version. */
  readonly defaults: ReadonlyMap<string, string>;
  /** Like defaults; a pinned version that does not match is an error instead of an expansion. */
  readonly checks: ReadonlyMap<string, string>;
  /** Used whatever version the value set pins. */
  readonly forces: ReadonlyMap<string, string>;
}

/** Reads the three inputs; a canonical without a version, or two for one system, is a 400. */
export function systemVersions(inputs: { readonly [K in 'system-version' | 'check-system-version' | 'force-system-version']?: readonly string[] }): SystemVersions | undefined {
  const read = (name: keyof typeof inputs): Map<string, string> => {
    const out = new Map<string, string>();
    for (const canonical of inputs[name] ?? []) {
      const { url, version } = splitCanonical(canonical);
      if (version === undefined) throw invalid(`The parameter '${name}' must be a canonical with a version (system|version), not '${canonical}'`, [name]);
      if (out.has(url) && out.get(url) !== version) throw invalid(`The parameter '${name}' names two versions of '${url}'`, [name]);
      out.set(url, version);
    }
    return out;
  };
  const rules = { defaults: read('system-version'), checks: read('check-system-version'), forces: read('force-system-version') };
  return rules.defaults.size + rules.checks.size + rules.forces.size === 0 ? undefined : rules;
}

/**
 * The version of `url` to use when a value set asks for `version` (undefined: not pinned): the forced
 * one, else the pinned one (which must match a check: `refused` when it does not), else the default or check one.
 */
function chooseVersion(rules: SystemVersions, url: string, version: string | undefined): string | undefined | typeof refused {
  const forced = rules.forces.get(url);
  if (forced !== undefined) return forced;
  const check = rules.checks.get(url);
  if (version === undefined) return rules.defaults.get(url) ?? check;
  return check !== undefined && !matchesVersion(check, version) ? refused : version;
}
const refused = Symbol('refused');

/**
 * HL7's VALUESET_VERSION_CHECK: the version a value set's pin resolves to is not one `check-system-version` allows. A 400
 * whose issue is `exception` `version-error` with the catalogue key and no `diagnostics`, as the reference servers give
 * it, at `check-system-version`: the request's parameter that refuses it is named, as every refusal of a client's input
 * is (the reference servers name none).
 */
function versionRefused(url: string, resolved: string, check: string): FhirError {
  const text = `The version '${resolved}' is not allowed for system '${url}': required to be '${check}' by a version-check parameter`;
  return new FhirError('invalid', text, {
    issueCode: 'exception', detailsCoding: { system: TX_ISSUE_TYPE, code: 'version-error' }, diagnostics: false, messageId: 'VALUESET_VERSION_CHECK',
    expression: ['check-system-version'],
  });
}

/**
 * The version of `url` a request asks for where a value set pins `version` (undefined: not pinned), as chooseVersion
 * chooses it, without judging a pinned version against `check-system-version` (a mismatch keeps the pinned one).
 */
export function requestedVersion(rules: SystemVersions, url: string, version: string | undefined): string | undefined {
  return rules.forces.get(url) ?? version ?? rules.defaults.get(url) ?? rules.checks.get(url);
}

/**
 * A CodeSystemLookup that resolves every code system version through `rules`. A pinned version that
 * `check-system-version` refuses is looked up first: one the server does not have is not found (the caller's
 * `not-found`, as the reference servers answer), and only one it has is the check's `version-error`. Each
 * parameter that put its version in place of the value set's is noted in `applied` (appliedKey).
 */
export function withSystemVersions(lookup: CodeSystemLookup, rules: SystemVersions | undefined, applied?: Set<string>): CodeSystemLookup {
  if (rules === undefined) return lookup;
  return {
    codeSystem: (url: string, version?: string) => {
      const asked = applied === undefined ? undefined : askedFor(rules, url, version);
      if (asked !== undefined) applied!.add(appliedKey(asked.parameter, url));
      const chosen = chooseVersion(rules, url, version);
      if (chosen !== refused) return lookup.codeSystem(url, chosen);
      // The pin (a pattern, say) judged by the version it resolves to, named in the refusal.
      const check = rules.checks.get(url)!;
      return then(lookup.codeSystem(url, version), (pinned) => {
        if (pinned === null) return null;
        const resolved = pinned.version ?? version!;
        if (matchesVersion(check, resolved)) return pinned;
        throw versionRefused(url, resolved, check);
      });
    },
    asOf: lookup.asOf,
    ...(lookup.codeSystemVersions === undefined ? {} : { codeSystemVersions: (url: string) => lookup.codeSystemVersions!(url) }),
    requestedVersion: (url: string, version: string | undefined) => askedFor(rules, url, version),
  };
}

/** The version a request's parameter puts in place of a value set's `version` (undefined: not pinned), with its name; undefined: none does. */
function askedFor(rules: SystemVersions, url: string, version: string | undefined): { version: string; parameter: string } | undefined {
  const forced = rules.forces.get(url);
  if (forced !== undefined) return { version: forced, parameter: 'force-system-version' };
  if (version !== undefined) return undefined;
  const chosen = rules.defaults.get(url);
  if (chosen !== undefined) return { version: chosen, parameter: 'system-version' };
  const check = rules.checks.get(url);
  return check === undefined ? undefined : { version: check, parameter: 'check-system-version' };
}

/** How withSystemVersions notes that the parameter `name` decided the version of the code system `url`. */
export const appliedKey = (name: string, url: string) => `${name} ${url}`;

/**
 * The version parameters an expansion echoes: those that decided a version it used (a forced one, or the
 * version of an include that pins none), as the reference servers echo them. A default or check for a code
 * system the value set does not use, or pins itself (a check it passes), did not shape the expansion.
 */
export function appliedVersionInputs<P extends { readonly name: string; readonly valueUri: string }>(inputs: readonly P[], applied: ReadonlySet<string>): P[] {
  return inputs.filter((p) => applied.has(appliedKey(p.name, splitCanonical(p.valueUri).url)));
}
