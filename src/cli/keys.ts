import type { Command } from './command.ts';
import { auditChange, openContext, printData } from './context.ts';

/** `cinder keys rotate`: new signing keys; the old ones stop signing and stay published until their tokens expire. */
export const keysRotateCommand: Command = {
  name: 'keys rotate',
  summary: 'Rotate the token signing keys',
  usage:
    'cinder keys rotate [--json]\n\n' +
    'Adds a new ES256 (access tokens) and RS256 (id_tokens) key. The previous keys stop signing (running\n' +
    'servers switch within a minute) and stay in /oauth2/jwks until every token they signed has expired.\n' +
    'With CINDER_AUDIT=on the rotation is recorded as an AuditEvent in every tenant.',
  options: { json: { type: 'boolean' } },
  async run(args, io) {
    const ctx = await openContext(io);
    const { store, keys } = ctx;
    try {
      await keys.init();
      const kids = await keys.rotate();
      // The keys sign every tenant's tokens: each tenant's trail records the rotation.
      for (const tenant of await store.tenants.list()) {
        await auditChange(ctx, io, 'keys rotate', tenant.id, kids.map((id) => ({ kind: 'key' as const, id })));
      }
      printData(io, !!args.values.json, { new_kids: kids });
      return 0;
    } finally {
      await store.close();
    }
  },
};
