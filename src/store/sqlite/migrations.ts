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
CREATE TABLE search_index (
  res INTEGER NOT NULL, tenant TEXT NOT NULL, type TEXT NOT NULL, param TEXT NOT NULL,
  system TEXT NOT NULL, value TEXT NOT NULL
);
CREATE INDEX search_index_value ON search_index (tenant, type, param, value, system);
CREATE INDEX search_index_res ON search_index (res);
CREATE TABLE compartments (res INTEGER NOT NULL, tenant TEXT NOT NULL, patient TEXT NOT NULL, type TEXT NOT NULL);
CREATE INDEX compartments_patient ON compartments (tenant, patient, type);
CREATE INDEX compartments_res ON compartments (res);
`,
  },
];
