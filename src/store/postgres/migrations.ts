import { deleteRowsStoredElsewhere } from '../stored-elsewhere.ts';

/**
 * Versioned PostgreSQL schema: the same tables and meaning as the SQLite migrations, adapted to Postgres.
 * Append new entries; never edit an applied one. Key columns use the "C" collation so that ordering
 * (`_sort=_id`, keyset paging) is bytewise, exactly as in SQLite, whatever the database's locale.
 * Resource content is TEXT, never jsonb: it is served exactly as stored.
 */
export interface PgMigration {
  version: number;
  name: string;
  /** Static SQL only (DDL, and data changes with literal names); never request values. */
  sql: string;
}

export const postgresMigrations: PgMigration[] = [
  {
    version: 1,
    name: 'core',
    sql: `
CREATE TABLE tenants (id TEXT COLLATE "C" PRIMARY KEY, created_at BIGINT NOT NULL);
CREATE TABLE clients (
  client_id TEXT COLLATE "C" PRIMARY KEY, tenant TEXT COLLATE "C" NOT NULL, name TEXT NOT NULL, secret_hash TEXT,
  grants TEXT NOT NULL, scopes TEXT NOT NULL, redirect_uris TEXT NOT NULL, jwks TEXT, jwks_url TEXT,
  read_attributes TEXT, access_token_ttl INTEGER, created_at BIGINT NOT NULL, disabled BOOLEAN NOT NULL DEFAULT false
);
CREATE INDEX clients_tenant ON clients (tenant, created_at);
CREATE TABLE signing_keys (
  kid TEXT COLLATE "C" PRIMARY KEY, alg TEXT NOT NULL, private_jwk TEXT NOT NULL, public_jwk TEXT NOT NULL,
  created_at BIGINT NOT NULL, retired_at BIGINT
);
CREATE SEQUENCE resource_seq;
CREATE TABLE resources (
  pk BIGSERIAL PRIMARY KEY, tenant TEXT COLLATE "C" NOT NULL, type TEXT COLLATE "C" NOT NULL, id TEXT COLLATE "C" NOT NULL,
  version_id INTEGER NOT NULL, last_updated BIGINT NOT NULL, deleted BOOLEAN NOT NULL,
  seq BIGINT NOT NULL, content TEXT NOT NULL
);
-- seq is included for changeToken (an index-only sum). There is deliberately no narrower
-- (tenant, type, ...) index: before the first ANALYZE (a fresh database under bulk import) the
-- planner costs every such index the same for a key lookup and takes the smallest, or on a tie the
-- last created, and a lookup then scans a whole type. Hence resources_key is created last.
CREATE INDEX resources_updated ON resources (tenant, type, last_updated, id) INCLUDE (seq);
CREATE UNIQUE INDEX resources_key ON resources (tenant, type, id);
CREATE TABLE resource_history (
  tenant TEXT COLLATE "C" NOT NULL, type TEXT COLLATE "C" NOT NULL, id TEXT COLLATE "C" NOT NULL, version_id INTEGER NOT NULL,
  last_updated BIGINT NOT NULL, deleted BOOLEAN NOT NULL, seq BIGINT NOT NULL, content TEXT NOT NULL,
  PRIMARY KEY (tenant, type, id, version_id)
);
CREATE INDEX resource_history_updated ON resource_history (tenant, last_updated);
CREATE TABLE search_index (
  res BIGINT NOT NULL, tenant TEXT COLLATE "C" NOT NULL, type TEXT COLLATE "C" NOT NULL, param TEXT COLLATE "C" NOT NULL,
  system TEXT COLLATE "C" NOT NULL, value TEXT COLLATE "C" NOT NULL
);
CREATE INDEX search_index_value ON search_index (tenant, type, param, value, system) INCLUDE (res);
CREATE INDEX search_index_res ON search_index (res);
CREATE TABLE compartments (
  res BIGINT NOT NULL, tenant TEXT COLLATE "C" NOT NULL, patient TEXT COLLATE "C" NOT NULL, type TEXT COLLATE "C" NOT NULL
);
CREATE INDEX compartments_patient ON compartments (tenant, patient, type) INCLUDE (res);
CREATE INDEX compartments_res ON compartments (res);
`,
  },
  {
    version: 2,
    name: 'auth',
    sql: `
CREATE TABLE users (
  id TEXT COLLATE "C" PRIMARY KEY, tenant TEXT COLLATE "C" NOT NULL, username TEXT COLLATE "C" NOT NULL, password_hash TEXT NOT NULL,
  name TEXT, email TEXT, email_verified BOOLEAN NOT NULL DEFAULT false, phone TEXT, phone_verified BOOLEAN NOT NULL DEFAULT false,
  address TEXT, fhir_user TEXT, created_at BIGINT NOT NULL, disabled BOOLEAN NOT NULL DEFAULT false
);
CREATE UNIQUE INDEX users_username ON users (tenant, username);
CREATE TABLE auth_codes (
  code_hash TEXT COLLATE "C" PRIMARY KEY, grant_id TEXT COLLATE "C" NOT NULL, client_id TEXT COLLATE "C" NOT NULL,
  tenant TEXT COLLATE "C" NOT NULL, user_id TEXT COLLATE "C" NOT NULL, redirect_uri TEXT NOT NULL, scope TEXT NOT NULL,
  nonce TEXT, code_challenge TEXT, auth_time BIGINT NOT NULL, expires_at BIGINT NOT NULL, consumed_at BIGINT
);
CREATE INDEX auth_codes_expires ON auth_codes (expires_at);
CREATE TABLE refresh_tokens (
  token_hash TEXT COLLATE "C" PRIMARY KEY, grant_id TEXT COLLATE "C" NOT NULL, client_id TEXT COLLATE "C" NOT NULL,
  tenant TEXT COLLATE "C" NOT NULL, user_id TEXT COLLATE "C" NOT NULL, scope TEXT NOT NULL, auth_time BIGINT NOT NULL,
  created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL, revoked_at BIGINT
);
CREATE INDEX refresh_tokens_grant ON refresh_tokens (grant_id);
CREATE INDEX refresh_tokens_expires ON refresh_tokens (expires_at);
CREATE TABLE revocations (
  kind TEXT COLLATE "C" NOT NULL, value TEXT COLLATE "C" NOT NULL, revoked_at BIGINT NOT NULL, expires_at BIGINT NOT NULL,
  PRIMARY KEY (kind, value)
);
CREATE INDEX revocations_revoked ON revocations (revoked_at);
CREATE TABLE assertion_jtis (
  client_id TEXT COLLATE "C" NOT NULL, jti TEXT COLLATE "C" NOT NULL, expires_at BIGINT NOT NULL, PRIMARY KEY (client_id, jti)
);
CREATE INDEX assertion_jtis_expires ON assertion_jtis (expires_at);
CREATE TABLE rate_counters (key TEXT COLLATE "C" PRIMARY KEY, count INTEGER NOT NULL, reset_at BIGINT NOT NULL);
`,
  },
  {
    version: 3,
    name: 'export_jobs',
    sql: `
CREATE TABLE export_jobs (
  id TEXT COLLATE "C" PRIMARY KEY, tenant TEXT COLLATE "C" NOT NULL, client_id TEXT COLLATE "C" NOT NULL, state TEXT NOT NULL,
  request TEXT NOT NULL, spec TEXT NOT NULL, transaction_time BIGINT NOT NULL, created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL,
  lease_owner TEXT, lease_until BIGINT, attempts INTEGER NOT NULL DEFAULT 0, progress TEXT NOT NULL, error TEXT,
  completed_at BIGINT, expires_at BIGINT, purged BOOLEAN NOT NULL DEFAULT false
);
CREATE INDEX export_jobs_claim ON export_jobs (state, created_at);
CREATE INDEX export_jobs_client ON export_jobs (tenant, client_id, state);
CREATE TABLE export_patients (
  job_id TEXT COLLATE "C" NOT NULL, patient TEXT COLLATE "C" NOT NULL, joined BOOLEAN NOT NULL, PRIMARY KEY (job_id, patient)
);
-- Downloads in progress hold their job's files (a lease each, renewed while streaming).
CREATE TABLE export_downloads (job_id TEXT COLLATE "C" NOT NULL, download TEXT COLLATE "C" NOT NULL, until BIGINT NOT NULL, PRIMARY KEY (job_id, download));
CREATE TABLE export_provenance (
  job_id TEXT COLLATE "C" NOT NULL, target TEXT COLLATE "C" NOT NULL, provenance TEXT COLLATE "C" NOT NULL, rank TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (job_id, target)
);
CREATE INDEX export_provenance_winner ON export_provenance (job_id, provenance);
-- Keyset scans of one type in row order. Keyed on an expression so that the planner never takes it for
-- the (tenant, type, id) lookups that resources_key serves; '/' occurs in neither tenant ids nor types.
CREATE INDEX resources_scan ON resources ((tenant || '/' || type), pk);
`,
  },
  {
    version: 4,
    name: 'leaner_index',
    sql: `
${deleteRowsStoredElsewhere()}
`,
  },
  {
    version: 5,
    name: 'export_files',
    sql: `
-- Export files kept in the database (CINDER_EXPORT_STORAGE=postgres), so every process sharing it can
-- serve every file. A file is its chunks of whole NDJSON lines (about 256 KiB each, keyed by their byte
-- offset in the file) plus a row written once they all are. Chunks are compressed with lz4, which
-- writes and reads NDJSON faster than storing it raw; a server without lz4 (before PostgreSQL 14, or
-- built without it) stores them uncompressed, since pglz costs more CPU than it saves.
-- UNLOGGED: no WAL for a gigabyte of export (writes about twice as fast); a database crash empties the
-- tables (a clean restart does not), and downloads of the lost files answer 410: the client exports again.
CREATE UNLOGGED TABLE export_file_chunks (key TEXT COLLATE "C" NOT NULL, start BIGINT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (key, start));
DO $$
BEGIN
  EXECUTE 'ALTER TABLE export_file_chunks ALTER COLUMN data SET COMPRESSION lz4';
EXCEPTION WHEN OTHERS THEN
  EXECUTE 'ALTER TABLE export_file_chunks ALTER COLUMN data SET STORAGE EXTERNAL';
END $$;
CREATE UNLOGGED TABLE export_files (key TEXT COLLATE "C" PRIMARY KEY, size BIGINT NOT NULL);
`,
  },
  {
    version: 6,
    name: 'search_tables',
    sql: `
-- Every search parameter type (#14): strings, dates/numbers/quantities and composites get tables of
-- their own, each with one value-first index (covering the searches' subqueries) and the res index
-- that replacing a resource's rows needs. index_state: as in the SQLite migration 5.
CREATE TABLE search_string (
  res BIGINT NOT NULL, tenant TEXT COLLATE "C" NOT NULL, type TEXT COLLATE "C" NOT NULL, param TEXT COLLATE "C" NOT NULL,
  value TEXT COLLATE "C" NOT NULL, exact TEXT COLLATE "C" NOT NULL
);
CREATE INDEX search_string_value ON search_string (tenant, type, param, value) INCLUDE (res);
CREATE INDEX search_string_res ON search_string (res);
CREATE TABLE search_range (
  res BIGINT NOT NULL, tenant TEXT COLLATE "C" NOT NULL, type TEXT COLLATE "C" NOT NULL, param TEXT COLLATE "C" NOT NULL,
  system TEXT COLLATE "C" NOT NULL, code TEXT COLLATE "C" NOT NULL, low DOUBLE PRECISION NOT NULL, high DOUBLE PRECISION NOT NULL
);
CREATE INDEX search_range_low ON search_range (tenant, type, param, low) INCLUDE (high, res);
CREATE INDEX search_range_res ON search_range (res);
CREATE TABLE search_composite (
  res BIGINT NOT NULL, tenant TEXT COLLATE "C" NOT NULL, type TEXT COLLATE "C" NOT NULL, param TEXT COLLATE "C" NOT NULL,
  system1 TEXT COLLATE "C" NOT NULL, value1 TEXT COLLATE "C" NOT NULL, system2 TEXT COLLATE "C" NOT NULL, value2 TEXT COLLATE "C" NOT NULL,
  low DOUBLE PRECISION NOT NULL, high DOUBLE PRECISION NOT NULL
);
CREATE INDEX search_composite_value ON search_composite (tenant, type, param, value1) INCLUDE (res);
CREATE INDEX search_composite_res ON search_composite (res);
-- A coded value's text (CodeableConcept.text, Coding.display), normalised, for :text; not indexed.
ALTER TABLE search_index ADD COLUMN display TEXT COLLATE "C" NOT NULL DEFAULT '';
CREATE TABLE index_state (name TEXT COLLATE "C" PRIMARY KEY, value BIGINT NOT NULL);
INSERT INTO index_state (name, value) SELECT 'model', CASE WHEN EXISTS (SELECT 1 FROM resources) THEN 0 ELSE 1 END;
INSERT INTO index_state (name, value) VALUES ('reindex_after', 0);
`,
  },
  {
    version: 7,
    name: 'validation_debt',
    sql: `
-- As the SQLite migration 6: tenants that may hold resources not validated strictly.
CREATE TABLE validation_debt (tenant TEXT COLLATE "C" PRIMARY KEY, generation BIGINT NOT NULL);
INSERT INTO validation_debt (tenant, generation)
  SELECT id, 1 FROM tenants WHERE EXISTS (SELECT 1 FROM resources WHERE resources.tenant = tenants.id);
`,
  },
  {
    version: 8,
    name: 'search_keys',
    sql: `
-- As the SQLite migration 7: index rows name their tenant, type, parameter and a token's system or a
-- quantity's unit by one integer key of search_keys. Writers create keys in statements of their own,
-- committed before the transaction that uses them (INSERT ... ON CONFLICT DO NOTHING), never deleted.
CREATE TABLE search_keys (
  k INTEGER GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, tenant TEXT COLLATE "C" NOT NULL, type TEXT COLLATE "C" NOT NULL,
  param TEXT COLLATE "C" NOT NULL, system TEXT COLLATE "C" NOT NULL, code TEXT COLLATE "C" NOT NULL,
  UNIQUE (tenant, type, param, system, code)
);
INSERT INTO search_keys (tenant, type, param, system, code)
  SELECT tenant, type, param, system, '' FROM search_index
  UNION SELECT tenant, type, param, '', '' FROM search_string
  UNION SELECT tenant, type, param, system, code FROM search_range
  UNION SELECT tenant, type, param, '', '' FROM search_composite
  ORDER BY 1, 2, 3, 4, 5;
CREATE TABLE search_index_keyed (res BIGINT NOT NULL, k INTEGER NOT NULL, value TEXT COLLATE "C" NOT NULL, display TEXT COLLATE "C" NOT NULL);
INSERT INTO search_index_keyed (res, k, value, display)
  SELECT s.res, k.k, s.value, s.display FROM search_index s
  JOIN search_keys k ON k.tenant = s.tenant AND k.type = s.type AND k.param = s.param AND k.system = s.system AND k.code = '';
DROP TABLE search_index;
ALTER TABLE search_index_keyed RENAME TO search_index;
CREATE INDEX search_index_value ON search_index (k, value) INCLUDE (res);
CREATE INDEX search_index_res ON search_index (res);
CREATE TABLE search_string_keyed (res BIGINT NOT NULL, k INTEGER NOT NULL, value TEXT COLLATE "C" NOT NULL, exact TEXT COLLATE "C" NOT NULL);
INSERT INTO search_string_keyed (res, k, value, exact)
  SELECT s.res, k.k, s.value, s.exact FROM search_string s
  JOIN search_keys k ON k.tenant = s.tenant AND k.type = s.type AND k.param = s.param AND k.system = '' AND k.code = '';
DROP TABLE search_string;
ALTER TABLE search_string_keyed RENAME TO search_string;
CREATE INDEX search_string_value ON search_string (k, value) INCLUDE (res);
CREATE INDEX search_string_res ON search_string (res);
CREATE TABLE search_range_keyed (res BIGINT NOT NULL, k INTEGER NOT NULL, low DOUBLE PRECISION NOT NULL, high DOUBLE PRECISION NOT NULL);
INSERT INTO search_range_keyed (res, k, low, high)
  SELECT s.res, k.k, s.low, s.high FROM search_range s
  JOIN search_keys k ON k.tenant = s.tenant AND k.type = s.type AND k.param = s.param AND k.system = s.system AND k.code = s.code;
DROP TABLE search_range;
ALTER TABLE search_range_keyed RENAME TO search_range;
CREATE INDEX search_range_low ON search_range (k, low) INCLUDE (high, res);
CREATE INDEX search_range_res ON search_range (res);
CREATE TABLE search_composite_keyed (
  res BIGINT NOT NULL, k INTEGER NOT NULL, system1 TEXT COLLATE "C" NOT NULL, value1 TEXT COLLATE "C" NOT NULL,
  system2 TEXT COLLATE "C" NOT NULL, value2 TEXT COLLATE "C" NOT NULL, low DOUBLE PRECISION NOT NULL, high DOUBLE PRECISION NOT NULL
);
INSERT INTO search_composite_keyed (res, k, system1, value1, system2, value2, low, high)
  SELECT s.res, k.k, s.system1, s.value1, s.system2, s.value2, s.low, s.high FROM search_composite s
  JOIN search_keys k ON k.tenant = s.tenant AND k.type = s.type AND k.param = s.param AND k.system = '' AND k.code = '';
DROP TABLE search_composite;
ALTER TABLE search_composite_keyed RENAME TO search_composite;
CREATE INDEX search_composite_value ON search_composite (k, value1) INCLUDE (res);
CREATE INDEX search_composite_res ON search_composite (res);
`,
  },
  {
    version: 9,
    name: 'search_text',
    sql: `
-- Full-text search (#14), as the SQLite migration 8: one row per resource row that holds text, each
-- column its words as the indexer writes them, searched by GIN indexes; \`content\` also holds the lexeme
-- \`#<scope>\` of the resource's tenant and type (src/store/text-scope.ts), which every search names. A
-- tsvector keeps each word once, without positions: there is no phrase search.
CREATE TABLE search_text (res BIGINT PRIMARY KEY, narrative tsvector NOT NULL, content tsvector NOT NULL);
CREATE INDEX search_text_narrative ON search_text USING gin (narrative);
CREATE INDEX search_text_content ON search_text USING gin (content);
UPDATE index_state SET value = 2 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 10,
    name: 'search_range_by_res',
    sql: `
-- Date, number and quantity rows read by their resource (a search's candidates probed, sort keys) carry
-- their key and bounds in the index, so those reads are index-only: a search sorted on a date read each
-- match's table row for its high end (Encounter?date=<month>&_sort=-date on a million resources, 653
-- matches: 9.5 against 5.5 ms). Deletes by resource use it as they used the index it replaces.
CREATE INDEX search_range_by_res ON search_range (res) INCLUDE (k, low, high);
DROP INDEX search_range_res;
`,
  },
  {
    version: 11,
    name: 'identifier_type_text',
    sql: `
-- Index model 3 (src/fhir/reindex.ts): an Identifier's rows carry its type's text, which token \`:text\`
-- searches. A database holding resources gets it from the reindex that \`cinder serve\` runs at start
-- (only the resources with such a text are rebuilt); an empty one follows model 3 already.
UPDATE index_state SET value = 3 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 12,
    name: 'search_range_high',
    sql: `
-- As the SQLite migration 10: date, number and quantity rows by their high end, which \`gt\` and \`ge\`
-- (and a number's \`sa\`) bound alone, so that such a search can start from its rows.
CREATE INDEX search_range_high ON search_range (k, high) INCLUDE (low, res);
`,
  },
  {
    version: 13,
    name: 'search_index_value_res',
    sql: `
-- Token rows by key, value and then resource, as SQLite's value-first index (whose rows end with their
-- primary key) holds them: a filtered export (src/store/snapshot-window.ts) reads a code's rows in
-- resource order, a page at a time, where the included \`res\` made it read all of them for each page.
CREATE INDEX search_index_value_res ON search_index (k, value, res);
DROP INDEX search_index_value;
ALTER INDEX search_index_value_res RENAME TO search_index_value;
`,
  },
  {
    version: 14,
    name: 'location_position',
    sql: `
-- Index model 4 (src/fhir/reindex.ts): a Location's position is a range row of \`near\` (latitude,
-- longitude). A database holding resources gets it from the reindex that \`cinder serve\` runs at start
-- (only the resources with a position are rebuilt); an empty one follows model 4 already.
UPDATE index_state SET value = 4 WHERE name = 'model' AND NOT EXISTS (SELECT 1 FROM resources);
`,
  },
  {
    version: 15,
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
    version: 16,
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
    version: 17,
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
    version: 18,
    name: 'condition_claims',
    sql: `
-- Conditional creates and updates of one condition in several processes (src/fhir/conditional.ts): the
-- write that settles a condition moves its claim on from the count it read before searching, in the
-- same transaction; a write that finds the count moved searches again. \`at\` dates the last move:
-- claims an hour old are purged.
CREATE TABLE condition_claims (
  tenant TEXT COLLATE "C" NOT NULL, key TEXT COLLATE "C" NOT NULL, n BIGINT NOT NULL, at BIGINT NOT NULL, PRIMARY KEY (tenant, key)
);
CREATE INDEX condition_claims_at ON condition_claims (at);
`,
  },
  {
    version: 19,
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
    version: 20,
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
    version: 21,
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
    version: 22,
    name: 'context_patient',
    sql: `
-- The patient in context that a user chose at sign-in (the SMART standalone-launch patient picker,
-- src/auth/patient-picker.ts), carried from the authorization code to the refresh tokens of its grant.
-- NULL: no patient was chosen (a Patient user's own record, or no launch/patient), as before.
ALTER TABLE auth_codes ADD COLUMN patient TEXT COLLATE "C";
ALTER TABLE refresh_tokens ADD COLUMN patient TEXT COLLATE "C";
`,
  },
  {
    version: 23,
    name: 'context_encounter',
    sql: `
-- The encounter in context of a SMART EHR launch (src/auth/launch.ts), carried from the authorization
-- code to the refresh tokens of its grant beside the patient. NULL: no encounter (a standalone launch, a
-- launch without one, or a row written before this migration).
ALTER TABLE auth_codes ADD COLUMN encounter TEXT COLLATE "C";
ALTER TABLE refresh_tokens ADD COLUMN encounter TEXT COLLATE "C";
`,
  },
  {
    version: 24,
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
    version: 25,
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
    version: 26,
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
    version: 27,
    name: 'launch_context',
    sql: `
-- The rest of a SMART EHR launch's context (src/auth/launch.ts), carried from the authorization code to the
-- refresh tokens of its grant beside the patient and encounter: \`fhir_context\`, the launch's \`fhirContext\`
-- items as JSON text (NULL: none, as in a standalone launch or a row written before this migration), and
-- \`need_patient_banner\`, false only when the EHR said its own UI shows the patient. Rows written before
-- this migration had no EHR that could say so: they read true, as every standalone sign-in does.
ALTER TABLE auth_codes ADD COLUMN fhir_context TEXT;
ALTER TABLE auth_codes ADD COLUMN need_patient_banner BOOLEAN NOT NULL DEFAULT true;
ALTER TABLE refresh_tokens ADD COLUMN fhir_context TEXT;
ALTER TABLE refresh_tokens ADD COLUMN need_patient_banner BOOLEAN NOT NULL DEFAULT true;
`,
  },
  {
    version: 28,
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
    version: 29,
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
    version: 30,
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
    version: 31,
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
  next_attempt_at BIGINT NOT NULL DEFAULT 0,
  lease_until BIGINT NOT NULL DEFAULT 0,
  leased_by TEXT,
  last_error TEXT,
  PRIMARY KEY (tenant, id)
);
CREATE TABLE subscription_notifications (
  pk BIGSERIAL PRIMARY KEY,
  tenant TEXT NOT NULL,
  subscription_id TEXT NOT NULL,
  type TEXT NOT NULL,
  resource_id TEXT NOT NULL,
  version_id INTEGER NOT NULL,
  created_at BIGINT NOT NULL
);
CREATE INDEX subscription_notifications_by_subscription ON subscription_notifications (tenant, subscription_id, pk);
`,
  },
  {
    version: 32,
    name: 'subscription_channels',
    sql: `
-- The channel of each activated subscription: rest-hook notifications are leased and sent by one process,
-- websocket ones are read by every process holding a socket bound to the subscription, and kept a while
-- for them (src/fhir/subscriptions/sockets.ts).
ALTER TABLE subscription_state ADD COLUMN channel TEXT NOT NULL DEFAULT 'rest-hook';
`,
  },
  {
    version: 33,
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
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  lease_owner TEXT,
  lease_until BIGINT,
  attempts INTEGER NOT NULL DEFAULT 0,
  progress TEXT NOT NULL,
  error TEXT,
  completed_at BIGINT
);
CREATE INDEX import_jobs_claimable ON import_jobs (state, created_at);
CREATE INDEX import_jobs_by_client ON import_jobs (tenant, client_id, state);
`,
  },
  {
    version: 34,
    name: 'account_lifecycle',
    sql: `
-- Client and user lifecycle (src/auth/client-lifecycle.ts, src/auth/user-lifecycle.ts): a rotated secret's
-- predecessor kept for a grace period, soft deletion (the row stays for the audit trail, its id is never reused),
-- and the lookups that revoke every refresh token of a client or of a user.
ALTER TABLE clients ADD COLUMN previous_secret_hash TEXT;
ALTER TABLE clients ADD COLUMN previous_secret_until BIGINT;
ALTER TABLE clients ADD COLUMN deleted_at BIGINT;
ALTER TABLE users ADD COLUMN deleted_at BIGINT;
CREATE INDEX refresh_tokens_client ON refresh_tokens (client_id);
CREATE INDEX refresh_tokens_user ON refresh_tokens (user_id);
`,
  },
  {
    version: 35,
    name: 'revocation_sequence',
    sql: `
-- Revocations numbered in the order they are recorded (src/auth/revocation.ts polls by the number, not by
-- revoked_at, which comes from a process's clock); src/store/postgres/oauth.ts takes them one at a time so that
-- the order is the order they commit in. Existing rows are numbered as the column is added.
CREATE SEQUENCE revocations_seq;
ALTER TABLE revocations ADD COLUMN seq BIGINT NOT NULL DEFAULT nextval('revocations_seq');
CREATE INDEX revocations_by_seq ON revocations (seq);
`,
  },
  {
    version: 36,
    name: 'import_credentials',
    sql: `
-- The credential of an $import's inputs (storageDetail.credentialHttpBasic), kept apart from the spec the status
-- is built from, read only by the process running the job, and wiped by the statement that ends the job.
ALTER TABLE import_jobs ADD COLUMN credential TEXT;
`,
  },
  {
    version: 37,
    name: 'subscription_topics',
    sql: `
-- Topic-based Subscriptions (R5 Backport IG, src/fhir/subscriptions/topics.ts): each subscription's count of
-- events since it started (events-since-subscription-start), moved by the write that records an event, so
-- event numbers are per subscription, monotonic and durable; each notification's kind (an event's
-- interaction create/update/delete, handshake or heartbeat; NULL for a criteria Subscription's) and event
-- number; and the heartbeat: its period (0: none) and when the subscription was last given a notification.
ALTER TABLE subscription_state ADD COLUMN events BIGINT NOT NULL DEFAULT 0;
ALTER TABLE subscription_state ADD COLUMN heartbeat_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE subscription_state ADD COLUMN last_notified_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE subscription_notifications ADD COLUMN event TEXT;
ALTER TABLE subscription_notifications ADD COLUMN event_number BIGINT;
`,
  },
  {
    version: 38,
    name: 'subscription_events',
    sql: `
-- The recent events of each topic-based Subscription (\`Subscription/{id}/$events\`, src/fhir/subscriptions/notification.ts),
-- recorded by the write that numbers them, in its transaction, and kept for the last EVENTS_KEPT of each
-- subscription (the write deletes the older ones), whether delivered or not.
CREATE TABLE subscription_events (
  tenant TEXT NOT NULL,
  subscription_id TEXT NOT NULL,
  event_number BIGINT NOT NULL,
  type TEXT NOT NULL,
  resource_id TEXT NOT NULL,
  version_id INTEGER NOT NULL,
  event TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  PRIMARY KEY (tenant, subscription_id, event_number)
);
`,
  },
  {
    version: 39,
    name: 'revocation_sequence_for_older_writers',
    sql: `
-- A release from before revocation_sequence (an older server or \`cinder\` during a rolling upgrade) writes its
-- revocations without taking the table lock, so its number (the column's default) may be drawn before, and
-- committed after, one a poller has already read; and, revoking a client or user again, it updates their row
-- without numbering it again. The database numbers every written row itself, in a trigger, after an advisory lock
-- held to the commit: numbers are then drawn in commit order, whichever release writes. A row this release
-- numbers (an upsert setting seq) keeps its number; it already holds the table lock, which orders it.
CREATE FUNCTION revocations_number() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND NEW.seq IS DISTINCT FROM OLD.seq THEN
    RETURN NEW;
  END IF;
  PERFORM pg_advisory_xact_lock(7236501123487126001);
  NEW.seq := nextval('revocations_seq');
  RETURN NEW;
END;
$$;
CREATE TRIGGER revocations_numbered BEFORE INSERT OR UPDATE ON revocations
  FOR EACH ROW EXECUTE FUNCTION revocations_number();
`,
  },
  {
    version: 40,
    name: 'tokens_revoked_at',
    sql: `
-- When a user's tokens were last revoked (a disable, a delete, a new password or fhirUser), and when every token
-- of a client was (its disable or delete, which revokes every sign-in with it), kept with them: the revocation row
-- expires with the tokens it covers, but a Subscription activated on a user's sign-in before it stays silent for
-- good (src/fhir/subscriptions/owner.ts).
ALTER TABLE users ADD COLUMN tokens_revoked_at BIGINT;
ALTER TABLE clients ADD COLUMN tokens_revoked_at BIGINT;
`,
  },
  {
    version: 41,
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
    version: 42,
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
    version: 43,
    name: 'import_jobs_counts',
    sql: `
-- The running input's counts of an import job ({"imported", "failed"}, src/import/run-job.ts), renewed with its
-- lease apart from its progress: the progress holds up to 10,000 issues (3.3 MB measured), which every renewal
-- (a third of the lease) rewrote whole only for the counts to move. Null between inputs and once the job ended.
ALTER TABLE import_jobs ADD COLUMN counts TEXT;
`,
  },
  {
    version: 44,
    name: 'job_owner_user',
    sql: `
-- The signed-in user a bulk export or import job runs for (its spec's ownerUser; null: the client's own authority, a
-- client_credentials token), so the limit of running jobs (CINDER_EXPORT_MAX_JOBS_PER_CLIENT,
-- CINDER_IMPORT_MAX_JOBS_PER_CLIENT) counts per client and user: one user of an app filled it for every other user.
-- The jobs already waiting or running get theirs from their spec.
-- (A spec is JSON.stringify's text: its ownerUser, a string, is read without casting a spec that may not be JSON.)
ALTER TABLE export_jobs ADD COLUMN owner_user TEXT;
ALTER TABLE import_jobs ADD COLUMN owner_user TEXT;
UPDATE export_jobs SET owner_user = substring(spec from '"ownerUser":"([^"\\\\]*)"')
  WHERE state IN ('accepted', 'in-progress');
UPDATE import_jobs SET owner_user = substring(spec from '"ownerUser":"([^"\\\\]*)"')
  WHERE state IN ('accepted', 'in-progress');
`,
  },
  {
    version: 45,
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
    version: 46,
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
    version: 47,
    name: 'subscription_event_tally',
    sql: `
-- The events of criteria (not topic-based) Subscriptions counted by writes that found the subscription's state
-- row held by another write counting its own (src/store/postgres/subscription-writes.ts countEvents): a row per
-- such write, folded into subscription_state.events by the next write that holds the row. A Subscription's
-- \`$status\` events-since-subscription-start is the state's count and the sum of its rows here. No key: rows are
-- only inserted, summed and deleted whole per subscription.
CREATE TABLE subscription_event_tally (
  tenant TEXT NOT NULL,
  subscription_id TEXT NOT NULL,
  events BIGINT NOT NULL
);
CREATE INDEX subscription_event_tally_sub ON subscription_event_tally (tenant, subscription_id);
`,
  },
  {
    version: 48,
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
    version: 49,
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
    version: 50,
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
    version: 51,
    name: 'tenant_writes',
    sql: `
-- A tenant's write mark (ResourceRepo.writeMark): every transaction that changes a tenant's resources or their
-- index rows (a write, an import, a reindex, an expunge) adds one to one of its rows, so that a search's \`_total\`
-- carried in its next link is used again only while the mark (the rows' sum) has not moved
-- (src/fhir/search-total.ts). Sixteen rows a tenant (by the writing backend), so that concurrent writers
-- seldom wait for one another's row lock; each adds its one as the last statement before COMMIT.
CREATE TABLE tenant_writes (tenant TEXT COLLATE "C" NOT NULL, shard INTEGER NOT NULL, n BIGINT NOT NULL, PRIMARY KEY (tenant, shard));
`,
  },
  {
    version: 52,
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
    version: 53,
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
    version: 54,
    name: 'sign_in_revocation_seq',
    sql: `
-- The number of the user's last revocation committed when they signed in (User.revocationSeq of the record their
-- password was checked against), carried from the authorization code to the refresh tokens of its grant: a user
-- revocation numbered above it refuses the grant (src/auth/issue.ts grantUser), whatever the clocks of the server
-- that stamped \`auth_time\` and of whoever recorded the revocation say. NULL in rows written before this migration
-- (and by an older release): those are judged by \`auth_time\`, as before.
ALTER TABLE auth_codes ADD COLUMN auth_revocation_seq BIGINT;
ALTER TABLE refresh_tokens ADD COLUMN auth_revocation_seq BIGINT;
`,
  },
  {
    version: 55,
    name: 'sign_in_client_revocation_seq',
    sql: `
-- The number of the last revocation of the client's tokens committed when the user signed in (Client.revocationSeq of
-- the record the authorization request was read on), kept with the authorization code: a client revocation numbered
-- above it refuses the code (src/auth/grants/authorization-code.ts), one at or below it (made before the sign-in) does
-- not, whatever the clocks of the server that stamped \`auth_time\` and of whoever recorded the revocation say. NULL in
-- rows written before this migration (and by an older release): those are judged by \`auth_time\`, as before.
ALTER TABLE auth_codes ADD COLUMN auth_client_revocation_seq BIGINT;
`,
  },
  {
    version: 56,
    name: 'tokens_revoked_seq',
    sql: `
-- The number of the last revocation of a user's or client's tokens (Revocation.seq), kept with its time
-- (tokens_revoked_at): a Subscription activated on a sign-in whose token states the records' numbers (\`urs\`,
-- \`crs\`) is silenced by a revocation numbered above them (src/fhir/subscriptions/owner.ts authorityRevoked), not by
-- one whose time is at or after the token's \`urt\`, which the clocks of the server and of whoever recorded it decided.
-- NULL where none was kept: judged by time, as before. A release from before this one (a rolling upgrade) records a
-- revocation's time without its number: the database clears the number then, so that the stale one of an earlier
-- revocation does not pass what the new one silences.
ALTER TABLE users ADD COLUMN tokens_revoked_seq BIGINT;
ALTER TABLE clients ADD COLUMN tokens_revoked_seq BIGINT;
CREATE FUNCTION tokens_revoked_unnumbered() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.tokens_revoked_at IS DISTINCT FROM OLD.tokens_revoked_at AND NEW.tokens_revoked_seq IS NOT DISTINCT FROM OLD.tokens_revoked_seq THEN
    NEW.tokens_revoked_seq := NULL;
  END IF;
  RETURN NEW;
END;
$$;
CREATE TRIGGER users_tokens_revoked_unnumbered BEFORE UPDATE ON users FOR EACH ROW EXECUTE FUNCTION tokens_revoked_unnumbered();
CREATE TRIGGER clients_tokens_revoked_unnumbered BEFORE UPDATE ON clients FOR EACH ROW EXECUTE FUNCTION tokens_revoked_unnumbered();
`,
  },
];
