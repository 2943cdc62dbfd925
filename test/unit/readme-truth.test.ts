/**
 * The README as a new user follows it: every setting of its configuration table is one the code reads,
 * with the default the code applies, and every setting the code reads is in the table; every command of its
 * command-line synopsis exists and takes exactly the flags the synopsis lists, and every command is there;
 * every `cinder ...` command written in README.md, ARCHITECTURE.md or docs/ names flags its command takes;
 * every other environment variable the README names changes what the code does; and the Dockerfile's
 * variables, command, health check and port are Cinder's. (The Bun version the README, CI and the
 * Dockerfile install is bun-pin.test.ts's.)
 */
import { describe, expect, test } from 'bun:test';
import { resolve } from 'node:path';
import { PURGE_DELAY } from '../../src/cli/allocator.ts';
import type { Command } from '../../src/cli/command.ts';
import { commands, runCli } from '../../src/cli/index.ts';
import { CONFIG_KEYS, envName, flagName, loadConfig } from '../../src/config.ts';
import { s3OptionsFromEnv } from '../../src/export/sink-s3.ts';

const read = (path: string) => Bun.file(new URL(`../../${path}`, import.meta.url)).text();
const readme = await read('README.md');

/** The configuration table's rows: variable and default cell. */
function configTable(): Map<string, string> {
  const rows = [...readme.matchAll(/^\| `(CINDER_[A-Z0-9_]+)` \| ([^|]*) \|/gm)].map((m) => [m[1]!, m[2]!.trim()] as const);
  const table = new Map(rows);
  expect(table.size).toBe(rows.length); // no variable twice
  return table;
}

