/** Which of a release's migrations a database has applied (`Store.schema()`, `cinder check`). */
export interface SchemaState {
  /** The highest migration version applied; 0 when none is (no `schema_migrations` table: not a Cinder database yet). */
  version: number;
  /** The newest migration this release knows. */
  latest: number;
  /** This release's migrations the database has not applied, as `<version>_<name>`, oldest first. */
  pending: string[];
  /** Migrations the database has applied that this release does not know (a newer Cinder wrote it), as `<version>_<name>`. */
  unknown: string[];
}

/** Compares the rows of `schema_migrations` with this release's migrations. */
export function schemaState(applied: readonly { version: number; name: string }[], known: readonly { version: number; name: string }[]): SchemaState {
  const done = new Set(applied.map((m) => m.version));
  const ours = new Set(known.map((m) => m.version));
  const label = (m: { version: number; name: string }) => `${m.version}_${m.name}`;
  const byVersion = (a: { version: number }, b: { version: number }) => a.version - b.version;
  return {
    version: Math.max(0, ...applied.map((m) => m.version)),
    latest: Math.max(0, ...known.map((m) => m.version)),
    pending: [...known].sort(byVersion).filter((m) => !done.has(m.version)).map(label),
    unknown: [...applied].sort(byVersion).filter((m) => !ours.has(m.version)).map(label),
  };
}
