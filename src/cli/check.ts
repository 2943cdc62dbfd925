import { existsSync } from 'node:fs';
import { loadConfig } from '../config.ts';
import { INDEX_MODEL } from '../fhir/reindex.ts';
import { openStore, sqlitePath } from '../store/open.ts';
import { indexState } from '../store/sqlite/db.ts';
import { errorText, foreignKeyProblems, integrityProblems, openExisting, sqliteSchema } from '../store/sqlite/maintenance.ts';
import type { SchemaState } from '../store/schema-state.ts';
import type { CliIO, Command } from './command.ts';
import { unusableDatabase } from './context.ts';
import { StoreUnavailableError } from '../store/types.ts';
import { isPostgresOutage } from '../store/postgres/db.ts';
import { isPostgresUrl } from './sqlite-file.ts';

/** Exit code of `cinder check` when it finds a problem (0: healthy; 1: the check itself failed; 2: usage error). */
export const PROBLEM_EXIT = 3;

interface Report {
  database: string;
  checks: Record<string, string>;
  problems: string[];
}

/** What the schema checks read: the migrations applied, the search index's model. */
interface Schema {
  schema(): SchemaState | Promise<SchemaState>;
  indexState(): { model: number; after: number } | Promise<{ model: number; after: number }>;
}

/**
 * SQLite: integrity_check and foreign_key_check on the file, then the schema checks, on one connection of
 * its own (not a store, which would switch a file in rollback journal mode, a backup, to WAL).
 */
async function checkFile(path: string, report: Report): Promise<void> {
  if (!existsSync(path)) {
    report.problems.push(`no SQLite database at ${path} (CINDER_DATA_DIR or CINDER_DATABASE_URL)`);
    return;
  }
  let db;
  try {
    db = openExisting(path);
  } catch (err) {
    report.problems.push((err as Error).message);
    return;
  }
  try {
    let integrity: string[];
    try {
      integrity = integrityProblems(db);
    } catch (err) {
      // Damage that stops the check itself (a page SQLite cannot parse): a problem of the same kind.
      report.checks.integrity = 'failed';
      report.problems.push(`integrity: ${errorText(err)}`);
      return;
    }
    report.checks.integrity = integrity.length ? `${integrity.length} problems` : 'ok';
    report.problems.push(...integrity.map((p) => `integrity: ${p}`));
    const keys = foreignKeyProblems(db);
    report.checks.foreign_keys = keys.length ? `${keys.length} problems` : 'ok';
    report.problems.push(...keys.map((p) => `foreign key: ${p}`));
    const raw = db;
    await checkSchema({ schema: () => sqliteSchema(raw), indexState: () => indexState(raw) }, report);
  } catch (err) {
    report.problems.push(`${path} cannot be read as a SQLite database: ${errorText(err)}`);
  } finally {
    db.close();
  }
}

/**
 * PostgreSQL: the database answers, then the schema checks through the store. A database that cannot be used (the server
 * unreachable, a wrong password, no such database, the connection lost during the checks) fails the check itself, as it
 * ends every other command (exit 1, `cinder: cannot use the PostgreSQL database ...`): nothing of it could be checked.
 */
async function checkServer(url: string, report: Report): Promise<void> {
  const store = openStore(url);
  try {
    await store.ping();
    report.checks.connection = 'ok';
    await checkSchema({ schema: () => store.schema(), indexState: () => store.resources.indexing.state() }, report);
  } catch (err) {
    if (!report.checks.connection || err instanceof StoreUnavailableError || isPostgresOutage(err)) throw unusableDatabase(err, url);
    report.problems.push(`the database cannot be read: ${errorText(err)}`);
  } finally {
    await store.close().catch(() => undefined);
  }
}

/** What every database gets checked for: every migration applied and none unknown, no reindex pending. */
async function checkSchema(db: Schema, report: Report): Promise<void> {
  const schema = await db.schema();
  report.checks.migrations = `${schema.version} (this release: ${schema.latest})`;
  if (schema.version === 0) {
    report.problems.push('no Cinder migration is applied: not a Cinder database, or one never started (cinder migrate)');
    return;
  }
  for (const m of schema.pending) report.problems.push(`migration ${m} is not applied (cinder migrate, or the next cinder serve, applies it)`);
  for (const m of schema.unknown) report.problems.push(`migration ${m} is unknown to this release: a newer Cinder wrote the database; run that version`);
  if (schema.pending.length || schema.unknown.length) return;
  const state = await db.indexState();
  report.checks.search_index = `model ${state.model} (this release: ${INDEX_MODEL})`;
  if (state.model < INDEX_MODEL) {
    const resumed = state.after > 0 ? `, an interrupted run stopped after resource row ${state.after}` : '';
    report.problems.push(`a reindex is pending: the search index follows model ${state.model}, this release writes ${INDEX_MODEL}${resumed} (cinder reindex --if-needed, or the next cinder serve, runs it)`);
  } else if (state.model > INDEX_MODEL) {
    report.problems.push(`the search index follows model ${state.model}, newer than this release's ${INDEX_MODEL}: a newer Cinder wrote it`);
  }
}

/** `cinder check`: reports what is wrong with the database, changing nothing. */
export const checkCommand: Command = {
  name: 'check',
  summary: 'Check the database: integrity, migrations, pending reindex (exit 3 on a problem)',
  usage:
    'cinder check [--json]\n\n' +
    'Checks the database of CINDER_DATABASE_URL (or cinder.db in CINDER_DATA_DIR) and changes nothing; a server may run:\n' +
    '  SQLite: PRAGMA integrity_check and foreign_key_check on the file; PostgreSQL: the database answers;\n' +
    '  both: every migration of this release is applied and none unknown (a newer\n' +
    '  Cinder\'s database), and no reindex is pending (what `cinder reindex --if-needed` would rebuild).\n' +
    `Prints each check and each problem. Exit 0 healthy, ${PROBLEM_EXIT} a problem found, 1 the check failed (a PostgreSQL database that cannot be used), 2 usage error.`,
  options: { json: { type: 'boolean' } },
  async run(args, io) {
    const { databaseUrl, databaseWarnings } = loadConfig(io.env);
    const postgres = isPostgresUrl(databaseUrl);
    const report: Report = { database: postgres ? 'postgres' : sqlitePath(databaseUrl), checks: {}, problems: [] };
    // As every command says them (openContext): a password file not read, a refused password that came from one.
    for (const warning of databaseWarnings) io.stderr(`cinder: warning: ${warning}\n`);
    if (postgres) await checkServer(databaseUrl, report);
    else await checkFile(report.database, report);
    print(io, !!args.values.json, report);
    return report.problems.length ? PROBLEM_EXIT : 0;
  },
};

function print(io: CliIO, json: boolean, report: Report): void {
  const healthy = report.problems.length === 0;
  if (json) {
    io.stdout(JSON.stringify({ database: report.database, healthy, checks: report.checks, problems: report.problems }, null, 2) + '\n');
    return;
  }
  io.stdout(`database: ${report.database}\n`);
  for (const [name, value] of Object.entries(report.checks)) io.stdout(`${name.replace('_', ' ')}: ${value}\n`);
  for (const p of report.problems) io.stdout(`problem: ${p}\n`);
  io.stdout(healthy ? 'healthy\n' : `${report.problems.length} problem${report.problems.length === 1 ? '' : 's'} found\n`);
}
