import type { CapabilityContribution } from '../fhir/capability.ts';

/** Bulk Data 2.0: the three export operations by their OperationDefinition canonicals, and the CapabilityStatement Cinder instantiates. */
export const exportCapability: CapabilityContribution = {
  instantiates: ['http://hl7.org/fhir/uv/bulkdata/CapabilityStatement/bulk-data'],
  operations: [
    { name: 'export', definition: 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/export' },
    { name: 'export', definition: 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/patient-export', types: ['Patient'] },
    { name: 'export', definition: 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/group-export', types: ['Group'] },
  ],
};
