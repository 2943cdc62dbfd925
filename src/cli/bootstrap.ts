import type { Clock } from '../clock.ts';
import type { Store } from '../store/types.ts';
import { createClient, createTenant } from '../auth/admin.ts';

/**
 * First start on an empty database: tenant `default` and an admin client (client_credentials,
 * `system/*.*`). Returns the credentials to print once, or null when tenants already exist.
 */
export async function bootstrap(store: Store, clock: Clock) {
  if ((await store.tenants.list()).length > 0) return null;
  await createTenant(store, clock, 'default');
  const { client, clientSecret } = await createClient(store, clock, {
    tenant: 'default', name: 'admin', grants: ['client_credentials'], scopes: ['system/*.*'],
  });
  return { tenant: 'default', clientId: client.clientId, clientSecret: clientSecret! };
}
