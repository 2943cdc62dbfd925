import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { fhirBaseOf } from '../config.ts';
import { FhirError } from '../errors.ts';
import { operatorAccess } from '../fhir/access.ts';
import type { ExportInput } from '../export/kickoff-input.ts';
import { kickOff } from '../export/kickoff.ts';
import { CLI_OWNER_PREFIX, runJob } from '../export/run-job.ts';
import { runSettings } from '../export/runner.ts';
import { createFileSink } from '../export/sink-file.ts';
import type { JobProgress } from '../export/spec.ts';
import { readPlan, readProgress } from '../export/job-data.ts';
import { createTerminology } from '../terminology/create.ts';
import { codesExpander } from '../search-terminology.ts';
import { UsageError, type CliIO, type Command } from './command.ts';
import { openContext, printData } from './context.ts';

const strings = (v: unknown): string[] => (Array.isArray(v) ? (v as string[]) : typeof v === 'string' ? [v] : []);

/** A progress bar on a terminal (stderr), redrawn at most every 100 ms. */
function progressBar(io: CliIO, total: number) {
  let last = 0;
  return (done: number, label: string, force = false) => {
    if (!io.isTTY || (!force && Date.now() - last < 100)) return;
    last = Date.now();
    const ratio = total > 0 ? Math.min(1, done / total) : 1;
    const width = 30;
    const bar = '#'.repeat(Math.round(ratio * width)).padEnd(width, '-');
    io.stderr(`\r[${bar}] ${String(Math.round(ratio * 100)).padStart(3)}%  ${done.toLocaleString('en')} / ${total.toLocaleString('en')} resources  ${label.padEnd(28).slice(0, 28)}`);
  };
}

/** `cinder export`: runs the bulk export pipeline locally into a directory (an operator's tool). */
export const exportCommand: Command = {
  name: 'export',
  summary: 'Export a tenant (or a Group) to NDJSON files with the bulk export pipeline',
  usage:
    'cinder export --tenant <id> [--group <id>] [--type <type>]... [--since <instant>] [--type-filter <query>]... --out <dir> [--json]\n\n' +
    'Writes one NDJSON file per resource type (split at CINDER_EXPORT_FILE_MAX_BYTES) into <dir>, from one\n' +
    'consistent snapshot of the database. --type takes repeated or comma-separated types.',
  options: {
    tenant: { type: 'string' },
    group: { type: 'string' },
    type: { type: 'string', multiple: true },
    since: { type: 'string' },
    'type-filter': { type: 'string', multiple: true },
    out: { type: 'string' },
    json: { type: 'boolean' },
  },
  async run(args, io) {
    const v = args.values;
    if (typeof v.tenant !== 'string') throw new UsageError('--tenant is required');
    if (typeof v.out !== 'string') throw new UsageError('--out is required');
    const out = resolve(v.out);
    const ctx = await openContext(io);
    const owner = `${CLI_OWNER_PREFIX}${process.pid}:${crypto.randomUUID().slice(0, 8)}`;
    let jobId: string | undefined;
    let starting: Promise<string> | undefined;
    let heartbeat: ReturnType<typeof setInterval> | undefined;
    const stopOnSignal = removeJobOnSignal(io, ctx, out, () => starting);
    try {
      if (!(await ctx.store.tenants.get(v.tenant))) throw new UsageError(`tenant '${v.tenant}' does not exist`);
      starting = start(ctx, v.tenant, typeof v.group === 'string' ? v.group : undefined, inputOf(v), owner);
      jobId = await starting;
      heartbeat = holdLease(ctx, jobId, owner);
      // Made once the export is accepted (the tenant, the Group, the types and filters): a refused export leaves
      // no empty directory behind; one that cannot be made leaves no job (finally).
      try {
        mkdirSync(out, { recursive: true });
      } catch (err) {
        throw new UsageError(`cannot make the --out directory ${out}: ${(err as { code?: string }).code ?? (err as Error).message}`);
      }
      const progress = await run(ctx, io, v.tenant, jobId, owner, out);
      printData(io, !!v.json, {
        out, transaction_time: new Date((await ctx.store.exports.jobs.get(v.tenant, jobId))!.transactionTime).toISOString(),
        resources: progress.exported, files: progress.files.map((f) => `${f.name}:${f.count}`),
      });
      return 0;
    } catch (err) {
      if (err instanceof FhirError) throw new UsageError(err.message);
      throw err;
    } finally {
      clearInterval(heartbeat);
      stopOnSignal();
      if (jobId) await ctx.store.exports.cleanup.remove(jobId);
      await ctx.store.close();
    }
  },
};

type Context = Awaited<ReturnType<typeof openContext>>;

