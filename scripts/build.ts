/**
 * `bun run build`: compiles Cinder into one executable, `dist/cinder` (Bun runtime included).
 *
 *   bun scripts/build.ts [--outfile <path>] [--target <bun-linux-x64|bun-linux-arm64|...>]
 *
 * Everything src/main.ts imports is bundled: migrations (TS modules), the R4 definitions JSON (via
 * the `@fhir-r4/*` tsconfig path), files imported `with { type: 'file' }`, dependencies. Worker entry
 * files (`src/**\/*worker.ts`) are added as entrypoints, so they are embedded too, laid out from src/:
 * start them with `new Worker(workerUrl('<path below src>'))` (src/worker-url.ts).
 *
 * What is static and costly at a server's first requests is computed here, once, into the executable:
 * src/fhir/capability-prebuilt.ts is replaced by a module returning the CapabilityStatement's per-type
 * entries (prebuildCapability, the code's own computation; test/unit/capability-prebuilt.test.ts checks
 * what is made from them against the statement computed at run time).
 */
import { rmSync } from 'node:fs';
import { relative } from 'node:path';
import { parseArgs } from 'node:util';
import type { BunPlugin } from 'bun';
import { prebuildCapability } from '../src/fhir/capability.ts';

const root = new URL('..', import.meta.url).pathname;
const { values } = parseArgs({
  args: Bun.argv.slice(2),
  options: { outfile: { type: 'string', default: root + 'dist/cinder' }, target: { type: 'string' } },
  strict: true,
});

const workers = [...new Bun.Glob('src/**/*worker.ts').scanSync({ cwd: root })].sort();
const entrypoints = ['src/main.ts', ...workers].map((p) => root + p);
const started = performance.now();

/** Replaces src/fhir/capability-prebuilt.ts by the static parts computed now. */
const prebuilt: BunPlugin = {
  name: 'cinder-prebuilt',
  setup(build) {
    const capability = JSON.stringify(prebuildCapability());
    build.onLoad({ filter: /[\\/]src[\\/]fhir[\\/]capability-prebuilt\.ts$/ }, () => ({
      // In a function, so that the text is made when the first `metadata` asks for it, not at start.
      contents: `export const prebuiltCapability = () => (${capability});`,
      loader: 'js',
    }));
  },
};

const result = await Bun.build({
  entrypoints,
  root: root + 'src',
  minify: true,
  // Embedded in the executable (compressed); stack traces name src/ files and lines.
  sourcemap: 'linked',
  bytecode: true,
  format: 'esm',
  plugins: [prebuilt],
  compile: {
    outfile: values.outfile,
    ...(values.target ? { target: values.target as Bun.Build.CompileTarget } : {}),
    // The repository's bunfig.toml configures tests; the binary reads its settings from CINDER_* only.
    autoloadBunfig: false,
  },
});
if (!result.success) {
  for (const log of result.logs) console.error(log);
  process.exit(1);
}
const out = result.outputs.find((o) => o.kind === 'entry-point') ?? result.outputs[0]!;
// The executable embeds its source map; the copy written beside it is not needed.
for (const o of result.outputs) if (o.kind === 'sourcemap') rmSync(o.path, { force: true });
const size = (Bun.file(out.path).size / 1048576).toFixed(1);
console.log(`built ${relative(process.cwd(), out.path)} (${size} MiB, workers: ${workers.join(', ') || 'none'}) in ${((performance.now() - started) / 1000).toFixed(1)} s`);
