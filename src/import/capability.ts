import type { CapabilityContribution } from '../fhir/capability.ts';

/**
 * `$import` at the system level. No HL7 OperationDefinition exists for it yet; the canonical is the one the
 * Bulk Data import proposal's drafts use (https://github.com/smart-on-fhir/bulk-import).
 */
export const importCapability: CapabilityContribution = {
  operations: [{ name: 'import', definition: 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/import' }],
};
