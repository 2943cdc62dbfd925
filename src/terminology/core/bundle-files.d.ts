/** Paths (readable with Bun.file) of the FHIR R4 core terminology bundles, see bundle-files.js. */
export declare const coreBundleFiles: readonly string[];
/** Path (readable with Bun.file) of the FHIR R4 core ConceptMaps bundle. */
export declare const coreConceptMapFile: string;
