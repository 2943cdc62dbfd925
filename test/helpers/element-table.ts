import { r4ResourceDefinitions } from './r4-definitions.ts';

/** Derives the `_elements` table (src/export/element-table.json) from the official R4 StructureDefinitions. */
export async function elementTableFromDefinitions(): Promise<Record<string, { all: string[]; required: string[] }>> {
  const table: Record<string, { all: string[]; required: string[] }> = {};
  for (const sd of await r4ResourceDefinitions()) {
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
