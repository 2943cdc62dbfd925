import { beforeAll, describe, expect, test } from "bun:test";
import { mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateBundles } from "../../bench/lib/bundle.ts";
import type { TransactionBundle } from "../../bench/lib/bundle.ts";
import { GENERATED_TYPES } from "../../bench/lib/fhir.ts";
import type { FhirResource } from "../../bench/lib/fhir.ts";
import { generatePatients, sharedPoolSize } from "../../bench/lib/generator.ts";
import { openNdjsonSink } from "../../bench/lib/output.ts";
import { Random } from "../../bench/lib/prng.ts";
import type { FhirSchema } from "../helpers/fhir-schema.ts";
import { loadFhirSchema } from "../helpers/fhir-schema.ts";

const FHIR_ID = /^[A-Za-z0-9\-.]{1,64}$/;
const URN_UUID = /^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** Every `reference` string anywhere in a value, with the path where it occurs. */
function references(value: unknown, path = "", out: [string, string][] = []): [string, string][] {
  if (Array.isArray(value)) value.forEach((v, i) => references(v, `${path}[${i}]`, out));
  else if (typeof value === "object" && value !== null) {
    for (const [key, child] of Object.entries(value)) {
      if (key === "reference" && typeof child === "string") out.push([path, child]);
      else references(child, `${path}.${key}`, out);
    }
  }
  return out;
}

const text = (resources: Iterable<FhirResource>) => Array.from(resources, (r) => JSON.stringify(r)).join("\n");
const countByType = (resources: FhirResource[]) =>
  resources.reduce<Record<string, number>>((acc, r) => ((acc[r.resourceType] = (acc[r.resourceType] ?? 0) + 1), acc), {});

let schema: FhirSchema;
let data: FhirResource[];
beforeAll(async () => {
  schema = await loadFhirSchema();
  data = [...generatePatients({ patients: 25, seed: "unit" })];
});

describe("PRNG", () => {
  test("same seed and stream give the same sequence, others differ", () => {
    const seq = (seed: number, stream: number) => Array.from({ length: 8 }, ((r) => () => r.next())(new Random(seed, stream)));
    expect(seq(1, 1)).toEqual(seq(1, 1));
    expect(seq(1, 1)).not.toEqual(seq(2, 1));
    expect(seq(1, 1)).not.toEqual(seq(1, 2));
  });

  test("uuid() is a version 4 layout UUID and a valid FHIR id", () => {
    const rng = new Random(7, 0);
    for (let i = 0; i < 100; i++) {
      const id = rng.uuid();
      expect(`urn:uuid:${id}`).toMatch(URN_UUID);
      expect(id).toMatch(FHIR_ID);
    }
  });
});

