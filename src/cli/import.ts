import { statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import type { FhirDeps } from '../fhir/crud.ts';
import { createImporter, type ImportIssue, type ImportSource } from '../fhir/import/importer.ts';
import { UsageError, type CliIO, type Command } from './command.ts';
import { openContext } from './context.ts';
import { createProgress, formatCount } from './progress.ts';
import { fhirBaseOf } from '../config.ts';
import { cliFhirDeps } from './fhir-deps.ts';

/** Error details kept for the --json summary (all of them are printed on stderr as they occur). */
const MAX_REPORTED = 1000;

function checkFiles(files: string[]): void {
  if (files.length === 0) throw new UsageError('expected at least one file');
  for (const f of files) {
    try {
      if (!statSync(f).isFile()) throw new Error('not a regular file');
    } catch (err) {
      throw new UsageError(`cannot read ${f}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
}

/** The format a file's name tells, once a `.gz` is taken off it (the importer's own test, importer.ts detectFormat); undefined: told by its content. */
function formatOfName(name: string): ImportSource['format'] {
  if (/\.(ndjson|jsonl)$/i.test(name)) return 'ndjson';
  if (/\.json$/i.test(name)) return 'json';
  if (/\.xml$/i.test(name)) return 'xml';
  return undefined;
}

/**
 * The files as import sources: a gzip file (RFC 1952, told by its first two bytes, whatever its name: a Bulk Data
 * export's `.ndjson.gz`) decompressed, as a stream, to a file in `dir`, read as what its name without `.gz` says.
 * Messages name the file as given.
 */
async function sourcesOf(files: string[], dir: () => Promise<string>): Promise<ImportSource[]> {
  const out: ImportSource[] = [];
  for (const [i, f] of files.entries()) {
    const file = Bun.file(f);
    const head = await file.slice(0, 2).bytes();
    if (head.length < 2 || head[0] !== 0x1f || head[1] !== 0x8b) {
      out.push({ name: f, blob: file });
      continue;
    }
    const path = join(await dir(), `${i}-${basename(f)}`);
    try {
      await Bun.write(path, new Response(file.stream().pipeThrough(new DecompressionStream('gzip'))));
    } catch (err) {
      throw new UsageError(`cannot decompress ${f}: ${(err as Error).message}`);
    }
    const format = formatOfName(f.replace(/\.gz$/i, ''));
    out.push({ name: f, blob: Bun.file(path), ...(format && { format }) });
  }
  return out;
}

function batchSize(value: unknown): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 100_000) throw new UsageError('--batch-size takes 1-100000');
  return n;
}

function where(i: ImportIssue): string {
  return i.line === undefined ? i.file : `${i.file}:${i.line}`;
}

/** `cinder import`: bulk-loads NDJSON files and Bundles or resources in FHIR JSON or XML into a tenant. */
export const importCommand: Command = {
  name: 'import',
  summary: 'Import resources from NDJSON files, or Bundles and resources in FHIR JSON or XML, into a tenant',
  usage:
    'cinder import --tenant <id> [--batch-size <n>] [--json] <file>...\n\n' +
    'NDJSON (.ndjson, .jsonl: one resource per line) is streamed; a .json file holds one resource or a Bundle in FHIR\n' +
    'JSON, a .xml file one in FHIR XML (transaction and batch Bundles are processed as if POSTed to the FHIR base,\n' +
    'collection Bundles are unpacked; a .json file is read whole, a .xml one as a stream: a collection\'s entries are\n' +
    'imported as they are read, each on its own as an NDJSON line). A file of another name is XML when its\n' +
    "first character (after whitespace) is '<', NDJSON when its first line is a JSON value by itself, else JSON.\n" +
    'Resources with an id are created or updated by that id; others get a server id. One equal to its current\n' +
    'version gets no new version and is counted as unchanged (running an import again adds no history), also when\n' +
    'validation now refuses it (it was stored before the rules that refuse it): it is reported as a warning with its\n' +
    'problems, as a REST update that changes nothing is answered; a change to it is refused.\n' +
    'Bad lines are reported with file and line number and skipped; an XML file that is not well-formed with line\n' +
    'and column, one that is not FHIR XML with the element (Patient.nickname); an invalid resource (CINDER_VALIDATION)\n' +
    'with each of its problems. At strict, a resource is also checked against each profile it claims (meta.profile)\n' +
    "that Cinder knows, as a REST write is: the tenant's StructureDefinitions as stored when the import starts\n" +
    '(one imported by the run applies from the next run on), and the R4 core profiles; a QuestionnaireResponse is\n' +
    "checked against its Questionnaire (the tenant's as stored when the import starts).\n" +
    'A gzip file (.ndjson.gz, .json.gz, .xml.gz: told by its first bytes) is decompressed to a temporary file first.\n' +
    'Exit code 1 when any resource failed.\n' +
    'urn:uuid: references resolve across the files of one run: a Bundle (or NDJSON line) referring to an entry\n' +
    'of a Bundle not written yet waits for the end of the run, so the order of the files does not matter;\n' +
    'references still unresolved then are reported with file, entry (or line) and reference.\n' +
    '--batch-size: resources per write transaction (default 10000; a transaction also ends at 32 Mi characters).',
  options: { tenant: { type: 'string' }, 'batch-size': { type: 'string' }, json: { type: 'boolean' } },
  allowPositionals: true,
  async run(args, io) {
    const tenant = args.values.tenant;
    if (typeof tenant !== 'string') throw new UsageError('--tenant is required');
    const size = batchSize(args.values['batch-size']);
    checkFiles(args.positionals);
    const { config, store, clock } = await openContext(io);
    // Where gzip files are decompressed, made on the first one; removed, with them, once the import ends.
    let made: Promise<string> | undefined;
    const dir = () => (made ??= mkdtemp(join(tmpdir(), 'cinder-cli-import-')));
    try {
      if (!(await store.tenants.get(tenant))) throw new UsageError(`tenant '${tenant}' does not exist (create it with: cinder tenant create ${tenant})`);
      const fhirBase = fhirBaseOf(config.baseUrl, tenant);
      const deps = cliFhirDeps(config, store, clock, tenant);
      const sources = await sourcesOf(args.positionals, dir);
      return await runImport(io, deps, { tenant, sources, size, fhirBase, json: !!args.values.json });
    } finally {
      await store.close();
      if (made) await rm(await made, { recursive: true, force: true });
    }
  },
};

interface ImportJob {
  tenant: string;
  sources: ImportSource[];
  size: number | undefined;
  fhirBase: string;
  json: boolean;
}

async function runImport(io: CliIO, deps: FhirDeps, o: ImportJob): Promise<number> {
  // Bytes as read: a gzip file's decompressed ones.
  const progress = createProgress(io, o.sources.reduce((n, s) => n + s.blob.size, 0));
  const errors: ImportIssue[] = [];
  // Resources imported unchanged though the rules now refuse them (ImportIssue.severity).
  const warnings: ImportIssue[] = [];
  let invalidUnchanged = 0;
  const importer = createImporter(deps, {
    tenant: o.tenant, fhirBase: o.fhirBase, ...(o.size === undefined ? {} : { batchSize: o.size }),
    onIssue(issue) {
      const warning = issue.severity === 'warning';
      if (warning) invalidUnchanged++;
      const list = warning ? warnings : errors;
      if (list.length < MAX_REPORTED) list.push(issue);
      progress.message(`${where(issue)}: ${warning ? 'warning: ' : ''}${issue.message}`);
      // An invalid resource: every problem on a line of its own (a kept one's first issue is the message).
      const problems = warning ? issue.issues?.slice(1) : issue.issues && issue.issues.length > 1 ? issue.issues : undefined;
      for (const i of problems ?? []) progress.message(`  ${i.expression?.[0] ?? ''}: ${i.details?.text ?? i.diagnostics ?? ''}`);
    },
    onProgress: (p) => progress.update(p),
  });
  try {
    await importer.add(o.sources);
    await importer.finish();
    // The planner's statistics predate the import (PostgreSQL; autovacuum may be off or not yet run).
    if (importer.progress.imported > importer.progress.unchanged) await deps.store.resources.indexing.analyze();
  } finally {
    progress.done();
  }
  const { imported, unchanged, failed } = importer.progress;
  const seconds = progress.elapsedSeconds();
  const rate = seconds > 0 ? Math.round(imported / seconds) : imported;
  if (o.json) {
    const summary = { tenant: o.tenant, files: o.sources.length, imported, unchanged, failed, seconds: Number(seconds.toFixed(3)), resourcesPerSecond: rate, errors, warnings };
    io.stdout(JSON.stringify(summary, null, 2) + '\n');
  } else {
    // Unchanged ones are named when there are some (a run again over the same files).
    io.stdout(
      `Imported ${formatCount(imported)} resources into tenant '${o.tenant}' in ${seconds.toFixed(2)} s ` +
        `(${formatCount(rate)} resources/s); ${unchanged > 0 ? `${formatCount(unchanged)} unchanged${invalidUnchanged > 0 ? ` (${formatCount(invalidUnchanged)} of them not valid now: warnings above)` : ''}, ` : ''}${formatCount(failed)} failed.\n`,
    );
  }
  return failed > 0 ? 1 : 0;
}
