import { createTenant } from '../auth/admin.ts';
import { UsageError, type Command } from './command.ts';
import { openContext, printData } from './context.ts';
import { fhirBaseOf } from '../config.ts';

/** `cinder tenant create <id>`. */
export const tenantCreateCommand: Command = {
  name: 'tenant create',
  summary: 'Create a tenant (project)',
  usage: 'cinder tenant create <id> [--json]',
  options: { json: { type: 'boolean' } },
  allowPositionals: true,
  async run(args, io) {
    const [id, extra] = args.positionals;
    if (!id || extra) throw new UsageError('expected exactly one tenant id');
    const { config, store, clock } = await openContext(io);
    try {
      const tenant = await createTenant(store, clock, id);
      printData(io, !!args.values.json, { tenant: tenant.id, fhir_base: fhirBaseOf(config.baseUrl, tenant.id) });
      return 0;
    } finally {
      await store.close();
    }
  },
};
