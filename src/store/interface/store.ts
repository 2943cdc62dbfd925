/** The store a composition root receives: one repository per area, and the database's own lifecycle. */
import type { ClientRepo, KeyRepo, TenantRepo, UserRepo } from './accounts.ts';
import type { ExportFileRepo } from './export-files.ts';
import type { ExpungeRepo } from './expunge.ts';
import type { ExportRepos } from './export-jobs.ts';
import type { ImportJobRepo } from './import-jobs.ts';
import type { CounterRepo, OAuthRepo } from './oauth.ts';
import type { ResourceRepo } from './resources.ts';
import type { SubscriptionRepo } from './subscriptions.ts';
import type { SchemaState } from '../schema-state.ts';
import type { WriteTimes } from '../write-times.ts';

export interface Store {
  readonly kind: 'sqlite' | 'postgres';
  /** Applies pending migrations (idempotent; safe when several processes start together). */
  migrate(): Promise<{ applied: string[] }>;
  /** Which migrations the database has applied, against this release's (changes nothing; `cinder check`). */
  schema(): Promise<SchemaState>;
  /** Throws when the database cannot be reached. */
  ping(): Promise<void>;
  /** Connection figures for /metrics (`cinder_db_pool{stat=...}`): pool size, queued writes... */
  stats(): Record<string, number>;
  close(): Promise<void>;
  readonly tenants: TenantRepo;
  readonly clients: ClientRepo;
  readonly keys: KeyRepo;
  readonly users: UserRepo;
  readonly oauth: OAuthRepo;
  readonly counters: CounterRepo;
  readonly resources: ResourceRepo;
  readonly exports: ExportRepos;
  /** Bulk import jobs (`$import`, src/import/). */
  readonly imports: ImportJobRepo;
  /** Subscription owners and the notification outbox (src/fhir/subscriptions/). */
  readonly subscriptions: SubscriptionRepo;
  /** Physical removal of versions (`$expunge`, `cinder expunge`, `cinder audit prune`). */
  readonly expunge: ExpungeRepo;
  /** Export file storage in the database, where the adapter offers it (PostgreSQL). */
  readonly exportFiles?: ExportFileRepo;
  /** The timestamps of writes in flight and the safe time they allow (src/store/write-times.ts). */
  readonly writeTimes: WriteTimes;
}
