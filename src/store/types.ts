/**
 * The storage interface the rest of Cinder uses, one file per area under interface/. SQL lives only in
 * the adapters (sqlite/, postgres/); one contract suite (test/store/) runs against both. Times are
 * epoch milliseconds.
 */
export * from './interface/accounts.ts';
export * from './interface/oauth.ts';
export * from './interface/resources.ts';
export * from './interface/search.ts';
export * from './interface/compartments.ts';
export * from './interface/snapshot.ts';
export * from './interface/export-jobs.ts';
export * from './interface/export-files.ts';
export * from './interface/import-jobs.ts';
export * from './interface/subscriptions.ts';
export * from './interface/expunge.ts';
export * from './interface/store.ts';
export * from './interface/errors.ts';
