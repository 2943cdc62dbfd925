/**
 * The commands that work on the server's database (every one but `serve` and `migrate`, which make it, and
 * `check`, `backup`, `restore` and `compact`, which refuse on their own) refuse to start where the configuration
 * finds no Cinder database, on both stores, and leave nothing there: a tenant, client, user or import is never
 * written to a new database no server reads (src/cli/context.ts).
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { Database } from 'bun:sqlite';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createCliEnv } from '../helpers/cli.ts';
import { rawStatements, storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
const ROOT = resolve(import.meta.dir, '../..');
const dirs: string[] = [];
afterAll(async () => {
  for (const t of targets) await t.cleanup();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'cinder-no-db-')));
  dirs.push(dir);
  return dir;
}

/** Every command that needs the server's database, with arguments it would otherwise take. */
function commandsOn(dir: string): { argv: string[]; stdin?: string }[] {
  const file = join(dir, 'patients.ndjson');
  writeFileSync(file, JSON.stringify({ resourceType: 'Patient', id: 'p1', gender: 'female' }) + '\n');
  return [
    { argv: ['client', 'create', '--tenant', 'default', '--scope', 'system/*.read'] },
    { argv: ['client', 'list', '--tenant', 'default'] },
    { argv: ['client', 'show', 'no-such-client'] },
    { argv: ['client', 'rotate-secret', 'no-such-client'] },
    { argv: ['user', 'create', '--tenant', 'default', '--username', 'alice', '--password-stdin'], stdin: 'a long enough password' },
    { argv: ['user', 'list', '--tenant', 'default'] },
    { argv: ['user', 'disable', '--tenant', 'default', 'alice'] },
    { argv: ['keys', 'rotate'] },
    { argv: ['import', '--tenant', 'default', file] },
    { argv: ['export', '--tenant', 'default', '--out', join(dir, 'export-out')] },
    { argv: ['validate', '--tenant', 'default'] },
    { argv: ['reindex'] },
    { argv: ['expunge', '--tenant', 'default', '--deleted'] },
    { argv: ['audit', 'prune', '--tenant', 'default', '--before', '2020-01-01T00:00:00Z'] },
  ];
}

/** The tables of the PostgreSQL database's schema, or of the SQLite file (none when it does not exist). */
async function tables(kind: string, url: string): Promise<string[]> {
  if (kind === 'postgres') {
    const [rows] = await rawStatements('postgres', url, [["SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1", []]]);
    return rows!.map((r) => String(r.name));
  }
  if (!existsSync(url)) return [];
  const db = new Database(url, { readonly: true });
  try {
    return db.query<{ name: string }, []>("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY 1").all().map((r) => r.name);
  } finally {
    db.close();
  }
}

for (const target of targets) {
  describe(`a command on a database no Cinder made (${target.kind})`, () => {
    test('is refused (exit 2) with where it looked and how to make one, writing nothing; after `cinder migrate` it runs', async () => {
      const dir = tempDir();
      const db = await target.fresh();
      const cli = createCliEnv({ CINDER_DATABASE_URL: db.url });
      try {
        const expected = target.kind === 'sqlite'
          ? `no Cinder database at ${resolve(db.url)}: set CINDER_DATA_DIR (or CINDER_DATABASE_URL) as the server has it`
          : `the PostgreSQL database '${new URL(db.url).pathname.slice(1)}' on ${new URL(db.url).host} holds no Cinder schema: set CINDER_DATABASE_URL as the server has it`;
        for (const { argv, stdin } of commandsOn(dir)) {
          const r = await cli.run(argv, { stdin });
          expect([argv.join(' '), r.code]).toEqual([argv.join(' '), 2]);
          const name = argv.slice(0, ['tenant', 'client', 'user', 'keys', 'audit'].includes(argv[0]!) ? 2 : 1).join(' ');
          expect(r.stderr).toStartWith(`cinder ${name}: ${expected}`);
          expect(r.stderr).toContain("to start a new database, run `cinder serve` (whose first start also creates tenant 'default' and an admin client) or `cinder migrate`");
          expect(r.stderr).not.toContain('Usage:'); // the command line was right
          expect(r.stdout).toBe('');
        }
        // Nothing was made: no file (SQLite), no table (PostgreSQL), no export directory.
        expect(existsSync(join(dir, 'export-out'))).toBe(false);
        if (target.kind === 'sqlite') expect(existsSync(db.url)).toBe(false);
        expect(await tables(target.kind, db.url)).toEqual([]);

        const help = await cli.run(['migrate', '--help']);
        expect(help.stdout).toContain('and makes the database when there is none');
        expect(help.stdout).toContain('Only this command, serve and tenant create make one: the others refuse to start without it.');
        const migrated = await cli.run(['migrate', '--json']);
        expect(migrated.code).toBe(0);
        expect((JSON.parse(migrated.stdout) as { applied: string[] }).applied[0]).toBe('1_core');
        expect((await cli.run(['tenant', 'create', 't1'])).code).toBe(0);
        const listed = await cli.run(['client', 'list', '--tenant', 't1', '--json']);
        expect([listed.code, listed.stdout]).toEqual([0, '[]\n']);
      } finally {
        cli.close();
      }
    });

    test('tenant create, the first command of an installation set up before its first start, makes the database and says so', async () => {
      const db = await target.fresh();
      const cli = createCliEnv({ CINDER_DATABASE_URL: db.url });
      try {
        const made = await cli.run(['tenant', 'create', 't1']);
        expect(made.code).toBe(0);
        expect(made.stdout).toContain('tenant: t1');
        const where = target.kind === 'sqlite' ? resolve(db.url) : `the PostgreSQL database '${new URL(db.url).pathname.slice(1)}' on ${new URL(db.url).host}`;
        expect(made.stderr).toContain(`note: there was no Cinder database at ${where}; this made one. A server reads it only with the same CINDER_DATA_DIR (or CINDER_DATABASE_URL)`);
        const listed = await cli.run(['client', 'list', '--tenant', 't1', '--json']);
        expect([listed.code, listed.stdout]).toEqual([0, '[]\n']);
        // The second says nothing of it.
        const again = await cli.run(['tenant', 'create', 't2']);
        expect(again.code).toBe(0);
        expect(again.stderr).not.toContain('no Cinder database');
      } finally {
        cli.close();
      }
    });
  });
}

