/**
 * Parses `Prefer` (RFC 7240) into its preferences: `return`, `handling`, `respond-async`, by their names
 * in lower case. A preference given twice counts once, the first time (RFC 7240 section 2: later ones
 * SHOULD be ignored).
 */
export function parsePrefer(header: string | undefined): Map<string, string> {
  const prefs = new Map<string, string>();
  for (const part of (header ?? '').split(',')) {
    const [k, v] = part.split(';')[0]!.split('=').map((s) => s.trim().replace(/^"|"$/g, ''));
    const name = k?.toLowerCase();
    if (name && !prefs.has(name)) prefs.set(name, v ?? '');
  }
  return prefs;
}
