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

/** Picks the resource of the requested version, or the latest one when no version is given. */
export function pickVersion<T extends { version?: string }>(candidates: readonly T[], version?: string): T | null {
  if (version !== undefined) return candidates.find((c) => c.version === version) ?? null;
  let best: T | null = null;
  for (const c of candidates) {
    if (best === null || compareVersions(c.version ?? '', best.version ?? '') > 0) best = c;
  }
  return best;
}

/** Splits a canonical reference `url|version` into its parts. */
export function splitCanonical(canonical: string): { url: string; version?: string } {
  const bar = canonical.indexOf('|');
  if (bar < 0) return { url: canonical };
  const version = canonical.slice(bar + 1);
  return version === '' ? { url: canonical.slice(0, bar) } : { url: canonical.slice(0, bar), version };
}
