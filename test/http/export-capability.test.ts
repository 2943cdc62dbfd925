import { afterAll, beforeAll, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';

let t: TestApp;
beforeAll(async () => (t = await createTestApp()));
afterAll(async () => t.close());

test('the CapabilityStatement declares the three export operations and instantiates Bulk Data', async () => {
  const cs = (await (await t.request(t.fhir() + '/metadata')).json()) as {
    instantiates: string[];
    rest: { operation: { name: string; definition: string }[]; resource: { type: string; operation?: { name: string; definition: string }[] }[] }[];
  };
  expect(cs.instantiates).toContain('http://hl7.org/fhir/uv/bulkdata/CapabilityStatement/bulk-data');
  expect(cs.rest[0]!.operation).toContainEqual({ name: 'export', definition: 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/export' });
  const op = (type: string) => cs.rest[0]!.resource.find((r) => r.type === type)!.operation;
  expect(op('Patient')).toContainEqual({ name: 'export', definition: 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/patient-export' });
  expect(op('Group')).toContainEqual({ name: 'export', definition: 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/group-export' });
});
