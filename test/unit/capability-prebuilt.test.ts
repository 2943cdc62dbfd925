/**
 * What `bun run build` computes of the CapabilityStatement into the executable (capability.ts
 * prebuildCapability, embedded by scripts/build.ts) against what the code computes at run time: the
 * statement a server serves from it must be the one computed without it, for any set of operations.
 * test/e2e/binary.test.ts compares the executable's `metadata` with the one computed from source.
 */
import { expect, test } from 'bun:test';
import { computedEntriesJson, computedSystemParams, prebuildCapability, prebuiltEntriesJson, type OperationDecl } from '../../src/fhir/capability.ts';
import { REST_RESOURCE_TYPES } from '../../src/fhir/resource-types.ts';

/** The static parts as the executable holds them: JSON text, read back. */
const embedded = () => JSON.parse(JSON.stringify(prebuildCapability())) as ReturnType<typeof prebuildCapability>;

const OPERATION_SETS: Record<string, OperationDecl[]> = {
  none: [],
  'system level only': [{ name: 'export', definition: 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/export' }],
  'on one type, several types and the system': [
    { name: 'everything', definition: 'http://hl7.org/fhir/OperationDefinition/Patient-everything', types: ['Patient'] },
    { name: 'validate', definition: 'http://hl7.org/fhir/OperationDefinition/Resource-validate', types: [...REST_RESOURCE_TYPES] },
    { name: 'export', definition: 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/export' },
    // Subscription's entry holds the topics placeholder, AuditEvent's is append-only: operations go last on both.
    { name: 'status', definition: 'http://hl7.org/fhir/uv/subscriptions-backport/OperationDefinition/backport-subscription-status', types: ['Subscription', 'AuditEvent'] },
    { name: 'expunge', definition: 'http://cinder.invalid/OperationDefinition/expunge', types: ['Patient', 'Observation'] },
  ],
};

for (const [name, ops] of Object.entries(OPERATION_SETS)) {
  test(`the prebuilt per-type entries with operations spliced in are the entries computed at run time (${name})`, () => {
    const computed = computedEntriesJson(ops);
    expect(prebuiltEntriesJson(embedded(), ops)).toBe(computed);
    // Every REST type, in order.
    expect((JSON.parse(computed) as { type: string }[]).map((e) => e.type)).toEqual([...REST_RESOURCE_TYPES]);
  });
}

test('the prebuilt parameters searched across types are those computed at run time', () => {
  expect(embedded().systemParams).toEqual(computedSystemParams());
});

test('prebuilt parts of another list of types are refused rather than spliced into the wrong entries', () => {
  const prebuilt = embedded();
  expect(() => prebuiltEntriesJson({ ...prebuilt, entries: prebuilt.entries.slice(1) }, [])).toThrow(/resource types/);
});
