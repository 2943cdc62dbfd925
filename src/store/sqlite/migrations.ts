import { deleteRowsStoredElsewhere } from '../stored-elsewhere.ts';

/** Versioned SQLite schema. Append new entries; never edit an applied one. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const sqliteMigrations: Migration[] = [
  {
    version: 1,
    name: 'core',
    sql: `
CREATE TABLE tenants (id TEXT PRIMARY KEY, created_at INTEGER NOT NULL);
CREATE TABLE clients (
  client_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, name TEXT NOT NULL, secret_hash TEXT,
  grants TEXT NOT NULL, scopes TEXT NOT NULL, redirect_uris TEXT NOT NULL, jwks TEXT, jwks_url TEXT,
  read_attributes TEXT, access_token_ttl INTEGER, created_at INTEGER NOT NULL, disabled INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX clients_tenant ON clients (tenant);
CREATE TABLE signing_keys (
  kid TEXT PRIMARY KEY, alg TEXT NOT NULL, private_jwk TEXT NOT NULL, public_jwk TEXT NOT NULL,
  created_at INTEGER NOT NULL, retired_at INTEGER
);
CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT INTO counters (name, value) VALUES ('resource_seq', 0);
CREATE TABLE resources (
  pk INTEGER PRIMARY KEY, tenant TEXT NOT NULL, type TEXT NOT NULL, id TEXT NOT NULL,
  version_id INTEGER NOT NULL, last_updated INTEGER NOT NULL, deleted INTEGER NOT NULL,
  seq INTEGER NOT NULL, content TEXT NOT NULL
);
CREATE UNIQUE INDEX resources_key ON resources (tenant, type, id);
CREATE INDEX resources_updated ON resources (tenant, type, last_updated, id);
CREATE INDEX resources_seq ON resources (tenant, type, seq);
CREATE TABLE resource_history (
  tenant TEXT NOT NULL, type TEXT NOT NULL, id TEXT NOT NULL, version_id INTEGER NOT NULL,
  last_updated INTEGER NOT NULL, deleted INTEGER NOT NULL, seq INTEGER NOT NULL, content TEXT NOT NULL,
  PRIMARY KEY (tenant, type, id, version_id)
);
CREATE INDEX resource_history_updated ON resource_history (tenant, last_updated);
-- Index and compartment rows are keyed by their resource row (res = resources.pk): one B-tree each
-- plus the lookup index, whose entries end with the key's res (covering the searches' subqueries).
CREATE TABLE search_index (
  res INTEGER NOT NULL, tenant TEXT NOT NULL, type TEXT NOT NULL, param TEXT NOT NULL,
  system TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (res, param, system, value)
) WITHOUT ROWID;
CREATE INDEX search_index_value ON search_index (tenant, type, param, value, system);
CREATE TABLE compartments (
  res INTEGER NOT NULL, tenant TEXT NOT NULL, patient TEXT NOT NULL, type TEXT NOT NULL, PRIMARY KEY (res, patient)
) WITHOUT ROWID;
CREATE INDEX compartments_patient ON compartments (tenant, patient, type);
`,
  },
  {
    version: 2,
    name: 'auth',
    sql: `
CREATE TABLE users (
  id TEXT PRIMARY KEY, tenant TEXT NOT NULL, username TEXT NOT NULL, password_hash TEXT NOT NULL,
  name TEXT, email TEXT, email_verified INTEGER NOT NULL DEFAULT 0, phone TEXT, phone_verified INTEGER NOT NULL DEFAULT 0,
  address TEXT, fhir_user TEXT, created_at INTEGER NOT NULL, disabled INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX users_username ON users (tenant, username);
CREATE TABLE auth_codes (
  code_hash TEXT PRIMARY KEY, grant_id TEXT NOT NULL, client_id TEXT NOT NULL, tenant TEXT NOT NULL, user_id TEXT NOT NULL,
  redirect_uri TEXT NOT NULL, scope TEXT NOT NULL, nonce TEXT, code_challenge TEXT, auth_time INTEGER NOT NULL,
  expires_at INTEGER NOT NULL, consumed_at INTEGER
);
CREATE INDEX auth_codes_expires ON auth_codes (expires_at);
CREATE TABLE refresh_tokens (
  token_hash TEXT PRIMARY KEY, grant_id TEXT NOT NULL, client_id TEXT NOT NULL, tenant TEXT NOT NULL, user_id TEXT NOT NULL,
  scope TEXT NOT NULL, auth_time INTEGER NOT NULL, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, revoked_at INTEGER
);
CREATE INDEX refresh_tokens_grant ON refresh_tokens (grant_id);
CREATE INDEX refresh_tokens_expires ON refresh_tokens (expires_at);
CREATE TABLE revocations (
  kind TEXT NOT NULL, value TEXT NOT NULL, revoked_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, PRIMARY KEY (kind, value)
);
CREATE INDEX revocations_revoked ON revocations (revoked_at);
CREATE TABLE assertion_jtis (client_id TEXT NOT NULL, jti TEXT NOT NULL, expires_at INTEGER NOT NULL, PRIMARY KEY (client_id, jti));
CREATE INDEX assertion_jtis_expires ON assertion_jtis (expires_at);
CREATE TABLE rate_counters (key TEXT PRIMARY KEY, count INTEGER NOT NULL, reset_at INTEGER NOT NULL);
`,
  },
  {
    version: 3,
    name: 'export_jobs',
    sql: `
CREATE TABLE export_jobs (
  id TEXT PRIMARY KEY, tenant TEXT NOT NULL, client_id TEXT NOT NULL, state TEXT NOT NULL, request TEXT NOT NULL,
  spec TEXT NOT NULL, transaction_time INTEGER NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
  lease_owner TEXT, lease_until INTEGER, attempts INTEGER NOT NULL DEFAULT 0, progress TEXT NOT NULL, error TEXT,
  completed_at INTEGER, expires_at INTEGER, purged INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX export_jobs_claim ON export_jobs (state, created_at);
CREATE INDEX export_jobs_client ON export_jobs (tenant, client_id, state);
CREATE TABLE export_patients (job_id TEXT NOT NULL, patient TEXT NOT NULL, joined INTEGER NOT NULL, PRIMARY KEY (job_id, patient)) WITHOUT ROWID;
-- Downloads in progress hold their job's files (a lease each, renewed while streaming).
CREATE TABLE export_downloads (job_id TEXT NOT NULL, download TEXT NOT NULL, until INTEGER NOT NULL, PRIMARY KEY (job_id, download)) WITHOUT ROWID;
CREATE TABLE export_provenance (
  job_id TEXT NOT NULL, target TEXT NOT NULL, provenance TEXT NOT NULL, rank TEXT NOT NULL, PRIMARY KEY (job_id, target)
) WITHOUT ROWID;
CREATE INDEX export_provenance_winner ON export_provenance (job_id, provenance);
-- Keyset scans of one type in row order (the implicit rowid ends the key).
CREATE INDEX resources_scan ON resources (tenant, type);
`,
  },
  {
    version: 4,
    name: 'leaner_index',
    sql: `
${deleteRowsStoredElsewhere()}
-- changeToken's MAX(seq) per type is read from resources_updated, which now ends with seq: one B-tree
-- less to maintain per resource written.
DROP INDEX resources_seq;
DROP INDEX resources_updated;
CREATE INDEX resources_updated ON resources (tenant, type, last_updated, id, seq);
`,
  },
  {
    version: 5,
    name: 'search_tables',
    sql: `
-- Every search parameter type (#14): strings, dates/numbers/quantities and composites get tables of
-- their own, each keyed by its resource row plus one value-first index. index_state says which index
-- model the stored rows follow: a database with resources starts at model 0 and is reindexed by
-- \`cinder reindex\` (which \`cinder serve\` runs at start when needed), resumably from reindex_after.
CREATE TABLE search_string (
  res INTEGER NOT NULL, tenant TEXT NOT NULL, type TEXT NOT NULL, param TEXT NOT NULL, value TEXT NOT NULL, exact TEXT NOT NULL,
  PRIMARY KEY (res, param, exact)
) WITHOUT ROWID;
CREATE INDEX search_string_value ON search_string (tenant, type, param, value);
CREATE TABLE search_range (
  res INTEGER NOT NULL, tenant TEXT NOT NULL, type TEXT NOT NULL, param TEXT NOT NULL, system TEXT NOT NULL, code TEXT NOT NULL,
  low REAL NOT NULL, high REAL NOT NULL, PRIMARY KEY (res, param, low, high, system, code)
) WITHOUT ROWID;
CREATE INDEX search_range_low ON search_range (tenant, type, param, low);
CREATE TABLE search_composite (
  res INTEGER NOT NULL, tenant TEXT NOT NULL, type TEXT NOT NULL, param TEXT NOT NULL, system1 TEXT NOT NULL, value1 TEXT NOT NULL,
  system2 TEXT NOT NULL, value2 TEXT NOT NULL, low REAL NOT NULL, high REAL NOT NULL,
  PRIMARY KEY (res, param, value1, system1, value2, system2, low, high)
) WITHOUT ROWID;
CREATE INDEX search_composite_value ON search_composite (tenant, type, param, value1);
-- A coded value's text (CodeableConcept.text, Coding.display), normalised, for :text; not indexed.
ALTER TABLE search_index ADD COLUMN display TEXT NOT NULL DEFAULT '';
CREATE TABLE index_state (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT INTO index_state (name, value) SELECT 'model', CASE WHEN EXISTS (SELECT 1 FROM resources) THEN 0 ELSE 1 END;
INSERT INTO index_state (name, value) VALUES ('reindex_after', 0);
`,
  },
  {
    version: 6,
    name: 'validation_debt',
    sql: `
-- Tenants that may hold resources not validated strictly against the R4 definitions (#15): written
-- before validation existed (every tenant that holds resources now), or with CINDER_VALIDATION at
-- structural or off. Bulk export validates such tenants' resources as it reads them; \`cinder validate\`
-- clears the row when it finds nothing invalid and nothing was written unvalidated meanwhile
-- (generation unchanged).
CREATE TABLE validation_debt (tenant TEXT PRIMARY KEY, generation INTEGER NOT NULL);
INSERT INTO validation_debt (tenant, generation)
  SELECT id, 1 FROM tenants WHERE EXISTS (SELECT 1 FROM resources WHERE resources.tenant = tenants.id);
`,
  },
  {
    version: 7,
    name: 'search_keys',
    sql: `
-- Smaller index rows (#14): a row names its tenant, type and parameter, and a token's system or a
-- quantity's unit (system and code), by one integer key k of search_keys instead of repeating them as
-- text in both B-trees of its table. Keys are created by the writers as they meet them and never
-- change or go. Every existing row is converted, with the same meaning.
CREATE TABLE search_keys (
  k INTEGER PRIMARY KEY, tenant TEXT NOT NULL, type TEXT NOT NULL, param TEXT NOT NULL, system TEXT NOT NULL, code TEXT NOT NULL,
  UNIQUE (tenant, type, param, system, code)
);
INSERT INTO search_keys (tenant, type, param, system, code)
  SELECT tenant, type, param, system, '' FROM search_index
  UNION SELECT tenant, type, param, '', '' FROM search_string
  UNION SELECT tenant, type, param, system, code FROM search_range
  UNION SELECT tenant, type, param, '', '' FROM search_composite
  ORDER BY 1, 2, 3, 4, 5;
-- Each table is copied in its res-first order (CROSS JOIN keeps the old table as SQLite's outer loop).
CREATE TABLE search_index_keyed (
  res INTEGER NOT NULL, k INTEGER NOT NULL, value TEXT NOT NULL, display TEXT NOT NULL, PRIMARY KEY (res, k, value)
) WITHOUT ROWID;
INSERT INTO search_index_keyed (res, k, value, display)
  SELECT s.res, k.k, s.value, s.display FROM search_index s CROSS JOIN search_keys k
  WHERE k.tenant = s.tenant AND k.type = s.type AND k.param = s.param AND k.system = s.system AND k.code = '';
DROP TABLE search_index;
ALTER TABLE search_index_keyed RENAME TO search_index;
CREATE INDEX search_index_value ON search_index (k, value);
CREATE TABLE search_string_keyed (
  res INTEGER NOT NULL, k INTEGER NOT NULL, value TEXT NOT NULL, exact TEXT NOT NULL, PRIMARY KEY (res, k, exact)
) WITHOUT ROWID;
INSERT INTO search_string_keyed (res, k, value, exact)
  SELECT s.res, k.k, s.value, s.exact FROM search_string s CROSS JOIN search_keys k
  WHERE k.tenant = s.tenant AND k.type = s.type AND k.param = s.param AND k.system = '' AND k.code = '';
DROP TABLE search_string;
ALTER TABLE search_string_keyed RENAME TO search_string;
CREATE INDEX search_string_value ON search_string (k, value);
CREATE TABLE search_range_keyed (
  res INTEGER NOT NULL, k INTEGER NOT NULL, low REAL NOT NULL, high REAL NOT NULL, PRIMARY KEY (res, k, low, high)
) WITHOUT ROWID;
INSERT INTO search_range_keyed (res, k, low, high)
  SELECT s.res, k.k, s.low, s.high FROM search_range s CROSS JOIN search_keys k
  WHERE k.tenant = s.tenant AND k.type = s.type AND k.param = s.param AND k.system = s.system AND k.code = s.code;
DROP TABLE search_range;
ALTER TABLE search_range_keyed RENAME TO search_range;
CREATE INDEX search_range_low ON search_range (k, low);
-- A composite keeps its components' systems in the row: its first component is searched with or
-- without a system, by the value-first index, and its rows are few.
CREATE TABLE search_composite_keyed (
  res INTEGER NOT NULL, k INTEGER NOT NULL, system1 TEXT NOT NULL, value1 TEXT NOT NULL, system2 TEXT NOT NULL, value2 TEXT NOT NULL,
  low REAL NOT NULL, high REAL NOT NULL, PRIMARY KEY (res, k, value1, system1, value2, system2, low, high)
) WITHOUT ROWID;
INSERT INTO search_composite_keyed (res, k, system1, value1, system2, value2, low, high)
  SELECT s.res, k.k, s.system1, s.value1, s.system2, s.value2, s.low, s.high FROM search_composite s CROSS JOIN search_keys k
  WHERE k.tenant = s.tenant AND k.type = s.type AND k.param = s.param AND k.system = '' AND k.code = '';
DROP TABLE search_composite;
ALTER TABLE search_composite_keyed RENAME TO search_composite;
CREATE INDEX search_composite_value ON search_composite (k, value1);
`,
  },
  {
    version: 8,
    name: 'search_text',
    sql: `
-- Full-text search (#14): \`_text\` (the narrative) and \`_content\` (all the resource's text). One row per
-- resource row that holds text (rowid = resources.pk), each column its words as the indexer writes them
-- (letters and digits, accents removed, lower case, separated by single spaces: src/fhir/text-index.ts),
-- so the ascii tokenizer splits them at the spaces alone, and \`scope\` one token for the resource's tenant
-- and type (src/store/text-scope.ts), which every search names. Contentless (the words are not stored
-- twice) with deletes, and column detail only: there is no phrase search.
CREATE VIRTUAL TABLE search_text USING fts5(narrative, content, scope, content='', contentless_delete=1, detail=column, tokenize='ascii');
-- FTS5 writes a segment per transaction (about 0.2 ms for one row, against 2 ms for a thousand), so
-- small transactions leave their words here, and resources they change or delete are listed as stale
-- (their FTS5 rows no longer count); both are moved into search_text in batches (sqlite/text.ts).
CREATE TABLE search_text_recent (res INTEGER PRIMARY KEY, narrative TEXT NOT NULL, content TEXT NOT NULL, scope TEXT NOT NULL);
CREATE TABLE search_text_stale (res INTEGER PRIMARY KEY);
-- A database holding resources gets their words from the reindex that \`cinder serve\` runs at start
-- (index model 2); an empty one follows model 2 already.
UPDATE index_state SET value = 2 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 9,
    name: 'identifier_type_text',
    sql: `
-- Index model 3 (src/fhir/reindex.ts): an Identifier's rows carry its type's text, which token \`:text\`
-- searches. A database holding resources gets it from the reindex that \`cinder serve\` runs at start
-- (only the resources with such a text are rebuilt); an empty one follows model 3 already.
UPDATE index_state SET value = 3 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 10,
    name: 'search_range_high',
    sql: `
-- Date, number and quantity rows by their high end as well: \`gt\` and \`ge\` (and a number's \`sa\`) bound
-- only the stored high end, so such a search could not start from its rows and read the type's
-- resources in order instead (Observation?date=gt<a date no Observation reaches> on a million
-- resources: every Observation, 7.7 s).
CREATE INDEX search_range_high ON search_range (k, high);
`,
  },
  {
    version: 11,
    name: 'location_position',
    sql: `
-- Index model 4 (src/fhir/reindex.ts): a Location's position is a range row of \`near\` (latitude,
-- longitude). A database holding resources gets it from the reindex that \`cinder serve\` runs at start
-- (only the resources with a position are rebuilt); an empty one follows model 4 already.
UPDATE index_state SET value = 4 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 12,
    name: 'ucum_canonical',
    sql: `
-- Index model 5 (src/fhir/reindex.ts): a UCUM quantity also has a row in its canonical unit, under the
-- parameter's canonical name (src/fhir/ucum.ts). A database holding resources gets them from the
-- reindex that \`cinder serve\` runs at start (only the resources naming UCUM are rebuilt); an empty one
-- follows model 5 already.
UPDATE index_state SET value = 5 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 13,
    name: 'contained_rows',
    sql: `
-- Index model 6 (src/fhir/reindex.ts): a resource also has rows of the resources it contains and refers
-- to, under prefixed parameters (src/fhir/indexer.ts containedRows), which chains read, and reference
-- rows of \`#id\`. A database holding resources gets them from the reindex that \`cinder serve\` runs at
-- start (only the resources that contain resources are rebuilt); an empty one follows model 6 already.
UPDATE index_state SET value = 6 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 14,
    name: 'contained_restricted',
    sql: `
-- Index model 7 (src/fhir/reindex.ts): the contained resources that a reference parameter restricted to a
-- type names (AuditEvent.patient, EpisodeOfCare.care-manager: \`where(resolve() is Patient)\`) have rows
-- as model 6 gave other contained resources. A database holding resources gets them from the reindex
-- that \`cinder serve\` runs at start (only such resources that contain resources are rebuilt); an empty
-- one follows model 7 already.
UPDATE index_state SET value = 7 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 15,
    name: 'condition_claims',
    sql: `
-- Conditional creates and updates of one condition in several processes (src/fhir/conditional.ts): the
-- write that settles a condition moves its claim on from the count it read before searching, in the
-- same transaction; a write that finds the count moved searches again. \`at\` dates the last move:
-- claims an hour old are purged.
CREATE TABLE condition_claims (
  tenant TEXT NOT NULL, key TEXT NOT NULL, n INTEGER NOT NULL, at INTEGER NOT NULL, PRIMARY KEY (tenant, key)
) WITHOUT ROWID;
CREATE INDEX condition_claims_at ON condition_claims (at);
`,
  },
  {
    version: 16,
    name: 'external_references',
    sql: `
-- Index model 8 (src/fhir/reindex.ts): an absolute reference names this tenant's resource only under the
-- tenant's FHIR base; another server's URL is indexed as written, and no longer as this tenant's resource
-- of the same type and id (nor puts the resource in that patient's compartment). A database holding
-- resources gets it from the reindex that \`cinder serve\` runs at start (only the resources holding an
-- absolute reference are rebuilt); an empty one follows model 8 already.
UPDATE index_state SET value = 8 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 17,
    name: 'date_ranges',
    sql: `
-- Index model 9 (src/fhir/reindex.ts): a Timing is one range from its earliest event or bounds start to
-- its latest event or bounds end, no longer a range per event and one for its bounds; a fraction of a
-- second of one or two digits is the range its precision implies (\`.1\` is 100 ms wide), no longer 1 ms.
-- A database holding resources gets it from the reindex that \`cinder serve\` runs at start (only the
-- resources holding a Timing's events or such a fraction are rebuilt, their range rows);
-- an empty one follows model 9 already.
UPDATE index_state SET value = 9 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 18,
    name: 'string_folding',
    sql: `
-- Index model 10 (src/fhir/reindex.ts): a string's normalised form is fully case-folded (\`ß\` as \`ss\`,
-- \`ﬁ\` as \`fi\`, \`ı\` as \`i\`, every sigma \`σ\`), no longer only lower-cased: string rows' values, a
-- token's \`:text\` display, a composite's string component. A database holding resources gets it from the
-- reindex that \`cinder serve\` runs at start (only the resources holding a character the folding changes
-- are rebuilt, their token, string and composite rows); an empty one follows model 10 already.
UPDATE index_state SET value = 10 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 19,
    name: 'context_patient',
    sql: `
-- The patient in context that a user chose at sign-in (the SMART standalone-launch patient picker,
-- src/auth/patient-picker.ts), carried from the authorization code to the refresh tokens of its grant.
-- NULL: no patient was chosen (a Patient user's own record, or no launch/patient), as before.
ALTER TABLE auth_codes ADD COLUMN patient TEXT;
ALTER TABLE refresh_tokens ADD COLUMN patient TEXT;
`,
  },
  {
    version: 20,
    name: 'context_encounter',
    sql: `
-- The encounter in context of a SMART EHR launch (src/auth/launch.ts), carried from the authorization
-- code to the refresh tokens of its grant beside the patient. NULL: no encounter (a standalone launch, a
-- launch without one, or a row written before this migration).
ALTER TABLE auth_codes ADD COLUMN encounter TEXT;
ALTER TABLE refresh_tokens ADD COLUMN encounter TEXT;
`,
  },
  {
    version: 21,
    name: 'token_texts',
    sql: `
-- Index model 11 (src/fhir/reindex.ts): a token row's \`:text\` display holds every text of its value (a
-- CodeableConcept's text, each Coding's display, an Identifier's type text) apart, one row per value, no
-- longer a row per Coding joining its CodeableConcept's text and display by a space (SQLite kept only the
-- first of two rows of one value). A database holding resources gets it from the reindex that \`cinder
-- serve\` runs at start (only the resources holding a display or a string text are rebuilt, their token
-- rows); an empty one follows model 11 already.
UPDATE index_state SET value = 11 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 22,
    name: 'range_units',
    sql: `
-- Index model 12 (src/fhir/reindex.ts): a Range whose end states a human \`unit\` other than its code has a
-- second row under that unit, as a Quantity has, which \`value||unit\` finds. A database holding resources
-- gets it from the reindex that \`cinder serve\` runs at start (only the resources holding a Range's end
-- and a \`unit\` are rebuilt, their range and composite rows); an empty one follows model 12 already.
UPDATE index_state SET value = 12 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 23,
    name: 'leap_seconds',
    sql: `
-- Index model 13 (src/fhir/reindex.ts): a dateTime or instant at a leap second (\`23:59:60\`, which the R4
-- regexes allow) is the last millisecond of its minute, where it had no date row. A database holding
-- resources gets it from the reindex that \`cinder serve\` runs at start (only the resources holding such
-- a value are rebuilt, their range rows); an empty one follows model 13 already.
UPDATE index_state SET value = 13 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 24,
    name: 'launch_context',
    sql: `
-- The rest of a SMART EHR launch's context (src/auth/launch.ts), carried from the authorization code to the
-- refresh tokens of its grant beside the patient and encounter: \`fhir_context\`, the launch's \`fhirContext\`
-- items as JSON text (NULL: none, as in a standalone launch or a row written before this migration), and
-- \`need_patient_banner\`, false only when the EHR said its own UI shows the patient. Rows written before
-- this migration had no EHR that could say so: they read true, as every standalone sign-in does.
ALTER TABLE auth_codes ADD COLUMN fhir_context TEXT;
ALTER TABLE auth_codes ADD COLUMN need_patient_banner INTEGER NOT NULL DEFAULT 1;
ALTER TABLE refresh_tokens ADD COLUMN fhir_context TEXT;
ALTER TABLE refresh_tokens ADD COLUMN need_patient_banner INTEGER NOT NULL DEFAULT 1;
`,
  },
  {
    version: 25,
    name: 'quantity_comparators',
    sql: `
-- Index model 14 (src/fhir/reindex.ts): a Quantity with a comparator (\`<5\`, \`>=5\`) is the range it bounds,
-- open at one end as a Range without a low or high, where it was its value alone. A database holding
-- resources gets it from the reindex that \`cinder serve\` runs at start (only the resources holding a
-- comparator are rebuilt, their range and composite rows); an empty one follows model 14 already.
UPDATE index_state SET value = 14 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 26,
    name: 'exact_composed',
    sql: `
-- Index model 15 (src/fhir/reindex.ts): a string row's \`exact\` form, which \`:exact\` compares, is the text in
-- Unicode's composed form (NFC), where it was the text as written: \`Zoe\` and a combining acute is \`Zoé\`. A
-- database holding resources gets it from the reindex that \`cinder serve\` runs at start (only the
-- resources holding text not in that form are rebuilt, their string rows); an empty one follows model 15 already.
UPDATE index_state SET value = 15 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 27,
    name: 'write_method',
    sql: `
-- The interaction that wrote each version (POST, PUT, PATCH or DELETE), stored in the version's row as it
-- is written and carried into resource_history with it, which a history Bundle's \`request.method\` names
-- (src/fhir/bundle.ts historyJson). NULL: a version written before this migration, whose method history
-- still infers from the version (DELETE for a deletion, POST for version 1, PUT otherwise).
ALTER TABLE resources ADD COLUMN method TEXT;
ALTER TABLE resource_history ADD COLUMN method TEXT;
`,
  },
  {
    version: 28,
    name: 'subscriptions',
    sql: `
-- FHIR R4 Subscriptions (src/fhir/subscriptions/). subscription_state: who activated each subscription (the
-- owner's access as JSON, which decides what it may notify about) and its delivery state: consecutive
-- failures, when the next attempt is due, and the lease of the delivery loop holding it. Notifications are
-- recorded in subscription_notifications by the write that causes them, in the same transaction (an outbox),
-- and deleted once delivered.
CREATE TABLE subscription_state (
  tenant TEXT NOT NULL,
  id TEXT NOT NULL,
  owner TEXT NOT NULL,
  failures INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER NOT NULL DEFAULT 0,
  lease_until INTEGER NOT NULL DEFAULT 0,
  leased_by TEXT,
  last_error TEXT,
  PRIMARY KEY (tenant, id)
);
CREATE TABLE subscription_notifications (
  pk INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant TEXT NOT NULL,
  subscription_id TEXT NOT NULL,
  type TEXT NOT NULL,
  resource_id TEXT NOT NULL,
  version_id INTEGER NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX subscription_notifications_by_subscription ON subscription_notifications (tenant, subscription_id, pk);
`,
  },
  {
    version: 29,
    name: 'subscription_channels',
    sql: `
-- The channel of each activated subscription: rest-hook notifications are leased and sent by one process,
-- websocket ones are read by every process holding a socket bound to the subscription, and kept a while
-- for them (src/fhir/subscriptions/sockets.ts).
ALTER TABLE subscription_state ADD COLUMN channel TEXT NOT NULL DEFAULT 'rest-hook';
`,
  },
  {
    version: 30,
    name: 'import_jobs',
    sql: `
-- Bulk import jobs (\`$import\`, src/import/): claimed with a lease as export jobs are, so a job survives a
-- restart and runs in one process of several. \`spec\` holds the validated inputs, \`progress\` the results
-- per input (counts and the first failures), both JSON owned by src/import.
CREATE TABLE import_jobs (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  client_id TEXT NOT NULL,
  state TEXT NOT NULL,
  request TEXT NOT NULL,
  spec TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  lease_owner TEXT,
  lease_until INTEGER,
  attempts INTEGER NOT NULL DEFAULT 0,
  progress TEXT NOT NULL,
  error TEXT,
  completed_at INTEGER
);
CREATE INDEX import_jobs_claimable ON import_jobs (state, created_at);
CREATE INDEX import_jobs_by_client ON import_jobs (tenant, client_id, state);
`,
  },
  {
    version: 31,
    name: 'account_lifecycle',
    sql: `
-- Client and user lifecycle (src/auth/client-lifecycle.ts, src/auth/user-lifecycle.ts): a rotated secret's
-- predecessor kept for a grace period, soft deletion (the row stays for the audit trail, its id is never reused),
-- and the lookups that revoke every refresh token of a client or of a user.
ALTER TABLE clients ADD COLUMN previous_secret_hash TEXT;
ALTER TABLE clients ADD COLUMN previous_secret_until INTEGER;
ALTER TABLE clients ADD COLUMN deleted_at INTEGER;
ALTER TABLE users ADD COLUMN deleted_at INTEGER;
CREATE INDEX refresh_tokens_client ON refresh_tokens (client_id);
CREATE INDEX refresh_tokens_user ON refresh_tokens (user_id);
`,
  },
  {
    version: 32,
    name: 'revocation_sequence',
    sql: `
-- Revocations numbered in the order they are recorded (src/auth/revocation.ts polls by the number, not by
-- revoked_at, which comes from the clock of whatever process recorded it). A counter, not MAX(seq) + 1: purging
-- expired rows must never hand out a number again. Rows from before are 0, read by a process's first poll.
ALTER TABLE revocations ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
CREATE TABLE revocation_sequence (n INTEGER NOT NULL);
INSERT INTO revocation_sequence (n) VALUES (0);
CREATE INDEX revocations_by_seq ON revocations (seq);
`,
  },
  {
    version: 33,
    name: 'import_credentials',
    sql: `
-- The credential of an $import's inputs (storageDetail.credentialHttpBasic), kept apart from the spec the status
-- is built from, read only by the process running the job, and wiped by the statement that ends the job.
ALTER TABLE import_jobs ADD COLUMN credential TEXT;
`,
  },
  {
    version: 34,
    name: 'subscription_topics',
    sql: `
-- Topic-based Subscriptions (R5 Backport IG, src/fhir/subscriptions/topics.ts): each subscription's count of
-- events since it started (events-since-subscription-start), moved by the write that records an event, so
-- event numbers are per subscription, monotonic and durable; each notification's kind (an event's
-- interaction create/update/delete, handshake or heartbeat; NULL for a criteria Subscription's) and event
-- number; and the heartbeat: its period (0: none) and when the subscription was last given a notification.
ALTER TABLE subscription_state ADD COLUMN events INTEGER NOT NULL DEFAULT 0;
ALTER TABLE subscription_state ADD COLUMN heartbeat_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE subscription_state ADD COLUMN last_notified_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE subscription_notifications ADD COLUMN event TEXT;
ALTER TABLE subscription_notifications ADD COLUMN event_number INTEGER;
`,
  },
  {
    version: 35,
    name: 'subscription_events',
    sql: `
-- The recent events of each topic-based Subscription (\`Subscription/{id}/$events\`, src/fhir/subscriptions/notification.ts),
-- recorded by the write that numbers them, in its transaction, and kept for the last EVENTS_KEPT of each
-- subscription (the write deletes the older ones), whether delivered or not.
CREATE TABLE subscription_events (
  tenant TEXT NOT NULL,
  subscription_id TEXT NOT NULL,
  event_number INTEGER NOT NULL,
  type TEXT NOT NULL,
  resource_id TEXT NOT NULL,
  version_id INTEGER NOT NULL,
  event TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (tenant, subscription_id, event_number)
);
`,
  },
  {
    version: 36,
    name: 'revocation_sequence_for_older_writers',
    sql: `
-- A release from before revocation_sequence (an older server or \`cinder\` during a rolling upgrade) writes its
-- revocations without a number (seq 0) and, revoking a client or user again, updates their row without
-- numbering it again: a running poller, past those numbers already, would never read them. The database numbers
-- them itself as they are written, from the same counter (writes are serialised: the order is the commit order).
-- This release's own writes set seq and are left alone. Rows already written that way are numbered now.
CREATE TRIGGER revocations_numbered_on_insert AFTER INSERT ON revocations WHEN NEW.seq = 0
BEGIN
  UPDATE revocation_sequence SET n = n + 1;
  UPDATE revocations SET seq = (SELECT n FROM revocation_sequence) WHERE kind = NEW.kind AND value = NEW.value;
END;
CREATE TRIGGER revocations_numbered_on_update AFTER UPDATE OF revoked_at, expires_at ON revocations WHEN NEW.seq = OLD.seq
BEGIN
  UPDATE revocation_sequence SET n = n + 1;
  UPDATE revocations SET seq = (SELECT n FROM revocation_sequence) WHERE kind = NEW.kind AND value = NEW.value;
END;
UPDATE revocations SET revoked_at = revoked_at WHERE seq = 0;
`,
  },
  {
    version: 37,
    name: 'tokens_revoked_at',
    sql: `
-- When a user's tokens were last revoked (a disable, a delete, a new password or fhirUser), and when every token
-- of a client was (its disable or delete, which revokes every sign-in with it), kept with them: the revocation row
-- expires with the tokens it covers, but a Subscription activated on a user's sign-in before it stays silent for
-- good (src/fhir/subscriptions/owner.ts).
ALTER TABLE users ADD COLUMN tokens_revoked_at INTEGER;
ALTER TABLE clients ADD COLUMN tokens_revoked_at INTEGER;
`,
  },
  {
    version: 38,
    name: 'quantity_sort',
    sql: `
-- Index model 16 (src/fhir/reindex.ts): a quantity has a row a value under its parameter's sort key
-- (\`value-quantity:sort\`, src/fhir/indexer.ts sortParam), its value in its canonical UCUM unit where it has
-- one, which \`_sort\` on a quantity parameter reads (500 mg before 1 g). A database holding resources gets
-- them from the reindex that \`cinder serve\` runs at start (only the resources holding a number value are
-- rebuilt, their range rows); an empty one follows model 16 already.
UPDATE index_state SET value = 16 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 39,
    name: 'email_case',
    sql: `
-- Index model 17 (src/fhir/reindex.ts): a ContactPoint's value (an email address, a phone number) is
-- lower-cased in its token rows, as searches on \`email\`, \`phone\` and \`telecom\` compare it
-- (src/fhir/contact-points.ts). A database holding resources gets it from the reindex that \`cinder serve\`
-- runs at start (only the resources holding a \`telecom\` or \`contact\` element are rebuilt, their token
-- rows); an empty one follows model 17 already.
UPDATE index_state SET value = 17 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 40,
    name: 'import_jobs_counts',
    sql: `
-- The running input's counts of an import job ({"imported", "failed"}, src/import/run-job.ts), renewed with its
-- lease apart from its progress: the progress holds up to 10,000 issues (3.3 MB measured), which every renewal
-- (a third of the lease) rewrote whole only for the counts to move. Null between inputs and once the job ended.
ALTER TABLE import_jobs ADD COLUMN counts TEXT;
`,
  },
  {
    version: 41,
    name: 'job_owner_user',
    sql: `
-- The signed-in user a bulk export or import job runs for (its spec's ownerUser; null: the client's own authority, a
-- client_credentials token), so the limit of running jobs (CINDER_EXPORT_MAX_JOBS_PER_CLIENT,
-- CINDER_IMPORT_MAX_JOBS_PER_CLIENT) counts per client and user: one user of an app filled it for every other user.
-- The jobs already waiting or running get theirs from their spec.
ALTER TABLE export_jobs ADD COLUMN owner_user TEXT;
ALTER TABLE import_jobs ADD COLUMN owner_user TEXT;
UPDATE export_jobs SET owner_user = json_extract(spec, '$.ownerUser')
  WHERE state IN ('accepted', 'in-progress') AND json_valid(spec) AND json_type(spec, '$.ownerUser') = 'text';
UPDATE import_jobs SET owner_user = json_extract(spec, '$.ownerUser')
  WHERE state IN ('accepted', 'in-progress') AND json_valid(spec) AND json_type(spec, '$.ownerUser') = 'text';
`,
  },
  {
    version: 42,
    name: 'coding_display_text',
    sql: `
-- Index model 18 (src/fhir/reindex.ts): a Coding's display without a code is a string row of its parameter's
-- \`:text\` (src/fhir/indexer.ts), which token \`:text\` finds (search.html: Coding.display) and \`:missing\`
-- counts. A database holding resources gets them from the reindex that \`cinder serve\` runs at start (only
-- the resources holding a \`display\` are rebuilt, their string rows); an empty one follows model 18 already.
UPDATE index_state SET value = 18 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 43,
    name: 'token_system_alone',
    sql: `
-- Index model 19 (src/fhir/reindex.ts): a Coding, Identifier or ContactPoint with a system but no code or
-- value is a token row of its system with an empty value (src/fhir/indexer.ts tokenValues), which
-- \`[system]|\` finds (search.html: any code in the system). A database holding resources gets them from the
-- reindex that \`cinder serve\` runs at start (only the resources holding such a system are rebuilt, their
-- token, string and composite rows); an empty one follows model 19 already.
UPDATE index_state SET value = 19 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 44,
    name: 'ucum_essence_units',
    sql: `
-- Index model 20 (src/fhir/reindex.ts): a UCUM quantity whose unit has an atom of UCUM's essence outside the
-- table before it (\`[psi]\`, \`Torr\`, \`[HPF]\`, \`[CFU]/mL\`; src/fhir/ucum.ts) gets canonical range and composite
-- rows, which a quantity search with a UCUM unit reads, and its sort key in its canonical unit. A database
-- holding resources gets them from the reindex that \`cinder serve\` runs at start (only the resources holding
-- such a unit are rebuilt, their range and composite rows); an empty one follows model 20 already.
UPDATE index_state SET value = 20 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 45,
    name: 'ucum_leading_solidus',
    sql: `
-- Index model 21 (src/fhir/reindex.ts): a UCUM quantity whose unit begins with \`/\` and goes on after its first
-- component (\`/kg/d\` is 1/(kg.d), where model 20 read 1/(kg/d)), or holds an annotated number (\`/100{WBCs}\`,
-- which it did not read; src/fhir/ucum.ts), gets its canonical range and composite rows and its sort key anew.
-- A database holding resources gets them from the reindex that \`cinder serve\` runs at start (only the
-- resources holding such a unit are rebuilt, their range and composite rows); an empty one follows model 21.
UPDATE index_state SET value = 21 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 46,
    name: 'string_letters_folded',
    sql: `
-- Index model 22 (src/fhir/reindex.ts): a string's Latin letters whose mark does not decompose and its
-- ligatures fold to their letters in its normalised form (\`ø\` as \`o\`, \`ł\` as \`l\`, \`æ\` as \`ae\`, \`þ\` as \`th\`;
-- src/fhir/indexer.ts normalizeString), which string searches, token \`:text\` and a composite's string part read.
-- A database holding resources gets them from the reindex that \`cinder serve\` runs at start (only the
-- resources holding such a letter are rebuilt, their token, string and composite rows); an empty one follows model 22.
UPDATE index_state SET value = 22 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 47,
    name: 'tenant_writes',
    sql: `
-- A tenant's write mark (ResourceRepo.writeMark): every transaction that changes a tenant's resources or their
-- index rows (a write, an import, a reindex, an expunge) adds one to its row, so that a search's \`_total\`
-- carried in its next link is used again only while the mark has not moved (src/fhir/search-total.ts).
CREATE TABLE tenant_writes (tenant TEXT NOT NULL, shard INTEGER NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (tenant, shard)) WITHOUT ROWID;
`,
  },
  {
    version: 48,
    name: 'text_words_folded',
    sql: `
-- Index model 23 (src/fhir/reindex.ts): the words of \`_text\` and \`_content\` are case folded as string search folds
-- them (\`ß\` as \`ss\`, a final \`ς\` as \`σ\`, \`ø\` as \`o\`, \`æ\` as \`ae\`, \`þ\` as \`th\`; src/fhir/case-fold.ts foldCase,
-- src/fhir/text-index.ts textWords), where they were only lower-cased. A database holding resources gets them from
-- the reindex that \`cinder serve\` runs at start (only the resources holding such a character are rebuilt, their
-- words alone); an empty one follows model 23.
UPDATE index_state SET value = 23 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 49,
    name: 'canonical_versions',
    sql: `
-- Index model 24 (src/fhir/reindex.ts): a canonical resource's \`url|version\` is one token row (VERSIONED_URL_PARAM),
-- which chains and \`_has\` through a canonical reference compare with a versioned reference, and on PostgreSQL a
-- versioned canonical reference of a url past the index bound gets a marker row (src/store/index-limits.ts
-- versionedMarkers). A database holding resources gets them from the reindex that \`cinder serve\` runs at start
-- (only the canonical resources with a version and the resources with a long versioned canonical are rebuilt, their
-- reference rows); an empty one follows model 24.
UPDATE index_state SET value = 24 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 50,
    name: 'sign_in_revocation_seq',
    sql: `
-- The number of the user's last revocation committed when they signed in (User.revocationSeq of the record their
-- password was checked against), carried from the authorization code to the refresh tokens of its grant: a user
-- revocation numbered above it refuses the grant (src/auth/issue.ts grantUser), whatever the clocks of the server
-- that stamped \`auth_time\` and of whoever recorded the revocation say. NULL in rows written before this migration
-- (and by an older release): those are judged by \`auth_time\`, as before.
ALTER TABLE auth_codes ADD COLUMN auth_revocation_seq INTEGER;
ALTER TABLE refresh_tokens ADD COLUMN auth_revocation_seq INTEGER;
`,
  },
  {
    version: 51,
    name: 'sign_in_client_revocation_seq',
    sql: `
-- The number of the last revocation of the client's tokens committed when the user signed in (Client.revocationSeq of
-- the record the authorization request was read on), kept with the authorization code: a client revocation numbered
-- above it refuses the code (src/auth/grants/authorization-code.ts), one at or below it (made before the sign-in) does
-- not, whatever the clocks of the server that stamped \`auth_time\` and of whoever recorded the revocation say. NULL in
-- rows written before this migration (and by an older release): those are judged by \`auth_time\`, as before.
ALTER TABLE auth_codes ADD COLUMN auth_client_revocation_seq INTEGER;
`,
  },
  {
    version: 52,
    name: 'tokens_revoked_seq',
    sql: `
-- The number of the last revocation of a user's or client's tokens (Revocation.seq), kept with its time
-- (tokens_revoked_at): a Subscription activated on a sign-in whose token states the records' numbers (\`urs\`,
-- \`crs\`) is silenced by a revocation numbered above them (src/fhir/subscriptions/owner.ts authorityRevoked), not by
-- one whose time is at or after the token's \`urt\`, which the clocks of the server and of whoever recorded it decided.
-- NULL where none was kept: judged by time, as before. A release from before this one (a rolling upgrade) records a
-- revocation's time without its number: the database clears the number then, so that the stale one of an earlier
-- revocation does not pass what the new one silences.
ALTER TABLE users ADD COLUMN tokens_revoked_seq INTEGER;
ALTER TABLE clients ADD COLUMN tokens_revoked_seq INTEGER;
CREATE TRIGGER users_tokens_revoked_unnumbered AFTER UPDATE OF tokens_revoked_at ON users
  WHEN NEW.tokens_revoked_at IS NOT OLD.tokens_revoked_at AND NEW.tokens_revoked_seq IS OLD.tokens_revoked_seq
BEGIN
  UPDATE users SET tokens_revoked_seq = NULL WHERE tenant = NEW.tenant AND id = NEW.id;
END;
CREATE TRIGGER clients_tokens_revoked_unnumbered AFTER UPDATE OF tokens_revoked_at ON clients
  WHEN NEW.tokens_revoked_at IS NOT OLD.tokens_revoked_at AND NEW.tokens_revoked_seq IS OLD.tokens_revoked_seq
BEGIN
  UPDATE clients SET tokens_revoked_seq = NULL WHERE client_id = NEW.client_id;
END;
`,
  },
];
