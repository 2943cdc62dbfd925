import { AdminError, createTenant } from '../auth/admin.ts';
import { UsageError, type Command } from './command.ts';
import { auditChange, openContext, printData } from './context.ts';
import { baseUrlIsDefault, fhirBaseOf } from '../config.ts';

/** `cinder tenant create <id>`: prints the tenant's FHIR base, from CINDER_BASE_URL (a note on stderr when it is the default). */
export const tenantCreateCommand: Command = {
  name: 'tenant create',
  summary: 'Create a tenant (project)',
  usage: 'cinder tenant create <id> [--json]\n\nPrints the tenant\'s FHIR base URL, built from CINDER_BASE_URL: set it as the server has it (this command cannot know a server\'s address or port).',
  options: { json: { type: 'boolean' } },
  allowPositionals: true,
  async run(args, io) {
    const [id, extra] = args.positionals;
    if (!id || extra) throw new UsageError('expected exactly one tenant id');
    // The one command besides serve and migrate that may start a database: an installation's tenants are set up
    // before its first start (`cinder serve` then makes no tenant 'default' nor admin client, having tenants).
    const ctx = await openContext(io, {}, true, 'missing');
    const { config, store, clock } = ctx;
    if (ctx.created) {
      io.stderr(`note: there was no Cinder database at ${ctx.where}; this made one. A server reads it only with the same ` +
        `CINDER_DATA_DIR (or CINDER_DATABASE_URL) as this command's.\n`);
    }
    try {
      // An id refused or taken is the administrator's mistake, a usage error as with `client create` and `user create`.
      const tenant = await createTenant(store, clock, id).catch((err: unknown) => {
        throw err instanceof AdminError ? new UsageError(err.message, { cause: err }) : err;
      });
      await auditChange(ctx, io, 'tenant create', tenant.id, { kind: 'tenant', id: tenant.id });
      printData(io, !!args.values.json, { tenant: tenant.id, fhir_base: fhirBaseOf(config.baseUrl, tenant.id) });
      // This command cannot know the address or port a server listens on: fhir_base is CINDER_BASE_URL's.
      if (baseUrlIsDefault(io.env)) {
        io.stderr(`note: fhir_base is built from CINDER_BASE_URL, which is not set here, so it is the default ${config.baseUrl} ` +
          `(its port is CINDER_PORT's, else PORT's, else 8080, not a running server's); set CINDER_BASE_URL as the server has it.\n`);
      }
      return 0;
    } finally {
      await store.close();
    }
  },
};
