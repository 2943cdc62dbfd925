/**
 * The URL of a Worker entry file, named by its path below src/ (e.g. `export/worker.ts`).
 *
 * Resolved against this module, which sits directly in src/: from source that is the file itself;
 * in the compiled executable every bundled module shares one URL at the root of the embedded files,
 * which `bun build --compile` lays out from src/ (scripts/build.ts adds each `src/**\/*worker.ts` as
 * an entrypoint). `new URL('./worker.ts', import.meta.url)` in a module below src/ would only work
 * from source.
 */
export function workerUrl(pathBelowSrc: string): string {
  return new URL(`./${pathBelowSrc}`, import.meta.url).href;
}
