/**
 * `$graphql` over a real port, as an app reaches it: Medplum's `MedplumClient` signs in with client
 * credentials against a listening Cinder and sends its `graphql()` queries over HTTP. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { MedplumClient } from '@medplum/core';
import { createClient, createTenant } from '../../src/auth/admin.ts';
import { eachStore } from '../helpers/export.ts';
import { startCinder, type Cinder } from '../helpers/server.ts';
import type { Json } from '../helpers/fhir.ts';
import type { Store } from '../../src/store/types.ts';

await eachStore((kind, fresh) => {
  describe(`$graphql on a port, with MedplumClient (${kind})`, () => {
    let store: Store;
    let cinder: Cinder;
    let m: MedplumClient;

    beforeAll(async () => {
      store = await fresh();
      cinder = await startCinder({ store });
      await createTenant(store, cinder.clock, 'clinic');
      const c = await createClient(store, cinder.clock, { tenant: 'clinic', name: 'GraphQL app', grants: ['client_credentials'], scopes: ['system/*.*'], redirectUris: [], secret: true });
      m = new MedplumClient({ baseUrl: `${cinder.url}/`, fhirUrlPath: 'tenants/clinic/fhir/R4', authCredentialsMethod: 'header', cacheTime: 0 });
      await m.startClientLogin(c.client.clientId, c.clientSecret!);
    });
    afterAll(async () => {
      cinder?.stop();
      await store?.close();
    });

    test('graphql() reads, searches and resolves references through the listening server', async () => {
      const org = await m.createResource({ resourceType: 'Organization', name: 'Port Clinic' });
      const p = await m.createResource({ resourceType: 'Patient', name: [{ family: 'Porter' }], managingOrganization: { reference: `Organization/${org.id}` } });
      const answer = (await m.graphql(`{ PatientList(family: "porter") { id managingOrganization { resource { ... on Organization { name } } } } }`)) as Json;
      expect(answer).toEqual({ data: { PatientList: [{ id: p.id, managingOrganization: { resource: { name: 'Port Clinic' } } }] } });
      const refused = (await m.graphql('mutation { PatientCreate { id } }')) as Json;
      expect(refused.errors[0].message).toContain('read-only');
    });
  });
});
