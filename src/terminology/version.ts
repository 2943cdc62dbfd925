import { type DatePeriod, parseDateTime } from './model/date-time.ts';

/**
 * Orders business versions of canonical resources ("1.0.2", "2.0", "20230131").
 * Numeric dot-separated segments compare as numbers, other segments as strings, so the
 * "latest version" rule of FHIR canonical resolution picks 2.10 over 2.9.
 */
export function compareVersions(a: string, b: string): number {
  const pa = a.split(/[.-]/);
  const pb = b.split(/[.-]/);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = pa[i];
    const y = pb[i];
    if (x === undefined) return -1;
    if (y === undefined) return 1;
    const nx = /^\d+$/.test(x) ? Number(x) : Number.NaN;
    const ny = /^\d+$/.test(y) ? Number(y) : Number.NaN;
    const cmp = Number.isNaN(nx) || Number.isNaN(ny) ? x.localeCompare(y) : nx - ny;
    if (cmp !== 0) return cmp;
  }
  return 0;
}

/** The fields that identify and date one version of a canonical resource. */
export interface Versioned {
  readonly version?: string;
  readonly date?: string;
  readonly meta?: { readonly lastUpdated?: string };
}

/** The versions the resources state, each once, in ascending order (compareVersions); those without one left out. */
export function versionsOf(resources: readonly Versioned[]): string[] {
  const out = new Set<string>();
  for (const r of resources) if (r.version !== undefined) out.add(r.version);
  return [...out].sort(compareVersions);
}

/** A version with wildcard segments (`1.x`, `1.x.x`, `2.*`), as a ValueSet include may pin a code system. */
export function isVersionPattern(version: string): boolean {
  return /(^|\.)[xX*](\.|$)/.test(version);
}

/** Whether `version` is `pattern`, or matches it segment by segment where the pattern's are not wildcards. */
export function matchesVersion(pattern: string, version: string): boolean {
  if (!isVersionPattern(pattern)) return pattern === version;
  const p = pattern.split('.');
  const v = version.split('.');
  return p.every((seg, i) => seg === 'x' || seg === 'X' || seg === '*' || seg === v[i]);
}

/**
 * Picks the resource of the requested version (the latest matching it, for a wildcard pattern such as
 * `1.x`); without one, the latest version (ties: the later
 * dated) among those already in effect at `asOf` (the `date` input of the terminology operations),
 * or among all when no date is given. See `effectiveFrom` for when a version takes effect.
 */
export function pickVersion<T extends Versioned>(candidates: readonly T[], version?: string, asOf?: DatePeriod): T | null {
  if (version !== undefined && !isVersionPattern(version)) return candidates.find((c) => c.version === version) ?? null;
  let best: T | null = null;
  for (const c of candidates) {
    if (version !== undefined && (c.version === undefined || !matchesVersion(version, c.version))) continue;
    if (asOf !== undefined && (effectiveFrom(c) ?? Number.NEGATIVE_INFINITY) > asOf.end) continue;
    if (best === null || newer(c, best)) best = c;
  }
  return best;
}

/**
 * When a version of a canonical resource takes effect: the start of its `date`, else of its
 * `meta.lastUpdated` (when the server stored it); undefined when it has neither, and such a
 * version counts as in effect at any date (the FHIR R4 core v2 tables carry no date).
 */
export function effectiveFrom(r: Versioned): number | undefined {
  const date = r.date === undefined ? null : parseDateTime(r.date);
  const stored = date === null && r.meta?.lastUpdated !== undefined ? parseDateTime(r.meta.lastUpdated) : null;
  return (date ?? stored)?.start;
}

function newer(a: Versioned, b: Versioned): boolean {
  const byVersion = compareVersions(a.version ?? '', b.version ?? '');
  if (byVersion !== 0) return byVersion > 0;
  return (effectiveFrom(a) ?? Number.NEGATIVE_INFINITY) > (effectiveFrom(b) ?? Number.NEGATIVE_INFINITY);
}

/** Splits a canonical reference `url|version` into its parts. */
export function splitCanonical(canonical: string): { url: string; version?: string } {
  const bar = canonical.indexOf('|');
  if (bar < 0) return { url: canonical };
  const version = canonical.slice(bar + 1);
  return version === '' ? { url: canonical.slice(0, bar) } : { url: canonical.slice(0, bar), version };
}