describe("generatePatients", () => {
  test("is deterministic: same seed same output, another seed different output", () => {
    const again = text(generatePatients({ patients: 25, seed: "unit" }));
    expect(again).toBe(text(data));
    expect(text(generatePatients({ patients: 25, seed: "other" }))).not.toBe(again);
  });

  test("a patient's record does not depend on how many patients are generated", () => {
    const five = [...generatePatients({ patients: 5, seed: "unit" })];
    expect(text(five)).toBe(text(data.slice(0, five.length)));
  });

  test("every resource is a valid R4 resource with a unique valid id", () => {
    const ids = new Set<string>();
    for (const resource of data) {
      expect(GENERATED_TYPES as readonly string[]).toContain(resource.resourceType);
      expect(schema.resourceTypes.has(resource.resourceType)).toBe(true);
      expect(resource.id).toMatch(FHIR_ID);
      expect(schema.validate(resource)).toEqual([]);
      ids.add(`${resource.resourceType}/${resource.id}`);
    }
    expect(ids.size).toBe(data.length);
    expect(Object.keys(countByType(data)).sort()).toEqual([...GENERATED_TYPES].sort());
  });

  test("every reference resolves to a resource generated before it", () => {
    const seen = new Set<string>();
    let checked = 0;
    for (const resource of data) {
      for (const [path, reference] of references(resource)) {
        expect(`${resource.resourceType}${path} -> ${seen.has(reference) ? "ok" : reference}`).toBe(`${resource.resourceType}${path} -> ok`);
        checked++;
      }
      seen.add(`${resource.resourceType}/${resource.id}`);
    }
    expect(checked).toBeGreaterThan(data.length * 2);
  });

  test("resources carry the expected codes, units and links", () => {
    const byType = (type: string) => data.filter((r) => r.resourceType === type);
    const observations = byType("Observation") as Array<Record<string, any>>;
    for (const o of observations) {
      expect(o.code.coding[0].system).toBe("http://loinc.org");
      expect(o.category[0].coding[0].system).toBe("http://terminology.hl7.org/CodeSystem/observation-category");
      expect(o.subject.reference).toStartWith("Patient/");
      expect(o.encounter.reference).toStartWith("Encounter/");
      expect(o.effectiveDateTime).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{2}:00$/);
      for (const q of [o.valueQuantity, ...(o.component ?? []).map((c: any) => c.valueQuantity)].filter(Boolean)) {
        expect(q.system).toBe("http://unitsofmeasure.org");
        expect(typeof q.value).toBe("number");
      }
    }
    const categories = new Set(observations.map((o) => o.category[0].coding[0].code));
    expect([...categories].sort()).toEqual(["laboratory", "social-history", "vital-signs"]);
    const systems = (type: string, field: string) => new Set(byType(type).map((r: any) => r[field].coding[0].system));
    expect(systems("Condition", "code")).toEqual(new Set(["http://snomed.info/sct"]));
    expect(systems("Condition", "clinicalStatus")).toEqual(new Set(["http://terminology.hl7.org/CodeSystem/condition-clinical"]));
    expect(systems("MedicationRequest", "medicationCodeableConcept")).toEqual(new Set(["http://www.nlm.nih.gov/research/umls/rxnorm"]));
    expect(systems("Immunization", "vaccineCode")).toEqual(new Set(["http://hl7.org/fhir/sid/cvx"]));
    expect(systems("Procedure", "code")).toEqual(new Set(["http://snomed.info/sct"]));
    for (const report of byType("DiagnosticReport") as Array<Record<string, any>>) {
      expect(report.result.length).toBeGreaterThan(0);
      for (const r of report.result) expect(r.reference).toStartWith("Observation/");
    }
    const encounters = byType("Encounter") as Array<Record<string, any>>;
    expect(encounters.every((e) => e.serviceProvider.reference.startsWith("Organization/"))).toBe(true);
    expect(encounters.every((e) => e.participant[0].individual.reference.startsWith("Practitioner/"))).toBe(true);
  });

  test("sizes are comparable to Synthea (Observation 0.7-1.1 KB on average)", () => {
    const observations = data.filter((r) => r.resourceType === "Observation");
    const average = observations.reduce((sum, r) => sum + JSON.stringify(r).length, 0) / observations.length;
    expect(average).toBeGreaterThan(700);
    expect(average).toBeLessThan(1100);
  });

  test("counts scale with patients and per-patient scale (~100 resources per patient at 1)", () => {
    const patients = (n: number, scale?: number) => [...generatePatients({ patients: n, seed: 3, perPatientScale: scale })];
    const base = data.length - sharedPoolSize(25).organizations - sharedPoolSize(25).practitioners;
    expect(countByType(data)["Patient"]).toBe(25);
    expect(base / 25).toBeGreaterThan(75);
    expect(base / 25).toBeLessThan(125);
    const single = patients(20).length;
    const double = patients(20, 2).length;
    const half = patients(20, 0.5).length;
    expect(double / single).toBeGreaterThan(1.6);
    expect(double / single).toBeLessThan(2.4);
    expect(half / single).toBeLessThan(0.7);
    expect(countByType(patients(20, 0.01))["Encounter"]).toBe(20);
    expect(sharedPoolSize(10_000)).toEqual({ organizations: 40, practitioners: 400 });
  });

  test("rejects bad options with the field named", () => {
    expect(() => [...generatePatients({ patients: 0 })]).toThrow(/patients/);
    expect(() => [...generatePatients({ patients: 1, perPatientScale: -1 })]).toThrow(/perPatientScale/);
  });
});