/**
 * Renews the lease of the job this command made until the command ends, from the moment it is made: the
 * run renews it too, but before the run comes the counting of each type's resources for the progress bar,
 * which on a large or busy database outlasts the lease (CINDER_EXPORT_LEASE_SECONDS), and a server's runner
 * would take the job for that of a killed command and fail it while this one lives (run-job.ts).
 */
function holdLease(ctx: Context, jobId: string, owner: string): ReturnType<typeof setInterval> {
  const { leaseMs } = runSettings(ctx.config);
  // A failed renewal is retried on the next tick, as the run's heartbeat does: the lease outlives a few misses.
  return setInterval(() => void ctx.store.exports.jobs.checkpoint(jobId, owner, ctx.clock.now(), leaseMs).catch(() => undefined), Math.max(250, Math.floor(leaseMs / 3)));
}

/**
 * Until the returned function is called, SIGINT (Ctrl-C) and SIGTERM end the command after removing its job
 * (exit 130 or 143): the job is claimed by this process under a lease, and once the lease ran out a server's
 * export workers would claim it and run the whole export again into the server's storage, for no one. The
 * removal does not wait for the run, whose statement may be what the operator is tired of waiting for.
 */
function removeJobOnSignal(io: CliIO, ctx: Context, out: string, job: () => Promise<string> | undefined): () => void {
  const stop = (signal: 'SIGINT' | 'SIGTERM') => {
    void (async () => {
      const id = await job()?.catch(() => undefined);
      if (id) await ctx.store.exports.cleanup.remove(id).catch(() => undefined);
      io.stderr(`cinder export: stopped by ${signal}: the export is removed, and what ${out} holds of it is incomplete\n`);
      process.exit(signal === 'SIGINT' ? 130 : 143);
    })();
  };
  const onInt = () => stop('SIGINT');
  const onTerm = () => stop('SIGTERM');
  process.once('SIGINT', onInt);
  process.once('SIGTERM', onTerm);
  return () => {
    process.off('SIGINT', onInt);
    process.off('SIGTERM', onTerm);
  };
}

function inputOf(v: Record<string, unknown>): ExportInput {
  const types = strings(v.type).flatMap((t) => t.split(',').filter(Boolean));
  const typeFilters = strings(v['type-filter']).filter((f) => f !== '');
  // `--type ''` names nothing, as `_type=` on the API: refused, never read as every type.
  const empty = [
    ...(v.type !== undefined && types.length === 0 ? ['_type'] : []),
    ...(v['type-filter'] !== undefined && typeFilters.length === 0 ? ['_typeFilter'] : []),
  ];
  return {
    method: 'GET', outputFormat: [], since: strings(v.since), types,
    typeFilters, elements: [], patients: [], includeAssociatedData: [], unknown: [], empty,
  };
}

/** Validates like a kick-off and creates the job already claimed by this process. */
function start(ctx: Context, tenant: string, group: string | undefined, input: ExportInput, owner: string): Promise<string> {
  const terminology = createTerminology({ store: ctx.store, clock: ctx.clock });
  const expandCodes = codesExpander(terminology.service);
  // The Group is read at once, as the job's pages are (run: settleMs 0), with a person waiting.
  return kickOff({ store: ctx.store, clock: ctx.clock, maxJobsPerClient: Number.MAX_SAFE_INTEGER, expandCodes, settleMs: 0 }, {
    tenant, access: operatorAccess, level: group ? 'group' : 'system', input, lenient: false,
    requestUrl: `cinder export --tenant ${tenant}${group ? ` --group ${group}` : ''}`, fhirBase: fhirBaseOf(ctx.config.baseUrl, tenant),
    claim: { owner, leaseMs: runSettings(ctx.config).leaseMs }, ...(group ? { groupId: group } : {}),
  });
}

/** Runs the job through the export pipeline into `out`, with a progress bar; returns its final progress. */
async function run(ctx: Context, io: CliIO, tenant: string, jobId: string, owner: string, out: string): Promise<JobProgress> {
  const job = (await ctx.store.exports.jobs.get(tenant, jobId))!;
  let total = 0;
  for (const type of readPlan(job).spec.types) total += await ctx.store.resources.count(tenant, { type, where: [], sort: [], count: 0 });
  const bar = progressBar(io, total);
  const outcome = await runJob({
    // Into a local directory, with a person waiting: a storage error is reported at once, not waited out.
    ...runSettings(ctx.config), settleMs: 0, storageWaitMs: 0, store: ctx.store, sink: createFileSink(out), clock: ctx.clock, log: ctx.log, owner,
    keyPrefix: () => '', onProgress: (n, label) => bar(n, label),
  }, job);
  const after = (await ctx.store.exports.jobs.get(tenant, jobId))!;
  if (outcome !== 'completed') throw new Error(`export ${outcome}: ${after.error ?? 'see the log'}`);
  const progress = readProgress(after);
  bar(progress.exported, 'done', true);
  if (io.isTTY) io.stderr('\n');
  return progress;
}
