/**
 * The R4 resource and datatype definitions snapshot generation stands on, as HL7 publishes them (npm
 * hl7.fhir.r4.examples 4.0.1, see r4-definitions.ts): every StructureDefinition of a resource, complex or
 * primitive type that is no constraint, and the two datatype profiles elements name (SimpleQuantity,
 * MoneyQuantity), without narrative and differential, as one collection Bundle's JSON text.
 * scripts/gen-base-definitions.ts writes it gzipped to src/fhir/validation/profile/r4-base-definitions.json.gz;
 * test/unit/validation/snapshot-reference.test.ts derives it again and requires it to equal the file.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { R4_PACKAGE } from './r4-definitions.ts';

const KINDS = new Set(['resource', 'complex-type', 'primitive-type']);
const TYPE_PROFILES = new Set(['SimpleQuantity', 'MoneyQuantity']);

export function baseDefinitionsText(): string {
  const out: Record<string, unknown>[] = [];
  for (const f of readdirSync(R4_PACKAGE).filter((n) => n.startsWith('StructureDefinition-') && n.endsWith('.json')).sort()) {
    const r = JSON.parse(readFileSync(new URL(f, R4_PACKAGE), 'utf8')) as Record<string, unknown>;
    if (r.resourceType !== 'StructureDefinition' || !KINDS.has(String(r.kind))) continue;
    if (r.derivation === 'constraint' && !TYPE_PROFILES.has(String(r.id))) continue;
    const { text: _text, differential: _differential, ...kept } = r;
    out.push(kept);
  }
  return JSON.stringify({ resourceType: 'Bundle', type: 'collection', entry: out.map((resource) => ({ resource })) });
}
