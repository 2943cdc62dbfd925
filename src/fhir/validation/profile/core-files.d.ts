/** Paths (readable with Bun.file) of the FHIR R4 core profile and extension definition bundles, see core-files.js. */
export declare const coreProfileFiles: readonly string[];
/** Paths of the R4 datatype and resource definition bundles (snapshot generation's bases), see core-files.js. */
export declare const coreBaseFiles: readonly string[];
