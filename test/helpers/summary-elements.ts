import { r4StructureDefinitions } from './r4-definitions.ts';

/**
 * Derives src/fhir/summary-elements.json from the official R4 StructureDefinitions: per resource type
 * (Resource and DomainResource included), its top-level elements marked isSummary (choice elements as
 * their name before `[x]`) and the mandatory ones (min >= 1), which `_summary=text` keeps.
 */
export async function summaryElementsFromDefinitions(): Promise<Record<string, { summary: string[]; mandatory: string[] }>> {
  const out: Record<string, { summary: string[]; mandatory: string[] }> = {};
  for (const sd of await r4StructureDefinitions()) {
    if (sd.kind !== 'resource' || sd.derivation === 'constraint') continue;
    const summary: string[] = [];
    const mandatory: string[] = [];
    for (const e of sd.snapshot.element) {
      const parts = e.path.split('.');
      if (parts.length !== 2) continue;
      const name = parts[1]!.replace('[x]', '');
      if (e.isSummary) summary.push(name);
      if ((e.min ?? 0) >= 1) mandatory.push(name);
    }
    out[sd.type] = { summary, mandatory };
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a.localeCompare(b)));
}

/**
 * Derives src/fhir/choice-elements.json: the names of every choice element of R4's data types and
 * resources (`value` of `value[x]`), which the FHIRPath evaluator looks up under their typed names.
 */
export async function choiceElementsFromDefinitions(): Promise<string[]> {
  const choices = new Set<string>();
  for (const sd of await r4StructureDefinitions()) {
    for (const e of sd.snapshot.element) if (e.path.endsWith('[x]')) choices.add(e.path.split('.').pop()!.replace('[x]', ''));
  }
  return [...choices].sort();
}