describe("README's configuration table", () => {
  test('lists every setting the code reads, and nothing else', () => {
    expect([...configTable().keys()].sort()).toEqual(CONFIG_KEYS.map(envName).sort());
  });

  test('states the default the code applies', () => {
    const config = loadConfig({});
    const onPostgres = loadConfig({ CINDER_DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/db' });
    const dataDir = config.dataDir;
    const table = configTable();
    for (const key of CONFIG_KEYS) {
      const cell = table.get(envName(key))!;
      const stated = [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
      // A placeholder (`<port>`, `<data dir>`) is the value the default is made of.
      const expand = (v: string) => v.replace('<port>', String(config.port)).replace('<data dir>', dataDir);
      const actual = String(config[key]);
      if (key === 'dataDir') expect({ key, value: resolve(stated[0]!) }).toEqual({ key, value: actual });
      else expect({ key, value: expand(stated[0]!) }).toEqual({ key, value: actual });
      // A default stated per database (`file:<data dir>/exports` on SQLite, `postgres` on PostgreSQL).
      if (/ on PostgreSQL/.test(cell)) expect({ key, value: stated[1] }).toEqual({ key, value: String(onPostgres[key]) });
    }
  });

  test('every variable is also a flag of serve (the variable without CINDER_, lower-case, with dashes), and flags win', () => {
    const serve = commands.find((c) => c.name === 'serve')!;
    for (const key of CONFIG_KEYS) {
      const flag = flagName(key).slice(2);
      expect({ key, flag, accepted: flag in serve.options }).toEqual({ key, flag, accepted: true });
      expect(envName(key).replace(/^CINDER_/, '').toLowerCase().replaceAll('_', '-')).toBe(flag);
    }
    expect(loadConfig({ CINDER_LOG_LEVEL: 'debug' }, { logLevel: 'warn' }).logLevel).toBe('warn');
  });
});

/** The synopsis' lines, each with its continuation lines joined to it. */
function synopsis(): string[] {
  const block = /^```\n(cinder \[serve\][\s\S]*?)^```$/m.exec(readme)?.[1];
  expect(block).toBeDefined();
  const lines: string[] = [];
  for (const line of block!.split('\n')) {
    if (!line.trim()) continue;
    if (line.startsWith('cinder ')) lines.push(line);
    else lines[lines.length - 1] += ' ' + line.trim();
  }
  return lines;
}

/** The commands a line names: `cinder [serve]`, `cinder import`, `cinder client disable|enable|delete`. */
function commandsOf(line: string): string[] {
  const [, group, subs] = /^cinder (\[serve\]|[a-z]+)(?: ([a-z][a-z|-]*))?/.exec(line)!;
  if (group === '[serve]') return ['serve'];
  const names = subs === undefined ? [group!] : subs.split('|').map((s) => `${group} ${s}`);
  // `cinder import --tenant`: one word; `cinder audit prune`: a group's command.
  return names.every((n) => commands.some((c) => c.name === n)) ? names : [group!];
}

const flagsOf = (text: string) => new Set([...text.matchAll(/(?:^|[\s[|])--([a-z][a-z0-9-]*)/g)].map((m) => m[1]!));

describe("README's command-line synopsis", () => {
  test('every command is there, and each takes exactly the flags it lists', () => {
    const listed = new Map<string, Set<string>>();
    for (const line of synopsis()) for (const name of commandsOf(line)) listed.set(name, flagsOf(line));
    expect([...listed.keys()].sort()).toEqual(commands.map((c) => c.name).sort());
    for (const c of commands) {
      const flags = [...listed.get(c.name)!];
      const options = Object.keys(c.options);
      if (c.name === 'serve') {
        // `[--port <n>] ... (every variable of the configuration table as a flag)`: those it names exist.
        expect({ command: c.name, unknown: flags.filter((f) => !options.includes(f)) }).toEqual({ command: c.name, unknown: [] });
      } else {
        expect({ command: c.name, flags: flags.sort() }).toEqual({ command: c.name, flags: options.sort() });
      }
    }
  });

  test('`cinder <command> --help` shows the synopsis of exactly the flags the command takes', async () => {
    for (const c of commands) {
      let stdout = '';
      const io = { env: {}, stdout: (t: string) => void (stdout += t), stderr: () => {}, stdin: async () => '', isTTY: false };
      expect(await runCli([...c.name.split(' '), '--help'], io)).toBe(0);
      const usage = /^Usage: ([\s\S]*?)(?:\n\n|\n$)/m.exec(stdout)?.[1];
      expect({ command: c.name, usage: usage?.startsWith(`cinder ${c.name}`) }).toEqual({ command: c.name, usage: true });
      expect({ command: c.name, flags: [...flagsOf(usage!)].sort() }).toEqual({ command: c.name, flags: Object.keys(c.options).sort() });
    }
  });

  test("every `cinder ...` written in README.md, ARCHITECTURE.md or docs/ names a command and flags it takes", async () => {
    const files = ['README.md', 'ARCHITECTURE.md', ...[...new Bun.Glob('docs/*.md').scanSync({ cwd: new URL('../../', import.meta.url).pathname })].sort()];
    const byLength = [...commands].sort((a, b) => b.name.length - a.name.length);
    const wrong: string[] = [];
    let checked = 0;
    for (const file of files) {
      const text = await read(file);
      // Inline code, and lines of code blocks (`./dist/cinder serve ...`, `docker exec <c> cinder backup ...`).
      const written = [
        ...[...text.matchAll(/`(?:\.\/dist\/)?(cinder [^`]+)`/g)].map((m) => m[1]!),
        ...[...text.matchAll(/^(?:\.\/dist\/|docker (?:exec|run) [^\n`]*?)?(cinder [^\n`]+)$/gm)].map((m) => m[1]!),
      ];
      for (const w of written) {
        const words = w.split(/\s+/).slice(1);
        const command: Command | undefined = words.length === 0 || words[0]!.startsWith('-')
          ? commands.find((c) => c.name === 'serve')
          : byLength.find((c) => c.name.split(' ').every((word, i) => words[i] === word));
        // A group, or several commands at once (`cinder client --help`, `cinder client disable|delete`): no flags of one command.
        if (!command) continue;
        checked++;
        const unknown = [...flagsOf(w)].filter((f) => f !== 'help' && !(f in command.options));
        if (unknown.length) wrong.push(`${file}: ${w} (${command.name} takes no ${unknown.map((f) => '--' + f).join(', ')})`);
      }
    }
    expect(checked).toBeGreaterThan(50);
    expect(wrong).toEqual([]);
  });
});

describe('the environment variables the README names', () => {
  test('each CINDER_ one is a setting, or one the tests read', async () => {
    const testSources = await Promise.all([...new Bun.Glob('test/**/*.ts').scanSync({ cwd: new URL('../../', import.meta.url).pathname })].map((p) => read(p)));
    const settings = new Set(CONFIG_KEYS.map(envName));
    const named = new Set([...readme.matchAll(/\bCINDER_[A-Z0-9_]*[A-Z0-9]\b/g)].map((m) => m[0]));
    for (const name of named) {
      if (settings.has(name)) continue;
      expect({ name, testOnly: name.startsWith('CINDER_TEST_') }).toEqual({ name, testOnly: true });
      expect({ name, read: testSources.some((s) => s.includes(`process.env.${name}`)) }).toEqual({ name, read: true });
    }
  });

  test('PORT and DATABASE_URL are read when CINDER_PORT and CINDER_DATABASE_URL are not set, or empty', () => {
    for (const env of [{}, { CINDER_PORT: '', CINDER_DATABASE_URL: '' }]) {
      const config = loadConfig({ ...env, PORT: '9191', DATABASE_URL: 'sqlite:/tmp/platform.db' });
      expect({ port: config.port, databaseUrl: config.databaseUrl }).toEqual({ port: 9191, databaseUrl: 'sqlite:/tmp/platform.db' });
    }
    expect(loadConfig({ CINDER_PORT: '9292', PORT: '9191' }).port).toBe(9292);
  });

  test("each S3_ and AWS_ one is read by S3 export storage", () => {
    const section = /S3 export storage reads the usual variables:[\s\S]*?\n\n/.exec(readme)?.[0];
    expect(section).toBeDefined();
    const named = [...new Set([...section!.matchAll(/\b(?:S3|AWS)_[A-Z0-9_]*[A-Z0-9]\b/g)].map((m) => m[0]))];
    expect(named.length).toBeGreaterThanOrEqual(9);
    const value = (name: string) => (name.endsWith('VIRTUAL_HOSTED_STYLE') ? 'true' : name.includes('ENDPOINT') ? 'http://s3.example' : 'x');
    for (const name of named) {
      expect({ name, options: s3OptionsFromEnv({ [name]: value(name) }) }).not.toEqual({ name, options: {} });
    }
    // "each also as AWS_*": every S3_ variable named has its AWS_ twin.
    for (const name of named.filter((n) => n.startsWith('S3_'))) {
      const twin = name.replace(/^S3_/, 'AWS_');
      expect({ twin, options: s3OptionsFromEnv({ [twin]: value(twin) }) }).toEqual({ twin, options: s3OptionsFromEnv({ [name]: value(name) }) });
    }
  });

  test('MIMALLOC_PURGE_DELAY is the variable the batch commands set', () => {
    expect(readme).toContain(`\`${PURGE_DELAY}=-1\``);
  });
});

describe('the Dockerfile', () => {
  test("sets only Cinder's variables, runs serve, checks itself with healthcheck and exposes the default port", async () => {
    const docker = await read('Dockerfile');
    const env = /^ENV ([\s\S]*?)(?<!\\)\n/m.exec(docker)?.[1] ?? '';
    const names = [...env.matchAll(/([A-Z_]+)=/g)].map((m) => m[1]!);
    expect(names).toEqual(['CINDER_DATA_DIR', 'CINDER_HOST']);
    for (const n of names) expect(CONFIG_KEYS.map(envName)).toContain(n);
    const volume = /^VOLUME \["([^"]+)"\]$/m.exec(docker)?.[1];
    expect(/CINDER_DATA_DIR=(\S+)/.exec(env)?.[1]).toBe(volume);
    expect(/^HEALTHCHECK .* CMD \["\/usr\/local\/bin\/cinder", "([a-z]+)"\]$/m.exec(docker)?.[1]).toBe('healthcheck');
    expect(/^CMD \["([a-z]+)"\]$/m.exec(docker)?.[1]).toBe('serve');
    for (const name of ['healthcheck', 'serve']) expect(commands.map((c) => c.name)).toContain(name);
    expect(Number(/^EXPOSE (\d+)$/m.exec(docker)?.[1])).toBe(loadConfig({}).port);
    // The README's words about the image.
    expect(readme).toContain(`keeps its data in the \`${volume}\` volume\n(\`CINDER_DATA_DIR=${volume}\`)`);
  });
});
