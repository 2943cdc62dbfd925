import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { FhirError } from '../errors.ts';
import { operatorAccess } from '../fhir/access.ts';
import type { ExportInput } from '../export/kickoff-input.ts';
import { kickOff } from '../export/kickoff.ts';
import { runJob } from '../export/run-job.ts';
import { runSettings } from '../export/runner.ts';
import { createFileSink } from '../export/sink-file.ts';
import type { ExportSpec, JobProgress } from '../export/spec.ts';
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
    mkdirSync(out, { recursive: true });
    const { config, log, store, clock } = await openContext(io);
    const owner = `cli:${process.pid}:${crypto.randomUUID().slice(0, 8)}`;
    let jobId: string | undefined;
    try {
      if (!(await store.tenants.get(v.tenant))) throw new UsageError(`tenant '${v.tenant}' does not exist`);
      const input: ExportInput = {
        method: 'GET', outputFormat: [], since: strings(v.since), types: strings(v.type).flatMap((t) => t.split(',').filter(Boolean)),
        typeFilters: strings(v['type-filter']), elements: [], patients: [], includeAssociatedData: [], unknown: [],
      };
      const settings = runSettings(config);
      jobId = await kickOff({ store, clock, maxJobsPerClient: Number.MAX_SAFE_INTEGER }, {
        tenant: v.tenant, access: operatorAccess, level: typeof v.group === 'string' ? 'group' : 'system', input, lenient: false,
        requestUrl: `cinder export --tenant ${v.tenant}${typeof v.group === 'string' ? ` --group ${v.group}` : ''}`,
        claim: { owner, leaseMs: settings.leaseMs }, ...(typeof v.group === 'string' ? { groupId: v.group } : {}),
      });
      const job = (await store.exports.get(v.tenant, jobId))!;
      const spec = JSON.parse(job.spec) as ExportSpec;
      let total = 0;
      for (const type of spec.types) total += await store.resources.count(v.tenant, { type, sort: 'id', count: 0 });
      const bar = progressBar(io, total);
      const outcome = await runJob(
        { ...settings, settleMs: 0, store, sink: createFileSink(out), clock, log, owner, keyPrefix: () => '', onProgress: (n, label) => bar(n, label) },
        job,
      );
      if (outcome !== 'completed') throw new Error(`export ${outcome}: ${(await store.exports.get(v.tenant, jobId))?.error ?? 'see the log'}`);
      const progress = JSON.parse((await store.exports.get(v.tenant, jobId))!.progress) as JobProgress;
      bar(progress.exported, 'done', true);
      if (io.isTTY) io.stderr('\n');
      printData(io, !!v.json, {
        out, transaction_time: new Date(job.transactionTime).toISOString(), resources: progress.exported,
        files: progress.files.map((f) => `${f.name}:${f.count}`),
      });
      return 0;
    } catch (err) {
      if (err instanceof FhirError) throw new UsageError(err.message);
      throw err;
    } finally {
      if (jobId) await store.exports.remove(jobId);
      await store.close();
    }
  },
};
