import { pruneAudit, INSTANT } from '../audit/prune.ts';
import { AUDIT_TYPE, expunge, type ExpungeTarget } from '../fhir/expunge.ts';
import { UsageError, type Command } from './command.ts';
import { auditChange, printData, withStore } from './context.ts';
import { createTally } from './progress.ts';

const seconds = (s: number) => Math.round(s * 10) / 10;

/** `cinder expunge`: `$expunge` for the operator (no CINDER_EXPUNGE needed, no token), in batches. */
export const expungeCommand: Command = {
  name: 'expunge',
  summary: 'Remove deleted resources and old versions physically ($expunge for the operator)',
  usage:
    'cinder expunge --tenant <id> [--type <t>]... [--id <id>] [--deleted] [--previous-versions] [--everything] [--json]\n\n' +
    'Removes stored versions for good, with their search index rows, as $expunge does (HAPI FHIR\'s semantics):\n' +
    '  --deleted             every version of each resource whose current version is a deletion\n' +
    '  --previous-versions   every version but the current one\n' +
    '  --everything          every resource of the tenant, live ones too (not with --type or --id)\n' +
    'Without --type every type is taken; --id names one resource of one --type. AuditEvents are never\n' +
    'taken (see `cinder audit prune`). Runs in batches of 500 versions, each one transaction, and prints the\n' +
    'number of versions removed. On SQLite the file keeps its size (the space is reused) until `cinder compact`.',
  options: {
    tenant: { type: 'string' },
    type: { type: 'string', multiple: true },
    id: { type: 'string' },
    deleted: { type: 'boolean' },
    'previous-versions': { type: 'boolean' },
    everything: { type: 'boolean' },
    json: { type: 'boolean' },
  },
  async run(args, io) {
    const v = args.values;
    if (typeof v.tenant !== 'string') throw new UsageError('--tenant is required');
    const types = ((v.type as string[] | undefined) ?? []).flatMap((t) => t.split(',')).filter(Boolean);
    if (typeof v.id === 'string' && types.length !== 1) throw new UsageError('--id needs exactly one --type');
    if (v.everything && (types.length || typeof v.id === 'string')) throw new UsageError('--everything takes every type: not with --type or --id');
    if (!v.deleted && !v['previous-versions'] && !v.everything) throw new UsageError('say what to remove: --deleted, --previous-versions or --everything');
    if (types.includes(AUDIT_TYPE)) throw new UsageError('AuditEvents are removed by `cinder audit prune` only');
    const target: ExpungeTarget = { ...(types.length && { types }), ...(typeof v.id === 'string' && { id: v.id }) };
    const tenant = v.tenant;
    return withStore(io, async (ctx) => {
      if (!(await ctx.store.tenants.get(tenant))) throw new UsageError(`tenant '${tenant}' does not exist`);
      const tally = createTally(io, 'expunge', 'versions removed');
      const options = { deletedResources: !!v.deleted, previousVersions: !!v['previous-versions'], everything: !!v.everything };
      // The flags given (true: one without a value), as the event's details and its command line.
      const given: [string, string | true][] = [
        ...types.map((type): [string, string] => ['type', type]), ...(typeof v.id === 'string' ? [['id', v.id] as [string, string]] : []),
        ...(['deleted', 'previous-versions', 'everything'] as const).filter((f) => v[f]).map((f): [string, true] => [f, true]),
      ];
      const line = given.map(([name, value]) => (value === true ? `--${name}` : `--${name} ${value}`)).join(' ');
      const record = (removed: number, failure?: unknown) => {
        const detail = [...given.map(([name, value]): [string, string] => [name, String(value)]), ['removed', String(removed)] as [string, string]];
        const what = failure === undefined ? `${removed} versions removed` : `failed after ${removed} versions removed: ${(failure as Error)?.message ?? String(failure)}`;
        return auditChange(ctx, io, 'expunge', tenant, { kind: 'tenant', id: tenant, detail }, `cinder expunge --tenant ${tenant} ${line}: ${what}`, failure === undefined ? '0' : '8');
      };
      let removed = 0;
      let count: number;
      try {
        count = await expunge(ctx.store, tenant, target, options, (p) => tally.update((removed = p.removed), p.type));
      } catch (err) {
        // The batches committed before the error stay removed: the trail says so (an error refused before any batch removed nothing).
        if (removed > 0) await record(removed, err).catch(() => undefined);
        throw err;
      }
      tally.done();
      await record(count);
      printData(io, !!v.json, { tenant, count, seconds: seconds(tally.elapsedSeconds()) });
      return 0;
    });
  },
};

/** `cinder audit prune`: removes old AuditEvents physically (the API keeps them append-only). */
export const auditPruneCommand: Command = {
  name: 'audit prune',
  summary: 'Remove AuditEvents recorded before an instant (retention)',
  usage:
    'cinder audit prune --tenant <id> --before <instant> [--json]\n\n' +
    'Removes, for good, the tenant\'s AuditEvents whose `recorded` is before the instant (with a time zone,\n' +
    'e.g. 2020-01-01T00:00:00Z), with their search index rows, in batches of 500, each one transaction.\n' +
    'The REST API keeps AuditEvents append-only; this command is the one way they go. Archive them first\n' +
    'if your policy asks (`cinder export --tenant <id> --type AuditEvent --out <dir>`).',
  options: { tenant: { type: 'string' }, before: { type: 'string' }, json: { type: 'boolean' } },
  async run(args, io) {
    const v = args.values;
    if (typeof v.tenant !== 'string') throw new UsageError('--tenant is required');
    if (typeof v.before !== 'string') throw new UsageError('--before is required');
    if (!INSTANT.test(v.before) || Number.isNaN(Date.parse(v.before))) throw new UsageError(`--before: '${v.before}' is not an instant with a time zone (e.g. 2026-01-01T00:00:00Z)`);
    const tenant = v.tenant;
    const before = v.before;
    return withStore(io, async (ctx) => {
      if (!(await ctx.store.tenants.get(tenant))) throw new UsageError(`tenant '${tenant}' does not exist`);
      const tally = createTally(io, 'audit prune', 'AuditEvents removed');
      let removed = 0;
      let count: number;
      try {
        count = await pruneAudit(ctx, tenant, before, (n) => tally.update((removed = n)));
      } catch (err) {
        // The batches committed before the error stay removed: the trail says so.
        if (removed > 0) {
          await auditChange(ctx, io, 'audit prune', tenant, { kind: 'tenant', id: tenant, detail: [['before', before], ['removed', String(removed)]] },
            `cinder audit prune --tenant ${tenant} --before ${before}: failed after ${removed} AuditEvents removed: ${(err as Error)?.message ?? String(err)}`, '8').catch(() => undefined);
        }
        throw err;
      }
      tally.done();
      // Written after the prune, so never pruned by it whatever the cut-off.
      await auditChange(ctx, io, 'audit prune', tenant, { kind: 'tenant', id: tenant, detail: [['before', before], ['removed', String(count)]] },
        `cinder audit prune --tenant ${tenant} --before ${before}: ${count} AuditEvents removed`);
      printData(io, !!v.json, { tenant, before, count, seconds: seconds(tally.elapsedSeconds()) });
      return 0;
    });
  },
};