describe("generateBundles", () => {
  let bundles: TransactionBundle[];
  beforeAll(() => {
    bundles = [...generateBundles({ patients: 4, seed: "unit" })];
  });

  test("first bundle PUTs the shared Organizations and Practitioners by id", () => {
    const [shared] = bundles;
    expect(schema.validate(shared)).toEqual([]);
    expect(shared!.type).toBe("transaction");
    for (const entry of shared!.entry) {
      expect(["Organization", "Practitioner"]).toContain(entry.resource.resourceType);
      expect(entry.request).toEqual({ method: "PUT", url: `${entry.resource.resourceType}/${entry.resource.id}` });
    }
  });

  test("patient bundles are valid transactions with urn:uuid fullUrls and internal references", () => {
    const sharedRefs = new Set(bundles[0]!.entry.map((e) => `${e.resource.resourceType}/${e.resource.id}`));
    expect(bundles).toHaveLength(5);
    for (const bundle of bundles.slice(1)) {
      expect(schema.validate(bundle)).toEqual([]);
      expect(bundle.type).toBe("transaction");
      const fullUrls = new Set(bundle.entry.map((e) => e.fullUrl));
      expect(fullUrls.size).toBe(bundle.entry.length);
      expect(bundle.entry[0]!.resource.resourceType).toBe("Patient");
      for (const entry of bundle.entry) {
        expect(entry.fullUrl).toMatch(URN_UUID);
        expect(entry.request).toEqual({ method: "POST", url: entry.resource.resourceType });
        expect(entry.resource.id).toBeUndefined();
        for (const [, reference] of references(entry.resource)) {
          expect(fullUrls.has(reference) || sharedRefs.has(reference)).toBe(true);
        }
      }
    }
  });

  test("bundles hold the same data as NDJSON, with urn:uuid instead of relative references", () => {
    const typeOf = new Map<string, string>();
    const resources: FhirResource[] = [];
    for (const bundle of bundles) {
      for (const e of bundle.entry) typeOf.set(e.fullUrl, e.resource.resourceType);
      for (const { fullUrl, resource } of bundle.entry) {
        const { id: _, ...rest } = resource;
        resources.push({ ...rest, id: fullUrl.slice("urn:uuid:".length) } as FhirResource);
      }
    }
    const relative = text(resources).replace(/"urn:uuid:([0-9a-f-]{36})"/g, (_, id: string) => `"${typeOf.get(`urn:uuid:${id}`)}/${id}"`);
    const ndjson = [...generatePatients({ patients: 4, seed: "unit" })];
    const withIdLast = ndjson.map(({ id, ...rest }) => ({ ...rest, id }) as FhirResource);
    expect(relative).toBe(text(withIdLast));
  });
});

describe("output", () => {
  test("the NDJSON sink writes one line per resource and counts bytes, flushing at the high-water mark", async () => {
    const dir = await mkdtemp(join(tmpdir(), "cinder-gen-"));
    try {
      const sink = await openNdjsonSink(dir, ["Patient", "Observation"], 256);
      const resources = [...generatePatients({ patients: 1, seed: 9 })].filter((r) => r.resourceType === "Observation");
      let flushes = 0;
      for (const r of resources) {
        const pending = sink.write(r);
        if (pending !== undefined) (flushes++, await pending);
      }
      const stats = await sink.close();
      const written = await readFile(join(dir, "Observation.ndjson"), "utf8");
      expect(flushes).toBe(resources.length);
      expect(written).toBe(resources.map((r) => `${JSON.stringify(r)}\n`).join(""));
      expect(stats.get("Observation")).toEqual({ count: resources.length, bytes: Buffer.byteLength(written) });
      expect(await readFile(join(dir, "Patient.ndjson"), "utf8")).toBe("");
      expect(() => sink.write({ resourceType: "Device", id: "x" })).toThrow(/Device/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("bench/generate.ts CLI", () => {
  const cli = (args: string[]) => Bun.spawnSync(["bun", join(import.meta.dir, "../../bench/generate.ts"), ...args]);

  async function filesOf(dir: string): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    for (const name of (await readdir(dir)).sort()) out[name] = await readFile(join(dir, name), "utf8");
    return out;
  }

  test("two runs with the same arguments give byte-identical files, in both formats", async () => {
    const root = await mkdtemp(join(tmpdir(), "cinder-gen-"));
    try {
      for (const format of ["ndjson", "bundle"]) {
        const runs = [];
        for (const n of [1, 2]) {
          const out = join(root, `${format}-${n}`);
          const result = cli(["--patients", "3", "--seed", "42", "--format", format, "--out", out, "--json"]);
          expect(result.exitCode).toBe(0);
          const summary = JSON.parse(result.stdout.toString());
          expect(summary.types.Patient.count).toBe(3);
          runs.push(await filesOf(out));
        }
        expect(runs[0]).toEqual(runs[1]!);
        const names = Object.keys(runs[0]!);
        if (format === "ndjson") expect(names.sort()).toEqual(GENERATED_TYPES.map((t) => `${t}.ndjson`).sort());
        else expect(names).toEqual(["bundle-000000.json", "bundle-000001.json", "bundle-000002.json", "bundle-000003.json"]);
      }
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  test("bad arguments exit with status 2 and a message", () => {
    for (const args of [[], ["--patients", "0"], ["--patients", "x"], ["--patients", "1", "--format", "xml"], ["--nope"]]) {
      const result = cli(args);
      expect(result.exitCode).toBe(2);
      expect(result.stderr.toString()).toContain("Usage:");
    }
  });
});