describe('a SQLite file that is not a Cinder database', () => {
  test("another program's database, a file that is not SQLite, an empty file and a directory are refused, unchanged", async () => {
    const dir = tempDir();
    const other = join(dir, 'other.db');
    const raw = new Database(other, { create: true });
    raw.exec('CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES (\'kept\')');
    raw.close();
    const text = join(dir, 'notes.txt');
    writeFileSync(text, 'not a database\n');
    const empty = join(dir, 'empty.db');
    writeFileSync(empty, '');
    const folder = join(dir, 'folder.db');
    mkdirSync(folder);
    const cases: [path: string, message: string][] = [
      [other, `${other} holds no Cinder schema: set CINDER_DATA_DIR (or CINDER_DATABASE_URL) as the server has it`],
      [empty, `${empty} holds no Cinder schema: set CINDER_DATA_DIR (or CINDER_DATABASE_URL) as the server has it`],
      [text, `${text} is not a SQLite database (file is not a database (SQLITE_NOTADB)): set CINDER_DATA_DIR (or CINDER_DATABASE_URL)`],
      [folder, `${folder} is a directory, not a Cinder database: set CINDER_DATA_DIR (or CINDER_DATABASE_URL)`],
    ];
    for (const [path, message] of cases) {
      const before = existsSync(path) && !path.endsWith('folder.db') ? readFileSync(path) : null;
      const cli = createCliEnv({ CINDER_DATABASE_URL: `sqlite:${path}` });
      try {
        const r = await cli.run(['tenant', 'create', 't1']);
        expect([path, r.code]).toEqual([path, 2]);
        expect(r.stderr).toStartWith(`cinder tenant create: ${message}`);
      } finally {
        cli.close();
      }
      if (before) expect(readFileSync(path).equals(before)).toBe(true);
    }
    // Nothing beside the files either (a store would have left a WAL and its index).
    expect(readdirSync(dir).sort()).toEqual(['empty.db', 'folder.db', 'notes.txt', 'other.db']);
    expect(readdirSync(folder)).toEqual([]);
  });

  test('an in-memory database (CINDER_DATABASE_URL=sqlite::memory:) is nothing to miss: the command runs', async () => {
    const cli = createCliEnv({ CINDER_DATABASE_URL: 'sqlite::memory:' });
    try {
      const r = await cli.run(['tenant', 'create', 't1']);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain('fhir_base: ');
    } finally {
      cli.close();
    }
  });
});

describe('cinder run where no CINDER_DATA_DIR points (the default ./cinder-data)', () => {
  test('client list is refused and makes no ./cinder-data; after `cinder migrate` a tenant is created without a note', async () => {
    const dir = tempDir();
    const env = { PATH: process.env.PATH ?? '', HOME: tempDir(), CINDER_LOG_LEVEL: 'silent' };
    const run = async (...args: string[]) => {
      const p = Bun.spawn([process.execPath, join(ROOT, 'src/main.ts'), ...args], { env, cwd: dir, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' });
      const [code, stdout, stderr] = await Promise.all([p.exited, new Response(p.stdout).text(), new Response(p.stderr).text()]);
      return { code, stdout, stderr };
    };
    const refused = await run('client', 'list', '--tenant', 'default');
    expect(refused.code).toBe(2);
    expect(refused.stderr).toStartWith(`cinder client list: no Cinder database at ${join(dir, 'cinder-data', 'cinder.db')}: set CINDER_DATA_DIR`);
    expect(readdirSync(dir)).toEqual([]);
    expect((await run('migrate')).code).toBe(0);
    const created = await run('tenant', 'create', 't1');
    expect(created.code).toBe(0);
    expect(created.stderr).not.toContain('no Cinder database');
    expect(created.stdout).toContain('fhir_base: http://localhost:8080/tenants/t1/fhir/R4');
  }, 30_000);
});
