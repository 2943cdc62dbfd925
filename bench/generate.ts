/**
 * Synthetic FHIR R4 patient data generator (CLI).
 *
 *   bun bench/generate.ts --patients N [--seed S] [--format ndjson|bundle] [--out DIR]
 *                         [--per-patient-scale F] [--json]
 *
 * ndjson: one file per resource type, DIR/<Type>.ndjson. bundle: DIR/bundle-000000.json holds
 * the shared Organizations and Practitioners (PUT by id), then one transaction Bundle per
 * patient (POST, urn:uuid references). The same arguments always give byte-identical files.
 */
import { parseArgs } from "node:util";
import { z } from "zod";
import type { TransactionBundle } from "./lib/bundle.ts";
import { generateBundles } from "./lib/bundle.ts";
import { GENERATED_TYPES } from "./lib/fhir.ts";
import { generatePatients, resolveOptions } from "./lib/generator.ts";
import type { ResolvedOptions } from "./lib/generator.ts";
import type { FileStats } from "./lib/output.ts";
import { openNdjsonSink, writeBundleFiles } from "./lib/output.ts";

const USAGE = `Usage: bun bench/generate.ts --patients N [options]

Options:
  --patients N             number of patients (required)
  --seed S                 seed text or number (default 1); same seed, same bytes
  --format ndjson|bundle   NDJSON per resource type, or transaction Bundles (default ndjson)
  --out DIR                output directory (default bench/out)
  --per-patient-scale F    scales the number of encounters per patient (default 1, ~100 resources)
  --json                   print the summary as JSON
  --help                   show this help`;

interface Summary {
  format: "ndjson" | "bundle";
  out: string;
  patients: number;
  seed: string | number;
  resources: number;
  bytes: number;
  files: number;
  seconds: number;
  resourcesPerSecond: number;
  types: Record<string, { count: number; bytes?: number }>;
}

const formatSchema = z.enum(["ndjson", "bundle"]);

function parseCli(argv: string[]): { options: ResolvedOptions; format: "ndjson" | "bundle"; out: string; json: boolean } | "help" {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      patients: { type: "string" },
      seed: { type: "string" },
      format: { type: "string", default: "ndjson" },
      out: { type: "string", default: "bench/out" },
      "per-patient-scale": { type: "string" },
      json: { type: "boolean", default: false },
      help: { type: "boolean", default: false },
    },
  });
  if (values.help) return "help";
  if (values.patients === undefined) throw new Error("--patients is required");
  const options = resolveOptions({
    patients: Number(values.patients),
    seed: values.seed,
    perPatientScale: values["per-patient-scale"] === undefined ? undefined : Number(values["per-patient-scale"]),
  });
  return { options, format: formatSchema.parse(values.format), out: values.out, json: values.json };
}

async function writeNdjson(options: ResolvedOptions, out: string): Promise<Map<string, FileStats>> {
  const sink = await openNdjsonSink(out, GENERATED_TYPES);
  for (const resource of generatePatients(options)) {
    const flushed = sink.write(resource);
    if (flushed !== undefined) await flushed;
  }
  return sink.close();
}

async function writeBundles(options: ResolvedOptions, out: string): Promise<{ types: Map<string, FileStats>; files: FileStats }> {
  const types = new Map<string, FileStats>(GENERATED_TYPES.map((t) => [t, { count: 0, bytes: 0 }]));
  function* counted(): Generator<TransactionBundle> {
    for (const bundle of generateBundles(options)) {
      for (const entry of bundle.entry) types.get(entry.resource.resourceType)!.count++;
      yield bundle;
    }
  }
  const files = await writeBundleFiles(out, counted(), options.patients + 1);
  return { types, files };
}

async function run(options: ResolvedOptions, format: "ndjson" | "bundle", out: string): Promise<Summary> {
  const started = performance.now();
  const result = format === "ndjson" ? { types: await writeNdjson(options, out), files: undefined } : await writeBundles(options, out);
  const seconds = (performance.now() - started) / 1000;
  let resources = 0;
  let bytes = 0;
  const types: Summary["types"] = {};
  for (const [type, stats] of result.types) {
    resources += stats.count;
    bytes += stats.bytes;
    types[type] = format === "ndjson" ? { count: stats.count, bytes: stats.bytes } : { count: stats.count };
  }
  if (result.files !== undefined) bytes = result.files.bytes;
  const files = result.files?.count ?? result.types.size;
  const resourcesPerSecond = Math.round(resources / seconds);
  return { format, out, patients: options.patients, seed: options.seed, resources, bytes, files, seconds, resourcesPerSecond, types };
}

function printSummary(s: Summary): void {
  const mb = (n: number) => (n < 1_048_576 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1_048_576).toFixed(1)} MiB`);
  console.log(`Generated ${s.resources} resources for ${s.patients} patients (seed ${s.seed}) as ${s.format} in ${s.out}`);
  for (const [type, t] of Object.entries(s.types)) {
    const size = t.bytes === undefined ? "" : `  ${mb(t.bytes).padStart(10)}  avg ${t.count ? Math.round(t.bytes / t.count) : 0} B`;
    console.log(`  ${type.padEnd(20)} ${String(t.count).padStart(10)}${size}`);
  }
  console.log(`  ${"total".padEnd(20)} ${String(s.resources).padStart(10)}  ${mb(s.bytes).padStart(10)} in ${s.files} files`);
  console.log(`${s.seconds.toFixed(2)} s, ${s.resourcesPerSecond} resources/s`);
}

async function main(argv: string[]): Promise<number> {
  let parsed: ReturnType<typeof parseCli>;
  try {
    parsed = parseCli(argv);
  } catch (error) {
    const message = error instanceof z.ZodError ? z.prettifyError(error) : error instanceof Error ? error.message : String(error);
    console.error(`generate: ${message}\n\n${USAGE}`);
    return 2;
  }
  if (parsed === "help") {
    console.log(USAGE);
    return 0;
  }
  const summary = await run(parsed.options, parsed.format, parsed.out);
  if (parsed.json) console.log(JSON.stringify(summary));
  else printSummary(summary);
  return 0;
}

process.exitCode = await main(Bun.argv.slice(2));
