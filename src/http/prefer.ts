/** Parses `Prefer` (RFC 7240) into its preferences: `return`, `handling`, `respond-async`. */
export function parsePrefer(header: string | undefined): Map<string, string> {
  const prefs = new Map<string, string>();
  for (const part of (header ?? '').split(',')) {
    const [k, v] = part.split(';')[0]!.split('=').map((s) => s.trim().replace(/^"|"$/g, ''));
    if (k) prefs.set(k.toLowerCase(), v ?? '');
  }
  return prefs;
}
