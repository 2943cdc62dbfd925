import type { Clock } from '../clock.ts';
import type { Store } from '../store/types.ts';
import { StoreConflictError } from '../store/types.ts';
import { createClient } from '../auth/admin.ts';

/**
 * First start on an empty database: tenant `default` and an admin client (client_credentials,
 * `system/*.*`). Returns the credentials to print once, or null when tenants already exist. When
 * several processes start together on one empty PostgreSQL database, the one whose tenant insert wins
 * creates the client; the others start without printing anything.
 */
export async function bootstrap(store: Store, clock: Clock) {
  if ((await store.tenants.list()).length > 0) return null;
  try {
    await store.tenants.create('default', clock.now());
  } catch (err) {
    if (err instanceof StoreConflictError) return null;
    throw err;
  }
  const { client, clientSecret } = await createClient(store, clock, {
    tenant: 'default', name: 'admin', grants: ['client_credentials'], scopes: ['system/*.*'],
  });
  return { tenant: 'default', clientId: client.clientId, clientSecret: clientSecret! };
}
